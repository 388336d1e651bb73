"""Usage and cost: tokens per run and model turn, cost from the price table, the
conversation's sum, every ending keeping its finished turns' tokens, and a success with
tool errors told apart."""

from __future__ import annotations

import asyncio
import csv
import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from chat import fragments, owner, store
from chat.export import COLUMNS, csv_lines, trace_rows
from chat.models import AgentRun, Conversation, ModelPrice, RunStatus, StepKind, StepStatus
from chat.presenters import RunPresenter
from chat.pricing import ConversationUsage, cost_of, format_cost, price_for, summarise
from chat.runs import create_run
from chat.store.limits import runs_interrupt_stale
from tests.chat.conftest import wait_for_runs
from tests.chat.test_fragments import no_queries
from tests.fakes import tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db

OPENAI = {"provider": "openai", "model_name": "gpt-4o-mini"}
DEMO = {"provider": "demo", "model_name": "demo-scripted"}


def tokens(inputs: int, outputs: int) -> dict[str, int]:
    """Return a usage dict as the loop reports it."""
    return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}


def _price(model_pattern: str = "gpt-4o-mini", provider: str = "", **kwargs) -> ModelPrice:
    values = {"input_per_million": Decimal("0.15"), "output_per_million": Decimal("0.60")}
    return ModelPrice.objects.create(
        provider=provider, model_pattern=model_pattern, **{**values, **kwargs}
    )


def _start(conversation: Conversation, model: dict[str, str] = OPENAI) -> AgentRun:
    return store.run_start(conversation_id=conversation.pk, content="Weather in Suzhou?",
                           started_at=timezone.now(), **model)  # fmt: skip


def _turn(run: AgentRun, iteration: int, tokens: tuple[int, int] | None, *, finish=True) -> None:
    """Store a model turn with ``(input, output)`` tokens; left running unless ``finish``."""
    step = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=iteration,
                            started_at=timezone.now())  # fmt: skip
    if not finish:
        return
    counts = {}
    if tokens is not None:
        counts = {"input_tokens": tokens[0], "output_tokens": tokens[1],
                  "total_tokens": sum(tokens)}  # fmt: skip
    store.step_finish(step_id=step.pk, finished_at=timezone.now(), status=StepStatus.SUCCESS,
                      text="Let me look.", **counts)  # fmt: skip


def _finish(run: AgentRun, status: str = RunStatus.SUCCEEDED, usage=None, **kwargs) -> AgentRun:
    return store.run_finish(
        run_id=run.pk, status=status, output=kwargs.get("output", "Sunny." if status ==
        RunStatus.SUCCEEDED else ""), error=kwargs.get("error", ""), iterations=2,
        usage=usage if usage is not None else {}, finished_at=timezone.now(),
    )  # fmt: skip


# Prices


def test_the_most_specific_price_applies():
    rows = [
        ModelPrice(provider="", model_pattern="gpt-4o*", input_per_million=Decimal(1),
                   output_per_million=Decimal(1)),
        ModelPrice(provider="", model_pattern="gpt-4o-mini*", input_per_million=Decimal(2),
                   output_per_million=Decimal(2)),
        ModelPrice(provider="", model_pattern="gpt-4o-mini", input_per_million=Decimal(3),
                   output_per_million=Decimal(3)),
        ModelPrice(provider="openai", model_pattern="gpt-4o*", input_per_million=Decimal(4),
                   output_per_million=Decimal(4)),
    ]  # fmt: skip
    assert price_for(rows, provider="openai", model_name="gpt-4o-mini").input_per_million == 4
    assert price_for(rows, provider="azure", model_name="gpt-4o-mini").input_per_million == 3
    assert price_for(rows, provider="azure", model_name="gpt-4o-mini-2024").input_per_million == 2
    assert price_for(rows, provider="azure", model_name="gpt-4o").input_per_million == 1
    assert price_for(rows, provider="azure", model_name="GPT-4O") is None  # names are exact
    assert price_for(rows, provider="ollama", model_name="qwen3:0.6b") is None


