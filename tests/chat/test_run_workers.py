"""Runs in processes of their own (``CHAT_RUN_WORKERS``, ``manage.py runowner``): the web
side only sends a run's start to the run owners' group; the first owner to claim the run
runs it, and an owner's sweep starts a run whose start no owner heard. Here the owners
are opened in the test's own loop on the in-memory layer, standing in for the run owners'
processes (tests/deploy/test_run_workers.py runs the real processes on Redis)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.core import checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from chat import owner, queued, store
from chat.checks import RUN_WORKERS_LAYER_ID, check_run_workers_layer
from chat.live import interrupt_stale_runs
from chat.models import AgentRun, QueuedMessage, RunStatus
from chat.owner import RunOwner, request_stop, start_run
from chat.runs import STOPPED, create_run
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


@pytest.fixture(autouse=True)
def _runs_in_workers(settings):
    settings.CHAT_RUN_WORKERS = True
    settings.AGENT_HEARTBEAT_S = 3600  # no sweep but the ones a test calls


async def a_stored_run(content: str = TRAVEL_QUESTION) -> AgentRun:
    _, conversation = await make_conversation()
    return await database_sync_to_async(create_run)(
        conversation_id=conversation.pk, content=content
    )


async def an_ended_run_with_a_queued_message() -> AgentRun:
    """Return a run that ended elsewhere, its conversation holding a queued message with
    no run going (a Stop of a waiting run leaves it so)."""
    run = await a_stored_run()
    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        status=RunStatus.SUCCEEDED, finished_at=timezone.now(), owner_channel="elsewhere"
    )
    await database_sync_to_async(QueuedMessage.objects.create)(
        conversation_id=run.conversation_id, content="And the day after?",
        created_at=timezone.now(), client_id="c-2",
    )  # fmt: skip
    return run


async def a_socket_asking(question: str):
    """Open a new conversation's socket and send ``question``; return the socket."""
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": question}))
    return communicator


async def reload(run_id: int) -> AgentRun:
    return await database_sync_to_async(AgentRun.objects.get)(pk=run_id)


async def owners(count: int) -> list[RunOwner]:
    """Open ``count`` run owners on the layer, each in the owners' group."""
    opened = [RunOwner(get_channel_layer()) for _ in range(count)]
    for run_owner in opened:
        await run_owner.channel()
    return opened


async def test_a_message_over_the_socket_is_run_by_a_run_owner_not_by_the_web_process():
    (worker,) = await owners(1)
    try:
        communicator = await a_socket_asking(TRAVEL_QUESTION)
        frames = await receive_until_finished(communicator)
        await communicator.disconnect()
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await worker.close()

    assert "status-succeeded" in frames[-1]
    assert any('data-tool="weather_forecast"' in frame for frame in frames)
    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == RunStatus.SUCCEEDED
    assert run.owner_channel == await worker.channel()
    assert owner._current is None or owner._current.running() == {}  # the web side ran nothing


async def test_of_two_run_owners_told_of_a_run_exactly_one_runs_it():
    first, second = await owners(2)
    try:
        run = await a_stored_run()
        await start_run(get_channel_layer(), run.pk, run.conversation_id)

        async def ended() -> AgentRun:
            while (row := await reload(run.pk)).status == RunStatus.RUNNING:
                await asyncio.sleep(0.02)
            return row

        row = await asyncio.wait_for(ended(), WAIT_S)
        claims = [await first.claim_start(run.pk, run.conversation_id),
                  await second.claim_start(run.pk, run.conversation_id)]  # fmt: skip
    finally:
        await first.close()
        await second.close()
    assert row.status == RunStatus.SUCCEEDED
    assert row.owner_channel in {await first.channel(), await second.channel()}
    assert claims == [False, False]  # ended, and claimed once already


