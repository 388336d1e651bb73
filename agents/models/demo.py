"""An offline, scripted chat model: the default when no OpenAI key is set.

``DemoChatModel`` is not an LLM. It follows a fixed script so the app runs on a fresh
machine with no network, and it makes real tool calls against whatever tools are bound:

* Last message a HumanMessage: the question is routed to the bound tools by keyword overlap
  with their names and descriptions (see :mod:`agents.models.demo_routing`), arguments are
  filled from their JSON schemas by parameter-name heuristics (see
  :mod:`agents.models.demo_args`), and all chosen calls come back in ONE AIMessage (parallel
  tool calls) after a one-line plan ("Checking 2 things: weather_forecast (Hangzhou), ...").
  A value the tool may reject (a place the gazetteer does not know, a zone such as
  "Mars/Olympus", "50 rooms" over the schema's maximum) is passed on as written, so the
  tool's own error shows (see :mod:`agents.models.demo_places`). A follow-up naming only
  a city ("And in Chengdu?", "那成都呢？") repeats the previous turn's place-bound calls for
  that city. A matched tool missing a required argument: a reply asking for it ("Which
  town? I know: ..."). Nothing matched: a text reply listing the bound tools.
* Messages ending with ToolMessages: a Markdown answer that leads with what the results say
  (a recommended city, the first day's weather, a calculation), then summarises each result
  from its JSON shape and says plainly which tools failed and why (see
  :mod:`agents.models.demo_answer`); no new tool calls. Chinese when the user's question
  contains CJK characters, else English.
* Anything else (no messages, only a system message, odd content): a polite text reply.
  Planning never raises; an unexpected error is logged and becomes a text reply.

It gets things wrong the way keyword matching does: paraphrases with no shared word, an
unknown place written in lower case, several requests for one tool in one clause. Streaming
and ``invoke`` build the same message from one plan: text in small pieces, then each tool
call as ``tool_call_chunks`` (JSON ``args`` split across chunks), then a last chunk with a
rough ``usage_metadata`` (characters / 4). Tool call ids are random, as a provider's are.
It speaks only the native
tool-calling format: ``stop`` is ignored, and the text strategies (react, structured_chat,
xml) would need scripts of their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from agents.models.demo_answer import (
    answer_from_results,
    capabilities_reply,
    missing_reply,
    plan_line,
)
from agents.models.demo_routing import Router, ToolInfo, tool_infos
from agents.models.demo_text import CJK_CHARS, has_cjk, message_text

logger = logging.getLogger(__name__)

FALLBACK_REPLY = "Sorry, the demo model could not handle that message. Please try rephrasing."
GREETING = "Hello! I'm the offline demo model. Ask me something to get started."
_PIECE = re.compile(rf"[{CJK_CHARS}]{{1,3}}|[^\s{CJK_CHARS}]+\s*|\s+")
_ARGS_PIECE = 12  # characters of tool-call JSON per streamed chunk


@dataclass(frozen=True)
class DemoPlan:
    """What the model says for one turn: text, tool calls and a rough token count."""

    text: str
    tool_calls: list[ToolCall]
    usage: UsageMetadata

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


def _select_tools(tools: Sequence[Any] | None, tool_choice: Any) -> list[ToolInfo]:
    infos = tool_infos(tools)
    if tool_choice == "none":
        return []
    chosen = tool_choice.get("function", tool_choice) if isinstance(tool_choice, dict) else None
    name = chosen.get("name") if isinstance(chosen, dict) else tool_choice
    if isinstance(name, str) and any(info.name == name for info in infos):
        return [info for info in infos if info.name == name]
    return infos


def _decide(
    messages: list[BaseMessage], infos: list[ToolInfo]
) -> tuple[str, list[tuple[str, dict]]]:
    """Return the reply text and ``(name, args)`` calls for the conversation so far."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    question = message_text(messages[humans[-1]]) if humans else ""
    lang = "zh" if has_cjk(question) else "en"
    trailing: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        trailing.insert(0, message)
    if trailing:
        before = messages[: len(messages) - len(trailing)]
        request = before[-1] if before and isinstance(before[-1], AIMessage) else None
        return answer_from_results(trailing, request, lang), []
    spoken = [m for m in messages if not isinstance(m, SystemMessage)]
    if not spoken or not isinstance(spoken[-1], HumanMessage) or not question.strip():
        return GREETING, []
    router = Router(infos)
    earlier = messages[: humans[-1]]
    calls = router.route(question, earlier) or router.repeat(question, earlier)
    if calls:
        return plan_line(calls, lang), calls
    if router.missing:
        return missing_reply(router.missing, infos, lang), []
    return capabilities_reply(question, [(t.name, t.description) for t in infos], lang), []