def test_a_cost_is_an_exact_decimal_from_the_prices_per_million():
    price = ModelPrice(input_per_million=Decimal("0.15"), output_per_million=Decimal("0.60"))
    cost = cost_of(1000, 500, price)
    assert cost == Decimal("0.00045") and isinstance(cost, Decimal)
    assert cost_of(1000, None, price) is None  # a total alone cannot be split
    assert cost_of(1000, 500, None) is None


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [
        ("1.234", "USD", "$1.23"),
        ("0.0123", "EUR", "€0.0123"),
        ("0.00006184", "USD", "$0.0000618"),
        ("0", "USD", "$0.00"),
        ("0.5", "CHF", "CHF 0.50"),
        ("0.1204", "USD", "$0.12"),
        ("4035", "USD", "$4,035.00"),  # thousands grouped, as the token counts are
    ],
)
def test_costs_are_shown_without_rounding_a_small_one_to_zero(amount, currency, shown):
    assert format_cost(Decimal(amount), currency) == shown


def test_a_price_with_a_lowercase_or_unknown_currency_is_refused():
    price = ModelPrice(model_pattern="x", input_per_million=1, output_per_million=1,
                       currency="usd")  # fmt: skip
    with pytest.raises(Exception, match="currency"):
        price.full_clean()


# A run's tokens and cost


def test_a_run_costs_its_stored_tokens_at_its_models_price():
    _price()
    run = _start(Conversation.objects.create())
    _turn(run, 1, (600, 100))
    _turn(run, 2, (400, 400))
    run = _finish(run, usage={"input_tokens": 1000, "output_tokens": 500, "total_tokens": 1500})
    assert (run.cost, run.cost_currency) == (Decimal("0.00045"), "USD")
    run.refresh_from_db()
    assert run.cost == Decimal("0.00045")
    html = fragments.run_ended(run)
    assert "1,500 tokens · <span" in html and "$0.00045" in html
    assert "1,000 in · 500 out" in html
    assert "Model turn 1: 600 in · 100 out" in html and "Model turn 2: 400 in · 400 out" in html


def test_a_run_whose_model_has_no_price_shows_no_price_never_zero():
    _price("gpt-4o")  # an exact name: does not match gpt-4o-mini
    run = _finish(_start(Conversation.objects.create()),
                  usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15})  # fmt: skip
    assert run.cost is None and run.cost_currency == ""
    assert RunPresenter(run).cost_label == "no price"
    html = fragments.run_ended(run)
    assert "no price" in html and "$0" not in html


def test_a_run_with_no_token_counts_says_tokens_unknown_and_has_no_cost():
    _price()
    run = _start(Conversation.objects.create())
    _turn(run, 1, None)
    run = _finish(run)
    assert run.total_tokens is None and run.cost is None
    words = RunPresenter(run)
    assert (words.tokens_label, words.cost_label) == ("tokens unknown", "")
    html = fragments.run_ended(run)
    assert "tokens unknown" in html and "Model turn 1: tokens unknown" in html
    assert "no price" not in html


def test_a_run_stopped_before_its_first_model_turn_used_no_tokens_not_unknown_ones():
    """A chat whose only run was stopped before the model was called said "tokens
    unknown" in its header (a new-user walk): it used none."""
    _price()
    conversation = Conversation.objects.create()
    run = _finish(_start(conversation), RunStatus.CANCELLED, error="Stopped at your request.")
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (0, 0, 0)
    assert RunPresenter(run).tokens_label == "0 tokens"
    assert "tokens unknown" not in fragments.run_ended(run)
    assert run.conversation_usage.tokens_label == "0 tokens"


def test_estimated_tokens_make_an_estimated_cost():
    _price("demo-*")
    run = _finish(_start(Conversation.objects.create(), DEMO),
                  usage=tokens(100, 20))  # fmt: skip
    assert run.usage_estimated
    assert RunPresenter(run).tokens_label == "≈120 tokens (estimated)"
    assert RunPresenter(run).cost_label == "≈$0.000027"
    assert "(estimated, not counted)" in fragments.run_ended(run)


def test_a_price_changed_later_leaves_the_cost_of_earlier_runs():
    price = _price()
    run = _finish(_start(Conversation.objects.create()),
                  usage=tokens(1000, 0))  # fmt: skip
    price.input_per_million = Decimal("99")
    price.save()
    run.refresh_from_db()
    assert run.cost == Decimal("0.00015")


ENDINGS = [
    (RunStatus.FAILED, "The model call failed."),
    (RunStatus.CANCELLED, "Stopped at your request."),
    (RunStatus.MAX_ITERATIONS, "Iteration limit reached."),
    (RunStatus.SUCCEEDED, ""),
]


