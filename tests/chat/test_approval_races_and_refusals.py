"""Decisions on held tool calls: a frame no database can hold or store is refused and
changes nothing; tabs, Stop, the expiry and the sweep racing for one call decide it once;
a restart mid-decision leaves evidence; markup is escaped in the card, admin and CSV."""

from __future__ import annotations

import csv as _csv
import io
import json

import pytest
from channels.db import database_sync_to_async

from chat.models import ApprovalOutcome
from chat.presenters import StepPresenter
from tests.chat.conftest import wait_for_runs
from tests.chat.test_approvals import ask_and_wait, decision, rows
from tests.chat.test_consumer import receive_until_finished

pytestmark = pytest.mark.django_db(transaction=True)

BOOKING = "check_bnb_availability"


@pytest.fixture(autouse=True)
def _ask_for_booking(settings):
    settings.AGENT_TOOL_POLICIES = {BOOKING: "ask"}
    settings.AGENT_APPROVAL_TIMEOUT_S = 3600


async def _refused_and_still_pending(tab, conversation, frame: str, expected: str) -> None:
    """Send ``frame``; the socket answers with an error naming ``expected``, stays open,
    and the call is still pending."""
    await tab.send_to(text_data=frame)
    answer = await tab.receive_from()
    assert "chat-error" in answer and expected in answer, answer
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING


@pytest.mark.parametrize(
    "step",
    ["\u00b2", "\u2460", 10**30, "99999999999999999999999", 2**63, -(2**63) - 1],
    ids=["superscript-two", "circled-one", "huge-int", "huge-text", "2^63", "below-int64"],
)
async def test_a_step_id_no_database_can_hold_is_refused_not_a_crash(step):
    """'²'.isdigit() is true but int('²') raises ValueError; 10**30 overflows SQLite's
    INTEGER (OverflowError) and Postgres' bigint (DataError). Either killed the socket."""
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    frame = json.dumps({"type": "approval", "step": step, "decision": "approve"})
    await tab.send_to(text_data=frame)
    answer = await tab.receive_from()
    assert "chat-error" in answer
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING
    # The socket still works: the real decision goes through.
    _, held, _ = await rows(conversation.pk)
    await tab.send_to(text_data=decision(held.pk))
    await receive_until_finished(tab)
    await wait_for_runs()
    await tab.disconnect()


@pytest.mark.parametrize(
    "fields",
    [
        {"decision": "deny", "reason": "no \ud800 way"},
        {"decision": "approve", "arguments": '{"town": "Su\ud800zhou"}'},
        {"decision": "approve", "arguments": '{"town": "Su\\ud800zhou"}'},
        {"decision": "approve", "arguments": '{"town": "Su\\u0000zhou"}'},
        {"decision": "deny", "reason": "x\u0000y"},
        {"decision": "approve", "arguments": '{"town": ' + "[" * 9000 + "]" * 9000 + "}"},
        {"decision": "approve", "arguments": "[" * 19_990 + "]" * 10},
        {"decision": "approve", "arguments": '["town", "Suzhou"]'},
        {"decision": "approve", "arguments": '"Suzhou"'},
        {"decision": "approve", "arguments": "null"},
        {"decision": "approve", "arguments": "NaN"},
        {"decision": "approve", "arguments": '{"town": "' + "x" * 20_000 + '"}'},
    ],
    ids=["raw-surrogate-reason", "raw-surrogate-args", "escaped-surrogate-args",
         "escaped-nul-args", "nul-reason", "nested-9000", "unclosed-20000", "a-list",
         "a-string", "null", "nan", "over-20000"],
)  # fmt: skip
async def test_text_no_database_can_store_is_refused_in_a_decision(fields):
    """The message path refuses NUL and lone surrogates (clean_message); a decision's
    reason and arguments must too, including JSON escapes (\\ud800, \\u0000) that only
    become those characters once parsed (Postgres refuses both in jsonb and text)."""
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, held, _ = await rows(conversation.pk)
    frame = json.dumps({"type": "approval", "step": held.pk, **fields})
    await _refused_and_still_pending(tab, conversation, frame, "")
    await tab.send_to(text_data=decision(held.pk))
    await receive_until_finished(tab)
    await wait_for_runs()
    await tab.disconnect()


