"""The run owner: the one place a process starts, stops, resumes and sweeps runs.

Each process that runs agents has one :class:`RunOwner`. It holds its runs' tasks and
their heartbeats, and is addressed directly: it listens on a channel of its own, which
every run it takes records (``AgentRun.owner_channel``), so a Stop sent from any process
reaches it whether or not a page of that conversation is open there; and it joins
:data:`OWNERS_GROUP`, through which a decision taken anywhere (a socket, the admin) asks
every owner to resume the run it made ready: the first to claim it does. Its background
work starts with the process (Daphne's reactor, :func:`install`), not with a socket:
every ``AGENT_HEARTBEAT_S`` it marks runs of dead processes interrupted, expires
approvals past their time, resumes the runs ready to go on and sends the queued messages
whose run has ended (:meth:`RunOwner.send_next`; a run's own end sends its
conversation's next at once). On a graceful stop it lets
its runs finish for a while and ends the rest (:meth:`RunOwner.finish_runs`).

Consumers, views, the admin and ``ask`` only talk to it: :func:`start_run`,
:func:`send_next`, :func:`request_stop`, :func:`decisions_taken`. With
``CHAT_RUN_WORKERS`` the web processes have no owner: :func:`start_run` and
:func:`send_next` go to :data:`OWNERS_GROUP`, whose owners run in processes of their own
(``manage.py runowner``), and the first to claim a run starts it.

A channel message that is lost (a process gone, Redis' pub/sub with nobody subscribed)
costs time, not correctness: a run's heartbeat finds a stop request in the database,
and the sweep finds ready runs (and, with ``CHAT_RUN_WORKERS``, runs no owner claimed).
The pattern is Channels' worker: a named consumer of messages beside the sockets.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from agents.events import RunStatus, utcnow
from chat import fragments, queued, store
from chat.live import Addressed, GroupPublisher, interrupt_stale_runs, publish_each
from chat.models import AgentRun
from chat.recorder import Update
from chat.runs import (
    SWALLOWED_AFTER_S,
    Listener,
    LocalRun,
    end_if_running,
    execute_run,
    finish_if_running,
    stop_paused_if_asked,
    through_cancels,
)
from chat.titles import title_after_run
from chat.traces import live as telemetry

logger = logging.getLogger(__name__)

OWNERS_GROUP = "chat-run-owners"
"""The channel-layer group every process's run owner joins."""

STOP_MESSAGE_TYPE = "run.stop"  # {"run_id": N}: to the run's owner_channel
RESUME_MESSAGE_TYPE = "run.resume"  # {"run_ids": [N, ...]}: to OWNERS_GROUP
# {"run_id": N, "conversation_id": N, "sent_at": time.time()}: to OWNERS_GROUP
START_MESSAGE_TYPE = "run.start"
NEXT_MESSAGE_TYPE = "queue.next"  # {"conversation_id": N}: to OWNERS_GROUP

# With CHAT_RUN_WORKERS: seconds after which a web process tells a run's pages (and its
# log) that no run owner has taken the run.
UNCLAIMED_NOTICE_S = 10.0
UNCLAIMED = (
    "No run owner has taken this run yet: it starts as soon as one does. (Runs go in "
    "processes of their own here; is one running?)"
)

# Seconds the cancelled runs of a stopping process get to record their end.
RECORD_TIMEOUT_S = 10.0
STOPPING = "the server is stopping"


class StopOutcome(enum.Enum):
    """What :func:`request_stop` found and did."""

    INTERRUPTED = "interrupted"  # the run's process was dead: marked interrupted
    STOPPED_WAITING = "stopped_waiting"  # a run waiting for decisions: ended here
    STOPPED_UNCLAIMED = "stopped_unclaimed"  # CHAT_RUN_WORKERS: no owner took it: ended here
    REQUESTED = "requested"  # a running run: its owner was told (and its heartbeat checks)
    NOTHING = "nothing"  # no run of the conversation is going


