"""A scripted chat model for tests, after LangGraph's prebuilt tests' fake model.

langchain-core's ``GenericFakeChatModel`` has no ``bind_tools``; this one accepts it and
answers from a script: each turn pops the next item (an ``AIMessage``, a list of
``AIMessageChunk`` streamed exactly as given, an exception to raise, or a callable taking
the messages and returning any of these). Text is streamed word by word so the loop's
``TextDelta`` events are exercised (an ``additional_kwargs["reasoning_content"]`` goes on
the first chunk, as DeepSeek streams it before the text); ``gates`` hold a turn mid-stream
until the test lets it go, so "while the model is still talking" is a state a test
creates, not a race it hopes to win.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    message_chunk_to_message,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

ScriptItem = AIMessage | list[AIMessageChunk] | BaseException | Callable[[list[BaseMessage]], Any]


def tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """Return a LangChain ``ToolCall`` dict."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


class ScriptedChatModel(BaseChatModel):
    """Answer each turn with the next script item; remember every prompt in ``prompts``.

    ``calls`` keeps, per turn, the ``stop`` sequences and the bound keyword arguments
    (``tools`` as names, ``tool_choice``, ``parallel_tool_calls``) the model was called with.
    ``gates`` maps a chunk's index (in every streamed turn) to an ``asyncio.Event`` the
    stream waits for before sending that chunk: an event the test never sets holds the turn
    until the run is cancelled, like a model that stopped answering.
    """

    script: list[Any] = Field(default_factory=list)
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    calls: list[dict[str, Any]] = Field(default_factory=list)
    delay_s: float = 0.0
    gates: dict[int, Any] = Field(default_factory=dict)
    model_name: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", t) for t in tools], **kwargs)

    def _next(
        self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any
    ) -> AIMessage:
        self.prompts.append(list(messages))
        self.calls.append({"stop": stop, **kwargs})
        if not self.script:
            raise AssertionError("the scripted model ran out of answers")
        item = self.script.pop(0)
        if callable(item) and not isinstance(item, BaseException | AIMessage | list):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        return item

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._next(messages, stop, **kwargs)
        if isinstance(message, list):
            merged = message[0]
            for chunk in message[1:]:
                merged = merged + chunk
            message = message_chunk_to_message(merged)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _chunks(self, message: AIMessage | list[AIMessageChunk]) -> Iterator[AIMessageChunk]:
        if isinstance(message, list):
            yield from message
            return
        reasoning = message.additional_kwargs.get("reasoning_content")
        if reasoning:
            yield AIMessageChunk(content="", additional_kwargs={"reasoning_content": reasoning})
        words = re.findall(r"\S+\s*|\s+", message.text) or [""]
        for i, word in enumerate(words):
            last = i == len(words) - 1
            yield AIMessageChunk(
                content=word,
                tool_call_chunks=[
                    {"name": c["name"], "args": _json(c["args"]), "id": c["id"], "index": n}
                    for n, c in enumerate(message.tool_calls)
                ]
                + [
                    {"name": c.get("name"), "args": c.get("args"), "id": c.get("id"),
                     "index": len(message.tool_calls) + n}
                    for n, c in enumerate(message.invalid_tool_calls)
                ]
                if last
                else [],
                usage_metadata=message.usage_metadata if last else None,
            )  # fmt: skip

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks(self._next(messages, stop, **kwargs)):
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = self._next(messages, stop, **kwargs)
        for index, chunk in enumerate(self._chunks(message)):
            gate = self.gates.get(index)
            if gate is not None:
                await gate.wait()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            yield ChatGenerationChunk(message=chunk)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
