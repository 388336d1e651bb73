"""Drive one agent run: build the prompt, run the loop, record every event, notify.

A run is a task of its own, not a part of any websocket: the process's run owner
(:mod:`chat.owner`) starts :func:`execute_run` in the background and keeps it, so closing
the tab does not stop the run, and every socket of the conversation's group sees its
events.
What a run is given (its chat model, tools from code, limits, strategy and context
window) comes from :mod:`chat.catalog`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

from agents.definitions import AgentDefinition
from agents.events import Event, RunFinished, RunStatus, utcnow
from agents.history import Exchange, history_messages, resume_from
from agents.runtime import RunLimits, run
from agents.strategies import Strategy
from chat import catalog, store
from chat.agents import (
    AgentTools,
    agent_limits,
    agent_tools,
    conversation_agent,
    snapshot_content,
    snapshot_digest,
    tool_policies,
    unavailable_note,
)
from chat.approvals import PolicyRows, policy_rows
from chat.models import AgentRun, AgentStep
from chat.pricing import PriceRow
from chat.recorder import RunRecorder, Update
from chat.store.rows import storable

logger = logging.getLogger(__name__)

Listener = Callable[[Update], Awaitable[None]]
T = TypeVar("T")

CANCELLED = "The run was cancelled (the server stopped it)."
STOPPED = "Stopped at your request. What the agent did until then is kept above."
INTERNAL_ERROR = "The run stopped because of an internal error ({error}). It has been logged."
CONFIG_ERROR = "The model is not configured correctly: {error}"
AGENT_ERROR = "The agent is not configured: {error}"

# A cancel is delivered at the task's next step, within milliseconds. A run still going
# this many seconds after this process cancelled it, and not recording its end, swallowed
# the cancel (a tool or library that caught ``CancelledError`` and went on): it is
# cancelled again, with a warning, by the next Stop, heartbeat or graceful stop.
SWALLOWED_AFTER_S = 1.0

# Seconds a cancelled run gives its agent loop to close (its pending tool calls are
# cancelled in the loop's ``finally`` blocks) before recording its end anyway.
CLOSE_LOOP_TIMEOUT_S = 5.0

SWALLOWED = (
    "run %s: still going %.1f s after its cancel (%s): a cancel was swallowed; cancelling again"
)
SWALLOWED_BELOW = (
    "run %s: its cancel was swallowed below the agent loop or a listener; ending it as cancelled"
)


@dataclass(eq=False)
class LocalRun:
    """A run going on in this process: its task and where its cancel stands.

    ``cancelled_at`` is the event loop's time (s) of this process's last cancel of it;
    ``ending`` is true while it records its cancelled end, which another cancel would cut
    short (so none is sent then).
    """

    run_id: int
    task: asyncio.Task[AgentRun | None]
    cancelled_at: float | None = None
    ending: bool = False

    def stop(self, reason: str) -> None:
        """Cancel the task unless it is done or recording its end; cancel it again if a
        cancel sent :data:`SWALLOWED_AFTER_S` or more ago was swallowed (logged)."""
        task = self.task
        if task.done() or self.ending:
            return
        now = task.get_loop().time()
        if self.cancelled_at is not None:
            waited = now - self.cancelled_at
            if waited < SWALLOWED_AFTER_S:
                return  # not delivered yet, or being handled
            logger.warning(SWALLOWED, self.run_id, waited, reason)
        self.cancelled_at = now
        task.cancel()


def create_run(*, conversation_id: int, content: str, rate_limited: bool = False) -> AgentRun:
    """Store the user's message and a running run with the conversation's model (sync).

    The run records the provider, model name and host of the model the conversation's
    ``model_key`` names when the message is stored
    (:func:`chat.catalog.model_provenance`). Raises
    :class:`chat.store.ConversationGone` if its owner deleted it,
    :class:`chat.store.RunAlreadyGoing` if the conversation has a run going, and with
    ``rate_limited`` :class:`chat.store.RateLimited` when its owner is over
    ``CHAT_RUNS_PER_MINUTE`` (0 turns the limit off).
    """
    limit = settings.CHAT_RUNS_PER_MINUTE if rate_limited else 0
    return store.run_start(
        conversation_id=conversation_id,
        content=content,
        model_of=catalog.model_provenance,
        agent_of=catalog.agent_name_for,
        started_at=utcnow(),
        runs_per_minute=limit or None,
    )


def build_prompt(
    exchanges: Sequence[Exchange], question: str, strategy: Strategy, system_prompt: str
) -> list[BaseMessage]:
    """Return the messages for a run: ``system_prompt`` (its agent's), earlier exchanges,
    the new question.

    The earlier exchanges go with their tool work, in ``strategy``'s form
    (:func:`agents.history.history_messages`); observations are clipped to
    ``AGENT_MAX_OBSERVATION_CHARS`` as they were when the model first read them. User and
    assistant messages alternate whatever the earlier runs ended with.
    """
    history = history_messages(
        exchanges, strategy, max_observation_chars=settings.AGENT_MAX_OBSERVATION_CHARS
    )
    return [SystemMessage(system_prompt), *history, HumanMessage(question)]


async def _notify(listeners: Sequence[Listener], update: Update) -> None:
    for listener in listeners:
        try:
            await listener(update)
        except Exception:
            # A broken page or terminal must not stop the run or lose its rows.
            logger.exception("run %s: listener %r failed", update.run_id, listener)


@dataclass(frozen=True)
class _Start:
    """What starting (or resuming) a run reads from the database, in one ORM call."""

    run: AgentRun
    exchanges: list[Exchange]
    policies: PolicyRows
    price: PriceRow | None
    resumed: store.ResumeState | None = None
    steps: list[AgentStep] | None = None


def _load_start(*, run_id: int, resume: bool, owner_channel: str) -> _Start | None:
    """Record ``owner_channel`` as the run's owner (if given), then return the run, the
    exchanges before its message and its tool policies (sync, one ORM call); with
    ``resume``, also its stored steps and decisions. None: a new run another owner took,
    or a Stop ended before any owner did (:func:`chat.store.run_take_owner`)."""
    if owner_channel and resume:  # claimed already (chat.store.run_claim_resume)
        store.run_set_owner(run_id=run_id, owner_channel=owner_channel)
    elif owner_channel and not store.run_take_owner(run_id=run_id, owner_channel=owner_channel):
        return None
    run_row = store.run_get(run_id=run_id)
    exchanges = store.conversation_exchanges(
        conversation_id=run_row.conversation_id, before_message_id=run_row.user_message_id,
        max_result_chars=settings.AGENT_MAX_OBSERVATION_CHARS,
    )  # fmt: skip
    policies = policy_rows(conversation_id=run_row.conversation_id)
    price = store.run_price(provider=run_row.provider, model_name=run_row.model_name)
    if not resume:
        return _Start(run_row, exchanges, policies, price)
    resumed = store.run_resume_state(run=run_row, at=utcnow(),
                                     timeout_s=settings.AGENT_APPROVAL_TIMEOUT_S)  # fmt: skip
    steps = store.run_steps_for_resume(run_id=run_id)
    return _Start(run_row, exchanges, policies, price, resumed, steps)


async def execute_run(
    run_id: int,
    *,
    listeners: Sequence[Listener] = (),
    model: BaseChatModel | None = None,
    tools: Sequence[BaseTool] | None = None,
    resume: bool = False,
    local: LocalRun | None = None,
    owner_channel: str = "",
) -> AgentRun:
    """Run the agent for the stored run ``run_id``; return the finished (or paused) run
    row, or the row as it is when this task may not take the run (another owner has it,
    or a Stop ended it before any owner did: :func:`chat.store.run_take_owner`). With
    ``resume``, go on with a run that waited for decisions on its tool calls and was
    claimed by this process (:meth:`chat.owner.RunOwner.resume_ready`), from its stored
    steps. ``local`` is the run's entry in its owner (how a Stop reaches this
    task); ``owner_channel`` is recorded on the run, and a Stop asked before that is
    honoured at once.

    Every event is recorded (:class:`chat.recorder.RunRecorder`) and then passed to each
    listener. The run always ends with a status: a cancelled task ends as ``cancelled``
    (then re-raises ``CancelledError``), a bug in the loop as ``failed`` with the error
    logged. A run this process stopped whose ``CancelledError`` something below it
    swallowed ends as cancelled at its next event, or is cancelled again
    (:meth:`LocalRun.stop`); on the way out the agent loop is closed, so the tool calls
    still running are cancelled before the end is recorded.
    """
    this_task = asyncio.current_task()
    assert this_task is not None
    if local is None or local.task is not this_task:
        local = LocalRun(run_id, this_task)  # not started by an owner (tests, benchmarks)
    start = await database_sync_to_async(_load_start)(
        run_id=run_id, resume=resume, owner_channel=owner_channel
    )
    if start is None:  # not this task's to run: its row says how it ended
        return await database_sync_to_async(store.run_get)(run_id=run_id)
    run_row, exchanges = start.run, start.exchanges
    if owner_channel and run_row.cancel_requested_at is not None:
        local.stop("a Stop asked before its owner was recorded")
    if start.steps is not None:
        recorder = RunRecorder.resumed(run_row, start.steps)
    else:
        recorder = RunRecorder(run_row)
    finished: AgentRun | None = None
    events: AsyncGenerator[Event, None] | None = None

    async def finish(status: RunStatus, error: str) -> AgentRun:
        event = RunFinished(status=status, output="", iterations=recorder.iteration, error=error)
        update = await recorder.record(event)
        await _notify(listeners, update)
        assert update.run is not None
        return update.run

    async def left_paused() -> None:
        # Cancelled once paused: the run belongs to its rows, not to this task, which had
        # only its tail left (a server stopping cancels it then). Only a Stop that came
        # meanwhile ends it, as a Stop on a waiting run does.
        await through_cancels(asyncio.ensure_future(
            stop_paused_if_asked(run_id, recorder.conversation_id, listeners)
        ))  # fmt: skip

    # The run's MCP sessions: opened and closed in this task (anyio's cancel scopes must
    # be), closed on every way out, after the loop and its tool calls.
    tool_sessions = contextlib.AsyncExitStack()
    try:
        try:
            agent = conversation_agent(run_row.agent_key)
        except ValueError as exc:
            return await finish(RunStatus.FAILED, AGENT_ERROR.format(error=exc))
        try:
            model = model or catalog.chat_model_for(run_row)
            context = catalog.context_window(run_row)
        except ValueError as exc:
            return await finish(RunStatus.FAILED, CONFIG_ERROR.format(error=exc))
        if tools is None:
            try:
                available = await tool_sessions.enter_async_context(
                    agent_tools(agent, catalog.code_tools_for(agent.name))
                )
            except ValueError as exc:  # a tool path the start-up checks would refuse
                return await finish(RunStatus.FAILED, AGENT_ERROR.format(error=exc))
        else:  # given by a caller (tests, benchmarks): as they are
            available = AgentTools(tools=list(tools))
        strategy = catalog.run_strategy(run_row)
        system_prompt = "\n\n".join(filter(None, [agent.system_prompt,
                                                  unavailable_note(available)]))  # fmt: skip
        messages = build_prompt(exchanges, run_row.user_message.content, strategy,
                                system_prompt)  # fmt: skip
        limits = agent_limits(catalog.run_limits(start.price), agent)
        if start.steps is None:  # a resumed run keeps what it was given at its start
            content = _snapshot(agent, system_prompt, available, limits, strategy)
            recorder.write_with_next(partial(
                store.run_snapshot_record, run_id=run_id, content=content,
                digest=snapshot_digest(content),
            ))  # fmt: skip
        resumed = None
        if start.resumed is not None:
            state = start.resumed
            resumed = resume_from(
                state.turns, state.calls, strategy=strategy, decisions=state.decisions,
                max_observation_chars=settings.AGENT_MAX_OBSERVATION_CHARS,
                usage=run_row.usage_so_far, spent_s=state.spent_s,
            )  # fmt: skip
        policy = start.policies.lookup(tool_policies(agent, available))
        events = run(model, available.tools, messages, strategy=strategy, limits=limits,
                     context=context, policy=policy, resume=resumed)  # fmt: skip
        async for event in events:
            # A write that has started is let finish even if the run is cancelled
            # meanwhile (once or more), so the cancel is recorded after it, never under it.
            update = await through_cancels(asyncio.ensure_future(recorder.record(event)))
            if update.run is not None:
                finished = update.run
            await _notify(listeners, update)
            if local.cancelled_at is not None and this_task.cancelling():
                # Stopped, yet no CancelledError came: something below swallowed it. The
                # publisher's group_send does, in one race: redis-py awaits each write in
                # asyncio.wait_for, which on Python 3.11 returns the result when the write
                # finishes in the loop iteration the cancel arrives (CPython gh-86296,
                # fixed in 3.12). Events still coming, the run would otherwise go on.
                logger.warning(SWALLOWED_BELOW, run_id)
                raise asyncio.CancelledError
    except asyncio.CancelledError:
        local.ending = True
        if finished is not None and finished.status == RunStatus.WAITING:
            await left_paused()
            raise

        async def record_cancel() -> AgentRun:
            if events is not None:
                await _close_loop(run_id, events)
            stopped = await database_sync_to_async(store.run_cancel_requested)(run_id=run_id)
            await recorder.flush_text()
            return await finish(RunStatus.CANCELLED, STOPPED if stopped else CANCELLED)

        # Recorded whole even if cancelled again meanwhile (two tabs pressing Stop, a
        # graceful stop): the run must not be left recorded as running.
        await through_cancels(asyncio.ensure_future(record_cancel()))
        raise
    except Exception as exc:
        logger.exception("run %s failed inside the loop", run_id)
        return await finish(RunStatus.FAILED, INTERNAL_ERROR.format(error=type(exc).__name__))
    finally:
        await _close_tool_sessions(run_id, tool_sessions)
    assert finished is not None
    return finished


def _snapshot(
    agent: AgentDefinition, system_prompt: str, tools: AgentTools, limits: RunLimits,
    strategy: Strategy,
) -> dict[str, Any]:  # fmt: skip
    """Return what defined a run: its agent, ``system_prompt`` as ``strategy`` sends it
    with ``tools``, the tools' schemas, the MCP servers, the limits; NUL characters (a
    server's tool description may hold one) replaced as every stored row has them, so
    PostgreSQL stores what SQLite does and the digest is of what is stored."""
    sent = strategy.build_prompt([SystemMessage(system_prompt)], tools.tools)[0]
    return storable(snapshot_content(agent, system_prompt=sent.text, tools=tools,
                                     limits=limits))  # fmt: skip


async def _close_tool_sessions(run_id: int, sessions: contextlib.AsyncExitStack) -> None:
    """Close a run's MCP sessions in its own task, even while it is being cancelled; a
    failure to close is logged, never raised over the run's own outcome."""
    try:
        await sessions.aclose()
    except asyncio.CancelledError:
        logger.warning("run %s: closing its MCP sessions was cancelled", run_id)
        raise
    except Exception:
        logger.exception("run %s: closing its MCP sessions failed", run_id)


