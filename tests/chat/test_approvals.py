"""People in the loop through the chat's socket: a call to an ``ask`` tool pauses its run,
every tab sees the pending card and the decision, the run goes on in whichever process
claims it, and every decision is stored as evidence.

The demo model's travel question calls three tools; ``check_bnb_availability`` (the
booking tool) is the one that asks.
"""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import Permission, User
from django.test import Client

from chat import catalog, owner, runs, store
from chat.approvals import policy_lookup
from chat.consumers import RUN_WAITING
from chat.forms import MAX_REASON_CHARS, REASON_TOO_LONG
from chat.models import (
    AgentRun,
    AgentStep,
    Approval,
    ApprovalOutcome,
    Conversation,
    Message,
    RunStatus,
    StepStatus,
    ToolApprovalPolicy,
    ToolGrant,
)
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import (
    TRAVEL_QUESTION,
    connect,
    make_conversation,
    receive_until,
    receive_until_finished,
)
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

BOOKING = "check_bnb_availability"


@pytest.fixture(autouse=True)
def _ask_for_booking(settings):
    settings.AGENT_TOOL_POLICIES = {BOOKING: "ask"}
    settings.AGENT_APPROVAL_TIMEOUT_S = 3600


def is_waiting(frame: str) -> bool:
    return 'class="run-status status-waiting' in frame


def decision(step_id: int, choice: str = "approve", **fields) -> str:
    return json.dumps({"type": "approval", "step": step_id, "decision": choice, **fields})


@database_sync_to_async
def rows(conversation_id: int) -> tuple[AgentRun, AgentStep, Approval]:
    run = AgentRun.objects.filter(conversation_id=conversation_id).latest("id")
    approval = Approval.objects.select_related("step").filter(run=run).latest("id")
    return run, approval.step, approval


async def ask_and_wait(conversation, user):
    """Open a tab, ask the travel question, return the tab and the frames up to the pause."""
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION}))
    frames = await receive_until(tab, is_waiting)
    await wait_for_runs()
    return tab, frames


async def test_the_booking_call_waits_with_a_card_while_the_other_calls_ran():
    user, conversation = await make_conversation()
    tab, frames = await ask_and_wait(conversation, user)
    html = "\n".join(frames)
    run, step, approval = await rows(conversation.pk)

    assert run.status == RunStatus.WAITING and run.paused_at is not None
    assert step.status == StepStatus.PENDING and step.tool_name == BOOKING
    assert approval.outcome == ApprovalOutcome.PENDING and approval.expires_at is not None
    assert f'data-approval-form aria-label="Decide on this call to {BOOKING}"' in html
    assert f'name="step" value="{step.pk}"' in html
    # Its expiry in relative words, the exact moment (with its date) in the <time>.
    assert re.search(
        r"counts as denied <time datetime=\""
        + re.escape(approval.expires_at.isoformat())
        + r'" data-until title="\w{3} \d+ \w{3}, \d\d:\d\d UTC">'
        r"in (\d+ min|\d+ h( \d+ min)?|less than a minute)</time>",
        html,
    )
    ran = await database_sync_to_async(lambda: list(
        AgentStep.objects.filter(run=run, kind="tool_call").exclude(pk=step.pk)
        .values_list("tool_name", "status")
    ))()  # fmt: skip
    assert ran and all(status == StepStatus.SUCCESS for _, status in ran)
    assert owner.running_tasks() == set()  # nothing of the run is left in memory
    await tab.disconnect()


async def test_approval_in_one_tab_is_seen_in_the_other_and_the_run_goes_on():
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    other = await connect(conversation.pk, user)
    await other.connect()
    caught_up = "\n".join(await receive_until(other, is_waiting))
    run, step, _ = await rows(conversation.pk)
    assert "data-approval-form" in caught_up  # a tab opened later sees the card too

    await tab.send_to(text_data=decision(step.pk))
    seen = "\n".join(await receive_until_finished(other))
    await wait_for_runs()
    run, step, approval = await rows(conversation.pk)

    assert 'data-approval="approved"' in seen and "by alice at" in seen
    assert ">ok · approved<" in seen  # the folded line says a person approved it
    assert run.status == RunStatus.SUCCEEDED and run.output
    assert step.status == StepStatus.SUCCESS and step.result
    assert approval.outcome == ApprovalOutcome.APPROVED and approval.decided_by_id == user.pk
    assert approval.decided_by_name == "alice" and approval.decided_at is not None
    assert run.waited_ms >= 0 and run.paused_at is None
    for communicator in (tab, other):
        await communicator.disconnect()