class RunOwner:
    """The runs of one process, and the background work that keeps every run moving.

    ``server`` off (``ask``, a process that lives for one run): the owner runs what it is
    given and hears the Stops for it, and nothing else: no sweep, not in
    :data:`OWNERS_GROUP`, no run resumed (a server resumes them). Once it is stopping
    (:meth:`finish_runs`) an owner takes no run to resume either. Methods are called in
    the owner's event loop; :func:`current` gives the process's owner there.
    """

    def __init__(self, layer: Any, *, server: bool = True) -> None:
        self.layer = layer
        self.server = server
        self.stopping = False
        self.loop = asyncio.get_running_loop()
        self._runs: dict[int, LocalRun] = {}
        self._channel: asyncio.Future[str] = self.loop.create_future()
        self._background: list[asyncio.Task[None]] = []
        self._titles: set[asyncio.Task[str]] = set()
        # Conversations whose queued message the rate limit holds: until when (loop time).
        self._held: dict[int, float] = {}
        self._sending: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------

    def open(self) -> None:
        """Start listening on the owner's channel and, for a ``server``, sweeping (once)."""
        if self._background:
            return
        self._background.append(self.loop.create_task(self._listen(), name="run-owner"))
        if self.server:
            self._background.append(self.loop.create_task(self._sweep(), name="run-sweep"))

    @property
    def closed(self) -> bool:
        """True once its event loop is closed (a test's, a command's)."""
        return self.loop.is_closed()

    async def close(self) -> None:
        """Stop the background work (not the runs: see :meth:`finish_runs`)."""
        for task in [*self._background, *self._titles]:
            task.cancel()
        await asyncio.gather(*self._background, *self._titles, return_exceptions=True)
        # Closed while the layer was still giving it a channel: no channel, no group.
        if self._channel.done() and not self._channel.cancelled() and not self._channel.exception():
            try:
                await self.layer.group_discard(OWNERS_GROUP, self._channel.result())
            except Exception:
                logger.exception("run owner: leaving %s failed", OWNERS_GROUP)

    async def channel(self) -> str:
        """Return this owner's channel name, once the layer has given it one."""
        self.open()
        return await asyncio.shield(self._channel)

    async def _listen(self) -> None:
        try:
            # The layer's default prefix: channels-redis' core layer reads all of a
            # process's channels through one (its own prefix would queue the sockets'
            # messages behind the owner's blocking read).
            name = await self.layer.new_channel()
            if self.server:
                await self.layer.group_add(OWNERS_GROUP, name)
        except BaseException as exc:
            if not self._channel.done():
                self._channel.set_exception(exc)
            raise
        self._channel.set_result(name)
        while True:
            try:
                message = await self.layer.receive(name)
            except Exception:  # the layer's server went away: it reconnects
                logger.exception("run owner: receiving failed")
                await asyncio.sleep(1.0)
                continue
            try:
                await self._handle(message)
            except Exception:
                logger.exception("run owner: handling %r failed", message.get("type"))

    async def _handle(self, message: dict[str, Any]) -> None:
        match message:
            case {"type": "run.stop", "run_id": int(run_id)}:
                self.stop_local(run_id, reason="a Stop")
            case {"type": "run.resume", "run_ids": list(run_ids)}:
                await self.resume_ready([int(run_id) for run_id in run_ids])
            case {"type": "run.start", "run_id": int(run_id), "conversation_id": int(chat)}:
                sent_at = message.get("sent_at")
                late = isinstance(sent_at, int | float) and (
                    time.time() - sent_at >= UNCLAIMED_NOTICE_S
                )
                await self.claim_start(run_id, chat, late=late)
            case {"type": "queue.next", "conversation_id": int(conversation_id)}:
                await self.send_next(conversation_id)
            case {"type": "layer.missed"}:
                pass  # a resume it missed: the next sweep resumes the ready runs anyway
            case _:
                logger.warning("run owner: message of unknown shape dropped: %r", message)

    async def _sweep(self) -> None:
        """Every ``AGENT_HEARTBEAT_S``: runs of dead processes marked interrupted (and
        their pages told), approvals past their time expired, ready runs resumed, with
        ``CHAT_RUN_WORKERS`` runs no owner claimed started (:meth:`start_unclaimed`)."""
        while not self.stopping:
            await asyncio.sleep(settings.AGENT_HEARTBEAT_S)
            if self.stopping:
                return
            try:
                # Again each time: a layer forgets a group's member after its group_expiry.
                await self.layer.group_add(OWNERS_GROUP, await self.channel())
            except Exception:
                logger.exception("run owner: joining %s failed", OWNERS_GROUP)
            try:
                interrupted = await database_sync_to_async(interrupt_stale_runs)(now=utcnow())
                await publish_each(self.layer, interrupted)
            except Exception:
                logger.exception("sweeping stale runs failed")
            try:
                await self.sweep_approvals()
            except Exception:
                logger.exception("sweeping approvals failed")
            try:
                await self.send_queued()
            except Exception:
                logger.exception("sending queued messages failed")
            if settings.CHAT_RUN_WORKERS:
                try:
                    await self.start_unclaimed()
                except Exception:
                    logger.exception("starting unclaimed runs failed")

    # -- runs -----------------------------------------------------------------------

    def start(
        self, run_id: int, *, listeners: Sequence[Listener] = (), resume: bool = False
    ) -> asyncio.Task[AgentRun | None]:
        """Run the stored run ``run_id`` in a task of this process, unless another owner
        has it or a Stop ended it first (then the task does nothing); return the task.

        Each event goes to ``listeners`` (for a resumed run: its conversation's group).
        The run records this owner's channel. It has a heartbeat until it ends; a run
        left waiting for decisions that all came meanwhile is resumed at once.
        """
        local: LocalRun

        began = False

        async def owned() -> AgentRun | None:
            nonlocal began
            began = True
            heartbeat: asyncio.Task[None] | None = None
            try:
                channel = await self._channel_for(run_id)
                heartbeat = self.loop.create_task(self._heartbeat(local))
                finished = await execute_run(run_id, listeners=listeners, resume=resume,
                                             local=local, owner_channel=channel)  # fmt: skip
            except asyncio.CancelledError:
                if not local.ending:
                    # Cancelled before execute_run could record it (waiting for the
                    # channel, in its first database calls): end it here, or it would look
                    # running until it went stale.
                    local.ending = True
                    await through_cancels(
                        asyncio.ensure_future(finish_if_running(run_id, listeners))
                    )
                # Else execute_run recorded the cancel. Either way the run has ended.
                await self._send_next_after(run_id)
                return None
            finally:
                if heartbeat is not None:
                    heartbeat.cancel()
            if channel and finished.owner_channel != channel:
                # Not taken here (chat.runs._load_start: a Stop ended it unclaimed, another
                # owner has it): its row is not this task's end. Whoever ended or runs it
                # sends the queue's next; no title, no resume from here.
                return finished
            if finished.status != RunStatus.WAITING:
                self.title_after(finished)
            if finished.status == RunStatus.WAITING:
                # Decisions that came while the turn's other calls ran found it not
                # paused yet, and left its resuming to whoever finds it ready: here.
                try:
                    await self.resume_ready([run_id])
                except asyncio.CancelledError:
                    # Cancelled once paused (a server stopping): the run belongs to its
                    # rows now; only a Stop that came meanwhile ends it.
                    local.ending = True
                    await through_cancels(asyncio.ensure_future(
                        stop_paused_if_asked(run_id, finished.conversation_id, listeners)
                    ))  # fmt: skip
                    return None
            else:
                await self._send_next_after(run_id, finished.conversation_id)
            return finished

        task = self.loop.create_task(owned(), name=f"agent-run-{run_id}")
        local = self._runs[run_id] = LocalRun(run_id, task)

        def forget(_: asyncio.Task[AgentRun | None]) -> None:
            # Only this task's entry: a run resumed by its own task has a new one by then.
            if self._runs.get(run_id) is local:
                del self._runs[run_id]
            if task.cancelled() and not began and not self.loop.is_closed():
                # Cancelled before its first step: nothing of it ran to record its end.
                self.loop.create_task(finish_if_running(run_id, listeners))

        task.add_done_callback(forget)
        return task

    def title_after(self, run: AgentRun) -> None:
        """Ask, in the background, for a model-made title of the ended run's conversation
        (:func:`chat.titles.title_after_run`: due only after its first run with a real
        model). A ``server``'s work alone: a command's process ends with its run."""
        entry = run.provider_entry
        if not self.server or self.stopping or entry is None or entry.scripted:
            return
        task = self.loop.create_task(title_after_run(run.pk, self.layer), name=f"title-{run.pk}")
        self._titles.add(task)
        task.add_done_callback(self._titles.discard)

    def background_jobs(self) -> set[asyncio.Task[Any]]:
        """Return the owner's jobs after runs that are still going (model-made titles)."""
        return set(self._titles)

    async def _send_next_after(self, run_id: int, conversation_id: int | None = None) -> None:
        """Send the next queued message of run ``run_id``'s conversation, the run having
        ended. Called in the run's task: the sending is a task of its own, so a cancel
        of the run's task (a second Stop) cannot cut it between taking the message and
        starting its run; a failure is logged, never the run's."""

        await asyncio.shield(self._send_next_task(conversation_id, run_id=run_id))

    def _send_next_task(
        self, conversation_id: int | None, *, run_id: int | None = None
    ) -> asyncio.Task[None]:
        """Return a task of this owner that sends the conversation's next queued message
        (:meth:`send_next`), its failure logged; the owner keeps it until it is done."""

        async def send() -> None:
            try:
                await self.send_next(conversation_id, run_id=run_id)
            except Exception:
                logger.exception("sending the queued message of chat %s (run %s) failed",
                                 conversation_id, run_id)  # fmt: skip

        task = self.loop.create_task(send(), name=f"queue-next-{conversation_id or run_id}")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        return task

    async def send_next(self, conversation_id: int | None, *, run_id: int | None = None) -> int:
        """Send the conversation's first queued message if none of its runs is going, and
        run it here; return its run's id (0 when nothing was sent).

        The conversation is ``conversation_id``'s, or run ``run_id``'s. Taken with one
        conditional DELETE (:func:`chat.store.queue_take`), so of two owners only one
        sends it; it is shown in every tab as a socket's message is. Over the rate limit
        it stays first, every tab is told when it will go, and it is tried again then
        (and by the sweep, should this process stop). An owner that is not a ``server``,
        or is stopping, sends nothing: a server's sweep does.
        """
        if not self.server or self.stopping:
            return 0
        if conversation_id is not None and self._held.get(conversation_id, 0) > self.loop.time():
            return 0
        try:
            taken = await database_sync_to_async(queued.take_next)(
                conversation_id=conversation_id, run_id=run_id
            )
        except store.RateLimited as exc:
            if conversation_id is None:
                conversation_id = await database_sync_to_async(store.run_conversation_id)(
                    run_id=run_id
                )
            if conversation_id is not None:
                await self._hold(conversation_id, exc)
            return 0
        if taken is None:
            return 0
        self._held.pop(taken.conversation_id, None)
        publisher = GroupPublisher(self.layer, taken.conversation_id)
        try:
            await publisher.publish(taken.html)
        except Exception:  # the layer failed: the run goes on all the same (a reload shows it)
            logger.exception("run %s: showing the queued message sent failed", taken.run_id)
        if self.stopping and settings.CHAT_RUN_WORKERS:
            # finish_runs began while it was taken and counted the runs without this one:
            # left unclaimed, another run owner's sweep starts it (start_unclaimed).
            return taken.run_id
        self.start(taken.run_id, listeners=[publisher])
        return taken.run_id

    async def _hold(self, conversation_id: int, limited: store.RateLimited) -> None:
        """Keep the conversation's queue until the rate limit frees a run, and say so in
        every tab; try again then."""
        wait = limited.retry_after_s
        self._held[conversation_id] = self.loop.time() + wait
        notice = queued.HELD.format(limit=limited.limit, seconds=wait)
        await GroupPublisher(self.layer, conversation_id).publish(fragments.error(notice))

        def retry() -> None:
            self._held.pop(conversation_id, None)
            self._send_next_task(conversation_id)

        self.loop.call_later(wait, retry)

    async def send_queued(self) -> list[int]:
        """Send the first queued message of each conversation with no run going (a run
        whose process died, a message the rate limit held); return the runs started."""
        if not self.server or self.stopping:
            return []
        ready = await database_sync_to_async(store.queues_ready)()
        started = [await self.send_next(conversation_id) for conversation_id in ready]
        return [run_id for run_id in started if run_id]

    async def _channel_for(self, run_id: int) -> str:
        """Return the owner's channel for a run to record; blank (logged) if the layer
        could not give one: the run goes on, stopped by its heartbeat alone."""
        try:
            return await self.channel()
        except Exception:
            logger.exception("run %s: its owner has no channel", run_id)
            return ""

    async def _heartbeat(self, local: LocalRun) -> None:
        """Write the run's heartbeat every ``AGENT_HEARTBEAT_S`` while its task runs; stop
        it when a beat finds a stop request that no message brought (and again, if a
        beat after its cancel finds it still going: the cancel was swallowed)."""
        while not local.task.done():
            await asyncio.sleep(settings.AGENT_HEARTBEAT_S)
            try:
                stop = await database_sync_to_async(store.run_beat)(
                    run_id=local.run_id, at=utcnow()
                )
            except Exception:
                logger.exception("run %s: heartbeat failed", local.run_id)
                continue
            if stop:
                local.stop("its stop request, seen by its heartbeat")

    def stop_local(self, run_id: int, *, reason: str = "a Stop") -> bool:
        """Cancel run ``run_id`` if this owner runs it; return whether it does.

        The run ends as ``cancelled`` with its steps so far kept; one still going
        :data:`chat.runs.SWALLOWED_AFTER_S` after an earlier cancel is cancelled again
        (:meth:`chat.runs.LocalRun.stop`). ``reason`` is for the log.
        """
        local = self._runs.get(run_id)
        if local is None or local.task.done():
            return False
        local.stop(reason)
        return True

    def running(self) -> dict[int, asyncio.Task[AgentRun | None]]:
        """Return the run tasks this owner runs, by run id (a copy, without ended ones)."""
        return {run_id: local.task for run_id, local in self._runs.items() if not local.task.done()}

    async def claim_start(self, run_id: int, conversation_id: int, *, late: bool = False) -> bool:
        """Start the new run ``run_id`` (of ``conversation_id``) here if this owner claims
        it first (:func:`chat.store.run_claim_start`); return whether it did. Its events
        go to its conversation's group; ``late`` (its start was heard, or found by the
        sweep, past :data:`UNCLAIMED_NOTICE_S`), its pages' notice that no owner took it
        (:data:`UNCLAIMED`) is cleared first. An owner that is not a ``server``, or is
        stopping, takes none."""
        if not self.server or self.stopping:
            return False
        channel = await self.channel()
        claiming = asyncio.ensure_future(database_sync_to_async(store.run_claim_start)(
            run_id=run_id, conversation_id=conversation_id, owner_channel=channel, at=utcnow()
        ))  # fmt: skip
        try:
            claimed = await through_cancels(claiming)
        except asyncio.CancelledError:
            # Cancelled (the owner closing) after the UPDATE had started: give the run back.
            if not claiming.cancelled() and claiming.exception() is None and claiming.result():
                await self._release(run_id, channel)
            raise
        if claimed and self.stopping:
            # finish_runs began meanwhile and counted its runs without this one.
            await self._release(run_id, channel)
            return False
        if claimed:
            publisher = GroupPublisher(self.layer, conversation_id)
            if late:
                await publisher.publish(fragments.error(""))
            self.start(run_id, listeners=[publisher])
        return claimed

    async def _release(self, run_id: int, channel: str) -> None:
        """Give back a run this owner claimed but will not run, to the other owners'
        sweep (:func:`chat.store.run_release_claim`), whatever cancels come meanwhile."""
        releasing = asyncio.ensure_future(database_sync_to_async(store.run_release_claim)(
            run_id=run_id, owner_channel=channel
        ))  # fmt: skip
        try:
            await through_cancels(releasing)
        except asyncio.CancelledError:
            if releasing.cancelled() or releasing.exception() is not None:
                logger.error("run %s: giving back its claim failed", run_id)
            raise

    async def start_unclaimed(self) -> list[int]:
        """Start the runs whose start message no owner heard (none running, a message
        lost) that this owner claims first, once they have waited two heartbeats; return
        their ids. Their pages' notice that no owner took them (:data:`UNCLAIMED`) is
        cleared."""
        before = utcnow() - timedelta(seconds=2 * settings.AGENT_HEARTBEAT_S)
        unclaimed = await database_sync_to_async(store.runs_unclaimed)(before=before)
        return [run_id for run_id, conversation_id in unclaimed
                if await self.claim_start(run_id, conversation_id, late=True)]  # fmt: skip

    async def resume_ready(self, run_ids: Sequence[int]) -> list[int]:
        """Resume each run of ``run_ids`` whose calls are all decided, if this owner
        claims it first (:func:`chat.store.run_claim_resume`); return the ids it resumed.
        A resumed run's events go to its conversation's group. An owner that is not a
        ``server``, or is stopping, takes none: a server's owner does."""
        if not self.server or self.stopping:
            return []
        resumed = []
        for run_id in run_ids:
            conversation_id = await database_sync_to_async(store.run_claim_resume)(
                run_id=run_id, at=utcnow()
            )
            if conversation_id is None:
                continue
            self.start(run_id, listeners=[GroupPublisher(self.layer, conversation_id)],
                       resume=True)  # fmt: skip
            resumed.append(run_id)
        return resumed

    async def sweep_approvals(self) -> list[int]:
        """Expire approvals past their time and resume every run ready to go on that this
        owner claims first; return the ids it resumed."""
        ready = await database_sync_to_async(_expire_and_find_ready)(now=utcnow())
        return await self.resume_ready(ready)

    async def finish_runs(
        self, *, grace_s: float, record_s: float = RECORD_TIMEOUT_S
    ) -> tuple[int, int]:
        """Wait up to ``grace_s`` seconds for this owner's runs, then cancel the rest.

        Each cancelled run records its end as ``cancelled`` ("the server stopped it");
        this waits up to ``record_s`` seconds for those writes, cancelling again any run
        that swallowed its cancel. Returns ``(finished, cancelled)``: how many runs ended
        on their own within the grace, how many were cut. The idea is Gunicorn's
        graceful timeout and Celery's warm shutdown.
        """
        self.stopping = True  # from now on it takes no run to resume
        runs = self.running()
        if not runs:
            return 0, 0
        logger.info("stopping: waiting up to %g s for %d run(s)", grace_s, len(runs))
        done: set[asyncio.Task[Any]] = set()
        pending: set[asyncio.Task[Any]] = set(runs.values())
        if grace_s > 0:
            done, pending = await asyncio.wait(pending, timeout=grace_s)
        cut = len(pending)
        if pending:
            logger.warning("stopping: cancelling %d run(s) still going after %g s", cut, grace_s)
        until = self.loop.time() + record_s
        while pending and (left := until - self.loop.time()) > 0:
            for run_id, task in runs.items():
                if task in pending:
                    self.stop_local(run_id, reason=STOPPING)
            _, pending = await asyncio.wait(pending, timeout=min(left, SWALLOWED_AFTER_S))
        return len(done), cut