async def through_cancels(future: asyncio.Future[T]) -> T:
    """Return ``future``'s result once it is done, however often this task is cancelled
    meanwhile; then, if it was, raise ``CancelledError`` (the cancel is kept, not lost).

    ``asyncio.shield`` alone lets a second cancel cut the await short. Its await is the
    fast path (3-5 µs less per event than ``asyncio.wait``, which is used only once
    cancelled); a failure of ``future`` after a cancel is logged, the cancel raised.
    """
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if future.cancelled():
            raise
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):  # raised below, once it is done
            await asyncio.wait([future])
    if not future.cancelled() and future.exception() is not None:
        logger.error("failed while the run was being cancelled", exc_info=future.exception())
    raise asyncio.CancelledError


async def _close_loop(run_id: int, events: AsyncGenerator[Event, None]) -> None:
    """Close the agent loop's generator of a cancelled run, waiting up to
    :data:`CLOSE_LOOP_TIMEOUT_S` seconds.

    A cancel delivered inside the loop ran its ``finally`` blocks on the way out; one
    delivered while the run wrote a row or notified a listener left the loop suspended at
    a ``yield``, with the tool calls of a batch still running in tasks of their own.
    Closed here, the loop closes the streams it relays, innermost first, cancelling those
    tasks before the run's end is recorded.
    """
    closing = asyncio.ensure_future(events.aclose())
    done, _ = await asyncio.wait([closing], timeout=CLOSE_LOOP_TIMEOUT_S)
    if not done:
        logger.warning("run %s: its agent loop did not close within %g s", run_id,
                       CLOSE_LOOP_TIMEOUT_S)  # fmt: skip
    elif closing.exception() is not None:
        logger.error("run %s: closing its agent loop failed", run_id,
                     exc_info=closing.exception())  # fmt: skip