async def test_edited_arguments_are_checked_against_the_tools_schema_then_run():
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, step, _ = await rows(conversation.pk)

    await tab.send_to(text_data=decision(step.pk, arguments='{"town": 5'))
    assert "not JSON" in await tab.receive_from()
    await tab.send_to(text_data=decision(step.pk, arguments='{"rooms": "many"}'))
    refused = await tab.receive_from()
    assert "do not match the tool" in refused and "Nothing was decided" in refused
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING

    edited = {**step.arguments, "rooms": 2}
    await tab.send_to(text_data=decision(step.pk, arguments=json.dumps(edited)))
    frames = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    _, step, approval = await rows(conversation.pk)
    assert approval.edited_arguments == edited and approval.arguments != edited
    assert step.arguments == edited and step.status == StepStatus.SUCCESS
    assert "Arguments edited before it ran" in frames
    # The demo model reads the note on the result and answers from what ran.
    run = await database_sync_to_async(store.run_get)(run_id=step.run_id)
    assert "有空房" in run.output or "available" in run.output, run.output
    await tab.disconnect()


async def test_a_decision_with_characters_no_database_stores_is_refused_beside_its_card():
    """The page makes a card's buttons usable again only on a refusal said beside them
    (its approval-error line): a reason or arguments with a NUL, refused before the
    store is asked, must be said there too, or the card stays disabled until a reload."""
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, step, _ = await rows(conversation.pk)

    for fields in ({"reason": "no\x00thanks"}, {"arguments": '{"town": "Su\x00zhou"}'}):
        choice = "deny" if "reason" in fields else "approve"
        await tab.send_to(text_data=decision(step.pk, choice, **fields))
        refused = await tab.receive_from()
        assert "NUL" in refused and f'id="step-{step.pk}-approval-error"' in refused, fields
        assert 'data-outcome="decision-refused"' in refused, fields
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING
    await tab.disconnect()


async def test_a_denial_with_its_reason_is_the_calls_error_and_the_model_answers_around_it():
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, step, _ = await rows(conversation.pk)

    await tab.send_to(text_data=decision(step.pk, "deny", reason="no bookings this week"))
    frames = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    run, step, approval = await rows(conversation.pk)

    assert approval.outcome == ApprovalOutcome.DENIED and approval.reason == "no bookings this week"
    assert step.status == StepStatus.ERROR and step.error_type == "ApprovalDenied"
    assert "no bookings this week" in step.result
    assert run.status == RunStatus.SUCCEEDED and run.output  # answered without it
    assert "Reason: no bookings this week" in frames and ">denied<" in frames
    # A denial is not a tool that failed: the run's badge says "Succeeded", not "· 1 tool
    # error" (a walkthrough read it as a fault), and the answer says what happened.
    assert (run.tool_call_count, run.tool_error_count) == (3, 0)
    assert "没有执行：审核人拒绝了这次调用（“no bookings this week”）" in run.output
    await tab.disconnect()


async def test_bad_duplicate_and_foreign_decisions_are_refused_and_change_nothing():
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, step, _ = await rows(conversation.pk)
    mallory, theirs = await make_conversation("mallory")

    for frame in (
        json.dumps({"type": "approval", "step": step.pk}),
        json.dumps({"type": "approval", "step": "x", "decision": "approve"}),
        json.dumps({"type": "approval", "step": step.pk, "decision": "maybe"}),
        json.dumps({"type": "approval", "step": step.pk, "decision": "deny", "reason": 5}),
    ):
        await tab.send_to(text_data=frame)
        assert "An approval needs" in await tab.receive_from()
    await tab.send_to(text_data=decision(step.pk, "deny", reason="x" * 1001))
    too_long = await tab.receive_from()
    assert "too long" in too_long
    # The admin refuses it with the same message (one form checks both).
    assert REASON_TOO_LONG.format(limit=MAX_REASON_CHARS) in too_long
    not_held = await database_sync_to_async(
        lambda: AgentStep.objects.filter(kind="tool_call").exclude(pk=step.pk).first().pk
    )()
    await tab.send_to(text_data=decision(not_held))
    assert "not a tool call waiting" in await tab.receive_from()
    # Another user's socket is refused at its conversation; the step is not theirs either.
    foreign = await connect(theirs.pk, mallory)
    await foreign.connect()
    await foreign.send_to(text_data=decision(step.pk))
    assert "not a tool call waiting" in await foreign.receive_from()
    await foreign.disconnect()
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING

    await tab.send_to(text_data=decision(step.pk, "deny"))
    await receive_until_finished(tab)
    await wait_for_runs()
    await tab.send_to(text_data=decision(step.pk))
    twice = await tab.receive_from()
    assert "already decided: denied by alice" in twice
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.DENIED
    await tab.disconnect()