def _expire_and_find_ready(*, now: Any) -> list[int]:
    """Expire the approvals past their time; return the runs ready to resume (sync)."""
    store.approvals_expire(now=now)
    return store.runs_ready()


_current: RunOwner | None = None


def running_tasks() -> set[asyncio.Task[Any]]:
    """Return the run tasks of this event loop's owner, and its jobs after runs (none if
    it has none yet)."""
    owner = _current
    if owner is None or owner.loop is not asyncio.get_running_loop():
        return set()
    return set(owner.running().values()) | owner.background_jobs()


async def close_current() -> None:
    """Close this event loop's run owner, if it has one still open (before the loop itself
    closes: a test's loop, whose close would cancel the owner's receive and the layer's
    reader at once, and on Redis hang in the unsubscribe between them)."""
    owner = _current
    if owner is not None and owner.loop is asyncio.get_running_loop() and not owner.closed:
        await owner.close()


def current() -> RunOwner:
    """Return this process's run owner, opening one in the running event loop if it has
    none there (the first use in a test's or a command's loop; Daphne opens it at start)."""
    global _current
    if _current is None or _current.loop is not asyncio.get_running_loop() or _current.closed:
        _current = RunOwner(get_channel_layer())
        _current.open()
    return _current


@dataclass(frozen=True)
class _Stop:
    """What :func:`_stop_rows` did, and what is left to tell: fragments for the pages,
    the end of a waiting run, the message for a running run's owner."""

    outcome: StopOutcome
    conversation_id: int
    interrupted: list[Addressed] = field(default_factory=list)
    ended: Update | None = None
    owner_channel: str = ""
    run_id: int = 0


