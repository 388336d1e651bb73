"""One model turn of the agent loop: stream the reply, merge its chunks, parse it.

:class:`ModelTurn` is the model half of :func:`agents.runtime.run` (the tool half is
:mod:`agents.tool_calls`): it streams the bound model, yields a :class:`TextDelta` per text
piece (a :class:`ReasoningDelta` per reasoning piece) and one :class:`ModelTurnFinished`,
and leaves what the loop needs next on itself: the parsed actions or final answer, or why
the model call failed.

A reply whose ``finish_reason`` is "length" (the server stopped at ``max_tokens``) and
that would be the final answer is not one: the turn fails with :data:`CUT_OFF`
(``error_type`` :data:`CUT_OFF_ERROR_TYPE`) and keeps the partial text. Tool calls cut
off that way are already invalid tool calls (their arguments are not strict JSON).

Reasoning is taken out before the strategy parses the reply (:mod:`agents.reasoning`),
so thinking that contains ``Action:``, JSON or a code fence is never read as format, and
never becomes the answer. The message kept for the scratchpad keeps
``additional_kwargs["reasoning_content"]`` (DeepSeek requires it back on the next
request) and loses the inline ``<think>`` markup.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.agents import AgentFinish
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call, tool_call
from langchain_core.runnables import Runnable

from agents.events import ModelTurnFinished, ReasoningDelta, TextDelta
from agents.model_errors import describe_model_error
from agents.reasoning import ThinkSplitter, join_reasoning, reasoning_of_chunk, split_think
from agents.strategies import ParseError, Strategy, ToolAgentAction, strict_json
from agents.strategies.base import new_tool_call_id
from agents.timing import Deadline, Stopwatch

MODEL_TIMED_OUT = "The model did not answer within {seconds:g} seconds."
# A reply that had started but was still streaming at the deadline: a model that runs on
# (a small local one without an output cap), not a server that did not answer.
MODEL_STILL_WRITING = (
    "The model was still writing its reply after {seconds:g} seconds and was stopped "
    "there; a cap on a reply's length (AGENT_MAX_TOKENS) ends such replies sooner."
)
# A would-be final answer the server stopped at the request's output cap: half an answer
# stored as a whole one would be wrong in a way nobody sees. The name is the OpenAI SDK's
# own (openai.LengthFinishReasonError, raised by its structured-output helpers).
CUT_OFF = (
    "The model's reply was cut off at its output limit (max_tokens; AGENT_MAX_TOKENS sets "
    "it) before it finished; what it wrote is kept on its turn."
)
CUT_OFF_ERROR_TYPE = "LengthFinishReasonError"
# ``finish_reason`` values that mean "stopped at the output cap": OpenAI's and every
# OpenAI-compatible server's "length"; "max_tokens" is Anthropic's ``stop_reason`` word,
# which some proxies pass through.
CUT_OFF_REASONS = frozenset({"length", "max_tokens"})


def error_text(exc: BaseException) -> str:
    """Return ``"ExceptionClass: message"``, as steps store an error (a private class
    named by its nearest public base: :func:`public_class`)."""
    return f"{public_class(type(exc)).__name__}: {exc}"


def public_class(cls: type) -> type:
    """Return ``cls``, or its nearest base whose name has no leading underscore."""
    for base in cls.__mro__:
        if not base.__name__.startswith("_"):
            return base
    return cls


# Streamed chunks merged at once (LangChain's ``+`` over a list): one message built per
# this many chunks instead of one per chunk, and a long reply's chunks not all held.
MERGE_EVERY = 256


class ModelTurn:
    """The ``iteration``-th model turn of a run with ``strategy``.

    After :meth:`stream` has run to its end, ``usage`` is the reply's ``usage_metadata``
    (None when not reported), ``reasoning`` its reasoning text, and exactly one of these
    holds: ``failure`` is the reason in plain words the model call failed (raised, timed
    out, an answer cut off at the output limit); ``finish`` is the final answer; or
    ``actions`` are the tool calls it asked for (those that cannot run carry their format
    error). ``finish_reason`` is the last one a chunk sent ("" for none);
    ``first_token_ms`` the milliseconds from asking the model to the first chunk that
    carried text, reasoning or a tool call (None until one came). ``timeout_s``: the
    seconds the turn may spend waiting for the model (:class:`agents.timing.Deadline`).
    """

    def __init__(self, strategy: Strategy, *, iteration: int, timeout_s: float) -> None:
        self.strategy = strategy
        self.iteration = iteration
        self.timeout_s = timeout_s
        self.failure = ""
        self.usage: dict[str, Any] | None = None
        self.finish: AgentFinish | None = None
        self.actions: list[ToolAgentAction] = []
        self._splitter = ThinkSplitter()
        self._field_reasoning: list[str] = []
        self.finish_reason = ""
        self.first_token_ms: int | None = None

    async def stream(
        self, bound: Runnable[LanguageModelInput, BaseMessage], history: LanguageModelInput
    ) -> AsyncIterator[TextDelta | ReasoningDelta | ModelTurnFinished]:
        """Yield a :class:`TextDelta` per streamed text piece, then the turn's end.

        Reasoning pieces (a ``reasoning_content`` field, reasoning content blocks, inline
        ``<think>`` markup split however the chunks fall) are :class:`ReasoningDelta`
        events instead. The chunks are merged once, at the end, with ``+`` over the list
        of them (LangChain's chunk merging: one message built a turn, not one a chunk),
        so tool calls split over chunks come out whole; usage is :func:`response_usage` of
        the chunks, never their sum. The turn's deadline (``timeout_s``) counts only the
        time spent waiting for the model, never the time the caller spends handling a
        yielded delta: a time-out firing inside the caller would cancel its work (a row
        being written) and charge a loaded server's own queue to the model.

        The turn is timed from here (:class:`agents.timing.Stopwatch`): the finishing
        event carries its start, finish, duration and time to first token.
        """
        watch = Stopwatch()
        first: AIMessageChunk | None = None
        rest: list[AIMessageChunk] = []
        usages: list[dict[str, Any]] = []
        chunks = aiter(bound.astream(history))
        try:
            async with Deadline(self.timeout_s) as deadline:
                while True:
                    deadline.arm()
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    if first is None:
                        first = chunk
                    else:
                        rest.append(chunk)
                        if len(rest) >= MERGE_EVERY:  # a long reply's chunks are not all kept
                            first, rest = first + rest, []
                    text, thought = _text_and_reasoning(chunk)
                    if self.first_token_ms is None and (
                        text or thought or getattr(chunk, "tool_call_chunks", None)
                    ):
                        self.first_token_ms = watch.elapsed_ms()
                    # Kept per chunk: merging concatenates a repeated one ("lengthlength").
                    metadata = getattr(chunk, "response_metadata", None) or {}
                    reason = metadata.get("finish_reason")
                    if isinstance(reason, str) and reason:
                        self.finish_reason = reason
                    if getattr(chunk, "usage_metadata", None):
                        usages.append(dict(chunk.usage_metadata))
                    if thought:
                        thought = strict_json.scrub(thought)
                        self._field_reasoning.append(thought)
                        deadline.pause()  # the caller's time is not the model's
                        yield ReasoningDelta(iteration=self.iteration, text=thought)
                    if text:  # an empty piece changes nothing in the splitter
                        # Storable: no lone surrogates, which a provider's JSON can carry
                        # as "\ud83d".
                        events = self._pieces(self._splitter.feed(strict_json.scrub(text)))
                        if events:
                            deadline.pause()
                        for event in events:
                            yield event
            for event in self._pieces(self._splitter.finish()):
                yield event
        except Exception as exc:
            await _close(chunks)
            yield self._failed(exc, streamed=first is not None, watch=watch)
            return
        usage = response_usage(usages) if usages else None
        if first is None:
            message = AIMessage("", usage_metadata=usage)
        else:
            merged = first + rest if rest else first
            message = merged_message(merged, usage_metadata=usage)
        yield self._finished(message, watch)

    def _pieces(self, pieces: list[tuple[str, str]]) -> list[TextDelta | ReasoningDelta]:
        """Return the events for the splitter's ``(kind, text)`` pieces."""
        events: list[TextDelta | ReasoningDelta] = []
        for kind, text in pieces:
            if kind == "text":
                events.append(TextDelta(iteration=self.iteration, text=text))
            else:
                events.append(
                    ReasoningDelta(iteration=self.iteration, text=text, moved=kind == "moved")
                )
        return events

    @property
    def reasoning(self) -> str:
        """Return the turn's reasoning so far: the field's, then the inline markup's."""
        # Field pieces are one text streamed in parts; inline markup is a second source.
        if not self._field_reasoning and not self._splitter.reasoning:
            return ""
        return join_reasoning(["".join(self._field_reasoning), self._splitter.reasoning])

    def _timing(self, watch: Stopwatch) -> dict[str, Any]:
        """Return the timing fields of the turn's finishing event, read now."""
        finished_at, duration_ms = watch.stop()
        return {
            "started_at": watch.started_at, "at": finished_at, "duration_ms": duration_ms,
            "first_token_ms": self.first_token_ms,
        }  # fmt: skip

    def _failed(self, exc: Exception, *, streamed: bool, watch: Stopwatch) -> ModelTurnFinished:
        # The user reads why in plain words; the turn keeps the provider's whole error
        # ("RateLimitError: Error code: 429 - {...}") for the audit trail.
        if isinstance(exc, TimeoutError):
            template = MODEL_STILL_WRITING if streamed else MODEL_TIMED_OUT
            self.failure = detail = template.format(seconds=self.timeout_s)
        else:
            self.failure, detail = describe_model_error(exc), error_text(exc)
        text = self._splitter.text.strip() if streamed else ""
        return ModelTurnFinished(
            iteration=self.iteration, text=text, tool_calls=(), invalid_tool_calls=(),
            usage=None, raw={}, error=detail, error_type=type(exc).__name__,
            reasoning=self.reasoning, **self._timing(watch),
        )  # fmt: skip

    def _finished(self, received: AIMessage, watch: Stopwatch) -> ModelTurnFinished:
        message = without_inline_reasoning(received)
        parsed = _parse(self.strategy, message)
        self.usage = dict(message.usage_metadata) if message.usage_metadata else None
        # A strategy may read a reply anew (tool-call markup taken out of a native reply's
        # text): the turn's text is then the text of the message it keeps.
        shown = message
        if isinstance(parsed, list) and parsed and isinstance(parsed[0].message_log[0], AIMessage):
            shown = parsed[0].message_log[0]
        content = shown.content
        common: dict[str, Any] = {
            "iteration": self.iteration,
            "text": content if type(content) is str else str(shown.text),
            "usage": self.usage,
            "raw": received.model_dump(mode="json"), "reasoning": self.reasoning,
            **self._timing(watch),
        }  # fmt: skip
        if isinstance(parsed, AgentFinish) and self.finish_reason in CUT_OFF_REASONS:
            self.failure = CUT_OFF
            return ModelTurnFinished(
                **common, tool_calls=(), invalid_tool_calls=(), error=CUT_OFF,
                error_type=CUT_OFF_ERROR_TYPE,
            )  # fmt: skip
        if isinstance(parsed, AgentFinish):
            self.finish = parsed
            return ModelTurnFinished(
                **common, tool_calls=(), invalid_tool_calls=(), final_answer=self.answer
            )
        self.actions = parsed
        calls, invalid = [], []
        for action in parsed:
            if action.error:
                invalid.append({**call_dict(action), "error": action.error})
            else:
                calls.append(call_dict(action))
        return ModelTurnFinished(
            **common, tool_calls=tuple(calls), invalid_tool_calls=tuple(invalid)
        )

    @property
    def answer(self) -> str:
        """Return the final answer's text ("" when the turn asked for tools or failed)."""
        return str(self.finish.return_values.get("output", "")) if self.finish else ""


def merged_message(
    merged: AIMessageChunk, *, usage_metadata: dict[str, Any] | None = None
) -> AIMessage:
    """Return the AIMessage of a merged stream, its tool calls parsed as strict JSON.

    LangChain parses streamed arguments with ``parse_partial_json``, which completes a
    truncated object: ``{"expression": "17*2`` (a reply cut off at the token limit)
    becomes ``{"expression": "17*2"}``, a call that would run with guessed arguments. Here
    each call's whole argument text must be a strict JSON object (or empty, meaning no
    arguments; :mod:`agents.strategies.strict_json`); one that is not becomes an invalid
    tool call with the decoder's error. Unpaired surrogates (``"\\ud83d"`` in a
    provider's JSON) become U+FFFD in the text, which could not be stored otherwise.
    ``usage_metadata``, when given, replaces the merged chunks' (see
    :func:`response_usage`).

    The message is built once, as ``message_chunk_to_message`` would build it but with
    these fields in place, and without validating again what the chunks' validation and
    the parse here already checked (``model_construct``): it is built every turn.
    """
    fields = merged.__dict__.copy()
    for key in _CHUNK_ONLY:
        fields.pop(key, None)
    content = fields["content"]
    if isinstance(content, str) and strict_json.SURROGATE.search(content):
        fields["content"] = strict_json.scrub(content)
    if usage_metadata is not None:
        fields["usage_metadata"] = usage_metadata
    if merged.tool_call_chunks:
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
        fields["tool_calls"], fields["invalid_tool_calls"] = calls, invalid
    return AIMessage.model_construct(**fields)


# What an AIMessageChunk has that an AIMessage has not (message_chunk_to_message's list).
_CHUNK_ONLY = frozenset({"type", "tool_call_chunks", "chunk_position"})


def without_inline_reasoning(message: AIMessage) -> AIMessage:
    """Return ``message`` without inline ``<think>`` markup in its text content.

    ``additional_kwargs`` (``reasoning_content`` among them) and content blocks other
    than text are kept; a message without markup is returned as it is.
    """
    content = message.content
    if isinstance(content, str):
        reasoning, text = split_think(content)
        return (
            message.model_copy(update={"content": text})
            if reasoning or text != content
            else message
        )
    if not isinstance(content, list):
        return message
    blocks: list[Any] = []
    changed = False
    first_text = True
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and first_text:
            first_text = False
            reasoning, text = split_think(str(block.get("text", "")))
            if reasoning or text != block.get("text"):
                changed = True
                block = {**block, "text": text}
        elif isinstance(block, str) and first_text:
            first_text = False
            reasoning, text = split_think(block)
            changed = changed or text != block
            block = text
        blocks.append(block)
    return message.model_copy(update={"content": blocks}) if changed else message


def response_usage(usages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return one response's usage from its chunks' ``usage_metadata`` dicts.

    The per-key maximum (nested token details too), never the sum: right for a server
    that repeats its running totals on every chunk (LangChain's chunk merging would add
    them up), for OpenAI's single last chunk, and for input counted on the first chunk
    and output on the last (Anthropic's shape).
    ``total_tokens`` is at least input plus output, since such a split reports each half
    with its own total.
    """
    # The usual stream reports once, plain counts: its maximum is a copy of it.
    only = usages[0] if len(usages) == 1 else None
    if only is not None and all(type(value) is int for value in only.values()):
        usage = dict(only)
    else:
        usage = _max_merge(usages)
    inputs, outputs = usage.get("input_tokens"), usage.get("output_tokens")
    if isinstance(inputs, int) and isinstance(outputs, int):
        usage["total_tokens"] = max(int(usage.get("total_tokens") or 0), inputs + outputs)
    return usage


def _max_merge(dicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in dicts:
        for key, value in d.items():
            if isinstance(value, dict):
                out[key] = _max_merge([out.get(key) or {}, value])
            elif isinstance(value, int | float) and not isinstance(value, bool):
                old = out.get(key)
                out[key] = value if not isinstance(old, int | float) else max(old, value)
            elif value is not None and key not in out:
                out[key] = value
    return out


def _text_and_reasoning(chunk: BaseMessage) -> tuple[str, str]:
    """Return a streamed chunk's text (a plain ``str``) and the reasoning it carries
    outside its text (:func:`agents.reasoning.reasoning_of_chunk`), read once per chunk.

    Plain-string content, the usual chunk, is its own text and holds no reasoning
    blocks: only the ``reasoning_content`` field is looked at (``.text`` would build a
    ``TextAccessor``, a callable ``str`` subclass, for every chunk).
    """
    content = chunk.content
    if type(content) is str:
        field = chunk.additional_kwargs.get("reasoning_content")
        return content, field if isinstance(field, str) else ""
    return str(chunk.text), reasoning_of_chunk(chunk)


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