async def test_with_no_queue_a_message_while_waiting_is_refused_and_stop_ends_the_run(
    settings,
):
    settings.CHAT_MAX_QUEUED = 0  # the queue off: refused as before it (docs/queue.md)
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)

    await tab.send_to(text_data=json.dumps({"content": "And the weather tomorrow?"}))
    assert RUN_WAITING[:40] in await tab.receive_from()
    assert await database_sync_to_async(Message.objects.filter(
        conversation=conversation, role="user").count)() == 1  # fmt: skip

    await tab.send_to(text_data=json.dumps({"type": "cancel"}))
    frames = "\n".join(await receive_until_finished(tab))
    run, step, approval = await rows(conversation.pk)
    assert run.status == RunStatus.CANCELLED and "Stopped at your request" in run.error
    assert run.iterations == 1  # the turn that asked is counted, as on the page
    assert approval.outcome == ApprovalOutcome.CANCELLED
    assert step.status == StepStatus.ERROR and step.error_type == "ApprovalCancelled"
    assert "never ran" in step.error
    assert 'data-approval="cancelled"' in frames and ">not run<" in frames

    # The chat is not stuck: the next message runs (and asks again).
    await tab.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION}))
    await receive_until(tab, is_waiting)
    await wait_for_runs()
    await tab.disconnect()


async def test_a_decision_after_a_restart_is_taken_by_whichever_process_gets_it():
    """Nothing of a paused run is in memory: a "restarted" process (no run tasks, a new
    socket) resumes it from the rows; a decision stored elsewhere (the admin) is picked
    up by the sweep, and only once however many processes sweep."""
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    await tab.disconnect()
    _, step, _ = await rows(conversation.pk)

    @database_sync_to_async
    def decide_in_admin():
        from django.utils import timezone

        from agents.approvals import Outcome

        staff = User.objects.create_user("staff", is_staff=True)
        store.approval_decide(conversation_id=conversation.pk, step_id=step.pk,
                              outcome=Outcome.APPROVED, by=staff, at=timezone.now())  # fmt: skip

    await decide_in_admin()
    layer = get_channel_layer()
    resumed = await owner.current().sweep_approvals()
    # A second process's owner: nothing left to take.
    again = await owner.RunOwner(layer).sweep_approvals()
    await wait_for_runs()
    run, step, approval = await rows(conversation.pk)
    assert resumed == [run.pk] and again == []
    assert run.status == RunStatus.SUCCEEDED and step.status == StepStatus.SUCCESS
    assert approval.decided_by_name == "staff"


async def test_a_decision_in_the_admin_shows_in_the_open_tab_and_the_run_goes_on_at_once(
    settings,
):
    """The open tab hears of the admin's decision and its socket resumes the run: no
    sweep (set to an hour here) is waited for."""
    settings.AGENT_HEARTBEAT_S = 3600
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, _, held = await rows(conversation.pk)

    @database_sync_to_async
    def approve_in_admin():
        client = Client()
        reviewer = User.objects.create_user("reviewer", is_staff=True)
        wanted = ("view_approval", "decide_approval")
        reviewer.user_permissions.add(*Permission.objects.filter(codename__in=wanted))
        client.force_login(reviewer)
        data = {"action": "approve_selected", "_selected_action": [held.pk]}
        return client.post("/admin/chat/approval/", data)

    assert (await approve_in_admin()).status_code == 302
    seen = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    run, step, approval = await rows(conversation.pk)
    assert 'data-approval="approved"' in seen and "by reviewer at" in seen
    assert approval.decided_by_name == "reviewer"
    assert run.status == RunStatus.SUCCEEDED and step.status == StepStatus.SUCCESS
    await tab.disconnect()