def _stop_rows(conversation_id: int, run_id: int | None = None) -> _Stop:
    """Do in the database what a Stop does (sync, one ORM call): see :func:`request_stop`."""
    now = utcnow()
    interrupted = interrupt_stale_runs(conversation_id=conversation_id, now=now)
    if interrupted:
        return _Stop(StopOutcome.INTERRUPTED, conversation_id, interrupted=interrupted)
    waiting = store.run_stop_waiting(conversation_id=conversation_id, at=now, run_id=run_id)
    if waiting is not None:
        return _Stop(StopOutcome.STOPPED_WAITING, conversation_id,
                     ended=end_if_running(waiting.pk))  # fmt: skip
    if settings.CHAT_RUN_WORKERS:
        # A run no run owner took yet has no task to tell: its end is recorded here.
        ended = store.run_stop_unclaimed(conversation_id=conversation_id, at=now,
                                         run_id=run_id, end=end_if_running)  # fmt: skip
        if ended is not None:
            return _Stop(StopOutcome.STOPPED_UNCLAIMED, conversation_id, ended=ended)
    run = store.run_request_cancel(conversation_id=conversation_id, at=now, run_id=run_id)
    if run is None:
        return _Stop(StopOutcome.NOTHING, conversation_id)
    return _Stop(StopOutcome.REQUESTED, conversation_id, owner_channel=run.owner_channel,
                 run_id=run.pk)  # fmt: skip


