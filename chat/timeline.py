"""A run's timeline (waterfall): one row per step on the run's own time axis.

:func:`timeline_of` turns a run and its steps into :class:`Row` offsets in milliseconds
from the run's start, and the percentages ``chat/_timeline.html`` draws the bars with.
Pure: it reads attributes (``started_at``, ``finished_at``, ``status``...) of the objects
it is given and never the database, so a test can pass unsaved rows. The times are the
stored ones, measured where the work happened (:mod:`agents.timing`), so parallel tool
calls of one model turn overlap here as they overlapped in fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agents.events import StepStatus
from agents.timing import whole_ms

MODEL_TURN = "model_turn"
# Steps between ticks of the time axis, in ms: the smallest that gives at most
# MAX_TICKS ticks across the span.
TICK_STEPS_MS = (
    10, 20, 50, 100, 200, 250, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
    120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000,
)  # fmt: skip
MAX_TICKS = 5


@dataclass(frozen=True)
class Row:
    """One step's bar: ``start_ms`` and ``end_ms`` from the run's start on an axis of
    ``span_ms``; a running step ends "now". ``first_token_ms`` (model turns) is from the
    bar's start, known when the turn ends; until then ``streaming`` says whether a running
    turn's text or reasoning has begun. ``format_error`` marks a call that never ran (its
    output did not parse), ``unfinished`` one its run's end closed."""

    step_id: int
    kind: str
    name: str
    iteration: int
    status: str
    start_ms: int
    end_ms: int
    span_ms: int
    running: bool = False
    first_token_ms: int | None = None
    format_error: bool = False
    unfinished: bool = False
    # A held call's wait for a person's decision (its Approval's requested_at to
    # decided_at), on the same axis; ``waiting`` while nobody has decided yet.
    wait_start_ms: int | None = None
    wait_end_ms: int | None = None
    waiting: bool = False
    decision: str = ""
    streaming: bool = False

    @property
    def is_model_turn(self) -> bool:
        """Return True for a model turn's bar (else a tool call's)."""
        return self.kind == MODEL_TURN

    @property
    def duration_ms(self) -> int:
        """Return the bar's length in ms (so far, while it runs)."""
        return self.end_ms - self.start_ms

    @property
    def left_pct(self) -> float:
        """Return where the bar starts, in percent of the axis."""
        return 100 * self.start_ms / self.span_ms

    @property
    def width_pct(self) -> float:
        """Return the bar's length, in percent of the axis."""
        return 100 * self.duration_ms / self.span_ms

    @property
    def waited_ms(self) -> int:
        """Return how long the call waited for a decision (so far), 0 if not held."""
        if self.wait_start_ms is None or self.wait_end_ms is None:
            return 0
        return self.wait_end_ms - self.wait_start_ms

    @property
    def wait_style(self) -> str:
        """Return the CSS position of the wait for a decision ("" if not held)."""
        if self.wait_start_ms is None:
            return ""
        left, width = 100 * self.wait_start_ms / self.span_ms, 100 * self.waited_ms / self.span_ms
        return f"left: {left:.3f}%; width: {width:.3f}%"

    @property
    def first_token_pct(self) -> float | None:
        """Return where the first token came, in percent of the bar's own length."""
        if self.first_token_ms is None:
            return None
        if self.duration_ms <= 0:
            return 100.0
        return min(100.0, 100 * self.first_token_ms / self.duration_ms)

    @property
    def style(self) -> str:
        """Return the bar's CSS position (numbers only: safe in a ``style`` attribute)."""
        return f"left: {self.left_pct:.3f}%; width: {self.width_pct:.3f}%"

    @property
    def first_token_style(self) -> str:
        """Return the CSS width of the part of the bar before the first token."""
        pct = self.first_token_pct
        return "" if pct is None else f"width: {pct:.3f}%"


@dataclass(frozen=True)
class Tick:
    """A mark on the time axis: ``at_ms`` from the run's start, at ``pct`` of it."""

    at_ms: int
    pct: float

    @property
    def style(self) -> str:
        """Return the mark's CSS position."""
        return f"left: {self.pct:.3f}%"


@dataclass(frozen=True)
class Timeline:
    """A run's rows in step order, its axis (``span_ms``, ``ticks``) and counts."""

    run_id: int
    rows: tuple[Row, ...]
    span_ms: int
    running: bool
    ticks: tuple[Tick, ...]

    @property
    def model_turns(self) -> int:
        """Return how many model turns the run has had."""
        return sum(1 for row in self.rows if row.is_model_turn)

    @property
    def tool_calls(self) -> int:
        """Return how many tool calls the run has had, format errors left out: the
        status line's count (``AgentRun.tool_call_count``), so the two agree."""
        return sum(1 for row in self.rows if not row.is_model_turn and not row.format_error)

    @property
    def format_errors(self) -> int:
        """Return how many of its calls never ran: the model's output did not parse."""
        return sum(1 for row in self.rows if row.format_error)

    @property
    def waiting(self) -> bool:
        """Return True while a held call of the run waits for a decision (its wait grows)."""
        return any(row.waiting for row in self.rows)

    @property
    def waited_ms(self) -> int:
        """Return the time its held calls waited for decisions (overlapping waits once)."""
        spans = sorted((r.wait_start_ms, r.wait_end_ms) for r in self.rows
                       if r.wait_start_ms is not None and r.wait_end_ms is not None)  # fmt: skip
        total, reached = 0, 0
        for start, end in spans:
            start = max(start, reached)
            if end > start:
                total += end - start
                reached = end
        return total