def _count(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def make_plan(
    messages: Sequence[Any],
    tools: Sequence[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
) -> DemoPlan:
    """Return the scripted reply to ``messages`` given the bound ``tools`` (OpenAI dicts)."""
    clean = [m for m in messages or () if isinstance(m, BaseMessage)]
    try:
        infos = _select_tools(tools, tool_choice)
        text, calls = _decide(clean, infos)
        if parallel_tool_calls is False:
            calls = calls[:1]
    except Exception:  # a scripted demo must answer something, whatever it was sent
        logger.exception("demo model failed to plan a reply")
        text, calls = FALLBACK_REPLY, []
    seed = json.dumps([[m.type, message_text(m)] for m in clean], ensure_ascii=False)
    tool_calls = [
        tool_call(
            name=name,
            args=args,
            # Unique like a real provider's ids, so audit searches by id find one call.
            id=f"call_{uuid.uuid4().hex[:24]}",
        )
        for name, args in calls
    ]
    prompt_chars = len(seed) + len(json.dumps(list(tools or ()), default=str))
    output_chars = len(text) + sum(
        len(c["name"]) + len(json.dumps(c["args"], ensure_ascii=False)) for c in tool_calls
    )
    input_tokens, output_tokens = _count(prompt_chars), _count(output_chars)
    usage = UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
    return DemoPlan(text=text, tool_calls=tool_calls, usage=usage)


def plan_chunks(plan: DemoPlan, model_name: str) -> Iterator[AIMessageChunk]:
    """Yield the plan as stream chunks: text pieces, tool-call chunks, then usage."""
    for piece in _PIECE.findall(plan.text):
        yield AIMessageChunk(content=piece)
    for index, call in enumerate(plan.tool_calls):
        args = json.dumps(call["args"], ensure_ascii=False)
        for start in range(0, max(len(args), 1), _ARGS_PIECE):
            first = start == 0
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(
                        name=call["name"] if first else None,
                        args=args[start : start + _ARGS_PIECE],
                        id=call["id"] if first else None,
                        index=index,
                    )
                ],
            )
    yield AIMessageChunk(
        content="",
        usage_metadata=plan.usage,
        response_metadata={"model_name": model_name, "finish_reason": plan.finish_reason},
        chunk_position="last",
    )


class DemoChatModel(BaseChatModel):
    """Answer from a script, calling the bound tools; see the module docstring."""

    token_delay_s: float = 0.0
    """Seconds to sleep between streamed chunks, so streaming is visible in a browser."""
    model_name: str = "demo-scripted"

    @property
    def _llm_type(self) -> str:
        return "demo"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type[BaseModel] | Callable | BaseTool],
        *,
        tool_choice: str | dict | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools`` as OpenAI tool dicts; ``tool_choice`` may be "none" or a name."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        if parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = parallel_tool_calls
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _plan(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> DemoPlan:
        return make_plan(
            messages,
            kwargs.get("tools"),
            kwargs.get("tool_choice"),
            kwargs.get("parallel_tool_calls"),
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        plan = self._plan(messages, kwargs)
        message = AIMessage(
            content=plan.text,
            tool_calls=plan.tool_calls,
            usage_metadata=plan.usage,
            response_metadata={"model_name": self.model_name, "finish_reason": plan.finish_reason},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for i, chunk in enumerate(plan_chunks(self._plan(messages, kwargs), self.model_name)):
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
        for i, chunk in enumerate(plan_chunks(self._plan(messages, kwargs), self.model_name)):
            if i and self.token_delay_s > 0:
                await asyncio.sleep(self.token_delay_s)
            yield ChatGenerationChunk(message=chunk)
