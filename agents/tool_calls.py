"""The tool calls of one model turn: run them, report each, collect the observations.

:class:`ToolCallBatch` is the tool half of :func:`agents.runtime.run` (the model half is
:mod:`agents.model_turn`). Tool failures are data, after simonw/llm's
``execute_tool_calls``: an unknown tool, arguments that fail the schema, an exception or a
time-out each become an error ToolMessage the model reads next turn, with the exception
class kept for the audit trail (``error_type``). Tools are invoked with a ``ToolCall``, so
what they return comes back as a ToolMessage with its ``artifact`` and ``status``; how
that is read (text for the model, blocks and artifact kept) is :mod:`agents.tool_output`.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import ValidationError

from agents.events import (
    ApprovalRequested,
    StepStatus,
    ToolCallFinished,
    ToolCallStarted,
    is_format_error,
    utcnow,
)
from agents.model_turn import call_dict, error_text, public_class
from agents.sentences import clause
from agents.strategies import ToolAgentAction
from agents.timing import Stopwatch
from agents.tool_output import read_output

# Error observations: what the model reads on its next turn, so it can correct itself.
UNKNOWN_TOOL = "Error: there is no tool named {name!r}. Available tools: {available}."
SCHEMA_MISMATCH = (
    "Error: the arguments for tool {name!r} do not match its schema: {error}. "
    "Fix the arguments and call the tool again."
)
TOOL_RAISED = "Error: tool {name!r} failed: {error}"
TOOL_TIMED_OUT = "Error: tool {name!r} did not finish within {seconds:g} seconds."
# A call cut short because the whole run's time budget (max_execution_time) ran out.
TOOL_RUN_TIME_LIMIT = (
    "Error: tool {name!r} was stopped after {seconds:.3g} seconds: the run's time limit ran out."
)
CLIPPED_NOTE = "\n[clipped: showing the first {shown:,} of {total:,} characters]"


@dataclass(frozen=True)
class ToolLimits:
    """Bounds on tool calls: seconds one call may take; longest result the model sees
    (``max_observation_chars``) and longest result kept on the event for storage
    (``max_result_chars``); longer ones are clipped with a note of how much was cut.
    ``timed_out``: the error observation of a call that overran ``timeout_s`` (with
    ``{name}`` and ``{seconds}``): :data:`TOOL_RUN_TIME_LIMIT` when the time-out is what
    was left of the run's own budget."""

    timeout_s: float
    max_observation_chars: int
    max_result_chars: int
    timed_out: str = TOOL_TIMED_OUT


# Named tuples, not frozen dataclasses: one of each a tool call, and a frozen dataclass sets
# every field through object.__setattr__.
class _Outcome(NamedTuple):
    status: StepStatus
    result: str
    error: str = ""
    error_type: str = ""
    blocks: tuple[dict[str, Any], ...] = ()
    artifact: Any = None


class _Timing(NamedTuple):
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