@pytest.fixture
def one_string_tool(monkeypatch, settings):
    """A one-argument ``book`` tool that asks, as the only tool runs get."""
    from langchain_core.tools import tool

    @tool
    def book(town: str) -> str:
        """Book a room in a town."""
        return f"booked in {town}"

    settings.AGENT_TOOL_POLICIES = {"book": "ask"}
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [book])
    monkeypatch.setattr("chat.consumers.code_tools_for", lambda *_: [book])


@pytest.mark.usefixtures("one_string_tool")
async def test_a_text_strategys_one_string_input_can_be_approved_from_the_card(scripted_model):
    """ReAct's ``Action Input: Suzhou`` is stored as the text "Suzhou"; the card's textarea
    shows it as it is and the form always sends the textarea, so approving unchanged sent
    "Suzhou" as the edited arguments, refused as not JSON: the call could only be denied."""
    from langchain_core.messages import AIMessage

    from chat.models import Conversation, RunStatus, StepStatus
    from tests.chat.test_approvals import is_waiting
    from tests.chat.test_consumer import connect, make_conversation, receive_until

    scripted_model.script = [
        AIMessage("Thought: book it\nAction: book\nAction Input: Suzhou"),
        AIMessage("Thought: done\nFinal Answer: Booked in Suzhou."),
    ]
    user, conversation = await make_conversation()
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        strategy="react"
    )
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=json.dumps({"content": "Book Suzhou."}))
    html = "\n".join(await receive_until(tab, is_waiting))
    await wait_for_runs()
    _, held, _ = await rows(conversation.pk)
    assert held.arguments == "Suzhou" and ">Suzhou</textarea>" in html
    # What the page's form sends: the textarea as it is.
    await tab.send_to(text_data=decision(held.pk, arguments=StepPresenter(held).arguments_json))
    frames = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    run, held, approval = await rows(conversation.pk)
    assert "not JSON" not in frames
    assert approval.outcome == ApprovalOutcome.APPROVED and approval.edited_arguments is None
    assert held.status == StepStatus.SUCCESS and held.result == "booked in Suzhou"
    assert run.status == RunStatus.SUCCEEDED
    await tab.disconnect()


async def _settled(conversation_id: int):
    """Wait until the run has left ``waiting``/``running`` and no run task is left;
    return the run, its held step and its approval (fails after ``WAIT_S``)."""
    import asyncio
    import time

    from chat.models import RunStatus
    from tests.chat.test_approvals import _all_runs_done
    from tests.timing import WAIT_S

    deadline = time.monotonic() + WAIT_S
    while True:
        await _all_runs_done()
        run, held, approval = await rows(conversation_id)
        if run.status not in (RunStatus.WAITING, RunStatus.RUNNING):
            return run, held, approval
        assert time.monotonic() < deadline, f"run {run.pk} still {run.status}"
        await asyncio.sleep(0.05)


async def _no_step_left_open(run_id: int) -> None:
    from chat.models import AgentStep, StepStatus

    open_steps = await database_sync_to_async(
        lambda: list(
            AgentStep.objects.filter(
                run_id=run_id, status__in=(StepStatus.PENDING, StepStatus.RUNNING)
            ).values_list("pk", "status")
        )
    )()
    assert open_steps == []


async def two_tabs_waiting():
    """Ask the travel question in one tab, open a second, return the conversation, both
    tabs and the held call's step once the run waits."""
    from tests.chat.test_consumer import connect, make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    other = await connect(conversation.pk, user)
    await other.connect()
    _, held, _ = await rows(conversation.pk)
    return conversation, tab, other, held


async def test_two_tabs_approving_and_denying_at_once_decide_it_once():
    import asyncio

    from chat.models import RunStatus

    conversation, tab, other, held = await two_tabs_waiting()
    await asyncio.gather(
        tab.send_to(text_data=decision(held.pk, "approve")),
        other.send_to(text_data=decision(held.pk, "deny", reason="no")),
    )
    run, held, approval = await _settled(conversation.pk)
    assert approval.outcome in (ApprovalOutcome.APPROVED, ApprovalOutcome.DENIED)
    assert run.status == RunStatus.SUCCEEDED
    await _no_step_left_open(run.pk)
    for communicator in (tab, other):
        await communicator.disconnect()