async def test_a_start_no_run_owner_heard_is_run_by_the_next_sweep(settings):
    run = await a_stored_run()
    # Nothing listens: the message is lost, and the run waits, unclaimed.
    await start_run(get_channel_layer(), run.pk, run.conversation_id)
    assert (await reload(run.pk)).owner_channel == ""
    settings.AGENT_HEARTBEAT_S = 1.0
    (worker,) = await owners(1)
    try:
        # Not before it has waited two heartbeats: its message may still be on its way.
        assert await worker.start_unclaimed() == []
        old = timezone.now() - timedelta(seconds=3)
        await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
            started_at=old, heartbeat_at=old
        )
        assert await worker.start_unclaimed() == [run.pk]
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await worker.close()
    row = await reload(run.pk)
    assert row.status == RunStatus.SUCCEEDED and row.owner_channel == await worker.channel()


async def test_a_stop_before_any_owner_claimed_the_run_ends_it_at_once():
    # No task holds the run: the Stop ends it where it is asked, as a waiting run's does,
    # and the tab is told now, not when (if ever) a run owner comes.
    run = await a_stored_run()
    stopped = await request_stop(get_channel_layer(), run.conversation_id, run.pk)
    assert stopped == owner.StopOutcome.STOPPED_UNCLAIMED
    row = await reload(run.pk)
    assert row.status == RunStatus.CANCELLED and row.error == STOPPED
    (worker,) = await owners(1)
    try:
        assert not await worker.claim_start(run.pk, run.conversation_id)
        assert worker.running() == {}
    finally:
        await worker.close()


async def test_a_run_an_owner_starts_itself_is_not_run_once_a_stop_ended_it(monkeypatch):
    """An owner's own start (the queue's next message: RunOwner.send_next) records its
    channel as the run begins, not as the run is stored: a Stop in between ends the run
    as unclaimed, and the owner's task must then leave it, not run its tools. The row it
    gets back is not its end either: it asks for no title (a cancelled run that never
    ran got one) and resumes nothing."""
    titled: list[int] = []
    monkeypatch.setattr(RunOwner, "title_after", lambda self, run: titled.append(run.pk))
    run = await a_stored_run()
    await request_stop(get_channel_layer(), run.conversation_id, run.pk)
    (worker,) = await owners(1)
    try:
        finished = await asyncio.wait_for(worker.start(run.pk), WAIT_S)
    finally:
        await worker.close()
    assert finished is not None and finished.status == RunStatus.CANCELLED
    row = await reload(run.pk)
    assert (row.status, row.error, row.owner_channel) == (RunStatus.CANCELLED, STOPPED, "")
    assert await database_sync_to_async(row.steps.count)() == 0
    assert titled == []


async def test_a_run_stopped_unclaimed_is_not_taken_for_a_dead_process_when_an_owner_comes(
    settings,
):
    """Stopped while no run owner ran, and the first one comes three heartbeats later:
    its sweep marked the run interrupted ("the server stopped while this run was going")
    before starting the unclaimed runs, though no server ever ran it and the user had
    pressed Stop."""
    run = await a_stored_run()
    await request_stop(get_channel_layer(), run.conversation_id, run.pk)
    settings.AGENT_HEARTBEAT_S = 1.0
    old = timezone.now() - timedelta(seconds=10)
    await database_sync_to_async(
        AgentRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update
    )(started_at=old, heartbeat_at=old, cancel_requested_at=old + timedelta(seconds=1))
    (worker,) = await owners(1)
    try:
        # The sweep's order (RunOwner._sweep): stale runs first, then unclaimed ones.
        await database_sync_to_async(interrupt_stale_runs)(now=timezone.now())
        await worker.start_unclaimed()
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await worker.close()
    row = await reload(run.pk)
    assert (row.status, row.error) == (RunStatus.CANCELLED, STOPPED)


