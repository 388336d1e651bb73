"""When a run stops without the model's final answer: the rest of LangChain's AgentExecutor.

langchain-classic's ``AgentExecutor`` (``langchain_classic/agents/agent.py``) ends a run
in ways beyond the model's own answer and ``max_iterations``; :func:`agents.runtime.run`
keeps its names:

- ``return_direct``: a tool whose ``BaseTool.return_direct`` is True answers for the
  model: its result is the run's output, with no further model turn
  (``AgentExecutor._get_tool_return``). :func:`direct_answer` picks it from a batch.
- ``max_execution_time``: a wall-clock budget for the whole run (``_should_continue``
  checks it between steps; ``_acall`` wraps the loop in ``asyncio_timeout``).
  :class:`RunClock` keeps it: checked between steps, and capping the time-out of the
  model turn or tool calls in progress to what is left.
- ``early_stopping_method``: ``force`` (end at the limit without an answer) or
  ``generate`` (``Agent.return_stopped_response``: one last model call for a final
  answer from the steps so far). The call itself is in :mod:`agents.runtime`.

- ``trim_intermediate_steps``: only the last N steps (or what a callable keeps) go into
  the scratchpad of each turn (``AgentExecutor._prepare_intermediate_steps``);
  :func:`trimmed` keeps a turn's parallel calls together.

And controls AgentExecutor lacks: :class:`RepeatedFailures`, a model that makes the same
failing call again and again ends its run instead of spinning to the limit; and
:class:`Budget`, a run's tokens or their cost past a limit end it.
Message templates (stored as the run's error, shown to the user) are module constants.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from langchain_core.messages import ToolMessage

from agents.events import StepStatus, ToolCallFinished, is_format_error
from agents.strategies import ToolAgentAction

EarlyStoppingMethod = Literal["force", "generate"]
EARLY_STOPPING_METHODS: tuple[str, ...] = ("force", "generate")

TIME_LIMIT = (
    "Stopped after {elapsed:.1f} seconds: the run's time limit of {budget:g} seconds "
    "(max_execution_time, AGENT_MAX_EXECUTION_TIME_S) ran out before a final answer."
)
REPEATED_FAILURE = (
    "Stopped: the model made the same failing call {count} times in a row: tool {name!r} "
    "with arguments {args} failed each time with {error}"
)
GENERATED_AT_LIMIT = (
    "Stopped after {limit} model turns without a final answer; the answer shown was "
    "generated at the limit (early_stopping_method=generate): one last model call, "
    "without tools, from what the run had found."
)
GENERATE_FAILED = (
    "Stopped after {limit} model turns without a final answer; the last call for an "
    "answer at the limit (early_stopping_method=generate) failed: {why}"
)
GENERATE_ASKED_FOR_TOOLS = "it asked for tools again instead of answering."
GENERATE_EMPTY = "it returned no answer."
GENERATE_UNREADABLE = "its reply did not follow the final answer's format."
RETURN_DIRECT_EMPTY = (
    "Tool {name!r} answers for the model (return_direct), but it returned nothing."
)

# A timer may fire up to the clock's resolution early (asyncio runs a handle due within
# ``loop._clock_resolution``): a run whose call was cut at its budget's end must read as
# out of time.
_SLACK_S = 0.001
ARGS_SHOWN_CHARS = 200


class RunClock:
    """A run's wall-clock budget (``max_execution_time``), in seconds from construction.

    ``budget_s`` None or 0: no budget (:meth:`expired` is never True, :meth:`cap` returns
    its argument). ``spent_s``: seconds of it a resumed run spent before its pause. Read
    from the monotonic clock, the one asyncio's timers use.
    """

    def __init__(self, budget_s: float | None, spent_s: float = 0.0) -> None:
        self.budget_s = budget_s or 0.0
        self._start = time.monotonic() - spent_s

    def elapsed_s(self) -> float:
        """Return the seconds since the run started."""
        return time.monotonic() - self._start

    def left_s(self) -> float | None:
        """Return the seconds of the budget left (may be <= 0), or None with no budget."""
        if not self.budget_s:
            return None
        return self.budget_s - self.elapsed_s()

    def expired(self) -> bool:
        """Return True if the budget has run out."""
        left = self.left_s()
        return left is not None and left <= _SLACK_S

    def cap(self, timeout_s: float) -> tuple[float, bool]:
        """Return ``(seconds, capped)``: ``timeout_s`` or, when less is left of the budget,
        what is left (``capped`` True), so a model turn or tool call in progress ends when
        the run's time does."""
        left = self.left_s()
        if left is None or left >= timeout_s:
            return timeout_s, False
        return max(left, _SLACK_S), True

    def reason(self) -> str:
        """Return the run's end reason for a budget that ran out."""
        return TIME_LIMIT.format(elapsed=self.elapsed_s(), budget=self.budget_s)


