"""The agent loop: ask the model, run the tool calls it asks for, repeat, yield events.

One loop for every strategy (:mod:`agents.strategies`: native tool calling, ReAct,
structured chat, XML), written as an async generator so a caller can stream every step.
Tool failures and output that breaks the format are data (an error observation the model
sees on its next turn, and an error event); failures of the loop itself raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.agents import AgentFinish
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call, tool_call
from langchain_core.tools import BaseTool
from pydantic import ValidationError

from agents.events import (
    Event,
    ModelTurnFinished,
    ModelTurnStarted,
    RunFinished,
    RunStarted,
    RunStatus,
    StepStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.model_errors import describe_model_error
from agents.strategies import ParseError, Strategy, ToolCallAction, strict_json
from agents.strategies.base import IntermediateStep, new_tool_call_id
from agents.strategies.tool_calling import ToolCallingStrategy

# Error observations: what the model reads on its next turn, so it can correct itself.
UNKNOWN_TOOL = "Error: there is no tool named {name!r}. Available tools: {available}."
SCHEMA_MISMATCH = (
    "Error: the arguments for tool {name!r} do not match its schema: {error}. "
    "Fix the arguments and call the tool again."
)
TOOL_RAISED = "Error: tool {name!r} failed: {error}"
TOOL_TIMED_OUT = "Error: tool {name!r} did not finish within {seconds:g} seconds."
CLIPPED_NOTE = "\n[clipped: showing the first {shown:,} of {total:,} characters]"

# Why a run ended without an answer, stored on the run and shown to the user.
MODEL_TIMED_OUT = "The model did not answer within {seconds:g} seconds."
EMPTY_ANSWER = "The model returned neither text nor tool calls."
ITERATION_LIMIT = "Stopped after {limit} model turns without a final answer."


@dataclass(frozen=True)
class RunLimits:
    """Bounds on one run.

    ``max_iterations``: model turns before the run ends as ``max_iterations``;
    ``tool_timeout_s`` / ``model_timeout_s``: seconds one tool call / one model turn may
    take; ``max_observation_chars``: longest tool result the model sees (longer ones are
    clipped with a note; the full result stays on the event); ``max_result_chars``:
    longest result kept on the event, for storage (a tool that returns megabytes is
    clipped there too, with a note).
    """

    max_iterations: int = 15
    tool_timeout_s: float = 30.0
    model_timeout_s: float = 120.0
    max_observation_chars: int = 8_000
    max_result_chars: int = 1_000_000


def _elapsed_ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


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


def clip(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters plus a note of how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + CLIPPED_NOTE.format(shown=limit, total=len(text))


async def _call_tool(
    tools: dict[str, BaseTool], call: dict[str, Any], limits: RunLimits
) -> tuple[dict[str, Any], StepStatus, str, str, int]:
    """Run one tool call; return ``(call, status, result_text, error, duration_ms)``.

    Unknown names, schema failures, exceptions and time-outs come back as error results.
    ``asyncio.CancelledError`` propagates so a cancelled run stops its tools.
    """
    name = call["name"]
    start = time.monotonic()
    tool = tools.get(name)
    if tool is None:
        message = UNKNOWN_TOOL.format(name=name, available=", ".join(sorted(tools)))
        return call, StepStatus.ERROR, message, f"UnknownTool: {name}", _elapsed_ms(start)
    try:
        async with asyncio.timeout(limits.tool_timeout_s):
            output = await tool.ainvoke(call["args"])
    except TimeoutError:
        message = TOOL_TIMED_OUT.format(name=name, seconds=limits.tool_timeout_s)
        return call, StepStatus.ERROR, message, "TimeoutError", _elapsed_ms(start)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        message = SCHEMA_MISMATCH.format(name=name, error=errors)
        return call, StepStatus.ERROR, message, _error_text(exc), _elapsed_ms(start)
    except Exception as exc:
        message = TOOL_RAISED.format(name=name, error=_error_text(exc))
        return call, StepStatus.ERROR, message, _error_text(exc), _elapsed_ms(start)
    return call, StepStatus.OK, _to_text(output), "", _elapsed_ms(start)


def _add_usage(total: dict[str, int], usage: dict[str, Any] | None) -> None:
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if usage and isinstance(usage.get(key), int):
            total[key] = total.get(key, 0) + usage[key]


def model_display_name(model: BaseChatModel) -> str:
    """Return a short name for ``model``: its ``model_name``/``model`` field or its type."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


