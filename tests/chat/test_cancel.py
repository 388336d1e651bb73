"""Stop: a cancel frame (or a stop request seen by the heartbeat) ends the run as cancelled."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agents.events import utcnow
from chat import owner, store
from chat.consumers import NOTHING_TO_STOP
from chat.models import AgentRun
from chat.owner import running_tasks
from chat.runs import (
    CANCELLED,
    STOPPED,
    create_run,
)
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import (
    connect,
    make_conversation,
    receive_until,
    receive_until_finished,
)
from tests.fakes import ScriptedChatModel, tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

STARTED: dict[str, asyncio.Event] = {}


@tool
async def slow_lookup(town: str) -> str:
    """Look a town up, slowly."""
    STARTED["event"].set()
    await asyncio.Event().wait()  # answers only by being cancelled
    return f"{town}: done"


@pytest.fixture
def slow_tools(monkeypatch):
    """Make runs call ``slow_lookup``; ``await tool_started()`` once it runs."""
    STARTED["event"] = asyncio.Event()
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [slow_lookup])


async def tool_started() -> None:
    await asyncio.wait_for(STARTED["event"].wait(), WAIT_S)


async def settle(communicator, label: str) -> list[str]:
    """Return the frames up to the answer to a marker frame sent now.

    A consumer handles a socket's frames one at a time, in order: once the marker is
    answered, every frame sent before it has been handled, however slow the machine.
    """
    await communicator.send_to(text_data=json.dumps({"type": label}))
    return await receive_until(communicator, lambda frame: label in frame)


@database_sync_to_async
def run_with_steps() -> tuple[AgentRun, list]:
    run = AgentRun.objects.get()
    return run, list(run.steps.order_by("ordinal"))


async def test_stop_cancels_a_running_tool_and_keeps_what_was_done(scripted_model, slow_tools):
    scripted_model.script = [
        AIMessage("Looking.", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
        AIMessage("never reached"),
    ]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "Suzhou?"}))
    await tool_started()

    await communicator.send_to(text_data=json.dumps({"type": "cancel", "HEADERS": {}}))
    frames = await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()

    run, steps = await run_with_steps()
    assert run.status == "cancelled" and run.error == STOPPED
    assert run.cancel_requested_at is not None
    assert (run.tool_call_count, run.tool_error_count) == (1, 0)
    kinds = [(s.kind, s.status) for s in steps]
    assert kinds == [("model_turn", "success"), ("tool_call", "error")]
    assert steps[0].text == "Looking."
    assert steps[1].error == "Cancelled before this step finished."
    assert steps[1].arguments == {"town": "Suzhou"}
    assert len(scripted_model.prompts) == 1  # the model was not asked again
    last = frames[-1]
    # The whole run comes again: the tool card is no longer running in any open page.
    assert 'id="run-' in last and 'data-status="cancelled"' in last
    assert 'data-tool="slow_lookup" data-status="error"' in last
    assert "Stopped at your request" in last


async def test_stop_during_streaming_keeps_all_the_text_streamed_so_far(
    scripted_model, monkeypatch
):
    words = " ".join(f"word{i}" for i in range(400))
    scripted_model.script = [AIMessage(words)]
    scripted_model.gates = {40: asyncio.Event()}  # the model stops talking after 40 words
    # No snapshot saves the text on the way (on a slow machine one came within the 40
    # words): what is stored can only come from the flush when the run stops.
    monkeypatch.setattr("chat.recorder.TEXT_SYNC_INTERVAL_S", 3600.0)
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "talk"}))
    await receive_until(communicator, lambda frame: "word39 " in frame)

    await communicator.send_to(text_data=json.dumps({"type": "cancel"}))
    await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()

    run, (turn,) = await run_with_steps()
    assert run.status == "cancelled" and turn.status == "error"
    assert turn.text == "".join(f"word{i} " for i in range(40))  # flushed whole


async def test_stop_with_nothing_running_says_so_and_the_socket_stays_usable(scripted_model):
    scripted_model.script = [AIMessage("hello")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"type": "cancel"}))
    assert NOTHING_TO_STOP in await communicator.receive_from()

    await communicator.send_to(text_data=json.dumps({"content": "hi"}))
    frames = await receive_until_finished(communicator)
    assert "status-succeeded" in frames[-1]
    await wait_for_runs()
    await communicator.disconnect()


async def test_a_stop_sent_to_the_runs_owner_cancels_the_run_in_the_process_running_it(
    scripted_model, slow_tools, settings
):
    """The path a stop takes when the tab is connected to another server process: that
    process sends it to the channel of the owner the run records."""
    settings.AGENT_HEARTBEAT_S = 3600  # nothing but the message can stop it
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    user, conversation = await make_conversation()
    watcher = await connect(conversation.pk, user)
    await watcher.connect()
    await watcher.send_to(text_data=json.dumps({"content": "Suzhou?"}))
    await tool_started()
    run = await database_sync_to_async(AgentRun.objects.get)()
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=utcnow()
    )
    await get_channel_layer().send(run.owner_channel, {"type": "run.stop", "run_id": run.pk})
    await receive_until_finished(watcher)
    await wait_for_runs()
    await watcher.disconnect()
    run, _ = await run_with_steps()
    assert run.status == "cancelled" and run.error == STOPPED


async def test_the_heartbeat_finds_a_stop_request_no_socket_delivered(
    scripted_model, slow_tools, settings
):
    """The stop request is stored but its message never reaches the run's owner (a lost
    channel message): the run's heartbeat finds the request and stops it."""
    settings.AGENT_HEARTBEAT_S = 0.05
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    task = owner.current().start(run.pk)
    await tool_started()
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=utcnow()
    )  # only the row: no message is sent
    assert await asyncio.wait_for(task, WAIT_S) is None
    run, _ = await run_with_steps()
    assert run.status == "cancelled" and run.error == STOPPED


