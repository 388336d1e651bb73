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
from dataclasses import dataclass, replace
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
# re-send brings it up to date. Saving at every re-send was the largest count of ORM calls
# a run made under load: the re-sends follow the clock, so a run that a loaded server
# slowed down made more of them, slowing it further (38 saves a run at 100 conversations
# under the profiler; docs/benchmarks.md, "Where a run's CPU goes"). A process that dies
# mid-stream loses at most this much of the turn's text.
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


class RunRecorder:
    """Record the events of one run as rows and fragments; see the module docstring.

    ``iteration`` is the newest model turn begun (0 before the first), so whoever ends
    the run from outside the loop (a cancel, a crash of the loop) can record its turns.
    """

    def __init__(self, run: AgentRun) -> None:
        self.run_id = run.pk
        self.conversation_id = run.conversation_id
        self.iteration = 0
        # The run row and every step row this recorder wrote, in ordinal order: the
        # recorder is their only writer while the run goes, so it inserts and updates
        # them without reading them back, and draws the timeline from them (no query).
        self._run = run
        self._steps: dict[int, AgentStep] = {}
        # The tool-call events the last model turn announced, as (events seen, events
        # that follow each other at once, all of them); see :meth:`_redraws_timeline`.
        self._batch: list[int] = [0, 0, 0]
        self._turn_step_ids: dict[int, int] = {}
        self._turn_text: dict[int, list[str]] = {}
        self._last_sync: dict[int, float] = {}
        self._last_save: dict[int, float] = {}
        self._utf16_length: dict[int, int] = {}
        self._turn_reasoning: dict[int, list[str]] = {}
        self._reasoning_utf16_length: dict[int, int] = {}
        self._call_step_ids: dict[tuple[int, str], int] = {}
        self._finished_turns: set[int] = set()

    @classmethod
    def resumed(cls, run: AgentRun, steps: list[AgentStep]) -> RunRecorder:
        """Return the recorder of a run going on after a pause, holding its ``steps``
        (in order) as if it had written them: its held calls' rows are started again
        where they are, later steps take the next ordinals."""
        recorder = cls(run)
        for step in steps:
            step.run = run
            recorder._steps[step.pk] = step
            if step.kind == StepKind.MODEL_TURN:
                recorder._turn_step_ids[step.iteration] = step.pk
                recorder._finished_turns.add(step.iteration)
                recorder.iteration = max(recorder.iteration, step.iteration)
            else:
                recorder._call_step_ids[(step.iteration, step.tool_call_id)] = step.pk
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

        Between snapshots the stored text lags up to :data:`TEXT_SYNC_INTERVAL_S` behind
        what the page showed; a run that stops mid-stream keeps all of it.
        """
        for iteration, step_id in self._turn_step_ids.items():
            if iteration in self._finished_turns:
                continue
            text, reasoning = self._so_far(iteration)
            if text or reasoning:
                await database_sync_to_async(store.step_save_text)(
                    step_id=step_id, text=text, reasoning=reasoning
                )

    def _so_far(self, iteration: int) -> tuple[str, str]:
        """Return a turn's streamed ``(text, reasoning)`` so far."""
        return (
            "".join(self._turn_text.get(iteration, [])),
            "".join(self._turn_reasoning.get(iteration, [])),
        )

    def _update(self, event: Event, **kwargs: Any) -> Update:
        return Update(event=event, run_id=self.run_id, conversation_id=self.conversation_id,
                      **kwargs)  # fmt: skip

    async def _in_db(self, write: Callable[[Any], Update], event: Event) -> Update:
        """Run ``write(event)`` (rows and fragment) in the ORM's thread, adding the run's
        timeline redrawn (:func:`_with_timeline`) when :meth:`_redraws_timeline` says."""

        def write_and_draw(event: Event) -> Update:
            update = write(event)
            return self._with_timeline(update) if self._redraws_timeline(event) else update

        return await database_sync_to_async(write_and_draw)(event)

    def _redraws_timeline(self, event: Event) -> bool:
        """Return whether recording ``event`` sends the run's timeline again.

        The timeline shows every step's start and end, but a redraw that another follows
        at once (without waiting for a tool or the model) is never seen: it is skipped.
        A model turn's end is followed at once by its tool calls' starts or the run's end;
        a turn's calls start one after the other (a call that cannot run, a format
        error, also ends at once), and the last call to end is followed at once by the
        next turn's start (or the run's end). So a run of one turn calling three tools
        and an answer redraws it 6 times, not 11: at each turn's start, once its calls
        have all started, at each call's end but the last, and at the run's end (a run
        that did not succeed is sent whole, timeline included). Half the timeline's
        renders, the largest share of a run's CPU after the rows themselves
        (bench/load.py --profile). Should the counts ever disagree with the events, the
        next redraw puts the timeline right.
        """
        match event:
            case ModelTurnFinished():
                broken = len(event.invalid_tool_calls)
                at_once = 2 * broken + len(event.tool_calls)
                self._batch = [0, at_once, 2 * broken + 2 * len(event.tool_calls)]
                return False
            case ToolCallStarted() | ToolCallFinished():
                self._batch[0] += 1
                seen, at_once, total = self._batch
                if seen > total:
                    return True
                return seen == at_once or (at_once < seen < total)
            case _:
                return True

    def _with_timeline(self, update: Update) -> Update:
        """Return ``update`` with the run's timeline redrawn from the rows just written.

        A step began or ended, or the run ended: a step's bar appears, stops growing or
        takes its measured start. Not per streamed token. A run that did not succeed is
        sent whole (:func:`chat.fragments.run_ended`), timeline included.

        Drawn from the rows this recorder holds (the run's end: from the run
        :func:`chat.store.run_finish` loaded with its steps), not read again: the redraw
        after every step event read the run and all its steps, two queries growing with
        the run (bench/load.py --profile).
        """
        if update.run is not None and update.run.status != RunStatus.WAITING:
            if update.run.status != RunStatus.SUCCEEDED:
                return update
            run, steps = update.run, list(update.run.steps.all())
        else:
            run, steps = self._run, list(self._steps.values())
        html = fragments.timeline_replaced(run, steps)
        return replace(update, html=update.html + html)

    def _step_start(self, **fields: Any) -> AgentStep:
        """Insert the run's next step (its ordinal counted here, after any the run had
        before a pause) and keep its row."""
        step = store.step_start(
            run_id=self.run_id, run=self._run, ordinal=len(self._steps) + 1, **fields
        )
        self._steps[step.pk] = step
        return step

    def _step_finish(self, step_id: int, **fields: Any) -> AgentStep:
        """Update a kept step row with its outcome (one UPDATE, no read)."""
        return store.step_finish(step_id=step_id, step=self._steps.get(step_id), **fields)

    # Each method below runs in the ORM's thread: write, then render from the rows.

    def _turn_started(self, event: ModelTurnStarted) -> Update:
        step = self._step_start(kind=StepKind.MODEL_TURN, iteration=event.iteration,
                                started_at=event.at)  # fmt: skip
        self.iteration = event.iteration
        self._turn_step_ids[event.iteration] = step.pk
        self._turn_text[event.iteration] = []
        self._last_sync[event.iteration] = time.monotonic()
        return self._update(event, html=fragments.step_appended(step))

    async def _text_delta(self, event: TextDelta) -> Update:
        parts = self._turn_text.setdefault(event.iteration, [])
        parts.append(event.text)
        # Where this delta starts, in UTF-16 code units as the browser counts text, so a
        # page that is behind (opened mid-stream) can tell and wait for a snapshot.
        offset = self._utf16_length.get(event.iteration, 0)
        self._utf16_length[event.iteration] = offset + utf16_length(event.text)
        step_id = self._turn_step_ids.get(event.iteration)
        if step_id is None:
            return self._update(event)
        now = time.monotonic()
        if now - self._last_sync.get(event.iteration, 0) < TEXT_SYNC_INTERVAL_S:
            delta = StreamedText(step_id, event.text, offset)
            return self._update(event, html=fragments.text_delta(step_id, event.text, offset),
                                streamed=delta)  # fmt: skip
        self._last_sync[event.iteration] = now
        text, reasoning = self._so_far(event.iteration)
        await self._save_text(event.iteration, step_id, text, reasoning, now=now)
        snapshot = StreamedText(step_id, text, whole=True)
        return self._update(event, html=fragments.text_replaced(step_id, text), streamed=snapshot)

    async def _save_text(
        self, iteration: int, step_id: int, text: str, reasoning: str, *, now: float,
        force: bool = False,
    ) -> None:  # fmt: skip
        """Save a streaming turn's text and reasoning so far at its first whole re-send,
        then every :data:`TEXT_SAVE_INTERVAL_S` (``force``: now)."""
        last = self._last_save.get(iteration)
        if force or last is None or now - last >= TEXT_SAVE_INTERVAL_S:
            self._last_save[iteration] = now
            await database_sync_to_async(store.step_save_text)(
                step_id=step_id, text=text, reasoning=reasoning
            )

    async def _reasoning_delta(self, event: ReasoningDelta) -> Update:
        """Keep reasoning as text is kept: sent as deltas, saved on the same timer.

        A ``moved`` delta (a lone ``</think>``) moves the turn's text so far into its
        reasoning: both are saved and sent whole at once.
        """
        parts = self._turn_reasoning.setdefault(event.iteration, [])
        parts.append(event.text)
        step_id = self._turn_step_ids.get(event.iteration)
        offset = self._reasoning_utf16_length.get(event.iteration, 0)
        self._reasoning_utf16_length[event.iteration] = offset + utf16_length(event.text)
        if event.moved:
            self._turn_text[event.iteration] = []
            self._utf16_length[event.iteration] = 0
        if step_id is None:
            return self._update(event)
        now = time.monotonic()
        if not event.moved and now - self._last_sync.get(event.iteration, 0) < TEXT_SYNC_INTERVAL_S:
            delta = StreamedText(step_id, event.text, offset, target="reasoning")
            html = fragments.text_delta(step_id, event.text, offset, target="reasoning")
            return self._update(event, html=html, streamed=delta)
        self._last_sync[event.iteration] = now
        text, reasoning = self._so_far(event.iteration)
        await self._save_text(event.iteration, step_id, text, reasoning, now=now,
                              force=event.moved)  # fmt: skip
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
        self._finished_turns.add(event.iteration)
        usage = event.usage or {}
        streamed = "".join(self._turn_text.get(event.iteration, []))
        step = self._step_finish(
            self._turn_step_ids[event.iteration],
            started_at=event.started_at,
            finished_at=event.at,
            first_token_ms=event.first_token_ms,
            status=StepStatus.ERROR if event.error else StepStatus.SUCCESS,
            text=(event.text or streamed) if event.error else event.text,
            reasoning=event.reasoning or "".join(self._turn_reasoning.get(event.iteration, [])),
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
        held = self._call_step_ids.get((event.iteration, event.tool_call_id))
        if held is not None:  # a held call, decided: it starts where its card is
            step = store.step_resume(step=self._steps[held], started_at=event.at,
                                     arguments=event.args)  # fmt: skip
            return self._update(event, html=fragments.step_replaced(step))
        step = self._step_start(
            kind=StepKind.TOOL_CALL, iteration=event.iteration, started_at=event.at,
            tool_name=event.name, tool_call_id=event.tool_call_id, arguments=event.args,
            text=event.log,
        )  # fmt: skip
        self._call_step_ids[(event.iteration, event.tool_call_id)] = step.pk
        return self._update(event, html=fragments.step_appended(step))

    def _call_finished(self, event: ToolCallFinished) -> Update:
        step = self._step_finish(
            self._call_step_ids[(event.iteration, event.tool_call_id)],
            started_at=event.started_at,
            finished_at=event.at,
            status=event.status,
            result=event.result,
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
        self._call_step_ids[(event.iteration, event.tool_call_id)] = step.pk
        store.approval_request(run=self._run, step=step, arguments=event.args, at=event.at,
                               timeout_s=settings.AGENT_APPROVAL_TIMEOUT_S)  # fmt: skip
        return self._update(event, html=fragments.step_appended(step))

    def _run_paused(self, event: RunPaused) -> Update:
        """Mark the run waiting; every page shows it so (its loop has returned)."""
        run = store.run_pause(run_id=self.run_id, iterations=event.iterations,
                              usage=event.usage, at=event.at)  # fmt: skip
        return self._update(event, html=fragments.run_status(run), run=run)

    def _run_finished(self, event: RunFinished) -> Update:
        run = store.run_finish(
            run_id=self.run_id, status=event.status, output=event.output, error=event.error,
            iterations=event.iterations, usage=event.usage, finished_at=event.at,
        )  # fmt: skip
        return self._update(event, html=fragments.run_ended(run), run=run)