async def _tell(layer: Any, stop: _Stop) -> StopOutcome:
    """Send what a Stop's rows left to tell (no database), and return its outcome."""
    await publish_each(layer, stop.interrupted)
    if stop.ended is not None:
        await GroupPublisher(layer, stop.conversation_id)(stop.ended)
    if stop.owner_channel:
        await layer.send(stop.owner_channel, {"type": STOP_MESSAGE_TYPE, "run_id": stop.run_id})
    return stop.outcome


async def request_stop(layer: Any, conversation_id: int, run_id: int | None = None) -> StopOutcome:
    """Stop the conversation's run (only if it is ``run_id``, the run the page showed
    going, when given: one that ended meanwhile is not followed by stopping the queue's
    next), wherever it runs; tell its pages what changed.

    A run of a dead process is marked interrupted; a run waiting for decisions, or
    (``CHAT_RUN_WORKERS``) one no run owner took yet, has no task, so its cancelled end
    is recorded here; a running run gets a stop request in
    the database and a message to its owner's channel (its heartbeat finds the request
    if the message is lost). A run that ended here is followed by the conversation's
    first queued message (:func:`send_next`: this process's owner, or the run owners'
    with ``CHAT_RUN_WORKERS``); a running run's owner sends it when the run ends.
    """
    outcome = await _tell(layer, await database_sync_to_async(_stop_rows)(conversation_id, run_id))
    if outcome in (StopOutcome.INTERRUPTED, StopOutcome.STOPPED_WAITING,
                   StopOutcome.STOPPED_UNCLAIMED):  # fmt: skip
        await send_next(layer, conversation_id)
    return outcome


