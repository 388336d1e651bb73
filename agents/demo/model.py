"""``DemoChatModel``: the scripted demo as a LangChain chat model, in every strategy's format.

The format comes from the prompt, as a real model reads it: a system message holding a
text strategy's instructions (:data:`agents.strategies.STRATEGIES`) asks for that format,
with the tools as its JSON Lines; anything else gets native ``tool_calls`` for the tools
bound with ``bind_tools``. Replies are written with the strategies' own writers
(``format_react``, ``format_structured``, ``format_xml`` and their final-answer and
malformed variants), so the parsers read back exactly what the demo meant.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.demo.script import TEXT, Turn, decide
from agents.strategies import STRATEGIES
from agents.strategies.base import TextStrategy, new_tool_call_id, text_of
from agents.strategies.react import format_react, format_react_final, format_react_malformed
from agents.strategies.structured_chat import (
    format_structured,
    format_structured_final,
    format_structured_malformed,
)
from agents.strategies.xml import format_xml, format_xml_final, format_xml_malformed

logger = logging.getLogger(__name__)

WRITERS: dict[str, tuple[Callable[..., str], Callable[[str], str], Callable[..., str]]] = {
    "react": (format_react, format_react_final, format_react_malformed),
    "structured_chat": (format_structured, format_structured_final, format_structured_malformed),
    "xml": (format_xml, format_xml_final, format_xml_malformed),
}
"""Per text strategy: the writers of a call, of a final answer and of a broken call."""

ARGS_PIECE = 12  # characters of a native call's JSON arguments per streamed chunk
# About a token per streamed piece, as a model streams: one CJK character, or up to six
# other characters and the space after them.
_PIECE = re.compile(r"[\u3400-\u9fff]|[^\s\u3400-\u9fff]{1,6}\s*|\s+")


def prompt_strategy(prompt: str) -> type[TextStrategy] | None:
    """Return the text strategy whose instructions the system ``prompt`` holds, else None.

    A strategy is recognised by the fixed text of its instructions between the tools and
    the tool names (the parts a prompt fills in), so the rest of the prompt may change.
    """
    for cls in STRATEGIES.values():
        if issubclass(cls, TextStrategy) and cls.name in WRITERS:
            fixed = cls.instructions.format(tools="\0", tool_names="\0").split("\0")[1]
            if fixed in prompt:
                return cls
    return None


def tool_names(tools: Any) -> list[str]:
    """Return the names of OpenAI tool dicts, or of a prompt's JSON Lines of tools.

    A prompt lists a tool per line, ``{"name": ..., "description": ..., "parameters": ...}``
    (:func:`agents.strategies.base.render_tools`).
    """
    if isinstance(tools, str):
        return re.findall(r'^\{"name": "([^"\\]+)"', tools, re.MULTILINE)
    specs = [t.get("function", t) for t in tools or () if isinstance(t, dict)]
    return [s["name"] for s in specs if isinstance(s, dict) and isinstance(s.get("name"), str)]


def reply(
    messages: Sequence[BaseMessage],
    tools: Any = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    stop: Sequence[str] | None = None,
) -> AIMessage:
    """Return the demo's reply to ``messages``, never raising.

    ``tools``: the OpenAI tool dicts bound (a text format uses the prompt's list instead);
    ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or ``"any"``, or a tool's name
    (also as OpenAI's ``{"function": {"name"}}``); ``parallel_tool_calls=False``: one call
    per turn. The text ends before the first ``stop`` sequence. ``usage_metadata`` is an
    estimate: characters / 4.
    """
    messages = [m for m in messages or () if isinstance(m, BaseMessage)]
    system = "\n".join(text_of(m) for m in messages if isinstance(m, SystemMessage))
    strategy = prompt_strategy(system)
    names = bound = (tool_names(system) if strategy else []) or tool_names(tools)
    chosen = tool_choice.get("function", tool_choice) if isinstance(tool_choice, dict) else None
    chosen = chosen.get("name") if isinstance(chosen, dict) else tool_choice
    if chosen == "none":
        names = []
    elif chosen in names:
        names = [chosen]
    try:
        turn = decide(
            messages,
            names,
            strategy=strategy,
            required=chosen in ("required", "any") or chosen in names[:1],
            one_per_turn=strategy is not None or parallel_tool_calls is False,
            bound=bound,
        )
        message = _written(turn, strategy)
    except Exception:  # a demo must answer something, whatever it was sent
        logger.exception("the demo model could not write its turn")
        message = _written(Turn(TEXT["en"]["sorry"], []), strategy)
    cuts = [message.content.find(s) for s in stop or () if s and s in message.content]
    message.content = message.content[: min(cuts, default=None)]
    prompt = sum(len(text_of(m)) for m in messages) + len(json.dumps(tools, default=str))
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    output = len(message.content) + len(json.dumps(calls, default=str))
    used = (math.ceil(prompt / 4), math.ceil(output / 4))
    message.usage_metadata = UsageMetadata(
        input_tokens=used[0], output_tokens=used[1], total_tokens=sum(used)
    )
    return message


def _written(turn: Turn, strategy: type[TextStrategy] | None) -> AIMessage:
    """Return ``turn`` as an AIMessage in the strategy's format, or with native calls."""
    if strategy is not None:
        write, write_final, write_malformed = WRITERS[strategy.name]
        if not turn.calls:
            return AIMessage(write_final(turn.text))
        call = turn.calls[0]
        return AIMessage(
            (write_malformed if turn.malformed else write)(call.tool, call.args, turn.text)
        )
    if turn.malformed:  # a Python repr, as a model that writes dicts does: not JSON
        broken = [invalid_tool_call(name=c.tool, args=repr(c.args), id=new_tool_call_id())
                  for c in turn.calls]  # fmt: skip
        return AIMessage(turn.text, invalid_tool_calls=broken)
    calls = [tool_call(name=c.tool, args=c.args, id=new_tool_call_id()) for c in turn.calls]
    return AIMessage(turn.text, tool_calls=calls)


def chunks(message: AIMessage) -> Iterator[AIMessageChunk]:
    """Yield ``message`` as a stream: text pieces, tool-call chunks, then usage and metadata.

    Each call's JSON arguments are split across chunks (``ARGS_PIECE`` characters each),
    as providers stream them; merged, the chunks give back ``message``.
    """
    for piece in _PIECE.findall(message.content):
        yield AIMessageChunk(content=piece)
    calls = [(c["name"], c["id"], json.dumps(c["args"], ensure_ascii=False))
             for c in message.tool_calls]  # fmt: skip
    calls += [(c["name"], c["id"], c["args"]) for c in message.invalid_tool_calls]
    for index, (name, call_id, args) in enumerate(calls):
        for start in range(0, max(len(args or ""), 1), ARGS_PIECE):
            head = {"name": name, "id": call_id} if start == 0 else {"name": None, "id": None}
            piece = tool_call_chunk(
                **head, args=(args or "")[start : start + ARGS_PIECE], index=index
            )
            yield AIMessageChunk(content="", tool_call_chunks=[piece])
    yield AIMessageChunk(
        content="",
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
        chunk_position="last",
    )


class DemoChatModel(BaseChatModel):
    """Answer from the script in :mod:`agents.demo.scenarios`, calling the tools it is given.

    Not an LLM: see :mod:`agents.demo`. ``invoke`` and streaming give the same message.
    """

    token_delay_s: float = 0.0
    """Seconds to sleep between streamed chunks, so streaming is visible in a browser."""
    model_name: str = "demo-scripted"

    @property
    def _llm_type(self) -> str:
        return "demo"

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: str | dict | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools`` as OpenAI tool dicts, with ``tool_choice`` and ``parallel_tool_calls``."""
        options = {"tool_choice": tool_choice, "parallel_tool_calls": parallel_tool_calls}
        kwargs.update({key: value for key, value in options.items() if value is not None})
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _reply(self, messages: list[BaseMessage], stop: list[str] | None, kw: dict) -> AIMessage:
        message = reply(messages, kw.get("tools"), kw.get("tool_choice"),
                        kw.get("parallel_tool_calls"), stop or kw.get("stop"))  # fmt: skip
        finish = "tool_calls" if message.tool_calls or message.invalid_tool_calls else "stop"
        message.response_metadata = {"model_name": self.model_name, "finish_reason": finish}
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, stop, kwargs))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for i, chunk in enumerate(chunks(self._reply(messages, stop, kwargs))):
            if i and self.token_delay_s > 0:
                time.sleep(self.token_delay_s)
            yield ChatGenerationChunk(message=chunk)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for i, chunk in enumerate(chunks(self._reply(messages, stop, kwargs))):
            if i and self.token_delay_s > 0:
                await asyncio.sleep(self.token_delay_s)
            yield ChatGenerationChunk(message=chunk)