def _ms(later: datetime, earlier: datetime) -> int:
    return max(0, whole_ms(later - earlier))


def ticks(span_ms: int) -> tuple[Tick, ...]:
    """Return the marks of an axis ``span_ms`` long: 0 and every round step after it.

    The step is the smallest of :data:`TICK_STEPS_MS` giving at most :data:`MAX_TICKS`
    marks (the largest for a longer span).
    """
    span_ms = max(1, span_ms)
    step = next((s for s in TICK_STEPS_MS if span_ms / s <= MAX_TICKS), TICK_STEPS_MS[-1])
    return tuple(Tick(at, 100 * at / span_ms) for at in range(0, span_ms + 1, step))


def step_name(step: Any) -> str:
    """Return a bar's name: ``model turn N`` or the tool's name."""
    if step.kind == MODEL_TURN:
        return f"model turn {step.iteration}"
    return step.tool_name or "(no tool named)"


def held_approval(step: Any) -> Any | None:
    """Return the approval a held call waited for when it was loaded with the step
    (``select_related``, or set by the recorder), else None: never a query."""
    state = getattr(step, "_state", None)
    if state is not None:
        return state.fields_cache.get("approval")
    return getattr(step, "approval", None)  # a plain object (tests)


def timeline_of(run: Any, steps: Iterable[Any], *, now: datetime) -> Timeline:
    """Return the timeline of ``run`` (an AgentRun) from ``steps`` (its AgentSteps).

    Offsets are ms from ``run.started_at`` (or an earlier step's start, should a clock
    have stepped back). A step still running, or closed without a finish, ends at
    ``now`` while the run goes and at the run's finish after; the axis ends at the run's
    finish (``now`` while it runs) or the latest bar's end, whichever is later. Rows keep
    the order of ``steps`` (by ordinal: a model turn, then the calls it asked for).
    """
    steps = list(steps)
    origin = min([run.started_at, *(s.started_at for s in steps if s.started_at)])
    running = run.finished_at is None
    run_end = now if running else run.finished_at
    spans: list[tuple[Any, int, int, bool]] = []
    waits: dict[int, tuple[int, int, bool, str]] = {}
    for step in steps:
        start = _ms(step.started_at or origin, origin)
        is_running = step.status == StepStatus.RUNNING
        finished = step.finished_at if step.finished_at and not is_running else run_end
        end = max(start, _ms(finished, origin))
        if (approval := held_approval(step)) is not None and approval.requested_at:
            undecided = approval.decided_at is None
            decided = run_end if undecided else approval.decided_at
            wait_start = _ms(approval.requested_at, origin)
            wait_end = max(wait_start, _ms(decided, origin))
            waits[id(step)] = (wait_start, wait_end, undecided, approval.outcome)
            # Its own bar is the call running, after the decision (none while it waits).
            start = max(start, wait_end)
            end = max(start, end) if step.status != StepStatus.PENDING else start
        spans.append((step, start, end, is_running))
    span = max([1, _ms(run_end, origin), *(end for _, _, end, _ in spans),
                *(end for _, end, _, _ in waits.values())])  # fmt: skip
    rows = tuple(
        Row(
            step_id=step.pk,
            kind=step.kind,
            name=step_name(step),
            iteration=step.iteration,
            status=step.status,
            start_ms=start,
            end_ms=end,
            span_ms=span,
            running=is_running and running,
            first_token_ms=getattr(step, "first_token_ms", None),
            format_error=bool(getattr(step, "is_format_error", False)),
            unfinished=bool(getattr(step, "is_unfinished", False)),
            streaming=step.kind == MODEL_TURN
            and bool(getattr(step, "text", "") or getattr(step, "reasoning", "")),
            **_wait_fields(waits.get(id(step)), running),
        )
        for step, start, end, is_running in spans
    )
    return Timeline(run_id=run.pk, rows=rows, span_ms=span, running=running, ticks=ticks(span))


def _wait_fields(wait: tuple[int, int, bool, str] | None, running: bool) -> dict[str, Any]:
    if wait is None:
        return {}
    start, end, undecided, outcome = wait
    return {"wait_start_ms": start, "wait_end_ms": end, "waiting": undecided and running,
            "decision": outcome}  # fmt: skip


def overlaps(a: Row, b: Row) -> bool:
    """Return True if two bars share some time (touching ends do not)."""
    return a.start_ms < b.end_ms and b.start_ms < a.end_ms


def overlapping_pairs(rows: Sequence[Row]) -> list[tuple[Row, Row]]:
    """Return every pair of tool-call bars that overlap: the calls that ran in parallel."""
    calls = [row for row in rows if not row.is_model_turn]
    return [(a, b) for i, a in enumerate(calls) for b in calls[i + 1 :] if overlaps(a, b)]