async def start_run(layer: Any, run_id: int, conversation_id: int) -> None:
    """Start the stored run ``run_id`` of ``conversation_id``: in this process's owner, or
    with ``CHAT_RUN_WORKERS`` in whichever run owner claims it first (a message to
    :data:`OWNERS_GROUP`; lost, a run owner's sweep starts it). Its events go to the
    conversation's group. A run no owner took within :data:`UNCLAIMED_NOTICE_S` is
    said so to its pages (:data:`UNCLAIMED`) and logged."""
    if not settings.CHAT_RUN_WORKERS:
        current().start(run_id, listeners=[GroupPublisher(layer, conversation_id)])
        return
    await layer.group_send(OWNERS_GROUP, {
        "type": START_MESSAGE_TYPE, "run_id": run_id, "conversation_id": conversation_id,
        "sent_at": time.time(),
    })  # fmt: skip
    check = asyncio.get_running_loop().create_task(
        _tell_if_unclaimed(layer, run_id, conversation_id), name=f"unclaimed-{run_id}"
    )
    _checks.add(check)
    check.add_done_callback(_checks.discard)


_checks: set[asyncio.Task[None]] = set()


async def _tell_if_unclaimed(layer: Any, run_id: int, conversation_id: int) -> None:
    """Tell the run's pages and the log if no run owner has taken run ``run_id`` within
    :data:`UNCLAIMED_NOTICE_S`."""
    await asyncio.sleep(UNCLAIMED_NOTICE_S)
    try:
        waiting = await database_sync_to_async(store.run_unclaimed)(run_id=run_id)
        if not waiting:
            return
        logger.warning(
            "run %s: no run owner took it within %g s (CHAT_RUN_WORKERS): is manage.py "
            "runowner running, with this process's DATABASE_URL, REDIS_URL and REDIS_PREFIX?",
            run_id, UNCLAIMED_NOTICE_S,
        )  # fmt: skip
        await GroupPublisher(layer, conversation_id).publish(fragments.error(UNCLAIMED))
    except Exception:
        logger.exception("run %s: checking whether a run owner took it failed", run_id)