async def test_approve_and_stop_at_once_end_the_run_one_way_with_nothing_left_open():
    import asyncio

    from chat.models import RunStatus

    conversation, tab, other, held = await two_tabs_waiting()
    await asyncio.gather(
        tab.send_to(text_data=decision(held.pk)),
        other.send_to(text_data=json.dumps({"type": "cancel"})),
        other.send_to(text_data=json.dumps({"type": "cancel"})),
    )
    run, held, approval = await _settled(conversation.pk)
    assert run.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED), run.status
    assert approval.outcome != ApprovalOutcome.PENDING
    await _no_step_left_open(run.pk)
    for communicator in (tab, other):
        await communicator.disconnect()


async def test_a_decision_racing_the_expiry_and_two_sweeps_resume_the_run_once(settings):
    import asyncio

    from channels.layers import get_channel_layer

    from chat import owner
    from chat.models import RunStatus
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, held, _ = await rows(conversation.pk)
    settings.AGENT_APPROVAL_TIMEOUT_S = 0.001
    await database_sync_to_async(
        lambda: __import__("chat.models").models.Approval.objects.filter(pk=held.approval.pk)
        .update(expires_at=held.started_at)
    )()  # fmt: skip
    layer = get_channel_layer()
    results = await asyncio.gather(
        owner.current().sweep_approvals(),
        tab.send_to(text_data=decision(held.pk)),
        owner.RunOwner(layer).sweep_approvals(),  # another process's
    )
    run, held, approval = await _settled(conversation.pk)
    resumed = [run_id for result in (results[0], results[2]) for run_id in result]
    assert len(resumed) <= 1
    assert approval.outcome in (ApprovalOutcome.APPROVED, ApprovalOutcome.EXPIRED)
    assert run.status == RunStatus.SUCCEEDED
    await _no_step_left_open(run.pk)
    await tab.disconnect()


async def test_an_hour_waiting_does_not_count_towards_the_runs_time_budget(settings):
    from datetime import timedelta

    from chat.models import AgentRun, RunStatus
    from tests.chat.test_consumer import make_conversation

    settings.AGENT_MAX_EXECUTION_TIME_S = 60
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    run, held, _ = await rows(conversation.pk)
    hour = timedelta(hours=1)
    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        started_at=run.started_at - hour, paused_at=run.paused_at - hour + timedelta(seconds=1)
    )
    await tab.send_to(text_data=decision(held.pk))
    run, held, _ = await _settled(conversation.pk)
    assert run.status == RunStatus.SUCCEEDED, (run.status, run.error)
    assert run.waited_ms >= 3_590_000
    await tab.disconnect()


async def test_a_run_whose_resuming_process_died_after_the_claim_is_interrupted_with_evidence(
    settings,
):
    """Claimed (waiting -> running) but no task: the stale sweep ends it interrupted; the
    decision stays as evidence and the approved call is not left pending."""
    from datetime import timedelta

    from agents.events import utcnow
    from chat import store
    from chat.live import interrupt_stale_runs
    from chat.models import RunStatus, StepStatus
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    await tab.disconnect()
    _, held, _ = await rows(conversation.pk)

    @database_sync_to_async
    def decide_claim_and_die():
        from agents.approvals import Outcome

        store.approval_decide(conversation_id=conversation.pk, step_id=held.pk,
                              outcome=Outcome.APPROVED, by=user, at=utcnow())  # fmt: skip
        return store.run_claim_resume(run_id=held.run_id, at=utcnow())

    assert await decide_claim_and_die() == conversation.pk
    later = utcnow() + timedelta(seconds=settings.AGENT_HEARTBEAT_S * 10 + 60)
    await database_sync_to_async(interrupt_stale_runs)(conversation_id=conversation.pk, now=later)
    run, held, approval = await rows(conversation.pk)
    assert run.status == RunStatus.INTERRUPTED
    assert held.status == StepStatus.ERROR
    assert approval.outcome == ApprovalOutcome.APPROVED and approval.decided_by_name == "alice"


