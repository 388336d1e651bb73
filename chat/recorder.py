"""Turn runtime events into rows and the page's fragments, in one place.

:meth:`RunRecorder.record` is the one dispatch over :mod:`agents.events` on the server:
for each kind it writes what the event means through :mod:`chat.store` and renders the
fragment every open page needs (:mod:`chat.fragments`) from the rows just written, both in
ONE call of ``database_sync_to_async``. No ORM object is read in async code, so a relation
a query forgot to load costs a query in that thread, never a ``SynchronousOnlyOperation``
at run time. It returns an :class:`Update` for the listeners: the live page
(:class:`chat.live.GroupPublisher`) and the ``ask`` command's terminal printer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from agents.events import (
    ApprovalRequested,
    Event,
    ModelTurnFinished,
    ModelTurnStarted,
    ReasoningDelta,
    RunFinished,
    RunPaused,
    RunStarted,
    StepStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from chat import fragments, store
from chat.models import AgentRun, AgentStep, RunStatus, StepKind

# How often (seconds) a streaming model turn's text (and reasoning) is re-sent whole, so a
# page that is behind (opened mid-stream) catches up within a second.
TEXT_SYNC_INTERVAL_S = 0.75
# How often (seconds) that whole text is also saved, from the first re-send of a turn on:
# a page loaded mid-stream is drawn from the row, up to this much behind, and the next
# re-send brings it up to date; a process that dies mid-stream loses at most this much.
# Not at every re-send: those follow the clock, so a slowed server would save more often.
TEXT_SAVE_INTERVAL_S = 3.0


@dataclass(frozen=True)
class StreamedText:
    """Model text the page appends to an element of model turn ``step_id``.

    ``target`` names the element: ``text`` (the reply) or ``reasoning`` (its thinking,
    folded). A delta starts at ``offset`` (UTF-16 code units, as the browser counts
    text), so a page that is behind can tell; with ``whole`` it is the element's text so
    far (saved every :data:`TEXT_SYNC_INTERVAL_S`), which replaces what the page has.
    """

    step_id: int
    text: str
    offset: int | None = None
    whole: bool = False
    target: str = "text"


@dataclass(frozen=True)
class Update:
    """What recording one event gave: ``html``, the fragment for every page of the
    conversation ("" when they need none); ``streamed``, set for model text, which a
    publisher may coalesce with the next deltas (``html`` then holds it alone); ``run``,
    the run row once the run has ended or paused (its loop returned)."""

    event: Event
    run_id: int
    conversation_id: int
    html: str = ""
    streamed: StreamedText | None = None
    run: AgentRun | None = None


def utf16_length(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units (JavaScript's ``length``)."""
    return len(text.encode("utf-16-le")) // 2


@dataclass(eq=False)
class Turn:
    """What the recorder holds of one model turn while its run goes.

    ``step`` is the turn's row, ``calls`` its tool calls' rows by ``tool_call_id``;
    ``finished``: its outcome is saved. ``text`` and ``reasoning`` are the pieces streamed
    so far, ``text_units`` and ``reasoning_units`` their length in UTF-16 code units (the
    next delta's offset). ``synced_at`` and ``saved_at`` are the ``time.monotonic()`` of
    the last whole re-send and of the last save (None: none yet). ``events_seen``,
    ``events_at_once`` and ``events_total`` count the tool-call events of the turn's batch
    (:meth:`RunRecorder._redraws_timeline`).
    """

    step: AgentStep
    finished: bool = False
    text: list[str] = field(default_factory=list)
    text_units: int = 0
    reasoning: list[str] = field(default_factory=list)
    reasoning_units: int = 0
    synced_at: float = 0.0
    saved_at: float | None = None
    calls: dict[str, AgentStep] = field(default_factory=dict)
    events_seen: int = 0
    events_at_once: int = 0
    events_total: int = 0

    def so_far(self) -> tuple[str, str]:
        """Return the turn's streamed ``(text, reasoning)`` so far."""
        return "".join(self.text), "".join(self.reasoning)


