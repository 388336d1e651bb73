"""AgentExecutor's other controls through the app's run path (settings, rows, page, admin,
CSV): return_direct, AGENT_MAX_EXECUTION_TIME_S, AGENT_EARLY_STOPPING_METHOD and a model
that repeats the same failing call."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from chat import fragments, store
from chat.export import COLUMNS, trace_rows
from chat.models import AgentRun, Conversation, Message, RunStatus
from chat.runs import create_run, execute_run
from chat.store.listing import MARKERS
from tests.fakes import ScriptedChatModel, tool_call

pytestmark = pytest.mark.django_db(transaction=True)


@tool(return_direct=True)
def book_room(town: str) -> str:
    """Book a room; the confirmation is the answer."""
    return f"Booked in {town}: **BK-42**"


@tool
async def hang(town: str) -> str:
    """Never return."""
    await asyncio.Event().wait()
    return town


@tool
def explode(reason: str) -> str:
    """Always raise."""
    raise RuntimeError(f"boom: {reason}")


def calling(name: str, args: dict, call_id: str = "call_1") -> AIMessage:
    return AIMessage("", tool_calls=[tool_call(name, args, call_id)])


async def ask(script: list, *, tools=(book_room, hang, explode)) -> AgentRun:
    def start() -> AgentRun:
        user = User.objects.create_user(f"u{User.objects.count()}")
        conversation = Conversation.objects.create(owner=user)
        return create_run(conversation_id=conversation.pk, content="Book me a room.")

    row = await database_sync_to_async(start)()
    await execute_run(row.pk, model=ScriptedChatModel(script=script), tools=list(tools))
    return await database_sync_to_async(store.run_get)(run_id=row.pk)


@database_sync_to_async
def drawn(run: AgentRun) -> str:
    """Return the run as the page draws it on a reload (and as its end is sent)."""
    (html,) = fragments.runs_caught_up(conversation_id=run.conversation_id)[-1:]
    return html


async def test_a_return_direct_answer_is_stored_as_the_runs_answer_and_drawn_after_the_steps():
    run = await ask([calling("book_room", {"town": "Suzhou"})])

    assert (run.status, run.output, run.error) == (
        RunStatus.SUCCEEDED,
        "Booked in Suzhou: **BK-42**",
        "",
    )
    assert run.iterations == 1
    messages = await database_sync_to_async(lambda: list(Message.objects.filter(run=run)))()
    assert [m.content for m in messages] == ["Booked in Suzhou: **BK-42**"]
    html = await drawn(run)
    assert f'id="run-{run.pk}-answer"' in html and 'data-tool="book_room"' in html
    assert "<strong>BK-42</strong>" in html  # Markdown, as any answer


async def test_a_return_direct_call_among_several_is_still_drawn_as_the_answer():
    calls = [tool_call("book_room", {"town": "Wuxi"}, "call_a"),
             tool_call("explode", {"reason": "x"}, "call_b")]  # fmt: skip
    run = await ask([AIMessage("", tool_calls=calls)])

    assert (run.status, run.output) == (RunStatus.SUCCEEDED, "Booked in Wuxi: **BK-42**")
    assert 'data-tool="book_room"' in await drawn(run)


async def test_the_time_limit_is_stored_with_its_own_status_and_reason(settings):
    settings.AGENT_MAX_EXECUTION_TIME_S = 0.5
    run = await ask([calling("hang", {"town": "Suzhou"})])

    assert run.status == RunStatus.TIME_LIMIT and run.output == ""
    assert "time limit of 0.5 seconds" in run.error
    html = await drawn(run)
    assert 'data-status="time_limit"' in html and "Time limit reached" in html
    assert "time limit of 0.5 seconds" in html


async def test_a_repeated_failing_call_is_stored_with_its_own_status_and_reason():
    same = calling("explode", {"reason": "x"})
    run = await ask([same, same, same])

    assert run.status == RunStatus.REPEATED_FAILURE and run.iterations == 3
    assert "same failing call 3 times in a row" in run.error
    html = await drawn(run)
    assert 'data-status="repeated_failure"' in html and "same call kept failing" in html


async def test_generate_stores_the_answer_at_the_limit_with_a_note(settings):
    settings.AGENT_MAX_ITERATIONS = 1
    settings.AGENT_EARLY_STOPPING_METHOD = "generate"
    run = await ask([calling("explode", {"reason": "x"}), AIMessage("I could not book it.")])

    assert (run.status, run.output) == (RunStatus.MAX_ITERATIONS, "I could not book it.")
    assert run.iterations == 2 and "generated at the limit" in run.error
    html = await drawn(run)
    assert "I could not book it." in html and "generated at the limit" in html
    assert "Model turn limit reached" in html


async def test_force_is_the_default_at_the_limit(settings):
    settings.AGENT_MAX_ITERATIONS = 1
    run = await ask([calling("explode", {"reason": "x"})])
    assert (run.status, run.output) == (RunStatus.MAX_ITERATIONS, "")


@pytest.mark.parametrize("status", ["time_limit", "repeated_failure"])
def test_the_new_statuses_are_in_the_admin_filter_the_csv_and_the_list_marker(client, status):
    staff = User.objects.create_user("auditor", is_staff=True, is_superuser=True)
    client.force_login(staff)
    conversation = Conversation.objects.create(owner=staff)
    run = create_run(conversation_id=conversation.pk, content="q")
    AgentRun.objects.filter(pk=run.pk).update(status=status, error="why")

    page = client.get("/admin/chat/agentrun/", {"status__exact": status}).content.decode()
    assert f"?status__exact={status}" in page and str(RunStatus(status).label) in page
    (row,) = trace_rows(AgentRun.objects.all())
    assert row[COLUMNS.index("run_status")] == status and row[COLUMNS.index("run_error")] == "why"
    assert MARKERS[RunStatus(status)][0] == "failed"


def costly(message: AIMessage, tokens: int) -> AIMessage:
    message.usage_metadata = {"input_tokens": tokens - 10, "output_tokens": 10,
                              "total_tokens": tokens}  # fmt: skip
    return message


async def test_a_run_past_its_token_budget_is_stored_as_budget_exceeded(settings):
    settings.AGENT_MAX_RUN_TOKENS = 100
    run = await ask([costly(calling("explode", {"reason": "x"}), 80),
                     costly(calling("explode", {"reason": "y"}, "call_2"), 80)])  # fmt: skip
    assert run.status == RunStatus.BUDGET_EXCEEDED and "AGENT_MAX_RUN_TOKENS" in run.error
    assert (run.total_tokens, run.iterations) == (160, 2)
    html = await drawn(run)
    assert "Budget reached" in html and "160 tokens" in html
    listed = await database_sync_to_async(store.conversations_listed)(
        owner=store.Owner(user_id=run.conversation.owner_id, guest_key="")
    )
    assert listed[0].marker == MARKERS[RunStatus.BUDGET_EXCEEDED]


async def test_the_cost_budget_uses_the_admins_price_for_the_runs_model(settings):
    from decimal import Decimal

    from chat.models import ModelPrice

    settings.AGENT_MAX_RUN_COST = Decimal("0.0001")
    await database_sync_to_async(ModelPrice.objects.create)(
        model_pattern="*", input_per_million=Decimal(1000), output_per_million=Decimal(0)
    )
    run = await ask([costly(calling("explode", {"reason": "x"}), 200),
                     AIMessage("never")])  # fmt: skip
    assert run.status == RunStatus.BUDGET_EXCEEDED and "AGENT_MAX_RUN_COST" in run.error


def test_the_settings_reach_the_runs_limits(settings):
    from chat.catalog import run_limits

    settings.AGENT_TRIM_INTERMEDIATE_STEPS = 4
    settings.AGENT_MAX_RUN_TOKENS = 9000
    limits = run_limits()
    assert limits.trim_intermediate_steps == 4 and limits.budget.max_tokens == 9000
    assert limits.budget.cost is None  # no price known: the cost budget cannot apply
    settings.AGENT_TRIM_INTERMEDIATE_STEPS = 0
    assert run_limits().trim_intermediate_steps == -1
