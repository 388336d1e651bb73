"""Cost growth: the conversation page shows a window of its newest exchanges, "Show
earlier messages" pages back to the start, and the page, the earlier fragment, the
catch-up on connect, the admin's run page and the sidebar cost the same number of queries
at two sizes (bench/growth.py measures the time and bytes)."""

from __future__ import annotations

import re
from datetime import timedelta
from itertools import pairwise

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.template.loader import render_to_string
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat import fragments, store
from chat.models import AgentRun, AgentStep, Conversation, Message
from tests.chat.test_admin import make_run, weather_call

pytestmark = pytest.mark.django_db

RUN_IDS = re.compile(r'<section class="run" id="run-(\d+)"')
BEFORE = re.compile(r"earlier/\?before=(\d+)")


@pytest.fixture
def window(settings) -> int:
    settings.CHAT_PAGE_EXCHANGES = 3
    return 3


def exchanges(conversation: Conversation, count: int, *, calls: int = 1, **kwargs) -> list[int]:
    """Store ``count`` runs a minute apart (``calls`` tool calls each); return their ids."""
    start = timezone.now() - timedelta(days=1)
    return [
        make_run(
            conversation,
            question=f"Question {n}?",
            calls=[weather_call(f"call_{n}_{k}") for k in range(calls)],
            started_at=start + timedelta(minutes=n),
            **kwargs,
        ).pk
        for n in range(count)
    ]


def shown(html: str) -> list[int]:
    return [int(pk) for pk in RUN_IDS.findall(html)]


def earlier_link(html: str) -> int | None:
    found = BEFORE.findall(html)
    assert len(found) <= 1
    return int(found[0]) if found else None