async def booked_and_waiting():
    """Ask "Book it." over a socket (the scripted model calls ``book``, an ``ask``
    tool); return the socket, the conversation and the held call's step once it waits."""
    from tests.chat.test_approvals import is_waiting
    from tests.chat.test_consumer import connect, make_conversation, receive_until

    user, conversation = await make_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=json.dumps({"content": "Book it."}))
    await receive_until(tab, is_waiting)
    await wait_for_runs()
    _, held, _ = await rows(conversation.pk)
    return tab, conversation, held


@pytest.mark.usefixtures("one_string_tool")
async def test_a_call_with_long_arguments_can_be_approved_as_asked(scripted_model, settings):
    """The card's textarea (sent with every decision) holds the arguments pretty-printed;
    a call the model made with more than 20,000 characters of them was refused as "too
    long" on approval, so it could only be denied. The limit is for edits."""
    import dataclasses

    from langchain_core.messages import AIMessage

    from chat.models import RunStatus, StepStatus
    from tests.fakes import tool_call

    settings.AGENT_MODEL = dataclasses.replace(settings.AGENT_MODEL, context_window=200_000)
    town = "Suzhou " * 4_000  # 28,000 characters
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("book", {"town": town}, "b1")]),
        AIMessage("Booked."),
    ]
    tab, conversation, held = await booked_and_waiting()
    await tab.send_to(text_data=decision(held.pk, arguments=StepPresenter(held).arguments_json))
    answer = await tab.receive_from()
    assert "too long" not in answer
    run, held, approval = await _settled(conversation.pk)
    assert approval.outcome == ApprovalOutcome.APPROVED and approval.edited_arguments is None
    assert held.status == StepStatus.SUCCESS and run.status == RunStatus.SUCCEEDED, run.error
    await tab.disconnect()


@pytest.mark.usefixtures("one_string_tool")
async def test_an_edit_over_the_limit_is_still_refused(scripted_model):
    from langchain_core.messages import AIMessage

    from tests.fakes import tool_call

    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("book", {"town": "Suzhou"}, "b1")]),
        AIMessage("Booked."),
    ]
    tab, conversation, held = await booked_and_waiting()
    edit = json.dumps({"town": "x" * 20_001})
    await _refused_and_still_pending(
        tab, conversation, decision(held.pk, arguments=edit), "too long"
    )
    await tab.send_to(text_data=decision(held.pk, "deny"))
    await _settled(conversation.pk)
    await tab.disconnect()


async def test_markup_in_arguments_and_reason_is_escaped_in_the_card_admin_and_csv(client):
    """The model writes the arguments and the person the reason: neither runs as HTML on
    the card, the evidence or the admin, nor as a formula in the CSV."""
    from chat import fragments, store
    from chat.export import csv_lines, trace_rows
    from chat.models import AgentRun
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, held, _ = await rows(conversation.pk)
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    await tab.send_to(text_data=decision(held.pk, "deny", reason="=HYPERLINK(1)" + evil))
    run, held, approval = await _settled(conversation.pk)
    await tab.disconnect()

    @database_sync_to_async
    def rendered():
        card = fragments.step_replaced(store.step_for_card(step_id=held.pk))
        staff = __import__("django.contrib.auth.models").contrib.auth.models.User
        admin = staff.objects.create_superuser("root", password="pw")
        client.force_login(admin)
        page = client.get(f"/admin/chat/approval/{approval.pk}/change/").content.decode()
        listing = client.get("/admin/chat/approval/").content.decode()
        csv = "".join(csv_lines(trace_rows(AgentRun.objects.filter(pk=run.pk))))
        return card, page, listing, csv

    card, page, listing, csv = await rendered()
    for html in (card, page, listing):
        assert "HYPERLINK(1)&lt;script&gt;" in html  # shown, escaped
        assert "<script>alert(1)" not in html and "<img src=x" not in html
    # No cell starts as a formula (the reason is quoted inside the denial's text too).
    cells = [cell for row in _csv.reader(io.StringIO(csv)) for cell in row]
    assert any("=HYPERLINK" in cell for cell in cells)
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))]