@pytest.mark.parametrize(("status", "error"), ENDINGS)
def test_every_ending_keeps_the_tokens_its_finished_model_turns_used(status, error):
    """The end event of a run stopped from outside the loop carries no usage."""
    _price()
    run = _start(Conversation.objects.create())
    _turn(run, 1, (600, 100))
    _turn(run, 2, (400, 50))
    _turn(run, 3, None, finish=False)  # cut off mid-stream: no counts to add
    run = _finish(run, status, error=error)
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (1000, 150, 1150)
    assert run.cost == Decimal("0.00024")
    html = fragments.run_ended(run)
    assert "1,150 tokens" in html and "–" not in html
    assert "Model turn 3: tokens unknown (did not finish)" in html


def test_an_interrupted_run_keeps_the_tokens_its_finished_model_turns_used(settings):
    _price()
    run = _start(Conversation.objects.create())
    _turn(run, 1, (600, 100))
    _turn(run, 2, None, finish=False)
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    (interrupted,) = runs_interrupt_stale(now=timezone.now())
    assert interrupted.status == RunStatus.INTERRUPTED
    assert (interrupted.input_tokens, interrupted.total_tokens) == (600, 700)
    assert interrupted.cost == Decimal("0.00015")
    assert interrupted.conversation_usage.tokens == 700
    with no_queries():
        html = fragments.run_ended(interrupted)
    assert 'id="conversation-usage"' in html and "700 tokens" in html


def test_the_loops_own_usage_is_kept_not_added_to_the_turns():
    run = _start(Conversation.objects.create())
    _turn(run, 1, (600, 100))
    run = _finish(run, usage={"input_tokens": 600, "output_tokens": 100, "total_tokens": 700})
    assert run.total_tokens == 700


HANGING: dict[str, asyncio.Event] = {}


@tool
async def hang(town: str) -> str:
    """Look a town up, forever (answers only by being cancelled)."""
    HANGING["started"].set()
    await asyncio.Event().wait()
    return town


@pytest.mark.django_db(transaction=True)
async def test_a_stopped_run_keeps_the_tokens_of_the_turns_that_finished(
    scripted_model, monkeypatch
):
    HANGING["started"] = asyncio.Event()
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [hang])
    scripted_model.script = [
        AIMessage("Looking.", tool_calls=[tool_call("hang", {"town": "Suzhou"}, "c1")],
                  usage_metadata={"input_tokens": 50, "output_tokens": 7, "total_tokens": 57}),
    ]  # fmt: skip
    conversation = await database_sync_to_async(Conversation.objects.create)()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    owner.current().start(run.pk, listeners=[])
    await asyncio.wait_for(HANGING["started"].wait(), WAIT_S)
    assert owner.current().stop_local(run.pk)
    await wait_for_runs()
    run = await database_sync_to_async(AgentRun.objects.get)(pk=run.pk)
    assert run.status == RunStatus.CANCELLED
    assert (run.input_tokens, run.output_tokens, run.total_tokens) == (50, 7, 57)


# A success with tool errors


def _with_tool_error(status: str = RunStatus.SUCCEEDED) -> AgentRun:
    run = _start(Conversation.objects.create())
    for call_id, call_status in (("c1", StepStatus.ERROR), ("c2", StepStatus.ERROR)):
        step = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1,
                                started_at=timezone.now(), tool_name="weather_forecast",
                                tool_call_id=call_id, arguments={})  # fmt: skip
        store.step_finish(step_id=step.pk, finished_at=timezone.now(), status=call_status,
                          result="Error: unknown town", error="ValueError: bad town")  # fmt: skip
    return _finish(run, status, error="" if status == RunStatus.SUCCEEDED else "It failed.")


def test_a_success_with_tool_errors_says_so_in_its_badge():
    run = _with_tool_error()
    html = fragments.run_ended(run)
    assert "with-tool-errors" in html
    assert ">Succeeded · 2 tool errors</span>" in html
    assert 'class="tool-errors"' not in html  # said once, in the badge


def test_a_clean_success_and_a_failure_with_tool_errors_keep_their_badges():
    clean = _finish(_start(Conversation.objects.create()))
    assert "with-tool-errors" not in fragments.run_ended(clean)
    assert '<span class="badge">Succeeded</span>' in fragments.run_ended(clean)
    failed = _with_tool_error(RunStatus.FAILED)
    html = fragments.run_ended(failed)
    assert "with-tool-errors" not in html and '<span class="badge">Failed</span>' in html
    assert '<span class="tool-errors">2 tool errors</span>' in html