def end_if_running(run_id: int) -> Update | None:
    """End run ``run_id`` as cancelled if nothing recorded its end (sync, in the ORM's
    thread): "stopped at your request" if someone pressed Stop. Return the update, or
    None when it had ended."""
    run_row = store.run_get(run_id=run_id)
    if run_row.status != RunStatus.RUNNING:
        return None
    stopped = store.run_cancel_requested(run_id=run_id)
    # A run stopped while it waited for approval has its model turns counted already.
    event = RunFinished(status=RunStatus.CANCELLED, output="", iterations=run_row.iterations,
                        error=STOPPED if stopped else CANCELLED)  # fmt: skip
    return RunRecorder(run_row).finish_in_db(event)


async def finish_if_running(run_id: int, listeners: Sequence[Listener]) -> None:
    """End run ``run_id`` as cancelled if nothing recorded its end (:func:`end_if_running`);
    tell the listeners."""
    update = await database_sync_to_async(end_if_running)(run_id=run_id)
    if update is not None:
        await _notify(listeners, update)


async def stop_paused_if_asked(
    run_id: int, conversation_id: int, listeners: Sequence[Listener]
) -> None:
    """End run ``run_id``, paused as its task was cancelled, if someone pressed Stop
    (as a Stop on a waiting run does: :func:`chat.owner.request_stop`)."""
    if not await database_sync_to_async(store.run_cancel_requested)(run_id=run_id):
        return
    waiting = await database_sync_to_async(store.run_stop_waiting)(
        conversation_id=conversation_id, at=utcnow()
    )
    if waiting is not None:
        await finish_if_running(waiting.pk, listeners)
