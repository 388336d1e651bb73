"""One model turn of the agent loop: stream the reply, merge its chunks, parse it.

:class:`ModelTurn` is the model half of :func:`agents.runtime.run` (the tool half is
:mod:`agents.tool_calls`): it streams the bound model, yields a :class:`TextDelta` per text
piece and one :class:`ModelTurnFinished`, and leaves what the loop needs next on itself:
the parsed actions or final answer, or why the model call failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.agents import AgentFinish
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    message_chunk_to_message,
)
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call, tool_call
from langchain_core.runnables import Runnable

from agents.events import ModelTurnFinished, TextDelta
from agents.model_errors import describe_model_error
from agents.strategies import ParseError, Strategy, ToolAgentAction, strict_json
from agents.strategies.base import new_tool_call_id

MODEL_TIMED_OUT = "The model did not answer within {seconds:g} seconds."


def elapsed_ms(start: float) -> int:
    """Return the whole milliseconds since ``start``, a ``time.monotonic()`` reading."""
    return int((time.monotonic() - start) * 1000)


def error_text(exc: BaseException) -> str:
    """Return ``"ExceptionClass: message"``, as steps store an error."""
    return f"{type(exc).__name__}: {exc}"


class ModelTurn:
    """The ``iteration``-th model turn of a run with ``strategy``.

    After :meth:`stream` has run to its end, ``usage`` is the reply's ``usage_metadata``
    (None when not reported) and exactly one of these holds: ``failure`` is
    the reason in plain words the model call failed (raised, timed out); ``finish`` is
    the final answer; or ``actions`` are the tool calls it asked for (those that cannot
    run carry their format error).
    """

    def __init__(self, strategy: Strategy, *, iteration: int, timeout_s: float) -> None:
        self.strategy = strategy
        self.iteration = iteration
        self.timeout_s = timeout_s
        self.failure = ""
        self.usage: dict[str, Any] | None = None
        self.finish: AgentFinish | None = None
        self.actions: list[ToolAgentAction] = []

    async def stream(
        self, bound: Runnable[LanguageModelInput, BaseMessage], history: Sequence[BaseMessage]
    ) -> AsyncIterator[TextDelta | ModelTurnFinished]:
        """Yield a :class:`TextDelta` per streamed text piece, then the turn's end.

        The chunks are merged with ``+`` (LangChain's chunk merging), so tool calls split
        over chunks come out whole. The turn's deadline (``timeout_s``) is checked only
        while waiting for the model, never while the caller handles a yielded delta:
        firing inside the caller (writing a row) would cancel that instead and end the run
        as cancelled, not timed out (found under load).
        """
        start = time.monotonic()
        merged: AIMessageChunk | None = None
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        chunks = aiter(bound.astream(history))
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                merged = chunk if merged is None else merged + chunk
                # A plain str (.text is a callable str subclass), storable (no lone
                # surrogates, which a provider's JSON can carry as "\ud83d").
                delta = strict_json.scrub(str(chunk.text))
                if delta:
                    yield TextDelta(iteration=self.iteration, text=delta)
        except Exception as exc:
            await _close(chunks)
            yield self._failed(exc, merged, elapsed_ms(start))
            return
        message = merged_message(merged) if merged is not None else AIMessage("")
        yield self._finished(message, elapsed_ms(start))

    def _failed(
        self, exc: Exception, merged: AIMessageChunk | None, duration_ms: int
    ) -> ModelTurnFinished:
        # The user reads why in plain words; the turn keeps the provider's whole error
        # ("RateLimitError: Error code: 429 - {...}") for the audit trail.
        if isinstance(exc, TimeoutError):
            self.failure = detail = MODEL_TIMED_OUT.format(seconds=self.timeout_s)
        else:
            self.failure, detail = describe_model_error(exc), error_text(exc)
        text = strict_json.scrub(str(merged.text)) if merged is not None else ""
        return ModelTurnFinished(
            iteration=self.iteration, text=text, tool_calls=(), invalid_tool_calls=(),
            usage=None, duration_ms=duration_ms, raw={}, error=detail,
            error_type=type(exc).__name__,
        )  # fmt: skip

    def _finished(self, message: AIMessage, duration_ms: int) -> ModelTurnFinished:
        parsed = _parse(self.strategy, message)
        self.usage = dict(message.usage_metadata) if message.usage_metadata else None
        common: dict[str, Any] = {
            "iteration": self.iteration, "text": str(message.text), "usage": self.usage,
            "duration_ms": duration_ms, "raw": message.model_dump(mode="json"),
        }  # fmt: skip
        if isinstance(parsed, AgentFinish):
            self.finish = parsed
            return ModelTurnFinished(
                **common, tool_calls=(), invalid_tool_calls=(), final_answer=self.answer
            )
        self.actions = parsed
        return ModelTurnFinished(
            **common,
            tool_calls=tuple(call_dict(a) for a in parsed if not a.error),
            invalid_tool_calls=tuple({**call_dict(a), "error": a.error} for a in parsed if a.error),
        )

    @property
    def answer(self) -> str:
        """Return the final answer's text ("" when the turn asked for tools or failed)."""
        return str(self.finish.return_values.get("output", "")) if self.finish else ""


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


def call_dict(action: ToolAgentAction) -> dict[str, Any]:
    """Return ``action`` as a LangChain ``ToolCall`` dict (``{"name", "args", "id"}``)."""
    return {"name": action.tool, "args": action.tool_input, "id": action.tool_call_id}


async def _close(stream: Any) -> None:
    """Close an async generator the loop stopped reading (a time-out or an error)."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


def _parse(strategy: Strategy, message: AIMessage) -> list[ToolAgentAction] | AgentFinish:
    """Return ``strategy.parse(message)``, a format error as one action carrying it."""
    try:
        return strategy.parse(message)
    except ParseError as exc:
        return [
            ToolAgentAction(
                tool=exc.tool,
                tool_input=exc.tool_input,
                log=str(message.text),
                message_log=[message],
                tool_call_id=new_tool_call_id(),
                error=exc.observation,
                error_type="OutputParserException",
            )
        ]