async def test_a_stop_just_after_a_run_owner_took_the_run_ends_it_as_it_starts():
    run = await a_stored_run()
    (worker,) = await owners(1)
    try:
        claimed = await database_sync_to_async(store.run_claim_start)(
            run_id=run.pk, conversation_id=run.conversation_id,
            owner_channel=await worker.channel(), at=timezone.now(),
        )  # fmt: skip
        assert claimed
        stopped = await request_stop(get_channel_layer(), run.conversation_id)
        assert stopped == owner.StopOutcome.REQUESTED
        # Cancelled twice (the stop message, then the request the row holds): the task may
        # end cancelled itself; what it recorded is what counts.
        task = worker.start(run.pk)
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), WAIT_S)
    finally:
        await worker.close()
    row = await reload(run.pk)
    assert row.status == RunStatus.CANCELLED and row.error == STOPPED


async def test_a_run_no_owner_took_is_said_so_to_its_page_and_cleared_once_one_does(
    settings, monkeypatch, caplog
):
    monkeypatch.setattr(owner, "UNCLAIMED_NOTICE_S", 0.05)
    communicator = await a_socket_asking(TRAVEL_QUESTION)
    frames = await receive_until(communicator, lambda frame: owner.UNCLAIMED[:40] in frame)
    assert "no run owner took it" in caplog.text
    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == RunStatus.RUNNING and run.owner_channel == ""

    old = timezone.now() - timedelta(seconds=10)  # waited past the sweep's two heartbeats
    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        started_at=old, heartbeat_at=old
    )
    settings.AGENT_HEARTBEAT_S = 1.0
    (worker,) = await owners(1)
    try:
        assert await worker.start_unclaimed() == [run.pk]
        cleared = await receive_until(communicator, lambda frame: 'id="chat-error"' in frame)
        assert owner.UNCLAIMED[:40] not in cleared[-1]
        frames += await receive_until_finished(communicator)
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await communicator.disconnect()
        await worker.close()
    assert "status-succeeded" in frames[-1]


async def test_a_run_an_owner_took_in_time_is_not_said_to_wait(monkeypatch, caplog):
    # The check looks once the run was claimed, whatever the machine's speed: the one
    # start_run scheduled waits an hour (cancelled at the end), this one looks now.
    monkeypatch.setattr(owner, "UNCLAIMED_NOTICE_S", 3600.0)
    (worker,) = await owners(1)
    try:
        communicator = await a_socket_asking(TRAVEL_QUESTION)
        frames = await receive_until_finished(communicator)
        run = await database_sync_to_async(AgentRun.objects.get)()
        monkeypatch.setattr(owner, "UNCLAIMED_NOTICE_S", 0.0)
        await owner._tell_if_unclaimed(get_channel_layer(), run.pk, run.conversation_id)
        assert await communicator.receive_nothing()
        await communicator.disconnect()
    finally:
        for check in list(owner._checks):
            check.cancel()
        await worker.close()
    assert not any(owner.UNCLAIMED[:40] in frame for frame in frames)
    assert "no run owner took it" not in caplog.text


async def test_a_stopping_run_owner_claims_nothing():
    run = await a_stored_run()
    (worker,) = await owners(1)
    try:
        await worker.finish_runs(grace_s=0)
        assert not await worker.claim_start(run.pk, run.conversation_id)
        assert await worker.start_unclaimed() == []
    finally:
        await worker.close()
    assert (await reload(run.pk)).owner_channel == ""


def held_in_its_thread(monkeypatch, module, name: str):
    """Hold each call of ``module.name`` (sync, run in the ORM's thread) until ``go`` is
    set; ``started`` is set once one is under way. Return ``(started, go)``."""
    started, go = threading.Event(), threading.Event()
    real = getattr(module, name)

    def held(**kwargs):
        started.set()
        go.wait(WAIT_S)
        return real(**kwargs)

    monkeypatch.setattr(module, name, held)
    return started, go