# Races found by review: each of these left a run "running" (or rewrote a finished one).


async def run_state(run_id: int) -> tuple[str, str, list[str]]:
    @database_sync_to_async
    def read() -> tuple[str, str, list[str]]:
        run = AgentRun.objects.get(pk=run_id)
        return run.status, run.error, list(run.steps.values_list("status", flat=True))

    return await read()


async def test_two_stops_at_once_still_record_the_cancel(scripted_model, slow_tools):
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    user, conversation = await make_conversation()
    first = await connect(conversation.pk, user)
    second = await connect(conversation.pk, user)
    await first.connect()
    await second.connect()
    await first.send_to(text_data=json.dumps({"content": "q"}))
    await tool_started()
    await first.send_to(text_data=json.dumps({"type": "cancel"}))
    await second.send_to(text_data=json.dumps({"type": "cancel"}))
    await first.send_to(text_data=json.dumps({"type": "cancel"}))
    await wait_for_runs()
    # Every stop has been handled (not just "0.3 s have passed") before the rows are read.
    await settle(first, "settled-first")
    await settle(second, "settled-second")
    run = await database_sync_to_async(AgentRun.objects.get)()
    status, error, steps = await run_state(run.pk)
    assert (status, error) == ("cancelled", STOPPED) and "running" not in steps
    await first.disconnect()
    await second.disconnect()


async def test_a_second_cancel_of_the_task_is_ignored(scripted_model, slow_tools):
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    owner.current().start(run.pk, listeners=[])
    await tool_started()
    assert owner.current().stop_local(run.pk)
    for _ in range(3):
        await asyncio.sleep(0)
    owner.current().stop_local(run.pk)
    await wait_for_runs()
    assert (await run_state(run.pk))[0] == "cancelled"


async def test_a_cancel_before_the_run_got_going_is_recorded(scripted_model, slow_tools):
    scripted_model.script = [AIMessage("never")]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    owner.current().start(run.pk, listeners=[])
    await asyncio.sleep(0)
    assert owner.current().stop_local(run.pk)
    await wait_for_runs()
    assert (await run_state(run.pk))[0] == "cancelled"