def _args_key(args: Any) -> str:
    """Return ``args`` as canonical JSON (keys sorted), to compare two calls' arguments."""
    try:
        return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(args)


class RepeatedFailures:
    """Count the same failing call made again and again, in the order the model asked.

    A call that failed with the same tool, the same arguments (compared as canonical
    JSON) and the same error observation as the call before it adds one to the streak; any other
    call (a success, another failure, output that broke the format) starts over. A
    format error is left out: no tool ran, and a model that never gets the format right
    ends at ``max_iterations`` with the parser's reason, as before. After
    :meth:`feed`, :attr:`tripped` is True once the streak reaches ``limit`` (0: never).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._last: tuple[str, str, str] | None = None
        self._error = ""
        self.count = 0

    def feed(self, finished: Iterable[tuple[Any, ToolCallFinished]]) -> None:
        """Take one batch's ``(args, finished event)`` pairs, in the order the model asked."""
        for args, event in finished:
            failed = event.status == StepStatus.ERROR and not is_format_error(event.error_type)
            self._add(event.name, args, event.observation, event.error, failed=failed)

    def feed_steps(self, steps: Iterable[tuple[ToolAgentAction, ToolMessage]]) -> None:
        """Take ``(action, observation)`` pairs rebuilt from stored steps (a resumed run,
        :mod:`agents.approvals`), in order; the error named is the observation."""
        for action, observation in steps:
            failed = observation.status == "error" and not is_format_error(action.error_type)
            text = str(observation.content)
            self._add(action.tool, action.tool_input, text, text, failed=failed)

    def _add(self, name: str, args: Any, observation: str, error: str, *, failed: bool) -> None:
        # Keyed on what the model read: the same for a call made live and one rebuilt.
        if not failed:
            self._last, self.count = None, 0
            return
        key = (name, _args_key(args), observation)
        if key == self._last:
            self.count += 1
        else:
            self._last, self._error, self.count = key, error, 1

    @property
    def tripped(self) -> bool:
        """Return True if the same failing call came ``limit`` times in a row."""
        return self.limit > 0 and self.count >= self.limit

    def reason(self) -> str:
        """Return the run's end reason: the call, its arguments and its error."""
        assert self._last is not None
        name, args, _ = self._last
        error = self._error
        if len(args) > ARGS_SHOWN_CHARS:
            args = args[:ARGS_SHOWN_CHARS] + "…"
        return REPEATED_FAILURE.format(count=self.count, name=name, args=args, error=error)


def direct_answer(
    steps: Sequence[tuple[ToolAgentAction, ToolMessage]],
    finished: Mapping[str, ToolCallFinished],
    direct: frozenset[str],
) -> tuple[str, str] | None:
    """Return ``(tool name, result)`` of the call that answers the run, or None.

    ``steps``: a turn's ``(action, observation)`` pairs in the order the model asked;
    ``finished``: the end events of those that ran in this batch, by ``tool_call_id``
    (their whole result; a call a resumed run made before its pause has only its
    observation); ``direct``: the names of the ``return_direct`` tools. The first call
    to such a tool that succeeded wins: a failed one is an observation like any other,
    and the loop goes on. LangChain's ``AgentExecutor`` looks at a step only when the
    turn made a single call; here a turn of several calls runs them all and then ends
    with the first ``return_direct`` one's result (as LangGraph's ``create_react_agent``
    ends after a batch holding one).
    """
    if not direct:
        return None
    for action, observation in steps:
        if action.tool not in direct:
            continue
        event = finished.get(action.tool_call_id)
        if event is not None:
            if event.status == StepStatus.SUCCESS:
                return event.name, event.result
        elif observation.status != StepStatus.ERROR:
            return action.tool, str(observation.content)
    return None