async def test_an_owner_that_starts_stopping_during_its_claim_leaves_the_run_to_the_others(
    monkeypatch,
):
    """SIGTERM (finish_runs) while a claim is in the database: the claim lands, but the
    stopping owner's finish_runs had counted its runs already, so the run it started
    was neither waited for nor ended by it; the process's exit cut it as 'the server
    stopped it', though the other owners could have run it."""
    run = await a_stored_run()
    (worker,) = await owners(1)
    started, go = held_in_its_thread(monkeypatch, store, "run_claim_start")
    try:
        claim = asyncio.ensure_future(worker.claim_start(run.pk, run.conversation_id))
        await asyncio.to_thread(started.wait, WAIT_S)
        assert await worker.finish_runs(grace_s=0) == (0, 0)
        go.set()
        claimed = await asyncio.wait_for(claim, WAIT_S)
        left = worker.running()
    finally:
        go.set()
        await worker.close()
    assert not claimed and left == {}
    row = await reload(run.pk)
    assert (row.status, row.owner_channel) == (RunStatus.RUNNING, "")  # for another owner


async def test_an_owner_closed_during_its_claim_leaves_the_run_to_the_others(monkeypatch):
    """close() cancels the listening task mid-claim (runowner's exit with no runs): the
    UPDATE still lands in its thread, and the run stayed claimed by a process gone,
    never started, until the stale sweep called it interrupted."""
    run = await a_stored_run()
    (worker,) = await owners(1)
    started, go = held_in_its_thread(monkeypatch, store, "run_claim_start")
    try:
        claim = asyncio.ensure_future(worker.claim_start(run.pk, run.conversation_id))
        await asyncio.to_thread(started.wait, WAIT_S)
        claim.cancel()
        go.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(claim, WAIT_S)
        left = worker.running()
    finally:
        go.set()
        await worker.close()
    assert left == {}
    row = await reload(run.pk)
    assert (row.status, row.owner_channel) == (RunStatus.RUNNING, "")


async def test_an_owner_that_starts_stopping_while_taking_a_queued_message_leaves_its_run(
    monkeypatch,
):
    """As with a claim: the queued message taken as finish_runs begins became a run the
    graceful stop did not count, cut by the process's exit. Left unclaimed, another
    owner's sweep starts it."""
    run = await an_ended_run_with_a_queued_message()
    started, go = held_in_its_thread(monkeypatch, queued, "take_next")
    (worker,) = await owners(1)
    try:
        sending = asyncio.ensure_future(worker.send_next(run.conversation_id))
        await asyncio.to_thread(started.wait, WAIT_S)
        await worker.finish_runs(grace_s=0)
        go.set()
        sent = await asyncio.wait_for(sending, WAIT_S)
        left = worker.running()
    finally:
        go.set()
        await worker.close()
    assert sent and left == {}
    row = await reload(sent)
    assert (row.status, row.owner_channel) == (RunStatus.RUNNING, "")  # for another owner


async def test_the_queues_next_message_is_sent_by_a_run_owner():
    """A conversation with a queued message and no run going (a Stop of a waiting run
    leaves it so): the web side sends the run owners the conversation, one of them takes
    the message and runs it."""
    run = await an_ended_run_with_a_queued_message()
    (worker,) = await owners(1)
    try:
        await owner.send_next(get_channel_layer(), run.conversation_id)

        async def next_run_ended() -> AgentRun:
            later = AgentRun.objects.filter(conversation_id=run.conversation_id, pk__gt=run.pk)
            ended = later.exclude(status=RunStatus.RUNNING)
            while (found := await database_sync_to_async(ended.first)()) is None:
                await asyncio.sleep(0.02)
            return found

        second = await asyncio.wait_for(next_run_ended(), WAIT_S)
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await worker.close()
    assert second.owner_channel == await worker.channel()
    assert second.status == RunStatus.SUCCEEDED
    assert not await database_sync_to_async(QueuedMessage.objects.exists)()


def test_run_workers_with_an_in_memory_layer_is_refused_by_the_checks(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "chat.layers.InMemoryChannelLayer"}}
    [error] = check_run_workers_layer()
    assert error.id == RUN_WORKERS_LAYER_ID and error.level == checks.ERROR
    assert "REDIS_URL" in error.hint
    settings.CHAT_RUN_WORKERS = False
    assert check_run_workers_layer() == []
    settings.CHAT_RUN_WORKERS = True
    redis = "channels_redis.pubsub.RedisPubSubChannelLayer"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": redis}}
    assert check_run_workers_layer() == []