def schema_errors(exc: ValidationError) -> str:
    """Return what a tool's ``args_schema`` refused, one ``"field: message"`` per error,
    joined by "; " (``"arguments: ..."`` for the object as a whole)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )


def tool_error_type(exc: BaseException) -> str:
    """Return the ``error_type`` of an exception a tool raised: its class name.

    A class named like a format error (a tool running a chain of its own may raise
    LangChain's ``OutputParserException``) is named with its module,
    ``langchain_core.exceptions.OutputParserException``: the tool ran, so the call must
    not read as one whose arguments never reached it.

    A private class (``_MCPToolExecutionError``, langchain-mcp-adapters' for an MCP
    ``isError`` result) is named by its nearest public base (``ToolException``): the
    audit trail's words should be ones a reader can look up.
    """
    if isinstance(exc, ToolAborted):
        exc = exc.raised
    cls = public_class(type(exc))
    if is_format_error(cls.__name__):
        return f"{cls.__module__}.{cls.__qualname__}"
    return cls.__name__


# Sync tools run here, not in the event loop's default executor, where langchain-core's
# ainvoke puts them: a sync tool that outlives its time-out keeps its thread, and a few
# such would starve what the loop itself runs there (getaddrinfo before every model
# request and HTTP MCP connection). Ours can only starve other sync tools.
SYNC_TOOL_THREADS = 16
_SYNC_TOOLS = ThreadPoolExecutor(max_workers=SYNC_TOOL_THREADS, thread_name_prefix="sync-tool")


def _is_sync(tool: BaseTool) -> bool:
    """Return True for a tool whose async path would only run its sync code in a thread."""
    if isinstance(tool, StructuredTool):
        return tool.coroutine is None
    return type(tool)._arun is BaseTool._arun


class ToolAborted(Exception):
    """A tool raised ``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit`` (a library
    calling ``sys.exit``, say): kept as an ordinary exception, so it fails the call, not
    the event loop every chat runs on (asyncio re-raises the first two out of the loop
    from the task langchain-core runs an async tool in). ``raised`` is the original."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(str(raised))
        self.raised = raised


_ABORTS = (SystemExit, KeyboardInterrupt, GeneratorExit)


def _contained_sync(func: Callable[[], Any]) -> Any:
    try:
        return func()
    except _ABORTS as exc:
        raise ToolAborted(exc) from None


def _contained(coroutine: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def contained(*args: Any, **kwargs: Any) -> Any:
        try:
            return await coroutine(*args, **kwargs)
        except _ABORTS as exc:
            raise ToolAborted(exc) from None

    return contained


def _invoked(tool: BaseTool, name: str, args: Any, call_id: str) -> Awaitable[Any]:
    """Return the awaitable of one call of ``tool``: its ToolMessage (langchain-core's
    ``ainvoke`` with a ToolCall), a sync tool's from a thread of :data:`_SYNC_TOOLS`; a
    structured tool's own code raising what would stop the event loop raises
    :class:`ToolAborted` instead."""
    if isinstance(tool, StructuredTool) and tool.coroutine is not None:
        tool = tool.model_copy(update={"coroutine": _contained(tool.coroutine)})
    if isinstance(args, dict):
        tool_call = {"name": name, "args": args, "id": call_id, "type": "tool_call"}
        if _is_sync(tool):
            return _in_thread(partial(tool.invoke, tool_call))
        return tool.ainvoke(tool_call)
    # A text strategy's one-argument input: ainvoke's ToolCall path copies ``args``
    # with ``.copy()``, which a string has not; ``arun`` takes the id beside it.
    if _is_sync(tool):
        return _in_thread(partial(tool.run, args, tool_call_id=call_id))
    return tool.arun(args, tool_call_id=call_id)


async def _in_thread(func: Callable[[], Any]) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_SYNC_TOOLS, copy_context().run, _contained_sync, func)


async def _call_tool(tool: BaseTool | None, call: dict[str, Any], *, names: Iterable[str],
                     timeout_s: float, timed_out: str = TOOL_TIMED_OUT) -> _Outcome:  # fmt: skip
    """Run one tool call within ``timeout_s`` seconds (``asyncio.timeout``); an unknown
    name, a schema failure, an exception or a time-out comes back as an error outcome.
    ``asyncio.CancelledError`` propagates, so a cancelled run stops its tools.
    ``timed_out``: the observation's template for a time-out."""
    name = call["name"]
    if tool is None:
        message = UNKNOWN_TOOL.format(name=name, available=", ".join(sorted(names)))
        return _Outcome(StepStatus.ERROR, message, f"UnknownTool: {name}", "UnknownTool")
    invoked = _invoked(tool, name, call["args"], call["id"])
    try:
        async with asyncio.timeout(timeout_s):
            output = await invoked
    except TimeoutError:
        message = timed_out.format(name=name, seconds=timeout_s)
        return _Outcome(StepStatus.ERROR, message, "TimeoutError", "TimeoutError")
    except ValidationError as exc:
        message = SCHEMA_MISMATCH.format(name=name, error=clause(schema_errors(exc)))
        return _Outcome(StepStatus.ERROR, message, error_text(exc), type(exc).__name__)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        said = error_text(exc.raised if isinstance(exc, ToolAborted) else exc)
        message = TOOL_RAISED.format(name=name, error=said)
        return _Outcome(StepStatus.ERROR, message, said, tool_error_type(exc))
    except BaseException as exc:  # a BaseException of the tool's own (not a stop of ours)
        message = TOOL_RAISED.format(name=name, error=error_text(exc))
        return _Outcome(StepStatus.ERROR, message, error_text(exc), tool_error_type(exc))
    read = read_output(output, validation_only=bool(tool.handle_validation_error
                                                    and not tool.handle_tool_error))  # fmt: skip
    if read.failed:
        summary = read.text.strip().splitlines()[0] if read.text.strip() else ""
        return _Outcome(StepStatus.ERROR, read.text, f"{read.error_type}: {summary}",
                        read.error_type, read.blocks, read.artifact)  # fmt: skip
    return _Outcome(StepStatus.SUCCESS, read.text, blocks=read.blocks, artifact=read.artifact)


class ToolCallBatch:
    """The actions of the ``iteration``-th model turn, run with ``tools``.

    ``held``: the ``tool_call_id`` of actions waiting for a person's decision
    (:mod:`agents.approvals`): announced, not run. ``notes``: by ``tool_call_id``, a line
    put before a call's observation (a person's edit of its arguments,
    :func:`agents.approvals.edited_note`), in the ToolMessage and on its event alike.
    After :meth:`run` has run to its end, :meth:`intermediate_steps` pairs every other
    action with its observation (a ToolMessage paired by ``tool_call_id``), in the order
    the model asked, whatever order the calls finished in.
    """

    def __init__(self, actions: Sequence[ToolAgentAction], tools: Mapping[str, BaseTool], *,
                 iteration: int, limits: ToolLimits, held: Collection[str] = frozenset(),
                 notes: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.actions = list(actions)
        self.held_ids = frozenset(held)
        reported = [action for action in actions if action.tool_call_id not in held]
        # Calls that cannot run (a format error, a denial) are reported at once; the rest run.
        self.broken = [action for action in reported if action.error]
        self.runnable = [action for action in reported if not action.error]
        self.tools = tools
        self.iteration = iteration
        self.limits = limits
        self.notes = notes or {}
        self.observations: dict[str, ToolMessage] = {}
        # Each call's end event by ``tool_call_id``, as :meth:`run` yields them.
        self.finished: dict[str, ToolCallFinished] = {}

    async def run(self) -> AsyncIterator[ApprovalRequested | ToolCallStarted | ToolCallFinished]:
        """Yield every action's start in the order the model asked (a held one's
        :class:`ApprovalRequested`), then an end per action that is not held: the broken
        ones' at once, then the runnable calls' as they finish (they run concurrently; one
        alone is awaited in place)."""
        for action in self.actions:
            if action.tool_call_id in self.held_ids:
                yield ApprovalRequested(iteration=self.iteration, tool_call_id=action.tool_call_id,
                                        name=action.tool, args=action.tool_input,
                                        log=action.log)  # fmt: skip
            else:
                yield self._started(action)
        for action in self.broken:
            summary = action.error.splitlines()[0] if action.error else ""
            error_type = action.error_type or "OutputParserException"
            outcome = _Outcome(StepStatus.ERROR, action.error, f"{error_type}: {summary}",
                               error_type)  # fmt: skip
            yield self._finished(call_dict(action), outcome, _Timing.instant())
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

    @property
    def held(self) -> list[ToolAgentAction]:
        """Return the held actions, in the order the model asked."""
        return [action for action in self.actions if action.tool_call_id in self.held_ids]

    def intermediate_steps(self) -> list[tuple[ToolAgentAction, ToolMessage]]:
        """Return ``(action, observation)`` pairs in the order the model asked (held
        actions have none)."""
        return [
            (a, self.observations[a.tool_call_id])
            for a in self.actions
            if a.tool_call_id not in self.held_ids
        ]

    def _started(self, action: ToolAgentAction) -> ToolCallStarted:
        return ToolCallStarted(
            iteration=self.iteration, tool_call_id=action.tool_call_id, name=action.tool,
            args=action.tool_input, log=action.log,
        )  # fmt: skip

    async def _timed(self, call: dict[str, Any]) -> tuple[dict[str, Any], _Outcome, _Timing]:
        # Timed around the tool itself, not when its events are recorded: the recorder
        # writes rows between the events, so a finish stamped then would come late.
        watch = Stopwatch()
        outcome = await _call_tool(
            self.tools.get(call["name"]), call, names=self.tools.keys(),
            timeout_s=self.limits.timeout_s, timed_out=self.limits.timed_out,
        )  # fmt: skip
        finished_at, duration_ms = watch.stop()
        return call, outcome, _Timing(watch.started_at, finished_at, duration_ms)

    def _finished(self, call: dict[str, Any], outcome: _Outcome, timing: _Timing
                  ) -> ToolCallFinished:  # fmt: skip
        limits = self.limits
        observation = clip(outcome.result, limits.max_observation_chars)
        note = self.notes.get(call["id"])
        if note:
            observation = f"{note}\n{observation}"
        result = clip(outcome.result, max(limits.max_result_chars, limits.max_observation_chars))
        self.observations[call["id"]] = ToolMessage(
            content=observation, tool_call_id=call["id"], name=call["name"],
            status=outcome.status.value,
        )  # fmt: skip
        event = self.finished[call["id"]] = ToolCallFinished(
            iteration=self.iteration, tool_call_id=call["id"], name=call["name"],
            status=outcome.status, result=result, observation=observation,
            error=outcome.error, error_type=outcome.error_type, duration_ms=timing.duration_ms,
            started_at=timing.started_at, at=timing.finished_at, blocks=outcome.blocks,
            artifact=outcome.artifact,
        )  # fmt: skip
        return event