async def test_a_cancel_after_the_run_succeeded_changes_nothing(scripted_model):
    scripted_model.script = [AIMessage("The answer.")]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    gate = asyncio.Event()

    async def slow_listener(update) -> None:
        if update.run is not None and update.run.status == "succeeded" and not gate.is_set():
            gate.set()
            await asyncio.Event().wait()  # the task is still going until it is cancelled

    owner.current().start(run.pk, listeners=[slow_listener])
    await asyncio.wait_for(gate.wait(), WAIT_S)
    assert owner.current().stop_local(run.pk)  # the task had not ended: the cancel reaches it
    await wait_for_runs()
    finished = await database_sync_to_async(AgentRun.objects.get)(pk=run.pk)
    assert (finished.status, finished.output) == ("succeeded", "The answer.")


async def test_a_message_that_says_cancel_is_a_message_not_a_stop(scripted_model):
    """Found rereading the change: the stop request was the string "cancel"."""
    scripted_model.script = [AIMessage("You said cancel.")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "cancel"}))
    frames = await receive_until_finished(communicator)
    assert "status-succeeded" in frames[-1] and NOTHING_TO_STOP not in "\n".join(frames)
    await wait_for_runs()
    await communicator.disconnect()


# A cancel that something swallowed (a tool or a library catching CancelledError and going
# on) left the task "cancelling" while it went on waiting, and nothing cancelled it again
# (docs/deploy.md, "A cancelled run that never ends"). Each of these ended `running`.

SWALLOWED: dict[str, asyncio.Event] = {}


@tool
async def stubborn_lookup(town: str) -> str:
    """Look a town up, ignoring a cancel."""
    STARTED["event"].set()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        SWALLOWED["event"].set()
        return "ignored"
    return f"{town}: done"


@pytest.fixture
def swallowing(monkeypatch, settings):
    """A cancel still undelivered is not mistaken for a swallowed one by the time a second
    cancel comes; no heartbeat unless a test turns it on."""
    STARTED["event"] = asyncio.Event()
    SWALLOWED["event"] = asyncio.Event()
    monkeypatch.setattr("chat.runs.SWALLOWED_AFTER_S", 0.0)
    settings.AGENT_HEARTBEAT_S = 3600


class Ends:
    """A run listener keeping each run-finished update."""

    def __init__(self) -> None:
        self.finished: list[str] = []

    async def __call__(self, update) -> None:
        if update.run is not None and update.event.__class__.__name__ == "RunFinished":
            self.finished.append(update.run.status)


async def next_message_succeeds(scripted_model, conversation_id: int) -> None:
    scripted_model.script, scripted_model.gates = [AIMessage("Back again.")], {}
    run = await database_sync_to_async(create_run)(conversation_id=conversation_id, content="q2")
    owner.current().start(run.pk, listeners=[])
    await wait_for_runs()
    assert (await run_state(run.pk))[0] == "succeeded"


async def test_a_tool_that_swallows_the_cancel_ends_the_run_at_its_next_event(
    scripted_model, swallowing, monkeypatch, caplog
):
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [stubborn_lookup])
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("stubborn_lookup", {"town": "Suzhou"}, "c1")]),
        AIMessage("never reached"),
    ]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    ends = Ends()
    owner.current().start(run.pk, listeners=[ends])
    await tool_started()
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=utcnow()
    )
    assert owner.current().stop_local(run.pk)
    await wait_for_runs()

    assert SWALLOWED["event"].is_set()  # the tool returned "ignored" and the loop went on
    status, error, steps = await run_state(run.pk)
    assert (status, error) == ("cancelled", STOPPED) and "running" not in steps
    assert ends.finished == ["cancelled"]  # recorded once
    assert len(scripted_model.prompts) == 1  # the model was not asked again
    assert f"run {run.pk}: its cancel was swallowed" in caplog.text
    await next_message_succeeds(scripted_model, conversation.pk)


