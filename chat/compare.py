"""Two runs of the same question compared step by step: steps aligned, differences marked.

:func:`compare_runs` is pure: it takes two :class:`RunSide` records (built from loaded
rows by :func:`run_side`, which reads no database) and returns a :class:`Comparison`.
The steps are aligned as ``diff`` aligns lines: :class:`difflib.SequenceMatcher` over
each step's :func:`step_key` (a model turn, its answer, a tool call by tool name, a
format error), then the steps of each matched block are paired in order; a step with no
partner stands alone, on its own side. A lone tool call whose twin (same tool, same
arguments) stands alone on the other side is marked ``moved``: the runs made it in
another order. Arize Phoenix users asked for this view (Arize-ai/phoenix#8852).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from chat.display import arguments_json
from chat.presenters import RunPresenter, StepPresenter
from chat.store.rows import count_tool_calls

if TYPE_CHECKING:
    from chat.models import AgentRun, AgentStep

# What one side shows of a result or an answer; the comparison itself reads them whole.
RESULT_PREVIEW_CHARS = 600
ANSWER_PREVIEW_CHARS = 1200
# Two durations differ when the longer is more than this times the shorter and they are
# at least DURATION_MIN_MS apart: a run's timings always differ by a few milliseconds,
# and marking every step would hide the differences that matter.
DURATION_RATIO = 1.5
DURATION_MIN_MS = 100

# The fields of an aligned step, in the order they are shown.
STEP_FIELDS = ("tool", "arguments", "result", "status", "duration", "tokens")
FIELD_LABELS = {
    "tool": "Tool",
    "arguments": "Arguments",
    "result": "Result",
    "status": "Status",
    "duration": "Time",
    "tokens": "Tokens",
}


@dataclass(frozen=True)
class StepSide:
    """One step as a comparison reads it: a model turn or a tool call of one run.

    ``arguments`` is the call's arguments as canonical JSON on one line (keys sorted: the
    same arguments in another order are the same), "" for a model turn; ``result`` the
    tool's result or error, or the model's text (its answer for the last turn), whole;
    ``status`` the badge word (``ok``, ``error``, ``format error``, ``answer``,
    ``running``...); ``duration_ms`` and ``tokens`` None when unknown.
    """

    ordinal: int
    iteration: int
    kind: str
    tool: str = ""
    arguments: str = ""
    arguments_shown: str = ""
    result: str = ""
    status: str = ""
    duration_ms: int | None = None
    tokens: int | None = None
    is_answer: bool = False
    is_format_error: bool = False
    running: bool = False

    @property
    def is_tool_call(self) -> bool:
        """Return True for a tool call (else a model turn)."""
        return self.kind == "tool_call"

    @property
    def label(self) -> str:
        """Return what the step is, as its heading says: the tool's name or the turn."""
        if self.is_format_error:
            return f"Format error ({self.tool or 'no tool named'})"
        if self.is_tool_call:
            return self.tool or "(no name)"
        return "Model turn: the answer" if self.is_answer else "Model turn"

    @property
    def result_preview(self) -> str:
        """Return the result cut to ``RESULT_PREVIEW_CHARS`` with a note of what was left."""
        if len(self.result) <= RESULT_PREVIEW_CHARS:
            return self.result
        return f"{self.result[:RESULT_PREVIEW_CHARS]}… [{len(self.result):,} characters]"


@dataclass(frozen=True)
class RunSide:
    """One run as a comparison reads it: its facts and its steps in order.

    Counts are the run's stored ones once it ended, and its steps' so far while it goes
    (``running``); ``tokens`` None when unknown.
    """

    run_id: int
    status: str
    status_label: str
    running: bool = False
    model: str = ""
    strategy: str = ""
    question: str = ""
    answer: str = ""
    duration_ms: int | None = None
    tokens: int | None = None
    model_turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    format_errors: int = 0
    steps: tuple[StepSide, ...] = ()


@dataclass(frozen=True)
class AlignedRow:
    """One row of the comparison: a step of each run paired, or one step alone.

    ``differs`` names the fields (of :data:`STEP_FIELDS`) whose values differ, for a pair;
    ``moved`` marks a lone tool call whose twin stands alone in the other run.
    """

    left: StepSide | None
    right: StepSide | None
    differs: frozenset[str] = frozenset()
    moved: bool = False

    @property
    def paired(self) -> bool:
        """Return True when both runs have this step."""
        return self.left is not None and self.right is not None

    @property
    def changed(self) -> bool:
        """Return True for a step alone, or a pair with any field that differs."""
        return not self.paired or bool(self.differs)

    @property
    def change(self) -> str:
        """Return the row's change in words: ``same``, ``differs``, ``only in A``/``B``."""
        if self.left is None:
            return "only in B"
        if self.right is None:
            return "only in A"
        return "differs" if self.differs else "same"

    @property
    def fields(self) -> list[tuple[str, str, bool]]:
        """Return ``(name, label, differs)`` for each field, in the order shown."""
        return [(name, FIELD_LABELS[name], name in self.differs) for name in STEP_FIELDS]

    @property
    def differs_labels(self) -> str:
        """Return the differing fields as words: ``"Arguments, Result"``."""
        return ", ".join(FIELD_LABELS[name] for name in STEP_FIELDS if name in self.differs)