def page(client: Client, conversation: Conversation) -> str:
    response = client.get(f"/c/{conversation.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def earlier(client: Client, conversation: Conversation, before: object) -> str:
    response = client.get(f"/c/{conversation.pk}/earlier/", {"before": before})
    assert response.status_code == 200
    return response.content.decode()


def test_a_conversation_of_exactly_the_window_shows_every_run_and_no_earlier_control(alice, window):
    client, conversation = alice
    ids = exchanges(conversation, window)
    html = page(client, conversation)
    assert shown(html) == ids
    assert earlier_link(html) is None
    assert "Show earlier messages" not in html


def test_one_run_more_than_the_window_leaves_the_oldest_behind_show_earlier(alice, window):
    client, conversation = alice
    ids = exchanges(conversation, window + 1)
    html = page(client, conversation)
    assert shown(html) == ids[1:]
    assert earlier_link(html) == ids[1]
    assert 'id="empty-hint"' not in html
    rest = earlier(client, conversation, ids[1])
    assert shown(rest) == ids[:1]
    assert earlier_link(rest) is None


def test_an_empty_conversation_shows_the_examples_and_no_earlier_control(alice, window):
    client, conversation = alice
    html = page(client, conversation)
    assert 'id="empty-hint"' in html
    assert shown(html) == []
    assert "Show earlier messages" not in html


def test_show_earlier_pages_back_to_the_start_without_gaps_or_repeats(alice, window):
    client, conversation = alice
    ids = exchanges(conversation, 3 * window + 2)
    html = page(client, conversation)
    seen = shown(html)
    before = earlier_link(html)
    while before is not None:
        html = earlier(client, conversation, before)
        assert 0 < len(shown(html)) <= window
        seen = shown(html) + seen
        before = earlier_link(html)
    assert seen == ids


def test_runs_started_at_the_same_moment_page_by_id_without_loss(alice, window):
    client, conversation = alice
    moment = timezone.now()
    ids = [make_run(conversation, question=f"Q{n}", started_at=moment).pk for n in range(7)]
    html = page(client, conversation)
    seen, before = shown(html), earlier_link(html)
    while before is not None:
        html = earlier(client, conversation, before)
        seen = shown(html) + seen
        before = earlier_link(html)
    assert seen == ids


def test_a_running_run_is_the_newest_and_always_in_the_first_window(alice, window):
    client, conversation = alice
    ids = exchanges(conversation, 2 * window)
    running = make_run(conversation, question="Still going?", status="running")
    running.heartbeat_at = timezone.now()
    running.save(update_fields=["heartbeat_at"])
    html = page(client, conversation)
    assert shown(html) == [*ids[-(window - 1) :], running.pk]
    assert 'data-status="running"' in html


@pytest.mark.parametrize("before", ["", "abc", "-1", "1.5", "²", "9" * 40])
def test_a_before_that_is_not_a_run_id_is_a_clean_400(alice, window, before):
    client, conversation = alice
    exchanges(conversation, window + 1)
    response = client.get(f"/c/{conversation.pk}/earlier/", {"before": before})
    assert response.status_code == 400
    assert b"before must be the id of a run" in response.content


def test_a_run_of_another_conversation_or_none_at_all_is_404(alice, window):
    client, conversation = alice
    exchanges(conversation, window + 1)
    other = Conversation.objects.create(owner=conversation.owner)
    foreign = exchanges(other, 1)[0]
    for before in (foreign, 10**9):
        response = client.get(f"/c/{conversation.pk}/earlier/", {"before": before})
        assert response.status_code == 404


def test_someone_elses_conversation_is_404_for_the_earlier_fragment(alice, window):
    _client, conversation = alice
    ids = exchanges(conversation, window + 1)
    stranger = Client()
    stranger.force_login(User.objects.create_user("mallory"))
    response = stranger.get(f"/c/{conversation.pk}/earlier/", {"before": ids[-1]})
    assert response.status_code == 404


def test_the_earlier_fragment_is_get_only(alice, window):
    client, conversation = alice
    ids = exchanges(conversation, window + 1)
    response = client.post(f"/c/{conversation.pk}/earlier/?before={ids[-1]}")
    assert response.status_code == 405


def test_a_window_holds_at_least_one_exchange(alice):
    _client, conversation = alice
    with pytest.raises(ValueError, match="at least one"):
        store.runs_window(conversation_id=conversation.pk, exchanges=0)


# Bounded queries: the same count at two sizes.


def queries(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured)


def two_conversations(owner: User) -> tuple[Conversation, Conversation]:
    """A short conversation with small runs and a long one with runs of many steps."""
    short = Conversation.objects.create(owner=owner, title="short")
    exchanges(short, 4, calls=1)
    long = Conversation.objects.create(owner=owner, title="long")
    exchanges(long, 30, calls=8)
    return short, long


def test_the_page_costs_the_same_queries_for_4_and_30_exchanges_of_more_steps(alice, window):
    client, conversation = alice
    short, long = two_conversations(conversation.owner)
    counts = [queries(lambda c=c: page(client, c)) for c in (short, long)]
    assert counts[0] == counts[1]


# Kinds of run a long conversation holds, cycled: (run status, its tool call's status).
RUN_KINDS = [
    ("succeeded", "success"),
    ("succeeded", "error"),
    ("failed", "success"),
    ("cancelled", "error"),
    ("max_iterations", "success"),
]


def bulk_exchanges(conversation: Conversation, count: int) -> list[int]:
    """Store ``count`` runs as :func:`exchanges` does (one tool call each, the kinds of
    :data:`RUN_KINDS` in turn), in three bulk inserts; return their ids."""
    start = timezone.now() - timedelta(days=1)
    kinds = [RUN_KINDS[n % len(RUN_KINDS)] for n in range(count)]
    questions = Message.objects.bulk_create(
        Message(conversation=conversation, role="user", content=f"Question {n}?")
        for n in range(count)
    )
    for before, question in pairwise(questions):
        question.parent = before  # in line, as run_start links each to the branch's leaf
    Message.objects.bulk_update(questions[1:], ["parent"])
    runs = AgentRun.objects.bulk_create(
        _bulk_run(question, kind, start + timedelta(minutes=n))
        for n, (question, kind) in enumerate(zip(questions, kinds, strict=True))
    )
    AgentStep.objects.bulk_create(
        step for run, kind in zip(runs, kinds, strict=True) for step in _bulk_steps(run, kind)
    )
    return [run.pk for run in runs]


def _bulk_run(question: Message, kind: tuple[str, str], at) -> AgentRun:
    status, call_status = kind
    return AgentRun(
        conversation_id=question.conversation_id, user_message=question,
        strategy="tool_calling", provider="demo", model_name="demo-scripted", status=status,
        started_at=at, finished_at=at + timedelta(seconds=2), duration_ms=2000, iterations=2,
        output="It is **sunny**." if status == "succeeded" else "",
        error="" if status == "succeeded" else "it ended", tool_call_count=1,
        tool_error_count=int(call_status == "error"), input_tokens=100, output_tokens=20,
        total_tokens=120,
    )  # fmt: skip


def _bulk_steps(run: AgentRun, kind: tuple[str, str]) -> list[AgentStep]:
    """A model turn asking for one weather call, the call, and the last turn."""
    status, call_status = kind
    call_id = f"c{run.pk}"
    return [
        AgentStep(run=run, ordinal=1, iteration=1, kind="model_turn", status="success",
                  started_at=run.started_at, text="Let me check.",
                  raw={"tool_calls": [{"name": "weather_forecast", "id": call_id}]},
                  input_tokens=60, output_tokens=10, total_tokens=70),
        AgentStep(run=run, ordinal=2, iteration=1, kind="tool_call", status=call_status,
                  started_at=run.started_at, tool_name="weather_forecast",
                  tool_call_id=call_id, arguments={"town": "Suzhou", "days": 1},
                  result='{"high_c": 8}' if call_status == "success" else "",
                  error="" if call_status == "success" else "Cancelled.", duration_ms=15),
        AgentStep(run=run, ordinal=3, iteration=2, kind="model_turn",
                  status="success" if status == "succeeded" else "error",
                  started_at=run.started_at, text=run.output or "The answer was",
                  raw={"tool_calls": []}, input_tokens=40, output_tokens=10, total_tokens=50),
    ]  # fmt: skip


def test_a_conversation_of_200_runs_opens_with_the_queries_of_one_of_5(alice, settings):
    """Every run shown (the window holds 200), and still no query per run or per step."""
    settings.CHAT_PAGE_EXCHANGES = 200
    client, conversation = alice
    five = Conversation.objects.create(owner=conversation.owner, title="five")
    many = Conversation.objects.create(owner=conversation.owner, title="many")
    bulk_exchanges(five, 5)
    ids = bulk_exchanges(many, 200)

    counts = [queries(lambda c=c: page(client, c)) for c in (five, many)]

    assert counts[0] == counts[1]
    html = page(client, many)
    assert shown(html) == ids and "Show earlier messages" not in html
    assert html.count('data-kind="tool_call"') == 200


def test_the_earlier_fragment_costs_the_same_queries_at_both_sizes(alice, window):
    client, conversation = alice
    short, long = two_conversations(conversation.owner)
    counts = []
    for c in (short, long):
        newest = AgentRun.objects.filter(conversation=c).order_by("-started_at").first()
        counts.append(queries(lambda c=c, pk=newest.pk: earlier(client, c, pk)))
    assert counts[0] == counts[1]


def test_the_catch_up_on_connect_costs_the_same_queries_at_both_sizes(alice, window):
    _client, conversation = alice
    short, long = two_conversations(conversation.owner)
    counts = [
        queries(lambda c=c: fragments.runs_caught_up(conversation_id=c.pk)) for c in (short, long)
    ]
    assert counts[0] == counts[1]
    # The latest run only: not the whole conversation.
    assert len(store.runs_to_catch_up(conversation_id=long.pk)) == 1


def test_the_admin_run_page_costs_the_same_queries_for_3_and_60_steps(alice, client):
    conversation = Conversation.objects.create(owner=alice[1].owner)
    small = make_run(conversation, calls=[weather_call(f"s{k}") for k in range(1)])
    large = make_run(conversation, calls=[weather_call(f"l{k}") for k in range(58)])
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))

    def open_run(run: AgentRun) -> None:
        response = client.get(f"/admin/chat/agentrun/{run.pk}/change/")
        assert response.status_code == 200

    open_run(small)  # warm the caches (content types) the first request fills
    assert queries(lambda: open_run(small)) == queries(lambda: open_run(large))


