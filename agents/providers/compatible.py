"""ChatOpenAI for the servers that speak OpenAI's chat-completions protocol their own way.

:class:`CompatibleChatOpenAI` is langchain-openai's ``ChatOpenAI`` with a provider's
:class:`~agents.providers.base.Quirks` profile applied, the one place the protocol's
variants are handled. It is imported only when a model is built (it imports
langchain-openai). What it changes, and why (each with a test in
``tests/agents/test_provider_quirks.py`` and one through a fake server in
``tests/agents/test_openai_compatible.py``):

Received, for every provider (nothing a conforming server sends is changed):

- ``function.arguments`` as a JSON object instead of a string (some llama.cpp builds,
  ggml-org/llama.cpp#20198), or any other JSON value, becomes its JSON text;
  ``ChatOpenAI`` would fail the whole turn with a pydantic ``ValidationError``. A tool
  call without ``index`` gets its position in the delta's list.
- A tool name sent again on every chunk of one call (llama.cpp's server with tools, and
  llama-cpp-python's) is kept once: LangChain's chunk merging concatenates strings, so
  ``calculator`` would become ``calculatorcalculator...``. A repeated whole-object
  ``arguments`` is dropped the same way. A new call id on an index already used for
  another call (servers that number every parallel call 0) moves that call to an index
  of its own instead of gluing two calls together.
- ``usage`` inside ``choices[0]`` instead of beside it is read as the chunk's usage.
- A choice whose ``delta`` is ``null`` or missing (a last chunk carrying only its
  ``finish_reason``) counts as an empty delta, so the reply's end is seen.
- Reasoning text, ``delta.reasoning_content`` (DeepSeek, vLLM/SGLang before 0.9, Qwen on
  DashScope) or ``delta.reasoning`` (newer vLLM, Ollama, OpenRouter), arrives as
  ``AIMessageChunk.additional_kwargs["reasoning_content"]`` (text pieces, merged by
  chunk merging), as langchain-deepseek's ``ChatDeepSeek`` does.
- An error object as an event of a 200 stream in vLLM's shape (``{"object": "error",
  "message": ...}``, which the OpenAI SDK does not read as an error) raises
  :class:`~agents.model_errors.ErrorEvent` with the server's message.
- An HTTP 200 whose stream carries no chunk at all (llama.cpp when the prompt overflows
  its context) raises :class:`~agents.model_errors.EmptyReply`; a stream that ends with
  no ``finish_reason`` (the connection closed mid-reply) raises
  :class:`~agents.model_errors.IncompleteReply`, so a truncated reply is never taken for
  a whole one.

Sent, for every provider: arguments that are not a JSON object (an invalid tool call
sent back) as ``"{}"``, since llama.cpp's server answers HTTP 500 to the whole request
otherwise (:func:`object_arguments`); tool-call ids in the profile's style, unique within
the request (:mod:`agents.providers.call_ids`).

Refused: a request the server refuses for something :mod:`agents.providers.learned`
reads (a field the model does not take, reasoning it wants back, ids of another form) is
sent again once with that lesson, which every later request to the server and model
keeps; a reply whose own tool-call ids are all nine letters and digits teaches that
style too.

Sent, by profile: ``reasoning_content`` back on assistant messages
(``send_reasoning_content``; ``ChatDeepSeek`` 1.1.1 receives it but does not send it
back, so DeepSeek's thinking mode answers the second request of a tool-using run with
HTTP 400 "Missing reasoning_content"), ``content: ""`` beside tool calls
(``empty_content_with_tool_calls``) and the output cap as ``max_tokens``
(``max_tokens_field``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI
from pydantic import ConfigDict

from agents.model_errors import EmptyReply, ErrorEvent, IncompleteReply
from agents.providers.base import MAX_TOKENS_FIELDS, Quirks
from agents.providers.call_ids import ALNUM9, STYLES, sendable_ids
from agents.providers.learned import (
    ALNUM9_SEEN,
    Learned,
    learn,
    learned,
    lesson_from,
    server_key,
)

# Where servers put reasoning text in a streamed delta, the first found wins: vLLM in
# its transition sent both names with the same text.
REASONING_FIELDS = ("reasoning_content", "reasoning")

# Lessons one refused request may teach before its refusal is final (each is learned once).
MAX_LESSONS = 3

# The body of the request being sent and what was known of the server as it was built,
# for reading what its refusal refers to.
_sent: ContextVar[tuple[dict[str, Any], Learned]] = ContextVar(
    "sent_request", default=({}, Learned())
)

# The OpenAI SDK dumps each streamed chunk with pydantic, which warns (once per chunk) that
# an object ``arguments`` is not the ``str`` its type says; the object is repaired here.
warnings.filterwarnings(
    "ignore",
    message=r"Pydantic serializer warnings:[\s\S]*field_name='arguments'",
    category=UserWarning,
)


class CompatibleChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` that applies ``quirks`` (a :class:`Quirks` profile) to its requests
    and repairs the stream shapes listed in this module's docstring.

    Streaming only (the app always streams): a non-streamed reply gets ``ChatOpenAI``'s
    handling unchanged.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    quirks: Quirks = Quirks()

    # Received -----------------------------------------------------------------------

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict,
        default_chunk_class: type,
        base_generation_info: dict | None,
    ) -> ChatGenerationChunk | None:
        """Return ``ChatOpenAI``'s generation chunk for ``chunk`` once its delta is repaired.

        ``chunk`` is one streamed ``chat.completion.chunk`` as a dict; see
        :func:`repair_delta` for what changes.
        """
        if chunk.get("object") == "error":
            # vLLM's error event mid-stream: {"object": "error", "message": ..., "code": ...}
            message = chunk.get("message")
            raise ErrorEvent(message if isinstance(message, str) and message else str(chunk))
        delta = None
        choices = chunk.get("choices") or []
        if not chunk.get("usage") and choices and isinstance(choices[0], dict):
            # Usage inside the choice rather than beside it (some proxies): ChatOpenAI
            # reads only the chunk's own ``usage``, and the turn would have no counts.
            inner = choices[0].get("usage")
            if isinstance(inner, dict):
                chunk["usage"] = inner
        if choices and isinstance(choices[0], dict):
            # A last chunk with ``"delta": null`` or none at all, beside its finish_reason
            # (some proxies): ChatOpenAI would skip it or raise KeyError.
            if not isinstance(choices[0].get("delta"), dict):
                choices[0]["delta"] = {}
            delta = choices[0]["delta"]
            repair_delta(delta)
        generation = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        if generation is not None and isinstance(delta, dict):
            reasoning = reasoning_text(delta)
            if reasoning and isinstance(generation.message, AIMessageChunk):
                generation.message.additional_kwargs["reasoning_content"] = reasoning
        return generation

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for attempt in range(MAX_LESSONS + 1):
            repair = StreamRepair()
            try:
                for generation in super()._stream(*args, **kwargs):
                    yield repair.chunk(generation)
            except Exception as exc:
                if not self._send_again(exc, repair, attempt):
                    raise
                continue
            self._ended(repair)
            return

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for attempt in range(MAX_LESSONS + 1):
            repair = StreamRepair()
            try:
                async for generation in super()._astream(*args, **kwargs):
                    yield repair.chunk(generation)
            except Exception as exc:
                if not self._send_again(exc, repair, attempt):
                    raise
                continue
            self._ended(repair)
            return

    @property
    def server_key(self) -> str:
        """Return the key of what was learned about this server and model
        (:mod:`agents.providers.learned`)."""
        return server_key(self.openai_api_base or "https://api.openai.com/v1", self.model_name)

    def _send_again(self, exc: Exception, repair: StreamRepair, attempt: int) -> bool:
        """Learn what ``exc``, the refusal of the request just sent (try ``attempt``,
        from 0), teaches; return True when the request is worth sending again with it:
        nothing of the reply arrived, a lesson is left to learn and this one is new to
        the request (another run may have learned it since the request was built)."""
        if repair.chunks or attempt >= MAX_LESSONS:
            return False
        sent, known = _sent.get()
        lesson = lesson_from(exc, sent)
        if lesson is None:
            return False
        learn(self.server_key, lesson)
        return lesson.applied(known) != known

    def _ended(self, repair: StreamRepair) -> None:
        """Check the reply ``repair`` saw was whole; learn the server's id style from it.

        A server whose own tool-call ids are all nine letters and digits (Mistral's API,
        vLLM with a Mistral tokenizer) refuses any other: later requests send that style.
        """
        repair.end()
        if self.quirks.tool_call_ids == ALNUM9:  # the profile sends them so already
            return
        ids = [call["id"] for call in repair.calls.values() if call["id"]]
        if ids and all(STYLES[ALNUM9].fullmatch(i) for i in ids):
            learn(self.server_key, ALNUM9_SEEN)

    # Sent ---------------------------------------------------------------------------

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict:
        """Return ``ChatOpenAI``'s request body with the profile's changes.

        The body's ``messages`` are built one per input message, in order, so each sent
        dict is paired with the message it came from.
        """
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        known = learned(self.server_key)
        quirks = with_learned(self.quirks, known)
        if isinstance(payload.get("messages"), list):
            messages = self._convert_input(input_).to_messages()
            for message, sent in zip(messages, payload["messages"], strict=False):
                if sent.get("role") == "assistant":
                    apply_assistant_quirks(quirks, message, sent)
                    object_arguments(sent)
            sendable_ids(payload["messages"], quirks.tool_call_ids)
        other = next(f for f in MAX_TOKENS_FIELDS if f != quirks.max_tokens_field)
        if other in payload:
            payload[quirks.max_tokens_field] = payload.pop(other)
        for name in known.dropped:
            payload.pop(name, None)
        _sent.set((payload, known))
        return payload


def with_learned(quirks: Quirks, known: Learned) -> Quirks:
    """Return profile ``quirks`` with what was learned about the server (``known``)."""
    return replace(
        quirks,
        send_reasoning_content=quirks.send_reasoning_content or known.send_reasoning_content,
        tool_call_ids=known.tool_call_ids or quirks.tool_call_ids,
        max_tokens_field=known.max_tokens_field or quirks.max_tokens_field,
    )


def apply_assistant_quirks(quirks: Quirks, message: BaseMessage, sent: dict[str, Any]) -> None:
    """Change ``sent`` (the request dict of assistant ``message``) as ``quirks`` asks.

    With ``send_reasoning_content``, the message's reasoning goes back as
    ``reasoning_content``; a message with tool calls and no reasoning known (history
    rebuilt from storage, or a turn without thinking) sends ``""``, since DeepSeek
    rejects a tool-call message without the field. With
    ``empty_content_with_tool_calls``, ``content: null`` beside tool calls becomes ``""``.
    """
    if quirks.send_reasoning_content and isinstance(message, AIMessage):
        reasoning = message.additional_kwargs.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            sent["reasoning_content"] = reasoning
        elif sent.get("tool_calls"):
            sent["reasoning_content"] = ""
    if quirks.empty_content_with_tool_calls and sent.get("tool_calls") and sent["content"] is None:
        sent["content"] = ""


def object_arguments(sent: dict[str, Any]) -> None:
    """Send ``"{}"`` for each call of assistant dict ``sent`` whose arguments are not a
    JSON object (an invalid tool call: cut off, broken or a scalar).

    langchain-openai sends ``invalid_tool_calls`` back with their raw text; llama.cpp's
    server parses every ``arguments`` of the history and answers HTTP 500 "Failed to parse
    tool call arguments as JSON" (ggml-org/llama.cpp#25510, #21771), so one broken call
    would fail every later request of the run. The call's ToolMessage still says why it
    did not run.
    """
    for call in sent.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and not _is_json_object(function.get("arguments") or "{}"):
            function["arguments"] = "{}"


def repair_delta(delta: dict[str, Any]) -> None:
    """Repair one streamed ``delta`` dict in place, where no conforming server differs.

    Each ``tool_calls`` item: ``function.arguments`` given as any JSON value but a string
    (an object, some llama.cpp builds; an array, number or boolean) becomes its JSON text
    (``ensure_ascii=False``, so Chinese stays readable), so a value that is not an object
    ends as an invalid tool call with its reason, not a pydantic ``ValidationError`` that
    fails the whole turn; ``null`` stays ``null`` (no arguments yet). A missing ``index``
    becomes the item's position in the list.
    """
    tool_calls = delta.get("tool_calls")
    if not isinstance(tool_calls, list):
        return
    for position, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            continue
        if not isinstance(call.get("index"), int):
            call["index"] = position
        function = call.get("function")
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(function, dict) and arguments is not None and not isinstance(arguments, str):
            function["arguments"] = json.dumps(function["arguments"], ensure_ascii=False)


def reasoning_text(delta: dict[str, Any]) -> str:
    """Return the reasoning text of a streamed ``delta`` ("" when it has none)."""
    for field in REASONING_FIELDS:
        value = delta.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


class StreamRepair:
    """The state of one streamed reply: the tool calls seen so far, and how it ended.

    :meth:`chunk` is given each generation chunk in order and returns it repaired;
    :meth:`end` raises when the stream had no chunk or no ``finish_reason``.
    """

    def __init__(self) -> None:
        self.chunks = 0
        self.finished = False
        # Per index as the client sees it: the call's id, name and arguments so far.
        self.calls: dict[int, dict[str, str]] = {}
        # The server's index -> ours, when a new call reused an index.
        self.moved: dict[int, int] = {}

    def chunk(self, generation: ChatGenerationChunk) -> ChatGenerationChunk:
        """Return ``generation`` with its tool-call chunks repaired; note how it ends."""
        self.chunks += 1
        if (generation.generation_info or {}).get("finish_reason"):
            self.finished = True
        message = generation.message
        if not isinstance(message, AIMessageChunk) or not message.tool_call_chunks:
            return generation
        repaired = [self._call(dict(call)) for call in message.tool_call_chunks]
        if repaired == list(message.tool_call_chunks):
            return generation
        fields = message.model_dump(exclude={"tool_calls", "invalid_tool_calls"})
        fields["tool_call_chunks"] = repaired
        generation.message = AIMessageChunk.model_validate(fields)
        return generation

    def _call(self, call: dict[str, Any]) -> dict[str, Any]:
        index = call.get("index")
        if not isinstance(index, int):
            return call
        index = self.moved.get(index, index)
        seen = self.calls.get(index)
        call_id, name, args = call.get("id"), call.get("name"), call.get("args")
        if seen is not None and call_id and seen["id"] and call_id != seen["id"]:
            # A different call on an index in use: give it an index of its own.
            new_index = max(self.calls) + 1
            self.moved[call["index"]] = index = new_index
            seen = None
        call["index"] = index
        if seen is None:
            self.calls[index] = {"id": call_id or "", "name": name or "", "args": args or ""}
            return call
        if call_id and not seen["id"]:
            seen["id"] = call_id
        if name:
            if name == seen["name"]:
                call["name"] = None  # said again, not a continuation
            else:
                seen["name"] += name
        if args:
            if args == seen["args"] and _is_json_object(args):
                call["args"] = None  # the whole object again
            else:
                seen["args"] += args
        return call

    def end(self) -> None:
        """Raise :class:`EmptyReply` or :class:`IncompleteReply` for a stream that was not whole."""
        if not self.chunks:
            raise EmptyReply("The server answered with a stream that had no chunks.")
        if not self.finished:
            raise IncompleteReply("The stream ended before a chunk gave a finish_reason.")


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
