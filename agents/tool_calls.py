"""The tool calls of one model turn: run them, report each, collect the observations.

:class:`ToolCallBatch` is the tool half of :func:`agents.runtime.run` (the model half is
:mod:`agents.model_turn`). Tool failures are data, after simonw/llm's
``execute_tool_calls``: an unknown tool, arguments that fail the schema, an exception or a
time-out each become an error ToolMessage the model reads next turn, with the exception
class kept for the audit trail (``error_type``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from agents.events import StepStatus, ToolCallFinished, ToolCallStarted, is_format_error, utcnow
from agents.model_turn import call_dict, error_text
from agents.strategies import ToolAgentAction
from agents.timing import Stopwatch

# Error observations: what the model reads on its next turn, so it can correct itself.
UNKNOWN_TOOL = "Error: there is no tool named {name!r}. Available tools: {available}."
SCHEMA_MISMATCH = (
    "Error: the arguments for tool {name!r} do not match its schema: {error}. "
    "Fix the arguments and call the tool again."
)
TOOL_RAISED = "Error: tool {name!r} failed: {error}"
TOOL_TIMED_OUT = "Error: tool {name!r} did not finish within {seconds:g} seconds."
CLIPPED_NOTE = "\n[clipped: showing the first {shown:,} of {total:,} characters]"


@dataclass(frozen=True)
class ToolLimits:
    """Bounds on tool calls: seconds one call may take; longest result the model sees
    (``max_observation_chars``) and longest result kept on the event for storage
    (``max_result_chars``); longer ones are clipped with a note of how much was cut."""

    timeout_s: float
    max_observation_chars: int
    max_result_chars: int


@dataclass(frozen=True)
class _Outcome:
    status: StepStatus
    result: str
    error: str = ""
    error_type: str = ""


@dataclass(frozen=True)
class _Timing:
    """When a call ran, as :class:`agents.timing.Stopwatch` measured it."""

    started_at: datetime
    finished_at: datetime
    duration_ms: int

    @classmethod
    def instant(cls) -> _Timing:
        """Return the timing of a call that never ran: it starts and ends now."""
        now = utcnow()
        return cls(now, now, 0)


def clip(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters plus a note of how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + CLIPPED_NOTE.format(shown=limit, total=len(text))


def _to_text(output: Any) -> str:
    """Return tool output as text: strings as they are, anything else as JSON."""
    if isinstance(output, ToolMessage):
        output = output.content
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def tool_error_type(exc: BaseException) -> str:
    """Return the ``error_type`` of an exception a tool raised: its class name.

    A class named like a format error (a tool running a chain of its own may raise
    LangChain's ``OutputParserException``) is named with its module,
    ``langchain_core.exceptions.OutputParserException``: the tool ran, so the call must
    not read as one whose arguments never reached it.
    """
    cls = type(exc)
    if is_format_error(cls.__name__):
        return f"{cls.__module__}.{cls.__qualname__}"
    return cls.__name__


async def _call_tool(tool: BaseTool | None, call: dict[str, Any], *, names: Iterable[str],
                     timeout_s: float) -> _Outcome:  # fmt: skip
    """Run one tool call; an unknown name, a schema failure, an exception or a time-out
    comes back as an error outcome. ``asyncio.CancelledError`` propagates, so a
    cancelled run stops its tools."""
    name = call["name"]
    if tool is None:
        message = UNKNOWN_TOOL.format(name=name, available=", ".join(sorted(names)))
        return _Outcome(StepStatus.ERROR, message, f"UnknownTool: {name}", "UnknownTool")
    try:
        async with asyncio.timeout(timeout_s):
            output = await tool.ainvoke(call["args"])
    except TimeoutError:
        message = TOOL_TIMED_OUT.format(name=name, seconds=timeout_s)
        return _Outcome(StepStatus.ERROR, message, "TimeoutError", "TimeoutError")
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        message = SCHEMA_MISMATCH.format(name=name, error=errors)
        return _Outcome(StepStatus.ERROR, message, error_text(exc), type(exc).__name__)
    except Exception as exc:
        message = TOOL_RAISED.format(name=name, error=error_text(exc))
        return _Outcome(StepStatus.ERROR, message, error_text(exc), tool_error_type(exc))
    return _Outcome(StepStatus.SUCCESS, _to_text(output))


class ToolCallBatch:
    """The actions of the ``iteration``-th model turn, run with ``tools``.

    After :meth:`run` has run to its end, :meth:`intermediate_steps` pairs every action
    with its observation (a ToolMessage paired by ``tool_call_id``), in the order the
    model asked, whatever order the calls finished in.
    """

    def __init__(self, actions: Sequence[ToolAgentAction], tools: Mapping[str, BaseTool], *,
                 iteration: int, limits: ToolLimits) -> None:  # fmt: skip
        # Calls that cannot run (a format error) are reported first; the rest run.
        self.broken = [action for action in actions if action.error]
        self.runnable = [action for action in actions if not action.error]
        self.tools = tools
        self.iteration = iteration
        self.limits = limits
        self.observations: dict[str, ToolMessage] = {}

    async def run(self) -> AsyncIterator[ToolCallStarted | ToolCallFinished]:
        """Yield a start and an end per action; the runnable calls run concurrently (one
        alone is awaited in place)."""
        for action in self.broken:
            yield self._started(action)
            summary = action.error.splitlines()[0] if action.error else ""
            error_type = action.error_type or "OutputParserException"
            outcome = _Outcome(StepStatus.ERROR, action.error, f"{error_type}: {summary}",
                               error_type)  # fmt: skip
            yield self._finished(call_dict(action), outcome, _Timing.instant())
        for action in self.runnable:
            yield self._started(action)
        if len(self.runnable) == 1:
            # The usual turn makes one call: awaited here, without a task to schedule and
            # gather (a cancelled run still cancels it: the await is in the run's task).
            yield self._finished(*await self._timed(call_dict(self.runnable[0])))
            return
        tasks = [asyncio.ensure_future(self._timed(call_dict(a))) for a in self.runnable]
        try:
            for done in asyncio.as_completed(tasks):
                call, outcome, timing = await done
                yield self._finished(call, outcome, timing)
        finally:
            for task in tasks:
                task.cancel()

    def intermediate_steps(self) -> list[tuple[ToolAgentAction, ToolMessage]]:
        """Return ``(action, observation)`` pairs in the order the model asked."""
        return [(a, self.observations[a.tool_call_id]) for a in [*self.broken, *self.runnable]]

    def _started(self, action: ToolAgentAction) -> ToolCallStarted:
        return ToolCallStarted(
            iteration=self.iteration, tool_call_id=action.tool_call_id, name=action.tool,
            args=action.tool_input, log=action.log,
        )  # fmt: skip

    async def _timed(self, call: dict[str, Any]) -> tuple[dict[str, Any], _Outcome, _Timing]:
        # Timed around the tool itself, not when its events are recorded: the recorder
        # writes rows between the events, and a finish stamped then came up to 100 ms
        # late (a card said 431 ms of a step stored 541 ms apart).
        watch = Stopwatch()
        outcome = await _call_tool(
            self.tools.get(call["name"]), call, names=self.tools.keys(),
            timeout_s=self.limits.timeout_s,
        )  # fmt: skip
        finished_at, duration_ms = watch.stop()
        return call, outcome, _Timing(watch.started_at, finished_at, duration_ms)

    def _finished(self, call: dict[str, Any], outcome: _Outcome, timing: _Timing
                  ) -> ToolCallFinished:  # fmt: skip
        limits = self.limits
        observation = clip(outcome.result, limits.max_observation_chars)
        result = clip(outcome.result, max(limits.max_result_chars, limits.max_observation_chars))
        self.observations[call["id"]] = ToolMessage(
            content=observation, tool_call_id=call["id"], name=call["name"],
            status=outcome.status.value,
        )  # fmt: skip
        return ToolCallFinished(
            iteration=self.iteration, tool_call_id=call["id"], name=call["name"],
            status=outcome.status, result=result, observation=observation,
            error=outcome.error, error_type=outcome.error_type, duration_ms=timing.duration_ms,
            started_at=timing.started_at, at=timing.finished_at,
        )  # fmt: skip