Trim = int | Callable[[list[Any]], list[Any]]
"""``trim_intermediate_steps``: a count of steps to keep (0 or less: all), or a callable
from the ``(action, observation)`` pairs to those to keep (LangChain's type)."""


def trimmed(steps: list[Any], trim: Trim) -> list[Any]:
    """Return the intermediate steps the next turn's scratchpad shows.

    An int N > 0 keeps the last N steps, and then any earlier steps of the first kept
    step's model turn (parallel native calls share their turn's ``AIMessage``, and a
    server refuses a call without its result, or a result without its call); a callable
    is given every step and its result used as it is (AgentExecutor's semantics); 0 or
    less keeps them all.
    """
    if callable(trim):
        return list(trim(list(steps)))
    if trim <= 0 or len(steps) <= trim:
        return steps
    start = len(steps) - trim
    first = _turn_message(steps[start][0])
    while start > 0 and first is not None and _turn_message(steps[start - 1][0]) is first:
        start -= 1
    return steps[start:]


def _turn_message(action: Any) -> Any:
    log = getattr(action, "message_log", None)
    return log[0] if log else None


BUDGET_TOKENS = (
    "Stopped: the run used {used:,} tokens, more than its budget of {limit:,} "
    "(AGENT_MAX_RUN_TOKENS)."
)
BUDGET_ANSWERED = (
    "The run crossed its budget in the model turn that answered; the answer is kept. {why}"
)
BUDGET_COST = (
    "Stopped: the run's tokens cost {used} {currency}, more than its budget of {limit} "
    "{currency} (AGENT_MAX_RUN_COST)."
)


@dataclass(frozen=True)
class Budget:
    """What one run may use: ``max_tokens`` (input and output together; 0: no limit) and
    ``max_cost`` (in ``currency``; 0: no limit), priced by ``cost`` (the run's usage ->
    its cost, None while it cannot be told: no price for the model, or only a total
    count). Checked after each model turn on the counts the model reported (the offline
    demo's estimates too); a server that reports none is not limited. A turn that crosses
    it and asks for tools ends the run (``budget_exceeded``); one that answers ends it
    ``succeeded``, the answer kept with :data:`BUDGET_ANSWERED` as its note.
    """

    max_tokens: int = 0
    max_cost: Decimal = Decimal(0)
    cost: Callable[[Mapping[str, int]], Decimal | None] | None = None
    currency: str = ""

    def crossed(self, usage: Mapping[str, int]) -> str:
        """Return why ``usage`` is past the budget, or "" while it is within it."""
        if self.max_tokens:
            used = usage.get("total_tokens")
            if used is None and ("input_tokens" in usage or "output_tokens" in usage):
                used = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
            if used is not None and used > self.max_tokens:
                return BUDGET_TOKENS.format(used=used, limit=self.max_tokens)
        if self.max_cost and self.cost is not None:
            spent = self.cost(usage)
            if spent is not None and spent > self.max_cost:
                return BUDGET_COST.format(used=_plain(spent), limit=_plain(self.max_cost),
                                          currency=self.currency)  # fmt: skip
        return ""


def _plain(amount: Decimal) -> str:
    """Return ``amount`` in plain digits to at most 10 decimals (never ``1E-7``)."""
    with contextlib.suppress(InvalidOperation):  # too large for decimals: kept whole
        amount = amount.quantize(Decimal("1e-10"))
    return f"{amount.normalize():f}"