def test_runowner_refuses_to_start_when_the_web_processes_run_their_own_runs(settings):
    settings.CHAT_RUN_WORKERS = False
    with pytest.raises(CommandError, match="CHAT_RUN_WORKERS is off"):
        call_command("runowner", skip_checks=True)


async def test_the_web_process_opens_no_run_owner_of_its_own(monkeypatch):
    monkeypatch.setattr(owner, "_current", None)
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.disconnect()
    await wait_for_runs()
    assert owner._current is None


async def test_a_run_that_waited_past_the_stale_limit_for_an_owner_is_started_not_interrupted(
    settings,
):
    """No run owner came for longer than AGENT_STALE_AFTER_S: the run never ran anywhere,
    so the first owner's sweep (stale runs first, then unclaimed ones) starts it, rather
    than telling the user its server stopped."""
    run = await a_stored_run()
    settings.AGENT_HEARTBEAT_S = 1.0
    old = timezone.now() - timedelta(seconds=10 * settings.AGENT_STALE_AFTER_S)
    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        started_at=old, heartbeat_at=old
    )
    (worker,) = await owners(1)
    try:
        assert await database_sync_to_async(interrupt_stale_runs)(now=timezone.now()) == []
        assert await worker.start_unclaimed() == [run.pk]
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await worker.close()
    assert (await reload(run.pk)).status == RunStatus.SUCCEEDED


async def test_without_run_owners_a_run_whose_process_died_unrecorded_is_still_interrupted(
    settings,
):
    """Without CHAT_RUN_WORKERS a blank owner is a process that died before recording
    itself (or whose layer gave it no channel): stale, it is interrupted as before."""
    settings.CHAT_RUN_WORKERS = False
    run = await a_stored_run()
    old = timezone.now() - timedelta(seconds=10 * settings.AGENT_STALE_AFTER_S)
    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        started_at=old, heartbeat_at=old
    )
    interrupted = await database_sync_to_async(interrupt_stale_runs)(now=timezone.now())
    assert [conversation_id for conversation_id, _ in interrupted] == [run.conversation_id]
    assert (await reload(run.pk)).status == RunStatus.INTERRUPTED


async def test_a_run_said_to_wait_has_the_notice_cleared_when_its_start_message_is_heard_late(
    monkeypatch,
):
    """The web process told the page no run owner took the run (UNCLAIMED_NOTICE_S); an
    owner busy with other messages then hears the run.start and claims it: the run goes
    on, its steps streaming, under a notice saying no owner has taken it, until its end
    clears it (start_unclaimed clears it at once, the claim from a message does not)."""
    monkeypatch.setattr(owner, "UNCLAIMED_NOTICE_S", 0.05)
    communicator = await a_socket_asking(TRAVEL_QUESTION)
    await receive_until(communicator, lambda frame: owner.UNCLAIMED[:40] in frame)
    run = await database_sync_to_async(AgentRun.objects.get)()
    (worker,) = await owners(1)
    try:
        await get_channel_layer().group_send(owner.OWNERS_GROUP, {  # the run.start, late
            "type": owner.START_MESSAGE_TYPE, "run_id": run.pk,
            "conversation_id": run.conversation_id, "sent_at": time.time() - 60,
        })  # fmt: skip
        frames = await receive_until_finished(communicator)
        await asyncio.wait_for(asyncio.gather(*worker.running().values()), WAIT_S)
    finally:
        await communicator.disconnect()
        await worker.close()
    # Cleared while the run goes on (its end clears any notice: too late for a long run).
    assert "status-succeeded" in frames[-1]
    notices = [frame for frame in frames[:-1] if 'id="chat-error"' in frame]
    assert notices and owner.UNCLAIMED[:40] not in notices[-1]