# The conversation's sum


def test_a_conversation_sums_its_runs_costs_as_decimals_and_counts_those_with_no_price():
    _price()
    _price("claude-*", currency="EUR", input_per_million=Decimal(3), output_per_million=Decimal(15))
    conversation = Conversation.objects.create()
    tokens = {"input_tokens": 1000, "output_tokens": 500, "total_tokens": 1500}
    for _ in range(3):
        _finish(_start(conversation), usage=tokens)
    _finish(_start(conversation, {"provider": "anthropic", "model_name": "claude-x"}),
            usage=tokens)  # fmt: skip
    _finish(_start(conversation, {"provider": "ollama", "model_name": "qwen3"}), usage=tokens)
    last = _start(conversation)
    _turn(last, 1, None)  # a turn that reported no tokens at all
    last = _finish(last)
    usage = last.conversation_usage
    assert usage.costs == {"USD": Decimal("0.00135"), "EUR": Decimal("0.0105")}
    assert (usage.runs, usage.tokens, usage.unpriced, usage.unknown) == (6, 7500, 1, 1)
    assert usage.cost_label == "€0.0105 + $0.00135 + no price for 1 run"
    with no_queries():
        html = fragments.run_ended(last)
    assert 'id="conversation-usage"' in html and 'hx-swap-oob="true"' in html
    assert "7,500 tokens" in html and "$0.00135" in html


def test_a_running_run_is_left_out_of_the_sum_and_no_priced_run_shows_no_price():
    conversation = Conversation.objects.create()
    done = _finish(_start(conversation),
                   usage=tokens(1, 1))  # fmt: skip
    _start(conversation)
    usage = summarise(AgentRun.objects.filter(conversation=conversation))
    assert (usage.runs, usage.tokens, usage.cost_label) == (1, 2, "no price")
    assert done.conversation_usage.runs == 1
    assert ConversationUsage().tokens_label == "" and ConversationUsage().cost_label == ""


def test_the_chat_page_header_shows_the_conversations_cost(alice):
    client, conversation = alice
    _price("demo-*")
    run = store.run_start(conversation_id=conversation.pk, content="q", started_at=timezone.now(),
                          **DEMO)  # fmt: skip
    _finish(run, usage={"input_tokens": 1000, "output_tokens": 0, "total_tokens": 1000})
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="conversation-usage"' in html
    assert "≈1,000 tokens" in html and "≈$0.00015" in html


def test_the_page_sums_what_the_live_header_sums_a_forks_own_runs_and_every_take(alice):
    """Found by a new-user walk: a fresh fork's header counted its source's run as "this
    conversation's 1 finished run", then dropped it once the fork ran its own (the page
    summed the runs it rendered, the live header the conversation's own)."""
    client, conversation = alice
    _price("demo-*")
    run = store.run_start(conversation_id=conversation.pk, content="q", started_at=timezone.now(),
                          **DEMO)  # fmt: skip
    _finish(run, usage={"input_tokens": 1000, "output_tokens": 0, "total_tokens": 1000})
    owner = store.Owner(user_id=conversation.owner_id, guest_key="")
    fork = store.conversation_fork(owner=owner, conversation_id=conversation.pk,
                                   question_id=run.user_message_id)  # fmt: skip

    html = client.get(f"/c/{fork.pk}/").content.decode()
    assert '<span class="conversation-usage" id="conversation-usage"></span>' in html
    live = fragments.runs_caught_up(conversation_id=conversation.pk)[-1]
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    shown = re.search(r'<span class="conversation-usage".*?</span>', page).group(0)
    assert shown in live.replace(' hx-swap-oob="true"', "")


def test_an_empty_conversation_has_an_empty_usage_element_to_fill(alice):
    client, conversation = alice
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert '<span class="conversation-usage" id="conversation-usage"></span>' in html


# The admin and the CSV