async def test_a_cancel_that_wait_for_swallows_in_a_listener_still_ends_the_run(
    scripted_model, slow_tools, monkeypatch
):
    """The cause of the cross-process Stop that never ended (docs/deploy.md): the run's
    publisher awaits redis-py, whose writes go through ``asyncio.wait_for``; on Python
    3.11 it returns the write's result, swallowing the cancel, when the write finishes in
    the loop iteration the cancel arrives (CPython gh-86296)."""
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    monkeypatch.setattr("chat.runs.SWALLOWED_AFTER_S", 3600.0)  # nothing cancels twice
    sending: dict[str, asyncio.Future] = {}
    waiting = asyncio.Event()

    async def publisher(update) -> None:
        if update.event.__class__.__name__ == "ModelTurnStarted":
            sending["write"] = asyncio.get_running_loop().create_future()
            waiting.set()
            await asyncio.wait_for(sending["write"], 30)  # as redis-py's send_packed_command

    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    ends = Ends()
    owner.current().start(run.pk, listeners=[publisher, ends])
    await asyncio.wait_for(waiting.wait(), WAIT_S)
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=utcnow()
    )
    # The write finishes and Stop arrives in one step of the loop.
    sending["write"].set_result(None)
    assert owner.current().stop_local(run.pk)
    await wait_for_runs()

    status, error, steps = await run_state(run.pk)
    assert (status, error) == ("cancelled", STOPPED) and "running" not in steps
    assert ends.finished == ["cancelled"]
    assert not scripted_model.prompts  # stopped before its model turn


class SwallowingModel(ScriptedChatModel):
    """A scripted model whose stream ignores the first cancel and goes on waiting."""

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        STARTED["event"].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            SWALLOWED["event"].set()
        await asyncio.Event().wait()  # answers only by being cancelled (again)
        yield  # pragma: no cover (an async generator)


@pytest.fixture
def swallowing_model(monkeypatch) -> SwallowingModel:
    model = SwallowingModel()
    monkeypatch.setattr("chat.catalog.chat_model_for", lambda run=None: model)
    return model


async def test_a_model_stream_that_swallows_the_cancel_is_cancelled_again_by_the_heartbeat(
    swallowing, swallowing_model, settings, caplog
):
    settings.AGENT_HEARTBEAT_S = 0.05
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    ends = Ends()
    owner.current().start(run.pk, listeners=[ends])
    await tool_started()
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=utcnow()
    )
    assert owner.current().stop_local(run.pk)
    await wait_for_runs()

    assert SWALLOWED["event"].is_set()
    status, error, steps = await run_state(run.pk)
    assert (status, error) == ("cancelled", STOPPED) and "running" not in steps
    assert ends.finished == ["cancelled"]  # recorded once
    assert f"run {run.pk}: still going" in caplog.text
    assert "a cancel was swallowed; cancelling again" in caplog.text


async def test_a_second_stop_cancels_a_model_stream_that_swallowed_the_first(
    swallowing, swallowing_model, monkeypatch, caplog
):
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "q"}))
    await tool_started()
    await communicator.send_to(text_data=json.dumps({"type": "cancel"}))
    await asyncio.wait_for(SWALLOWED["event"].wait(), WAIT_S)
    assert running_tasks()  # the first Stop was swallowed: the run goes on
    await communicator.send_to(text_data=json.dumps({"type": "cancel"}))
    await receive_until_finished(communicator)
    await wait_for_runs()

    run = await database_sync_to_async(AgentRun.objects.get)()
    status, error, steps = await run_state(run.pk)
    assert (status, error) == ("cancelled", STOPPED) and "running" not in steps
    assert "a cancel was swallowed; cancelling again" in caplog.text
    scripted = ScriptedChatModel(script=[AIMessage("Back again.")])
    monkeypatch.setattr("chat.catalog.chat_model_for", lambda run=None: scripted)
    await communicator.send_to(text_data=json.dumps({"content": "again"}))
    frames = await receive_until_finished(communicator)
    assert "status-succeeded" in frames[-1]
    await wait_for_runs()
    await communicator.disconnect()