async def run(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    *,
    strategy: Strategy | None = None,
    limits: RunLimits | None = None,
) -> AsyncIterator[Event]:
    """Run the agent loop with ``strategy`` and yield :mod:`agents.events` as it goes.

    ``messages`` is the conversation (system message, earlier turns, the new question);
    it is not modified. ``strategy`` (default: native tool calling) builds the prompt from
    it, binds the model for each turn and parses each reply into tool calls or a final
    answer; see :mod:`agents.strategies`. Each turn the model is streamed with
    ``astream`` (every text piece is a :class:`TextDelta`) and the chunks are merged with
    ``+`` (LangChain's chunk merging), so tool calls split over chunks come out whole.
    The tool calls of one turn run concurrently; each observation is paired with its call
    by ``tool_call_id`` and shown to the model in the next turn's scratchpad. Output that
    breaks the strategy's format, invalid arguments and unknown tools become error steps
    whose observation tells the model what to fix; such retries count as turns.

    The last event is always a :class:`RunFinished`: ``succeeded`` (a non-empty final
    answer), ``failed`` (the model raised, timed out or answered with nothing) or
    ``max_iterations``. Cancelling the consumer's task cancels pending tool calls and
    propagates ``asyncio.CancelledError``.
    """
    limits = limits or RunLimits()
    strategy = strategy or ToolCallingStrategy()
    by_name = {tool.name: tool for tool in tools}
    prompt = strategy.build_prompt(messages, list(tools))
    intermediate_steps: list[IntermediateStep] = []
    usage_total: dict[str, int] = {}
    yield RunStarted(model=model_display_name(model), tools=tuple(by_name), strategy=strategy.name)

    for iteration in range(1, limits.max_iterations + 1):
        yield ModelTurnStarted(iteration=iteration)
        start = time.monotonic()
        bound = strategy.bind(model, list(tools), iteration=iteration)
        history = [*prompt, *strategy.format_scratchpad(intermediate_steps)]
        merged: AIMessageChunk | None = None
        # The turn's deadline is checked only while waiting for the model, never while the
        # caller handles a yielded delta: firing inside the caller (writing a row) would
        # cancel that instead and end the run as cancelled, not timed out (found under load).
        deadline = asyncio.get_running_loop().time() + limits.model_timeout_s
        stream = aiter(bound.astream(history))
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                merged = chunk if merged is None else merged + chunk
                # A plain str (.text is a callable str subclass), storable (no lone
                # surrogates, which a provider's JSON can carry as "\ud83d").
                delta = strict_json.scrub(str(chunk.text))
                if delta:
                    yield TextDelta(iteration=iteration, text=delta)
        except Exception as exc:
            await _close(stream)
            # The user reads why in plain words; the turn keeps the provider's whole
            # error ("RateLimitError: Error code: 429 - {...}") for the audit trail.
            if isinstance(exc, TimeoutError):
                error = detail = MODEL_TIMED_OUT.format(seconds=limits.model_timeout_s)
            else:
                error, detail = describe_model_error(exc), _error_text(exc)
            text = strict_json.scrub(str(merged.text)) if merged is not None else ""
            yield ModelTurnFinished(
                iteration=iteration, text=text, tool_calls=(), invalid_tool_calls=(),
                usage=None, duration_ms=_elapsed_ms(start), raw={}, error=detail,
            )  # fmt: skip
            yield RunFinished(
                status=RunStatus.FAILED, output="", iterations=iteration, error=error,
                usage=usage_total,
            )  # fmt: skip
            return

        message = merged_message(merged) if merged is not None else AIMessage("")
        assert isinstance(message, AIMessage)
        usage = dict(message.usage_metadata) if message.usage_metadata else None
        _add_usage(usage_total, usage)
        parsed = _parse(strategy, message)
        text = str(message.text)

        if isinstance(parsed, AgentFinish):
            output = str(parsed.return_values.get("output", ""))
            yield ModelTurnFinished(
                iteration=iteration, text=text, tool_calls=(), invalid_tool_calls=(),
                usage=usage, duration_ms=_elapsed_ms(start), raw=message.model_dump(mode="json"),
                final_answer=output,
            )  # fmt: skip
            if not output.strip():
                yield RunFinished(
                    status=RunStatus.FAILED, output="", iterations=iteration,
                    error=EMPTY_ANSWER, usage=usage_total,
                )  # fmt: skip
            else:
                yield RunFinished(
                    status=RunStatus.SUCCEEDED, output=output, iterations=iteration,
                    usage=usage_total,
                )  # fmt: skip
            return

        runnable = [action for action in parsed if not action.error]
        broken = [action for action in parsed if action.error]
        yield ModelTurnFinished(
            iteration=iteration, text=text,
            tool_calls=tuple(_call_dict(action) for action in runnable),
            invalid_tool_calls=tuple(
                {**_call_dict(action), "error": action.error} for action in broken
            ),
            usage=usage, duration_ms=_elapsed_ms(start), raw=message.model_dump(mode="json"),
        )  # fmt: skip

        observations: dict[str, ToolMessage] = {}
        for action in broken:
            yield ToolCallStarted(
                iteration=iteration, tool_call_id=action.tool_call_id, name=action.tool,
                args=action.tool_input, log=action.log,
            )  # fmt: skip
            summary = action.error.splitlines()[0] if action.error else ""
            yield ToolCallFinished(
                iteration=iteration, tool_call_id=action.tool_call_id, name=action.tool,
                status=StepStatus.ERROR, result=action.error, observation=action.error,
                error=f"{action.error_type or 'ParseError'}: {summary}", duration_ms=0,
            )  # fmt: skip
            observations[action.tool_call_id] = ToolMessage(
                content=action.error, tool_call_id=action.tool_call_id, name=action.tool,
                status="error",
            )  # fmt: skip

        for action in runnable:
            yield ToolCallStarted(
                iteration=iteration, tool_call_id=action.tool_call_id, name=action.tool,
                args=action.tool_input, log=action.log,
            )  # fmt: skip
        tasks = [
            asyncio.ensure_future(_call_tool(by_name, _call_dict(action), limits))
            for action in runnable
        ]
        try:
            for done in asyncio.as_completed(tasks):
                call, status, result, error, duration_ms = await done
                observation = clip(result, limits.max_observation_chars)
                result = clip(result, max(limits.max_result_chars, limits.max_observation_chars))
                yield ToolCallFinished(
                    iteration=iteration, tool_call_id=call["id"], name=call["name"],
                    status=status, result=result, observation=observation, error=error,
                    duration_ms=duration_ms,
                )  # fmt: skip
                observations[call["id"]] = ToolMessage(
                    content=observation, tool_call_id=call["id"], name=call["name"],
                    status="error" if status is StepStatus.ERROR else "success",
                )  # fmt: skip
        finally:
            for task in tasks:
                task.cancel()
        # In the order the model asked, whatever order the calls finished in.
        intermediate_steps.extend(
            (action, observations[action.tool_call_id]) for action in [*broken, *runnable]
        )

    yield RunFinished(
        status=RunStatus.MAX_ITERATIONS, output="", iterations=limits.max_iterations,
        error=ITERATION_LIMIT.format(limit=limits.max_iterations), usage=usage_total,
    )  # fmt: skip