@dataclass(frozen=True)
class TotalRow:
    """One run-level figure of both runs (``left``, ``right`` as shown) and whether they differ."""

    name: str
    label: str
    left: str
    right: str
    differs: bool


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: their totals, their aligned steps, and how many rows changed."""

    left: RunSide
    right: RunSide
    totals: list[TotalRow] = field(default_factory=list)
    rows: list[AlignedRow] = field(default_factory=list)

    @property
    def changed_rows(self) -> int:
        """Return how many aligned rows are a lone step or a pair that differs."""
        return sum(1 for row in self.rows if row.changed)

    @property
    def differing_totals(self) -> int:
        """Return how many run-level figures differ."""
        return sum(1 for total in self.totals if total.differs)

    @property
    def running(self) -> bool:
        """Return True when either run is still going (compared as far as it has got)."""
        return self.left.running or self.right.running


def step_key(step: StepSide) -> tuple[str, ...]:
    """Return what must match for two steps to be aligned: a model turn (the answer apart
    from the others), a tool call by its tool's name, a format error by the name it gave."""
    if step.is_format_error:
        return ("format_error", step.tool)
    if step.is_tool_call:
        return ("tool_call", step.tool)
    return ("model_turn", "answer" if step.is_answer else "")


def durations_differ(left: int | None, right: int | None) -> bool:
    """Return True when two durations differ enough to mark (see :data:`DURATION_RATIO`)."""
    if left is None or right is None:
        return left != right
    short, long = sorted((left, right))
    return long - short >= DURATION_MIN_MS and long > short * DURATION_RATIO


def step_differences(left: StepSide, right: StepSide) -> frozenset[str]:
    """Return the names of the fields (:data:`STEP_FIELDS`) in which two steps differ."""
    differs = set()
    if left.tool != right.tool:
        differs.add("tool")
    if left.arguments != right.arguments:
        differs.add("arguments")
    if left.result != right.result or left.running != right.running:
        differs.add("result")
    if left.status != right.status:
        differs.add("status")
    if durations_differ(left.duration_ms, right.duration_ms):
        differs.add("duration")
    if left.tokens != right.tokens:
        differs.add("tokens")
    return frozenset(differs)


def align_steps(left: Sequence[StepSide], right: Sequence[StepSide]) -> list[AlignedRow]:
    """Return the steps of two runs aligned, in order, as rows.

    ``SequenceMatcher`` (no junk heuristic: a run of 300 steps repeats its keys) finds the
    blocks of steps with equal keys; each block's steps are paired in order, with the
    fields that differ named. Steps between blocks stand alone, the first run's before
    the second's at each gap, as a diff shows a removed line before the added one.
    """
    keys_left = [step_key(step) for step in left]
    keys_right = [step_key(step) for step in right]
    matcher = SequenceMatcher(None, keys_left, keys_right, autojunk=False)
    rows: list[AlignedRow] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for a, b in zip(left[i1:i2], right[j1:j2], strict=True):
                rows.append(AlignedRow(a, b, step_differences(a, b)))
            continue
        rows.extend(AlignedRow(a, None) for a in left[i1:i2])
        rows.extend(AlignedRow(None, b) for b in right[j1:j2])
    return _marked_moved(rows)


def _marked_moved(rows: list[AlignedRow]) -> list[AlignedRow]:
    """Return ``rows`` with each lone tool call whose twin is alone on the other side
    marked ``moved``: each twin answers for one call on each side, in order (a call
    made twice in one run and once in the other is moved once, and once only in A)."""

    def twin(step: StepSide) -> tuple[str, str]:
        return (step.tool, step.arguments)

    def movable(step: StepSide | None) -> bool:
        return step is not None and step.is_tool_call and not step.is_format_error

    lone_left = Counter(twin(row.left) for row in rows if row.right is None and movable(row.left))
    lone_right = Counter(twin(row.right) for row in rows if row.left is None and movable(row.right))
    pairs = {key: min(count, lone_right[key]) for key, count in lone_left.items()}
    if not any(pairs.values()):
        return rows
    to_mark_left, to_mark_right = dict(pairs), dict(pairs)  # moves left to mark, per side
    marked = []
    for row in rows:
        side = to_mark_left if row.right is None else to_mark_right if row.left is None else None
        lone = row.left if row.right is None else row.right
        if side is not None and movable(lone) and side.get(twin(lone), 0) > 0:
            side[twin(lone)] -= 1
            row = AlignedRow(row.left, row.right, row.differs, moved=True)
        marked.append(row)
    return marked


