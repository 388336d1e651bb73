"""Turn runtime events into AgentRun / AgentStep rows, in one place.

The recorder writes through :mod:`chat.store` (inside ``database_sync_to_async``) and
returns an :class:`Update` naming the rows an event touched, so listeners (the live page,
the ``ask`` command) render from the same rows a page reload reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from channels.db import database_sync_to_async

from agents.events import (
    Event,
    ModelTurnFinished,
    ModelTurnStarted,
    RunFinished,
    RunStarted,
    StepStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from chat import store
from chat.models import AgentRun, AgentStep, StepKind

# How often (seconds) a streaming model turn's text is saved and re-sent whole.
TEXT_SYNC_INTERVAL_S = 0.75


@dataclass(frozen=True)
class Update:
    """What one event changed: ``step`` was ``created`` or updated; ``run`` when it ended.

    For a :class:`TextDelta`, ``step_id`` names the model turn it belongs to; nothing is
    written except every :data:`TEXT_SYNC_INTERVAL_S`, when the turn's text so far is
    saved and given as ``text_snapshot`` (so a page opened mid-stream catches up).
    """

    event: Event
    run_id: int
    conversation_id: int
    step_id: int | None = None
    step: AgentStep | None = None
    created: bool = False
    run: AgentRun | None = None
    text_snapshot: str | None = None
    text_offset: int | None = None


def utf16_length(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units (JavaScript's ``length``)."""
    return len(text.encode("utf-16-le")) // 2


class RunRecorder:
    """Record the events of one run (``run_id``) as rows; see the module docstring."""

    def __init__(self, run: AgentRun) -> None:
        self.run_id = run.pk
        self.conversation_id = run.conversation_id
        self._turn_step_ids: dict[int, int] = {}
        self._turn_text: dict[int, list[str]] = {}
        self._last_sync: dict[int, float] = {}
        self._utf16_length: dict[int, int] = {}
        self._call_step_ids: dict[tuple[int, str], int] = {}
        self._finished_turns: set[int] = set()

    def _update(self, event: Event, **kwargs: object) -> Update:
        return Update(event=event, run_id=self.run_id, conversation_id=self.conversation_id,
                      **kwargs)  # type: ignore[arg-type]  # fmt: skip

    async def flush_text(self) -> None:
        """Save the whole streamed text of every model turn still open (before a cancel).

        Between snapshots the stored text lags up to :data:`TEXT_SYNC_INTERVAL_S` behind
        what the page showed; a run that stops mid-stream keeps all of it.
        """
        for iteration, step_id in self._turn_step_ids.items():
            if iteration in self._finished_turns:
                continue
            text = "".join(self._turn_text.get(iteration, []))
            if text:
                await database_sync_to_async(store.step_save_text)(step_id=step_id, text=text)

    async def record(self, event: Event) -> Update:
        """Write what ``event`` means to the database; return what changed."""
        if isinstance(event, RunStarted):
            return self._update(event)
        if isinstance(event, ModelTurnStarted):
            step = await database_sync_to_async(store.step_start)(
                run_id=self.run_id, kind=StepKind.MODEL_TURN, iteration=event.iteration,
                started_at=event.at,
            )  # fmt: skip
            self._turn_step_ids[event.iteration] = step.pk
            self._turn_text[event.iteration] = []
            self._last_sync[event.iteration] = time.monotonic()
            return self._update(event, step_id=step.pk, step=step, created=True)
        if isinstance(event, TextDelta):
            parts = self._turn_text.setdefault(event.iteration, [])
            parts.append(event.text)
            # Where this delta starts, in UTF-16 code units as the browser counts text, so
            # a page that is behind (opened mid-stream) can tell and wait for a snapshot.
            offset = self._utf16_length.get(event.iteration, 0)
            self._utf16_length[event.iteration] = offset + utf16_length(event.text)
            step_id = self._turn_step_ids.get(event.iteration)
            now = time.monotonic()
            if step_id is None or now - self._last_sync.get(event.iteration, 0) < (
                TEXT_SYNC_INTERVAL_S
            ):
                return self._update(event, step_id=step_id, text_offset=offset)
            self._last_sync[event.iteration] = now
            text = "".join(parts)
            await database_sync_to_async(store.step_save_text)(step_id=step_id, text=text)
            return self._update(event, step_id=step_id, text_snapshot=text)
        if isinstance(event, ModelTurnFinished):
            self._finished_turns.add(event.iteration)
            usage = event.usage or {}
            step = await database_sync_to_async(store.step_finish)(
                step_id=self._turn_step_ids[event.iteration],
                finished_at=event.at,
                status=StepStatus.ERROR if event.error else StepStatus.OK,
                text=event.text or "".join(self._turn_text.get(event.iteration, [])),
                result=event.final_answer,
                error=event.error,
                raw=event.raw,
                duration_ms=event.duration_ms,
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
                total_tokens=usage.get("total_tokens"),
            )
            return self._update(event, step_id=step.pk, step=step)
        if isinstance(event, ToolCallStarted):
            step = await database_sync_to_async(store.step_start)(
                run_id=self.run_id, kind=StepKind.TOOL_CALL, iteration=event.iteration,
                started_at=event.at, tool_name=event.name, tool_call_id=event.tool_call_id,
                arguments=event.args, text=event.log,
            )  # fmt: skip
            self._call_step_ids[(event.iteration, event.tool_call_id)] = step.pk
            return self._update(event, step_id=step.pk, step=step, created=True)
        if isinstance(event, ToolCallFinished):
            step = await database_sync_to_async(store.step_finish)(
                step_id=self._call_step_ids[(event.iteration, event.tool_call_id)],
                finished_at=event.at,
                status=event.status,
                result=event.result,
                error=event.error,
                duration_ms=event.duration_ms,
            )
            return self._update(event, step_id=step.pk, step=step)
        if isinstance(event, RunFinished):
            run = await database_sync_to_async(store.run_finish)(
                run_id=self.run_id, status=event.status, output=event.output,
                error=event.error, iterations=event.iterations, usage=event.usage,
                finished_at=event.at,
            )  # fmt: skip
            return self._update(event, run=run)
        raise TypeError(f"not a runtime event: {event!r}")