async def test_an_approval_that_waits_too_long_expires_as_denied(settings):
    settings.AGENT_APPROVAL_TIMEOUT_S = 60
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, _, held = await rows(conversation.pk)
    # Its time is up (set, not waited for: the sweep compares it with the clock).
    await database_sync_to_async(Approval.objects.filter(pk=held.pk).update)(
        expires_at=held.requested_at
    )
    await owner.current().sweep_approvals()
    frames = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    run, step, approval = await rows(conversation.pk)
    assert approval.outcome == ApprovalOutcome.EXPIRED and approval.decided_by is None
    assert step.error_type == "ApprovalExpired" and "expired" in step.result
    assert run.status == RunStatus.SUCCEEDED
    assert 'data-approval="expired"' in frames
    await tab.disconnect()


async def test_always_allow_in_this_chat_skips_the_question_next_time_but_not_elsewhere():
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, step, _ = await rows(conversation.pk)
    await tab.send_to(text_data=decision(step.pk, always="on"))
    await receive_until_finished(tab)
    await wait_for_runs()
    assert await database_sync_to_async(
        ToolGrant.objects.filter(conversation=conversation, tool_name=BOOKING).exists
    )()

    await tab.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION}))
    frames = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    assert "status-waiting" not in frames
    other = await database_sync_to_async(Conversation.objects.create)(owner=user)
    lookup = await database_sync_to_async(policy_lookup)(conversation_id=other.pk)
    assert lookup(BOOKING) == "ask"
    await tab.disconnect()


async def test_the_admins_policy_overrides_the_setting_and_deny_never_runs():
    await database_sync_to_async(ToolApprovalPolicy.objects.create)(
        tool_name=BOOKING, policy="deny"
    )
    user, conversation = await make_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION}))
    frames = "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    step = await database_sync_to_async(
        AgentStep.objects.filter(run__conversation=conversation, tool_name=BOOKING).get
    )()
    assert step.error_type == "ToolDenied" and "policy is deny" in step.result
    assert re.search(r">not allowed<", frames)
    await tab.disconnect()


async def _all_runs_done() -> None:
    """Wait until no run task is left, including runs resumed by the ones awaited."""
    while owner.running_tasks():
        await wait_for_runs()


async def _held_while_another_call_runs(scripted_model, settings):
    """Start a run whose turn holds ``book`` while ``slow`` (allowed) blocks; return the
    run id, the gate that releases ``slow`` and the held step once it is stored."""
    import asyncio

    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from tests.fakes import tool_call

    gate = asyncio.Event()

    @tool
    async def slow(town: str) -> str:
        """A slow lookup."""
        await gate.wait()
        return f"slow answer for {town}"

    @tool
    def book(town: str) -> str:
        """Book a room."""
        return f"booked in {town}"

    settings.AGENT_TOOL_POLICIES = {"book": "ask"}
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("book", {"town": "Suzhou"}, "b1"),
                                  tool_call("slow", {"town": "Suzhou"}, "s1")]),
        AIMessage("Booked, and the slow answer came."),
    ]  # fmt: skip
    monkeypatch_tools = [slow, book]
    user, conversation = await make_conversation()
    row = await database_sync_to_async(runs.create_run)(
        conversation_id=conversation.pk, content="Book it."
    )
    catalog.code_tools_for = lambda *_: monkeypatch_tools  # restored by the fixture below
    owner.current().start(row.pk, listeners=[])
    held = AgentStep.objects.filter(run_id=row.pk, status=StepStatus.PENDING)
    # Polled from here, not with wait_until in the ORM thread: the run writes there.
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while (step := await database_sync_to_async(held.first)()) is None:
        assert asyncio.get_running_loop().time() < deadline, "no held call's step"
        await asyncio.sleep(0.01)
    return row.pk, conversation, user, gate, step


@pytest.fixture
def _restore_code_tools_for():
    original = catalog.code_tools_for
    yield
    catalog.code_tools_for = original