class RunRecorder:
    """Record the events of one run as rows and fragments; see the module docstring.

    It holds the run row, every step row it wrote (in ordinal order: it is their only
    writer while the run goes, so it inserts and updates them without reading them back
    and draws the timeline from them) and a :class:`Turn` per model turn, by iteration.
    ``iteration`` is the newest model turn begun (0 before the first), so whoever ends
    the run from outside the loop (a cancel, a crash of the loop) can record its turns.
    """

    def __init__(self, run: AgentRun) -> None:
        self.run_id = run.pk
        self.conversation_id = run.conversation_id
        self.iteration = 0
        self._run = run
        self._steps: list[AgentStep] = []
        self.turns: dict[int, Turn] = {}
        # A resumed run's pages still say it waits: its first update says it runs again.
        self._status_due = False
        self._pending: list[Callable[[], object]] = []

    @classmethod
    def resumed(cls, run: AgentRun, steps: list[AgentStep]) -> RunRecorder:
        """Return the recorder of a run going on after a pause, holding its ``steps``
        (in order) as if it had written them: its held calls' rows are started again
        where they are, later steps take the next ordinals."""
        recorder = cls(run)
        recorder._status_due = True
        for step in steps:
            step.run = run
            recorder._steps.append(step)
            if step.kind == StepKind.MODEL_TURN:
                recorder.turns[step.iteration] = Turn(step, finished=True)
                recorder.iteration = max(recorder.iteration, step.iteration)
            else:  # after its turn's row: the rows are in ordinal order
                recorder.turns[step.iteration].calls[step.tool_call_id] = step
        return recorder

    async def record(self, event: Event) -> Update:
        """Write what ``event`` means to the database and render it; return the update.

        Raises ``TypeError`` for an object that is not a runtime event, or a kind this
        recorder does not know yet (see "Adding an event kind" in docs/architecture.md).
        """
        match event:
            case RunStarted():
                return self._update(event)
            case ModelTurnStarted():
                return await self._in_db(self._turn_started, event)
            case TextDelta():
                return await self._text_delta(event)
            case ReasoningDelta():
                return await self._reasoning_delta(event)
            case ModelTurnFinished():
                return await self._in_db(self._turn_finished, event)
            case ToolCallStarted():
                return await self._in_db(self._call_started, event)
            case ToolCallFinished():
                return await self._in_db(self._call_finished, event)
            case ApprovalRequested():
                return await self._in_db(self._approval_requested, event)
            case RunPaused():
                return await self._in_db(self._run_paused, event)
            case RunFinished():
                return await self._in_db(self._run_finished, event)
            case _:
                raise TypeError(f"not a runtime event the recorder knows: {event!r}")

    async def flush_text(self) -> None:
        """Save the whole streamed text and reasoning of every model turn still open
        (before a cancel).

        Between saves the stored text lags up to :data:`TEXT_SAVE_INTERVAL_S` behind what
        the page showed; a run that stops mid-stream keeps all of it.
        """
        for turn in self.turns.values():
            if turn.finished:
                continue
            text, reasoning = turn.so_far()
            if text or reasoning:
                await database_sync_to_async(store.step_save_text)(
                    step_id=turn.step.pk, text=text, reasoning=reasoning
                )

    def write_with_next(self, write: Callable[[], object]) -> None:
        """Run ``write`` (sync, an ORM write of the run's) in the ORM's thread just before
        the next event's rows, in the same call: one wait in that thread's queue, not
        two. Every run records at least its end there, so the write is never lost."""
        self._pending.append(write)

    def _update(self, event: Event, **kwargs: Any) -> Update:
        return Update(event=event, run_id=self.run_id, conversation_id=self.conversation_id,
                      **kwargs)  # fmt: skip

    async def _in_db(self, write: Callable[[Any], Update], event: Event) -> Update:
        """Run ``write(event)`` (rows and fragment) in the ORM's thread, adding the run's
        timeline redrawn (:func:`_with_timeline`) when :meth:`_redraws_timeline` says."""

        def write_and_draw(event: Event) -> Update:
            while self._pending:
                self._pending.pop(0)()
            update = write(event)
            update = self._with_status(update)
            return self._with_timeline(update) if self._redraws_timeline(event) else update

        return await database_sync_to_async(write_and_draw)(event)

    def _with_status(self, update: Update) -> Update:
        """Return ``update`` with the run's status line first, if this is the first update
        of a run resumed after its decisions (every page still says it waits; the run went
        back to ``running`` when it was claimed). A pause or an end sends its own."""
        if not self._status_due:
            return update
        self._status_due = False
        if update.run is not None or update.streamed is not None:
            return update
        return replace(update, html=fragments.run_resumed(self._run) + update.html)

    def _redraws_timeline(self, event: Event) -> bool:
        """Return whether recording ``event`` sends the run's timeline again.

        The timeline shows every step's start and end, but a redraw that another follows
        at once (without waiting for a tool or the model) is never seen: it is skipped.
        A model turn's end is followed at once by its tool calls' starts or the run's end;
        a turn's calls start one after the other (a call that cannot run, a format
        error, also ends at once), and the last call to end is followed at once by the
        next turn's start (or the run's end). So it is redrawn at each turn's start, once
        its calls have all started, at each call's end but the last, and at the run's end
        (a run that did not succeed is sent whole, timeline included): its renders are
        much of a run's CPU. Should the counts ever disagree with the events, the next
        redraw puts the timeline right.
        """
        match event:
            case ModelTurnFinished():
                turn = self.turns[event.iteration]
                broken = len(event.invalid_tool_calls)
                turn.events_seen = 0
                turn.events_at_once = 2 * broken + len(event.tool_calls)
                turn.events_total = 2 * broken + 2 * len(event.tool_calls)
                return False
            case ToolCallStarted() | ToolCallFinished():
                turn = self.turns[event.iteration]
                turn.events_seen += 1
                seen, at_once, total = turn.events_seen, turn.events_at_once, turn.events_total
                if seen > total:
                    return True
                return seen == at_once or (at_once < seen < total)
            case _:
                return True

    def _with_timeline(self, update: Update) -> Update:
        """Return ``update`` with the run's timeline redrawn from the rows just written.

        A step began or ended, or the run ended: a step's bar appears, stops growing or
        takes its measured start. Not per streamed token. A run that did not succeed is
        sent whole (:func:`chat.fragments.run_ended`), timeline included. Drawn from the
        rows this recorder holds (the run's end: from the run :func:`chat.store.run_finish`
        loaded with its steps), not read again, so a redraw costs no query.
        """
        if update.run is not None and update.run.status != RunStatus.WAITING:
            if update.run.status != RunStatus.SUCCEEDED:
                return update
            run, steps = update.run, list(update.run.steps.all())
        else:
            run, steps = self._run, list(self._steps)
        html = fragments.timeline_replaced(run, steps)
        return replace(update, html=update.html + html)

    def _step_start(self, **fields: Any) -> AgentStep:
        """Insert the run's next step (its ordinal counted here, after any the run had
        before a pause) and keep its row."""
        step = store.step_start(
            run_id=self.run_id, run=self._run, ordinal=len(self._steps) + 1, **fields
        )
        self._steps.append(step)
        return step

    def _step_finish(self, step: AgentStep, **fields: Any) -> AgentStep:
        """Update a kept step row with its outcome (one UPDATE, no read)."""
        return store.step_finish(step_id=step.pk, step=step, **fields)

    # Each sync method below runs in the ORM's thread: write, then render from the rows.

    def _turn_started(self, event: ModelTurnStarted) -> Update:
        step = self._step_start(kind=StepKind.MODEL_TURN, iteration=event.iteration,
                                started_at=event.at)  # fmt: skip
        self.iteration = event.iteration
        self.turns[event.iteration] = Turn(step, synced_at=time.monotonic())
        return self._update(event, html=fragments.step_appended(step))

    async def _text_delta(self, event: TextDelta) -> Update:
        turn = self.turns.get(event.iteration)
        if turn is None:
            return self._update(event)
        turn.text.append(event.text)
        # Where this delta starts, in UTF-16 code units as the browser counts text, so a
        # page that is behind (opened mid-stream) can tell and wait for a snapshot.
        offset = turn.text_units
        turn.text_units += utf16_length(event.text)
        step_id = turn.step.pk
        now = time.monotonic()
        if now - turn.synced_at < TEXT_SYNC_INTERVAL_S:
            delta = StreamedText(step_id, event.text, offset)
            return self._update(event, html=fragments.text_delta(step_id, event.text, offset),
                                streamed=delta)  # fmt: skip
        turn.synced_at = now
        text, reasoning = turn.so_far()
        await self._save_text(turn, text, reasoning, now=now)
        snapshot = StreamedText(step_id, text, whole=True)
        return self._update(event, html=fragments.text_replaced(step_id, text), streamed=snapshot)

    async def _save_text(
        self, turn: Turn, text: str, reasoning: str, *, now: float, force: bool = False
    ) -> None:
        """Save a streaming turn's text and reasoning so far at its first whole re-send,
        then every :data:`TEXT_SAVE_INTERVAL_S` (``force``: now)."""
        if force or turn.saved_at is None or now - turn.saved_at >= TEXT_SAVE_INTERVAL_S:
            turn.saved_at = now
            await database_sync_to_async(store.step_save_text)(
                step_id=turn.step.pk, text=text, reasoning=reasoning
            )

    async def _reasoning_delta(self, event: ReasoningDelta) -> Update:
        """Keep reasoning as text is kept: sent as deltas, saved on the same timer.

        A ``moved`` delta (a lone ``</think>``) moves the turn's text so far into its
        reasoning: both are saved and sent whole at once.
        """
        turn = self.turns.get(event.iteration)
        if turn is None:
            return self._update(event)
        turn.reasoning.append(event.text)
        offset = turn.reasoning_units
        turn.reasoning_units += utf16_length(event.text)
        if event.moved:
            turn.text, turn.text_units = [], 0
        step_id = turn.step.pk
        now = time.monotonic()
        if not event.moved and now - turn.synced_at < TEXT_SYNC_INTERVAL_S:
            delta = StreamedText(step_id, event.text, offset, target="reasoning")
            html = fragments.text_delta(step_id, event.text, offset, target="reasoning")
            return self._update(event, html=html, streamed=delta)
        turn.synced_at = now
        text, reasoning = turn.so_far()
        await self._save_text(turn, text, reasoning, now=now, force=event.moved)
        html = fragments.reasoning_replaced(step_id, reasoning)
        if event.moved:
            # Not a snapshot a publisher may fold: it replaces the reply's text as well.
            return self._update(event, html=fragments.text_replaced(step_id, text) + html)
        snapshot = StreamedText(step_id, reasoning, whole=True, target="reasoning")
        return self._update(event, html=html, streamed=snapshot)

    def _turn_finished(self, event: ModelTurnFinished) -> Update:
        """Save the turn's outcome; the page's turn is replaced whole by what a reload shows.

        A finished reply's text is the event's, not what streamed: a strategy may have read
        it anew (tool-call markup taken out of a native reply's text, leaving "" when the
        reply was only markup). Only a model call that failed falls back to what streamed.
        """
        turn = self.turns[event.iteration]
        turn.finished = True
        usage = event.usage or {}
        streamed, streamed_reasoning = turn.so_far()
        step = self._step_finish(
            turn.step,
            started_at=event.started_at,
            finished_at=event.at,
            first_token_ms=event.first_token_ms,
            status=StepStatus.ERROR if event.error else StepStatus.SUCCESS,
            text=(event.text or streamed) if event.error else event.text,
            reasoning=event.reasoning or streamed_reasoning,
            result=event.final_answer,
            error=event.error,
            error_type=event.error_type,
            raw=event.raw,
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            total_tokens=usage.get("total_tokens"),
        )
        return self._update(event, html=fragments.step_replaced(step))

    def _call_started(self, event: ToolCallStarted) -> Update:
        calls = self.turns[event.iteration].calls
        held = calls.get(event.tool_call_id)
        if held is not None:  # a held call, decided: it starts where its card is
            step = store.step_resume(step=held, started_at=event.at,
                                     arguments=event.args)  # fmt: skip
            return self._update(event, html=fragments.step_replaced(step))
        step = self._step_start(
            kind=StepKind.TOOL_CALL, iteration=event.iteration, started_at=event.at,
            tool_name=event.name, tool_call_id=event.tool_call_id, arguments=event.args,
            text=event.log,
        )  # fmt: skip
        calls[event.tool_call_id] = step
        return self._update(event, html=fragments.step_appended(step))

    def _call_finished(self, event: ToolCallFinished) -> Update:
        step = self._step_finish(
            self.turns[event.iteration].calls[event.tool_call_id],
            started_at=event.started_at,
            finished_at=event.at,
            status=event.status,
            result=event.result,
            observation=event.observation,
            result_blocks=list(event.blocks) or None,
            artifact=event.artifact,
            error=event.error,
            error_type=event.error_type,
        )
        return self._update(event, html=fragments.step_replaced(step))

    def _approval_requested(self, event: ApprovalRequested) -> Update:
        """Insert the held call's step (``pending``) and the approval it waits for."""
        step = self._step_start(
            kind=StepKind.TOOL_CALL, iteration=event.iteration, started_at=event.at,
            tool_name=event.name, tool_call_id=event.tool_call_id, arguments=event.args,
            text=event.log, status=StepStatus.PENDING,
        )  # fmt: skip
        self.turns[event.iteration].calls[event.tool_call_id] = step
        store.approval_request(run=self._run, step=step, arguments=event.args, at=event.at,
                               timeout_s=settings.AGENT_APPROVAL_TIMEOUT_S)  # fmt: skip
        return self._update(event, html=fragments.step_appended(step))

    def _run_paused(self, event: RunPaused) -> Update:
        """Mark the run waiting; every page shows it so (its loop has returned)."""
        run = store.run_pause(run_id=self.run_id, iterations=event.iterations,
                              usage=event.usage, at=event.at)  # fmt: skip
        return self._update(event, html=fragments.run_status(run), run=run)

    def finish_in_db(self, event: RunFinished) -> Update:
        """Record the run's end as :meth:`record` does, from sync code in the ORM's thread
        (a run no task runs: one stopped while it waited for decisions)."""
        update = self._run_finished(event)
        return self._with_timeline(update) if self._redraws_timeline(event) else update

    def _run_finished(self, event: RunFinished) -> Update:
        run = store.run_finish(
            run_id=self.run_id, status=event.status, output=event.output, error=event.error,
            iterations=event.iterations, usage=event.usage, finished_at=event.at,
        )  # fmt: skip
        return self._update(event, html=fragments.run_ended(run), run=run)