async def send_next(layer: Any, conversation_id: int) -> None:
    """Send the conversation's first queued message if none of its runs is going
    (:meth:`RunOwner.send_next`): in this process's owner, or with ``CHAT_RUN_WORKERS`` in
    the run owners' (a message to :data:`OWNERS_GROUP`; lost, their sweep sends it)."""
    if not settings.CHAT_RUN_WORKERS:
        await current().send_next(conversation_id)
        return
    await layer.group_send(OWNERS_GROUP, {
        "type": NEXT_MESSAGE_TYPE, "conversation_id": conversation_id,
    })  # fmt: skip


def request_stop_sync(conversation_id: int) -> StopOutcome:
    """Like :func:`request_stop`, from sync code (views): the rows in this thread (its
    connection and transaction), then the layer."""
    return async_to_sync(_tell)(get_channel_layer(), _stop_rows(conversation_id))


async def decisions_taken(layer: Any, run_ids: Sequence[int]) -> None:
    """Ask every process's owner to resume the runs of ``run_ids`` now ready; the first
    to claim each resumes it. Nothing listening (no server runs): the sweep of the
    next server to start does."""
    if run_ids:
        await layer.group_send(
            OWNERS_GROUP, {"type": RESUME_MESSAGE_TYPE, "run_ids": list(run_ids)}
        )