@pytest.mark.usefixtures("_restore_code_tools_for")
async def test_a_decision_taken_before_the_pause_is_stored_resumes_the_run_at_once(
    scripted_model, settings
):
    """Decided while the turn's other call still ran: the run was not waiting yet, so
    the decision's own resume found nothing to claim; the run's task resumes it when it
    pauses, without waiting for a sweep."""
    from django.utils import timezone

    from agents.approvals import Outcome

    run_id, conversation, user, gate, step = await _held_while_another_call_runs(
        scripted_model, settings
    )
    decided = await database_sync_to_async(store.approval_decide)(
        conversation_id=conversation.pk, step_id=step.pk, outcome=Outcome.APPROVED, by=user,
        at=timezone.now(),
    )  # fmt: skip
    assert decided.run_ready
    gate.set()
    await _all_runs_done()
    run = await database_sync_to_async(store.run_get)(run_id=run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output.startswith("Booked")


@pytest.mark.usefixtures("_restore_code_tools_for")
async def test_a_run_stopped_before_its_pause_is_stored_leaves_no_approval_pending(
    scripted_model, settings
):
    run_id, conversation, user, _gate, step = await _held_while_another_call_runs(
        scripted_model, settings
    )
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=step.started_at
    )
    owner.current().stop_local(run_id)
    await _all_runs_done()
    run, step, approval = await rows(conversation.pk)
    assert run.status == RunStatus.CANCELLED
    assert step.status == StepStatus.ERROR and approval.outcome == ApprovalOutcome.CANCELLED
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=decision(step.pk))
    await receive_until(tab, lambda frame: "already decided: cancelled" in frame)
    await tab.disconnect()


@pytest.mark.parametrize("stop_asked", [False, True])
@pytest.mark.parametrize("where", ["while its pause is published", "in its tail"])
async def test_a_run_task_cancelled_after_its_pause_leaves_it_waiting_unless_stop_was_asked(
    stop_asked, where
):
    """A server stopping cancels the tasks it runs; a run that has just paused has only
    its task's tail left, and must stay waiting for its decision (found by the two-process
    test: it was recorded as cancelled). A Stop pressed meanwhile still ends it."""
    import asyncio

    from agents.events import RunPaused

    _, conversation = await make_conversation()
    row = await database_sync_to_async(runs.create_run)(
        conversation_id=conversation.pk, content=TRAVEL_QUESTION
    )

    async def server_stops_at_the_pause(update) -> None:
        if isinstance(update.event, RunPaused):
            if stop_asked:  # pressed as the run paused (before, it would stop at its start)
                await database_sync_to_async(AgentRun.objects.filter(pk=row.pk).update)(
                    cancel_requested_at=row.started_at
                )
            asyncio.current_task().cancel()
            if where == "while its pause is published":
                await asyncio.sleep(0)  # the cancel lands here, inside the run's loop

    task = owner.current().start(row.pk, listeners=[server_stops_at_the_pause])
    await asyncio.gather(task, return_exceptions=True)
    run, step, approval = await rows(conversation.pk)
    if stop_asked:
        assert run.status == RunStatus.CANCELLED
        assert approval.outcome == ApprovalOutcome.CANCELLED
    else:
        assert run.status == RunStatus.WAITING and step.status == StepStatus.PENDING
        assert approval.outcome == ApprovalOutcome.PENDING


@pytest.mark.parametrize("strategy", ["react", "structured_chat", "xml"])
async def test_a_text_strategys_run_pauses_and_resumes_from_its_rows(strategy):
    """The text strategies' held call is parsed from the model's text: its stored log
    rebuilds the scratchpad on resume (the demo model checks what it reads back)."""
    user, conversation = await make_conversation()
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        strategy=strategy
    )
    tab, _ = await ask_and_wait(conversation, user)
    _, step, _ = await rows(conversation.pk)
    assert step.tool_name == BOOKING and step.text  # the model text it was parsed from

    await tab.send_to(text_data=decision(step.pk))
    await receive_until_finished(tab)
    await _all_runs_done()
    run, step, approval = await rows(conversation.pk)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert step.status == StepStatus.SUCCESS and approval.outcome == ApprovalOutcome.APPROVED
    assert "有空房" in run.output or "available" in run.output, run.output
    await tab.disconnect()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_edited_arguments_with_nan_or_infinity_are_refused(constant):
    """Python's json reads them, PostgreSQL's jsonb refuses them: the decision's UPDATE
    raised DataError and closed the socket (found by the adversarial pass)."""
    from agents.tools import check_bnb_availability
    from chat.forms import DecisionForm, HeldCall

    held = HeldCall(BOOKING, {"town": "Suzhou"}, [check_bnb_availability])
    form = DecisionForm(
        {"decision": "approve", "arguments": f'{{"town": "Hangzhou", "extra": {constant}}}'},
        held=lambda: held,
    )
    assert not form.is_valid()
    assert f"{constant} is not a JSON value" in str(form.errors)