def _staff(client: Client, *codenames: str) -> User:
    user = User.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def test_the_admin_run_list_and_page_show_cost_no_price_and_the_tool_error_warning(client):
    _staff(client, "view_agentrun", "view_conversation")
    _price()
    priced = _finish(_start(Conversation.objects.create()),
                     usage=tokens(1000, 500))  # fmt: skip
    _finish(_start(Conversation.objects.create(), {"provider": "openai", "model_name": "o9"}),
            usage=tokens(1, 1))  # fmt: skip
    unknown = _start(Conversation.objects.create())
    _turn(unknown, 1, None)
    _finish(unknown)
    warned = _with_tool_error()
    html = client.get("/admin/chat/agentrun/").content.decode()
    assert '<td class="field-cost_shown">$0.00045</td>' in html
    assert '<td class="field-cost_shown">no price</td>' in html
    assert '<td class="field-tokens">unknown</td>' in html
    assert '<td class="field-cost_shown">unknown</td>' in html
    assert "Succeeded · 2 tool errors" in html
    page = client.get(f"/admin/chat/agentrun/{priced.pk}/change/").content.decode()
    assert "$0.00045" in page and "1000 in · 500 out · 1500 total" in page
    page = client.get(f"/admin/chat/agentrun/{warned.pk}/change/").content.decode()
    assert "Succeeded · 2 tool errors" in page


def test_staff_with_the_permissions_edit_the_price_table(client):
    _staff(client, "view_modelprice", "add_modelprice", "change_modelprice")
    response = client.post("/admin/chat/modelprice/add/", {
        "provider": "", "model_pattern": "gpt-4o-mini*", "input_per_million": "0.15",
        "output_per_million": "0.6", "currency": "USD",
    })  # fmt: skip
    assert response.status_code == 302
    price = ModelPrice.objects.get()
    assert price.input_per_million == Decimal("0.15")
    html = client.get("/admin/chat/modelprice/").content.decode()
    assert "gpt-4o-mini*" in html and "(any)" in html
    refused = client.post("/admin/chat/modelprice/add/", {
        "provider": "", "model_pattern": "x", "input_per_million": "-1",
        "output_per_million": "0", "currency": "usd",
    })  # fmt: skip
    assert refused.status_code == 200 and ModelPrice.objects.count() == 1
    misspelt = client.post("/admin/chat/modelprice/add/", {
        "provider": "opneai", "model_pattern": "gpt-4o", "input_per_million": "1",
        "output_per_million": "1", "currency": "USD",
    })  # fmt: skip
    assert misspelt.status_code == 200 and ModelPrice.objects.count() == 1
    assert "Select a valid choice" in misspelt.content.decode()


def test_the_csv_ends_with_the_runs_cost_its_currency_and_whether_it_is_estimated():
    assert COLUMNS[35:38] == ("run_cost", "run_cost_currency", "usage_estimated")
    assert COLUMNS.index("step_reasoning") == 34  # appended after the 35 columns before
    _price()
    priced = _start(Conversation.objects.create())
    _turn(priced, 1, (1000, 500))
    _finish(priced)
    unpriced = _finish(_start(Conversation.objects.create(), DEMO),
                       usage=tokens(1, 1))  # fmt: skip
    text = "".join(csv_lines(trace_rows(AgentRun.objects.order_by("pk"))))
    rows = [dict(zip(COLUMNS, row, strict=True))
            for row in list(csv.reader(io.StringIO(text, newline="")))[1:]]  # fmt: skip
    first = rows[0]
    assert (first["run_cost"], first["run_cost_currency"], first["usage_estimated"]) == (
        "0.00045", "USD", "false")  # fmt: skip
    last = rows[-1]
    assert last["run_id"] == str(unpriced.pk)
    assert (last["run_cost"], last["run_cost_currency"], last["usage_estimated"]) == (
        "", "", "true")  # fmt: skip


def test_a_page_that_reconnects_is_sent_the_conversations_usage_after_its_runs():
    _price()
    conversation = Conversation.objects.create()
    _finish(_start(conversation), usage=tokens(1000, 500))
    (frame,) = fragments.runs_caught_up(conversation_id=conversation.pk)
    assert frame.index('id="run-') < frame.index('id="conversation-usage"')
    assert "$0.00045" in frame
    assert fragments.runs_caught_up(conversation_id=Conversation.objects.create().pk) == []


def test_a_run_that_reported_only_a_total_has_no_cost_but_is_not_said_to_have_no_price():
    _price()
    run = _finish(_start(Conversation.objects.create()), usage={"total_tokens": 57})
    assert (run.total_tokens, run.cost) == (57, None)
    assert RunPresenter(run).cost_label == "cost unknown"
