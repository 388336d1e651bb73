"""The run owner (chat/owner.py) is addressed directly: a Stop reaches the process that
runs a run through the channel the run records, and a decision asks every owner to resume
its run, with no socket of the conversation anywhere. Heartbeats and sweeps are an hour
apart in these tests, so nothing but the message can have moved the run."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agents.approvals import Outcome
from chat import owner, store
from chat.models import AgentRun, Approval, RunStatus
from chat.owner import RunOwner, StopOutcome, decisions_taken, request_stop
from chat.runs import STOPPED, create_run
from tests.chat.test_approvals import BOOKING, _ask_for_booking  # noqa: F401 (fixture)
from tests.chat.test_cancel import slow_tools, tool_started  # noqa: F401 (fixture)
from tests.chat.test_consumer import TRAVEL_QUESTION, make_conversation
from tests.fakes import tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_heartbeat_or_sweep(settings):
    settings.AGENT_HEARTBEAT_S = 3600


async def a_running_tool_call(scripted_model, owner_: RunOwner) -> tuple[int, int, asyncio.Task]:
    """Start a run on ``owner_`` and wait until its tool call runs; return its
    conversation's id, its id and its task."""
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("slow_lookup", {"town": "Suzhou"}, "c1")]),
    ]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    task = owner_.start(run.pk)
    await tool_started()
    return conversation.pk, run.pk, task


@pytest.mark.usefixtures("slow_tools")
async def test_a_stop_reaches_the_process_running_the_run_with_no_socket_open(scripted_model):
    this = owner.current()
    conversation_id, run_id, task = await a_running_tool_call(scripted_model, this)

    assert await request_stop(get_channel_layer(), conversation_id) == StopOutcome.REQUESTED
    assert await asyncio.wait_for(task, WAIT_S) is None
    run = await database_sync_to_async(AgentRun.objects.get)(pk=run_id)
    assert run.status == RunStatus.CANCELLED and run.error == STOPPED
    assert run.owner_channel == await this.channel()


@pytest.mark.usefixtures("slow_tools")
async def test_a_stop_is_sent_to_the_runs_own_owner_not_this_processs(scripted_model):
    """Another process's owner (here a second owner on the same layer) runs the run: the
    Stop goes to the channel the run recorded, and that owner stops it."""
    other = RunOwner(get_channel_layer())
    other.open()
    try:
        conversation_id, run_id, task = await a_running_tool_call(scripted_model, other)
        assert owner.current().running() == {}  # nothing of it here

        assert await request_stop(get_channel_layer(), conversation_id) == StopOutcome.REQUESTED
        assert await asyncio.wait_for(task, WAIT_S) is None
    finally:
        await other.close()
    run = await database_sync_to_async(AgentRun.objects.get)(pk=run_id)
    assert run.status == RunStatus.CANCELLED and run.error == STOPPED
    assert run.owner_channel == await other.channel()


async def test_a_stop_asked_before_the_run_recorded_its_owner_ends_it_at_its_start():
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    # Pressed in the moment between the message's run being stored and its task starting:
    # the request is in the row, and no owner's channel was there to send it to.
    assert await request_stop(get_channel_layer(), conversation.pk) == StopOutcome.REQUESTED

    assert await asyncio.wait_for(owner.current().start(run.pk), WAIT_S) is None
    run = await database_sync_to_async(AgentRun.objects.get)(pk=run.pk)
    assert run.status == RunStatus.CANCELLED and run.error == STOPPED


async def test_stop_with_nothing_running_says_so():
    _, conversation = await make_conversation()
    assert await request_stop(get_channel_layer(), conversation.pk) == StopOutcome.NOTHING


@pytest.mark.usefixtures("_ask_for_booking")
async def test_a_decision_taken_elsewhere_resumes_the_run_with_no_page_open():
    """As the admin does: the decision is stored, then every owner is asked to resume."""
    this = owner.current()
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(
        conversation_id=conversation.pk, content=TRAVEL_QUESTION
    )
    paused = await asyncio.wait_for(this.start(run.pk), WAIT_S)
    assert paused.status == RunStatus.WAITING

    @database_sync_to_async
    def decide_in_admin() -> None:
        from django.contrib.auth.models import User

        approval = Approval.objects.get(run_id=run.pk)
        assert approval.step.tool_name == BOOKING
        store.approval_decide(conversation_id=conversation.pk, step_id=approval.step_id,
                              outcome=Outcome.APPROVED,
                              by=User.objects.create_user("staff", is_staff=True),
                              at=timezone.now())  # fmt: skip

    await decide_in_admin()
    await decisions_taken(get_channel_layer(), [run.pk])
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while (row := await database_sync_to_async(AgentRun.objects.get)(pk=run.pk)).status in (
        RunStatus.WAITING, RunStatus.RUNNING,
    ):  # fmt: skip
        assert asyncio.get_running_loop().time() < deadline, row.status
        await asyncio.sleep(0.02)
    assert row.status == RunStatus.SUCCEEDED