def merged_message(merged: AIMessageChunk) -> AIMessage:
    """Return the AIMessage of a merged stream, its tool calls parsed as strict JSON.

    LangChain parses streamed arguments with ``parse_partial_json``, which completes a
    truncated object: ``{"expression": "17*2`` (a reply cut off at the token limit)
    becomes ``{"expression": "17*2"}``, a call that would run with guessed arguments. Here
    each call's whole argument text must be a strict JSON object (or empty, meaning no
    arguments; :mod:`agents.strategies.strict_json`); one that is not becomes an invalid
    tool call with the decoder's error. Unpaired surrogates (``"\\ud83d"`` in a
    provider's JSON) become U+FFFD in the text, which could not be stored otherwise.
    """
    message = message_chunk_to_message(merged)
    assert isinstance(message, AIMessage)
    if isinstance(message.content, str) and strict_json.SURROGATE.search(message.content):
        message = message.model_copy(update={"content": strict_json.scrub(message.content)})
    if not merged.tool_call_chunks:
        return message
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for chunk in merged.tool_call_chunks:
        raw = chunk.get("args") or ""
        name = strict_json.scrub(chunk.get("name") or "")
        try:
            args = strict_json.loads(raw) if raw.strip() else {}
            if not isinstance(args, dict):
                raise ValueError(f"a JSON {type(args).__name__}, not an object")
        except ValueError as exc:
            call = invalid_tool_call(
                name=name, args=strict_json.scrub(raw), id=chunk.get("id"), error=str(exc)
            )
            invalid.append(call)
        else:
            calls.append(tool_call(name=name, args=args, id=chunk.get("id")))
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})


async def _close(stream: Any) -> None:
    """Close an async generator the loop stopped reading (a time-out or an error)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


def _call_dict(action: ToolCallAction) -> dict[str, Any]:
    """Return ``action`` as a LangChain ``ToolCall`` dict (``{"name", "args", "id"}``)."""
    return {"name": action.tool, "args": action.tool_input, "id": action.tool_call_id}


def _parse(strategy: Strategy, message: AIMessage) -> list[ToolCallAction] | AgentFinish:
    """Return ``strategy.parse(message)``, a format error as one action carrying it."""
    try:
        return strategy.parse(message)
    except ParseError as exc:
        return [
            ToolCallAction(
                tool=exc.tool,
                tool_input=exc.tool_input,
                log=str(message.text),
                message_log=[message],
                tool_call_id=new_tool_call_id(),
                error=exc.observation,
                error_type="OutputParserException",
            )
        ]