def decisions_taken_sync(run_ids: Sequence[int]) -> None:
    """Like :func:`decisions_taken`, from sync code (the admin), on the default layer."""
    if run_ids:
        async_to_sync(decisions_taken)(get_channel_layer(), run_ids)


def install() -> bool:
    """Open the run owner (none with ``CHAT_RUN_WORKERS``: the run owners' processes run
    the runs) and live telemetry when Daphne's reactor starts, and, with
    ``AGENT_GRACEFUL_SHUTDOWN``, finish its runs before the reactor stops; return
    whether a reactor was there (not in ``manage.py`` commands or the tests)."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return False
    reactor.callWhenRunning(_started, reactor)
    if settings.AGENT_GRACEFUL_SHUTDOWN:
        reactor.addSystemEventTrigger("before", "shutdown", _before_shutdown, reactor)
    return True


def _started(reactor: Any) -> None:
    """Open the run owner in the asyncio loop, and start live telemetry (when on) with
    the server rather than at its first run's end."""
    # Startup triggers fire before the asyncio loop runs; callLater(0) runs inside it.
    if not settings.CHAT_RUN_WORKERS:
        reactor.callLater(0, current)
    telemetry.start()


def _before_shutdown(reactor: Any) -> Any:
    """Stop listening and finish the runs; return a Deferred Twisted waits for.

    Listening stops first, so the proxy sends new connections to another process.
    """
    from twisted.internet import defer, tcp

    for reader in list(reactor.getReaders()):
        if isinstance(reader, tcp.Port):
            reader.stopListening()
    owner = _current
    if owner is None:
        return None
    future = asyncio.ensure_future(owner.finish_runs(grace_s=settings.AGENT_SHUTDOWN_GRACE_S))
    deferred = defer.Deferred.fromFuture(future)
    deferred.addErrback(lambda failure: logger.error("graceful stop failed: %s", failure))
    return deferred