async def test_a_message_of_unknown_shape_is_dropped_and_the_owner_goes_on(caplog):
    this = owner.current()
    layer = get_channel_layer()
    channel = await this.channel()
    await layer.send(channel, {"type": "run.stop", "run_id": "not a number"})
    await layer.send(channel, {"type": "run.frobnicate"})
    _, conversation = await make_conversation()
    assert await request_stop(layer, conversation.pk) == StopOutcome.NOTHING
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while caplog.text.count("unknown shape") < 2:
        assert asyncio.get_running_loop().time() < deadline, caplog.text
        await asyncio.sleep(0.01)
    assert not this.closed and all(not task.done() for task in this._background)


async def test_an_owner_closed_while_its_layer_gives_it_a_channel_closes():
    """An owner closed while ``new_channel`` was still waiting on the layer (a server
    stopped as it started; a slow Redis) raised the cancellation from ``close``, its
    channel's future holding it: the tests' loops failed to tear down on Redis."""
    asked = asyncio.Event()

    class SlowLayer:
        async def new_channel(self) -> str:
            asked.set()
            await asyncio.Event().wait()  # never answers
            return "never"

    this = RunOwner(SlowLayer())
    this.open()
    await asked.wait()
    await this.close()
    assert all(task.done() for task in this._background)


async def test_an_owner_on_redis_shares_the_sockets_reader(redis_url):
    """channels-redis' core layer reads a process's channels through one blocking read per
    prefix: an owner's channel of its own prefix had a read of its own, which queued the
    sockets' messages behind it for up to 5 s. Its channel and a socket's share one."""
    from channels_redis.core import RedisChannelLayer
    from django.conf import settings

    layer = RedisChannelLayer(hosts=[redis_url], prefix=f"{settings.REDIS_PREFIX}-owner")
    this = RunOwner(layer, server=False)
    this.open()
    try:
        socket = await layer.new_channel()
        assert layer.non_local_name(await this.channel()) == layer.non_local_name(socket)
        await layer.send(socket, {"type": "run.fragment", "html": "x"})
        assert (await asyncio.wait_for(layer.receive(socket), WAIT_S))["html"] == "x"
    finally:
        await this.close()
        await layer.flush()


@tool
async def endless_booking(town: str) -> str:
    """Book a room in a town, forever (answers only by being cancelled)."""
    BOOKING_STARTED["event"].set()
    await asyncio.Event().wait()
    return town


BOOKING_STARTED: dict[str, asyncio.Event] = {}


async def a_run_waiting_for_its_booking(scripted_model, monkeypatch, settings) -> int:
    """Return a run paused on an ``endless_booking`` call held for approval, approved."""
    BOOKING_STARTED["event"] = asyncio.Event()
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [endless_booking])
    settings.AGENT_TOOL_POLICIES = {"endless_booking": "ask"}
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("endless_booking", {"town": "Suzhou"}, "b1")]),
    ]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="b")
    assert (await asyncio.wait_for(owner.current().start(run.pk), WAIT_S)).status == "waiting"

    @database_sync_to_async
    def approve() -> None:
        approval = Approval.objects.get(run_id=run.pk)
        store.approval_decide(conversation_id=conversation.pk, step_id=approval.step_id,
                              outcome=Outcome.APPROVED, by=None, at=timezone.now())  # fmt: skip

    await approve()
    return run.pk


async def test_a_stopping_owner_takes_no_run_to_resume(scripted_model, monkeypatch, settings):
    """A decision taken elsewhere during a graceful stop's grace: the stopping owner took
    the run and its process exited with it going (found by the adversarial pass); it is
    left waiting for a process that stays."""
    run_id = await a_run_waiting_for_its_booking(scripted_model, monkeypatch, settings)
    this = owner.current()
    assert await this.finish_runs(grace_s=0) == (0, 0)  # the stop has begun

    assert await this.resume_ready([run_id]) == []
    await this._handle({"type": "run.resume", "run_ids": [run_id]})  # as the group brings it
    assert this.running() == {}
    assert (await database_sync_to_async(AgentRun.objects.get)(pk=run_id)).status == "waiting"


async def test_asks_owner_takes_no_other_run_to_resume(scripted_model, monkeypatch, settings):
    """ask's owner lives for one run: it took other chats' runs from the owners' group
    and cancelled them as it exited ("the server stopped it"; adversarial pass)."""
    run_id = await a_run_waiting_for_its_booking(scripted_model, monkeypatch, settings)
    asks = RunOwner(get_channel_layer(), server=False)
    asks.open()
    try:
        await asks.channel()
        await asks._handle({"type": "run.resume", "run_ids": [run_id]})
        assert asks.running() == {}
    finally:
        await asks.close()
    assert (await database_sync_to_async(AgentRun.objects.get)(pk=run_id)).status == "waiting"


async def test_a_run_cancelled_before_its_first_step_is_recorded_as_cancelled():
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    task = owner.current().start(run.pk)
    task.cancel()  # in the same step: the task never ran a line
    await asyncio.gather(task, return_exceptions=True)
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while (row := await database_sync_to_async(AgentRun.objects.get)(pk=run.pk)).status == (
        "running"
    ):
        assert asyncio.get_running_loop().time() < deadline, "still running"
        await asyncio.sleep(0.02)
    assert row.status == RunStatus.CANCELLED