def test_the_admin_conversation_page_costs_the_same_queries_for_2_and_20_exchanges(client):
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    counts = []
    for count in (2, 20):
        conversation = Conversation.objects.create(owner=root)
        for run_id in exchanges(conversation, count):
            conversation.messages.create(role="assistant", content="Sunny.", run_id=run_id)
        url = f"/admin/chat/conversation/{conversation.pk}/change/"
        client.get(url)  # warm the caches (content types) the first request fills
        counts.append(queries(lambda url=url: client.get(url)))
    assert counts[0] == counts[1]


def test_the_sidebar_costs_the_same_queries_for_3_and_60_conversations(alice):
    client, _conversation = alice
    few = User.objects.create_user("few")
    many = User.objects.create_user("many")
    for owner, count in ((few, 3), (many, 60)):
        for n in range(count):
            exchanges(Conversation.objects.create(owner=owner, title=f"#{n}"), 1)
    counts = []
    for owner in (few, many):
        client.force_login(owner)
        counts.append(queries(lambda: client.get("/c/list/")))
    assert counts[0] == counts[1]


# An ended run shows its last CHAT_RUN_STEPS_SHOWN steps.

STEP_IDS = re.compile(r'id="step-(\d+)" data-kind=')
STEPS_BEFORE = re.compile(r"runs/(\d+)/steps/\?before=(\d+)")