async def test_the_graceful_stop_cancels_again_a_run_that_swallowed_its_cancel(
    swallowing, swallowing_model, monkeypatch
):
    monkeypatch.setattr("chat.runs.SWALLOWED_AFTER_S", 0.01)
    monkeypatch.setattr("chat.owner.SWALLOWED_AFTER_S", 0.01)
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    ends = Ends()
    owner.current().start(run.pk, listeners=[ends])
    await tool_started()

    assert await owner.current().finish_runs(grace_s=0, record_s=WAIT_S) == (0, 1)

    assert SWALLOWED["event"].is_set() and not running_tasks()
    status, error, _ = await run_state(run.pk)
    assert (status, error) == ("cancelled", CANCELLED)
    assert ends.finished == ["cancelled"]


async def test_a_cancel_during_its_recording_neither_cuts_it_nor_records_it_twice(
    scripted_model, slow_tools, monkeypatch
):
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    monkeypatch.setattr("chat.runs.SWALLOWED_AFTER_S", 0.0)
    recording, go_on = asyncio.Event(), asyncio.Event()
    ends = Ends()

    async def slow_to_hear_the_end(update) -> None:
        await ends(update)
        if ends.finished:
            recording.set()
            await go_on.wait()

    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    task = owner.current().start(run.pk, listeners=[slow_to_hear_the_end])
    await tool_started()
    assert owner.current().stop_local(run.pk)
    await asyncio.wait_for(recording.wait(), WAIT_S)
    assert owner.current().stop_local(run.pk)  # sends nothing: the end is being recorded
    task.cancel()  # even a cancel from elsewhere does not cut the recording short
    go_on.set()
    await wait_for_runs()

    status, _, steps = await run_state(run.pk)
    assert status == "cancelled" and "running" not in steps
    assert ends.finished == ["cancelled"]


TOOL_CANCELLED: dict[str, asyncio.Event] = {}


@tool
async def quick_lookup(town: str) -> str:
    """Look a town up at once."""
    return f"{town}: quick"


@tool
async def endless_lookup(town: str) -> str:
    """Look a town up, never finishing."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        TOOL_CANCELLED["event"].set()
        raise
    return town  # pragma: no cover


async def test_a_cancel_between_events_cancels_the_batch_s_other_tool_calls_before_the_end(
    scripted_model, monkeypatch
):
    """Cancelled while a listener handled the first finished call of a batch, the run
    closes its agent loop: the batch's other calls are cancelled before its end is
    recorded. (Without that they were cancelled only after it, when the dropped generator
    was finalized.)"""
    TOOL_CANCELLED["event"] = asyncio.Event()
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [quick_lookup, endless_lookup])
    scripted_model.script = [
        AIMessage("", tool_calls=[
            tool_call("quick_lookup", {"town": "Suzhou"}, "c1"),
            tool_call("endless_lookup", {"town": "Hangzhou"}, "c2"),
        ]),
    ]  # fmt: skip
    in_listener = asyncio.Event()
    seen_at_the_end: list[bool] = []

    async def listener(update) -> None:
        name = update.event.__class__.__name__
        if name == "ToolCallFinished" and not in_listener.is_set():
            in_listener.set()
            await asyncio.Event().wait()  # a slow page: the cancel comes here
        if name == "RunFinished":
            seen_at_the_end.append(TOOL_CANCELLED["event"].is_set())

    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    owner.current().start(run.pk, listeners=[listener])
    await asyncio.wait_for(in_listener.wait(), WAIT_S)
    assert owner.current().stop_local(run.pk)
    await wait_for_runs()

    assert seen_at_the_end == [True]
    status, _, steps = await run_state(run.pk)
    assert status == "cancelled" and "running" not in steps