def _duration_label(ms: int | None) -> str:
    if ms is None:
        return "–"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def run_totals(left: RunSide, right: RunSide) -> list[TotalRow]:
    """Return the run-level figures of both runs, each marked when they differ.

    Status, model turns, tool calls (with their errors and format errors), tokens, time
    (by :func:`durations_differ`), model, strategy and answer. A run still going says so
    after its figures ("so far").
    """

    def so_far(run: RunSide, shown: str) -> str:
        return f"{shown} so far" if run.running else shown

    def errors(run: RunSide) -> str:
        return f"{run.tool_errors} tool errors · {run.format_errors} format errors"

    def tokens(run: RunSide) -> str:
        return "unknown" if run.tokens is None else f"{run.tokens:,}"

    rows = [
        ("status", "Status", left.status_label, right.status_label, left.status != right.status),
        ("model_turns", "Model turns", so_far(left, str(left.model_turns)),
         so_far(right, str(right.model_turns)), left.model_turns != right.model_turns),
        ("tool_calls", "Tool calls", so_far(left, str(left.tool_calls)),
         so_far(right, str(right.tool_calls)), left.tool_calls != right.tool_calls),
        ("errors", "Errors", errors(left), errors(right), errors(left) != errors(right)),
        ("tokens", "Tokens", so_far(left, tokens(left)), so_far(right, tokens(right)),
         left.tokens != right.tokens),
        ("duration", "Time", _duration_label(left.duration_ms), _duration_label(right.duration_ms),
         durations_differ(left.duration_ms, right.duration_ms)),
        ("model", "Model", left.model, right.model, left.model != right.model),
        ("strategy", "Strategy", left.strategy, right.strategy, left.strategy != right.strategy),
        ("question", "Question", left.question, right.question, left.question != right.question),
        ("answer", "Answer", clipped_answer(left.answer), clipped_answer(right.answer),
         left.answer != right.answer),
    ]  # fmt: skip
    return [TotalRow(*row) for row in rows]


def clipped_answer(answer: str) -> str:
    """Return an answer cut to ``ANSWER_PREVIEW_CHARS`` (``–`` for none)."""
    if not answer:
        return "–"
    if len(answer) <= ANSWER_PREVIEW_CHARS:
        return answer
    return f"{answer[:ANSWER_PREVIEW_CHARS]}… [{len(answer):,} characters]"


def compare_runs(left: RunSide, right: RunSide) -> Comparison:
    """Return two runs compared: their totals and their steps aligned (see the module)."""
    return Comparison(
        left=left,
        right=right,
        totals=run_totals(left, right),
        rows=align_steps(left.steps, right.steps),
    )


# From rows: what the views call on runs and steps they loaded (no query here).


def _canonical(arguments: Any) -> str:
    """Return arguments as one line of JSON with keys sorted (text arguments as they are)."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def step_side(step: AgentStep) -> StepSide:
    """Return what a comparison reads of a stored step (its ``run`` and ``approval``
    loaded with it: no query)."""
    running = step.is_running
    if step.is_tool_call:
        words = StepPresenter(step)
        return StepSide(
            ordinal=step.ordinal,
            iteration=step.iteration,
            kind="tool_call",
            tool=step.tool_name,
            arguments=_canonical(step.arguments),
            arguments_shown=arguments_json(step.arguments),
            result=step.result,
            status=words.badge,
            duration_ms=step.duration_ms,
            is_format_error=step.is_format_error,
            running=running,
        )
    if running:
        status = "running"
    elif step.is_error:
        status = "error"
    else:
        status = "answer" if step.is_answer else "ok"
    return StepSide(
        ordinal=step.ordinal,
        iteration=step.iteration,
        kind="model_turn",
        result=step.result if step.is_answer else step.text,
        status=status,
        duration_ms=step.duration_ms,
        tokens=step.total_tokens,
        is_answer=step.is_answer,
        running=running,
    )


def run_side(run: AgentRun, steps: Iterable[AgentStep]) -> RunSide:
    """Return what a comparison reads of a stored run and its steps (in order, loaded:
    no query). A run not ended is counted from its steps so far, by the rules its stored
    counts follow (:func:`chat.store.rows.count_tool_calls`)."""
    steps = list(steps)
    going = run.is_running or run.is_waiting
    if going:
        count_tool_calls(run, steps)  # the rules of the stored counts, on the given steps
    sides = tuple(step_side(step) for step in steps)
    provider = run.provider_label
    return RunSide(
        run_id=run.pk,
        status=run.status,
        status_label=RunPresenter(run).status_label,
        running=going,
        model=f"{run.model_name} ({provider})" if provider else run.model_name,
        strategy=run.get_strategy_display(),
        question=run.user_message.content,
        answer=run.output,
        duration_ms=run.duration_ms,
        tokens=run.total_tokens,
        model_turns=sum(1 for side in sides if not side.is_tool_call),
        tool_calls=run.tool_call_count,
        tool_errors=run.tool_error_count,
        format_errors=run.format_error_count,
        steps=sides,
    )