@pytest.fixture
def steps_shown(settings) -> int:
    settings.CHAT_RUN_STEPS_SHOWN = 4
    return 4


def long_run(conversation: Conversation, calls: int = 10, **kwargs) -> AgentRun:
    """A run of ``calls`` tool calls between its two model turns (``calls`` + 2 steps)."""
    return make_run(conversation, calls=[weather_call(f"c{k}") for k in range(calls)], **kwargs)


def step_ids(run: AgentRun) -> list[int]:
    return list(run.steps.order_by("ordinal").values_list("pk", flat=True))


def test_an_ended_run_shows_its_last_steps_and_loads_the_earlier_ones(alice, steps_shown):
    client, conversation = alice
    run = long_run(conversation)
    html = page(client, conversation)
    every = step_ids(run)
    assert [int(pk) for pk in STEP_IDS.findall(html)] == every[-steps_shown:]
    assert "Show the 8 earlier steps" in html
    ((run_id, before),) = STEPS_BEFORE.findall(html)
    response = client.get(f"/c/{conversation.pk}/runs/{run_id}/steps/", {"before": before})
    assert response.status_code == 200
    assert [int(pk) for pk in STEP_IDS.findall(response.content.decode())] == every[:-steps_shown]


def test_a_run_of_exactly_the_limit_shows_every_step_and_no_control(alice, steps_shown):
    client, conversation = alice
    run = long_run(conversation, calls=steps_shown - 2)
    html = page(client, conversation)
    assert [int(pk) for pk in STEP_IDS.findall(html)] == step_ids(run)
    assert "earlier step" not in html


def test_a_running_run_shows_every_step(alice, steps_shown):
    client, conversation = alice
    run = long_run(conversation, status="running")
    run.heartbeat_at = timezone.now()
    run.save(update_fields=["heartbeat_at"])
    html = page(client, conversation)
    assert [int(pk) for pk in STEP_IDS.findall(html)] == step_ids(run)
    assert "earlier step" not in html


def test_the_catch_up_sends_a_long_run_as_the_page_shows_it(alice, steps_shown):
    client, conversation = alice
    long_run(conversation)
    (frame,) = fragments.runs_caught_up(conversation_id=conversation.pk)
    html = page(client, conversation)
    assert STEP_IDS.findall(frame) == STEP_IDS.findall(html)
    assert STEPS_BEFORE.findall(frame) == STEPS_BEFORE.findall(html)


def test_the_staffs_read_only_copy_shows_every_step(client, steps_shown):
    owner = User.objects.create_user("owner")
    run = long_run(Conversation.objects.create(owner=owner))
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    response = client.get(f"/admin/chat/agentrun/{run.pk}/conversation/")
    html = response.content.decode()
    assert [int(pk) for pk in STEP_IDS.findall(html)] == step_ids(run)
    assert "earlier step" not in html


@pytest.mark.parametrize("before", ["", "x", "-2", "٣"])
def test_a_step_ordinal_that_is_not_a_number_is_a_clean_400(alice, steps_shown, before):
    client, conversation = alice
    run = long_run(conversation)
    response = client.get(f"/c/{conversation.pk}/runs/{run.pk}/steps/", {"before": before})
    assert response.status_code == 400


def test_the_steps_of_a_run_elsewhere_are_404(alice, steps_shown):
    client, conversation = alice
    other = Conversation.objects.create(owner=conversation.owner)
    run = long_run(other)
    response = client.get(f"/c/{conversation.pk}/runs/{run.pk}/steps/", {"before": 5})
    assert response.status_code == 404
    stranger = Client()
    stranger.force_login(User.objects.create_user("mallory"))
    response = stranger.get(f"/c/{other.pk}/runs/{run.pk}/steps/", {"before": 5})
    assert response.status_code == 404


def test_the_earlier_steps_cost_the_same_queries_for_8_and_80_steps(alice, steps_shown):
    client, conversation = alice
    runs = [long_run(conversation, calls=6), long_run(conversation, calls=78)]

    def load(run: AgentRun) -> None:
        response = client.get(f"/c/{conversation.pk}/runs/{run.pk}/steps/", {"before": 10**6})
        assert response.status_code == 200

    counts = [queries(lambda run=run: load(run)) for run in runs]
    assert counts[0] == counts[1]


def test_the_page_costs_the_same_queries_for_runs_of_8_and_80_steps(alice, steps_shown):
    client, conversation = alice
    short, long = two_conversations(conversation.owner)
    long_run(short, calls=6)
    long_run(long, calls=78)
    counts = [queries(lambda c=c: page(client, c)) for c in (short, long)]
    assert counts[0] == counts[1]


def test_the_windows_and_the_earlier_steps_render_without_a_query(alice, window, steps_shown):
    _client, conversation = alice
    ids = exchanges(conversation, window + 2, calls=5)
    shown_window = store.runs_window(conversation_id=conversation.pk, exchanges=window)
    steps = store.run_steps_before(conversation_id=conversation.pk, run_id=ids[-1], before=6)
    context = {"conversation": conversation, "runs": shown_window.runs,
               "earlier": shown_window.earlier}  # fmt: skip
    with CaptureQueriesContext(connection) as captured:
        html = render_to_string("chat/_earlier_loaded.html", context)
        html += render_to_string("chat/_steps.html", {"steps": steps})
    assert list(captured) == []
    assert shown(html) == ids[-window:]
    assert len(STEP_IDS.findall(html)) == window * steps_shown + 5


TIMELINE_ROWS = re.compile(r'<li class="tl-row')


def test_a_long_ended_runs_timeline_loads_its_bars_when_it_opens(alice, steps_shown):
    client, conversation = alice
    run = long_run(conversation)
    html = page(client, conversation)
    assert f'hx-get="/c/{conversation.pk}/runs/{run.pk}/timeline/"' in html
    assert TIMELINE_ROWS.findall(html) == []
    assert "2 model turns · 10 tool calls" in html  # the summary counts every step
    response = client.get(f"/c/{conversation.pk}/runs/{run.pk}/timeline/")
    assert response.status_code == 200
    assert len(TIMELINE_ROWS.findall(response.content.decode())) == 12
    assert f'id="run-{run.pk}-timeline-body"' in response.content.decode()


def test_a_short_runs_timeline_and_the_admins_are_drawn_in_the_page(client, steps_shown):
    owner = User.objects.create_user("owner")
    conversation = Conversation.objects.create(owner=owner)
    short = long_run(conversation, calls=2)
    client.force_login(owner)
    assert len(TIMELINE_ROWS.findall(page(client, conversation))) == 4
    long = long_run(conversation)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    admin = client.get(f"/admin/chat/agentrun/{long.pk}/change/").content.decode()
    assert len(TIMELINE_ROWS.findall(admin)) == 12
    assert short.pk != long.pk


def test_the_timeline_of_a_run_elsewhere_is_404(alice, steps_shown):
    client, conversation = alice
    run = long_run(Conversation.objects.create(owner=conversation.owner))
    assert client.get(f"/c/{conversation.pk}/runs/{run.pk}/timeline/").status_code == 404
    stranger = Client()
    stranger.force_login(User.objects.create_user("mallory"))
    url = f"/c/{run.conversation_id}/runs/{run.pk}/timeline/"
    assert stranger.get(url).status_code == 404


def test_the_timeline_costs_the_same_queries_for_8_and_80_steps(alice, steps_shown):
    client, conversation = alice
    runs = [long_run(conversation, calls=6), long_run(conversation, calls=78)]

    def load(run: AgentRun) -> None:
        assert client.get(f"/c/{conversation.pk}/runs/{run.pk}/timeline/").status_code == 200

    counts = [queries(lambda run=run: load(run)) for run in runs]
    assert counts[0] == counts[1]
