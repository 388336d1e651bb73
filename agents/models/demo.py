"""An offline, scripted chat model: the default when no OpenAI key is set.

``DemoChatModel`` is not an LLM. It follows a fixed script so the app runs on a fresh
machine with no network, and it makes real tool calls against whatever tools it is given,
in the format the prompt asks for (see :mod:`agents.models.demo_formats`): native
``tool_calls`` when tools are bound with ``bind_tools``, or text replies for the react,
structured_chat and xml strategies, whose system message lists the tools as JSON Lines.

* A new question: it is routed to the tools by keyword overlap with their names and
  descriptions (see :mod:`agents.models.demo_routing`), arguments are filled from their
  JSON schemas by parameter-name heuristics (see :mod:`agents.models.demo_args`). Native:
  all chosen calls in ONE AIMessage (parallel tool calls) after a one-line plan ("Checking
  2 things: weather_forecast (Hangzhou), ..."). A value the tool may reject (a place the
  gazetteer does not know, a zone such as "Mars/Olympus", "50 rooms" over the schema's
  maximum) is passed on as written, so the tool's own error shows (see
  :mod:`agents.models.demo_places`). A follow-up naming only a city ("And in Chengdu?",
  "那成都呢？") repeats the previous turn's place-bound calls for that city. A matched tool
  missing a required argument: a reply asking for it ("Which town? I know: ..."). Nothing
  matched: a text reply listing the tools.
* Results back (ToolMessages, or ``Observation: ...`` / ``<observation>`` messages): a
  Markdown answer that leads with what the results say (a recommended city, the first day's
  weather, a calculation), then summarises each result from its JSON shape and says plainly
  which tools failed and why (see :mod:`agents.models.demo_answer`). Chinese when the
  user's question contains CJK characters, else English.
* Text formats and ``parallel_tool_calls=False`` make one call per turn and go through the
  planned calls one by one before answering from all results; ``tool_choice="required"``
  makes a call even when nothing routes; ``#malformed`` in a question breaks the format of
  the first turn for it (see :mod:`agents.models.demo_turns`).
* Anything else (no messages, only a system message, odd content): a polite text reply.
  Planning never raises; an unexpected error is logged and becomes a text reply.

It gets things wrong the way keyword matching does: paraphrases with no shared word, an
unknown place written in lower case, several requests for one tool in one clause. Streaming
and ``invoke`` build the same message from one plan: text in small pieces, then each native
tool call as ``tool_call_chunks`` (JSON ``args`` split across chunks), then a last chunk
with a rough ``usage_metadata`` (characters / 4). ``stop`` sequences are honoured: the text
ends before the first one, as a real model's does. Tool call ids are random, as a
provider's are.
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
from dataclasses import dataclass, field
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
    InvalidToolCall,
    ToolCall,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from agents.models.demo_formats import (
    NATIVE,
    cut_at_stop,
    detect_format,
    malformed_args,
    prompt_tools,
    render_call,
    render_final,
    render_malformed,
)
from agents.models.demo_routing import ToolInfo, tool_infos
from agents.models.demo_text import CJK_CHARS, message_text
from agents.models.demo_turns import GREETING, Turn, decide

__all__ = ["GREETING", "DemoChatModel", "DemoPlan", "make_plan", "plan_chunks"]

logger = logging.getLogger(__name__)

FALLBACK_REPLY = "Sorry, the demo model could not handle that message. Please try rephrasing."
_PIECE = re.compile(rf"[{CJK_CHARS}]{{1,3}}|[^\s{CJK_CHARS}]+\s*|\s+")
_ARGS_PIECE = 12  # characters of tool-call JSON per streamed chunk
_REQUIRED = ("required", "any")


@dataclass(frozen=True)
class DemoPlan:
    """What the model says for one turn: text, tool calls and a rough token count.

    ``invalid_tool_calls`` holds native calls whose ``args`` are not JSON (the
    ``#malformed`` trigger); they stream as tool-call chunks like any other call.
    """

    text: str
    tool_calls: list[ToolCall]
    usage: UsageMetadata
    invalid_tool_calls: list[InvalidToolCall] = field(default_factory=list)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls or self.invalid_tool_calls else "stop"


def _new_id() -> str:
    # Unique like a real provider's ids, so audit searches by id find one call.
    return f"call_{uuid.uuid4().hex[:24]}"


def _chosen_name(tool_choice: Any) -> str | None:
    """Return the tool a ``tool_choice`` names ("name" or OpenAI's dict), else None."""
    chosen = tool_choice.get("function", tool_choice) if isinstance(tool_choice, dict) else None
    name = chosen.get("name") if isinstance(chosen, dict) else tool_choice
    return name if isinstance(name, str) and name not in ("auto", "none", *_REQUIRED) else None


def _select_tools(tools: Sequence[Any] | None, tool_choice: Any) -> list[ToolInfo]:
    infos = tool_infos(tools)
    if tool_choice == "none":
        return []
    name = _chosen_name(tool_choice)
    if name is not None and any(info.name == name for info in infos):
        return [info for info in infos if info.name == name]
    return infos


def _is_required(tool_choice: Any, infos: Sequence[ToolInfo]) -> bool:
    """Return True if ``tool_choice`` asks for a call whatever the question says.

    ``"required"`` (OpenAI), ``"any"`` (Anthropic) or the name of a bound tool.
    """
    if tool_choice in _REQUIRED:
        return True
    name = _chosen_name(tool_choice)
    return name is not None and [info.name for info in infos] == [name]


def _count(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def _write(turn: Turn, fmt: str) -> tuple[str, list[ToolCall], list[InvalidToolCall]]:
    """Return the reply text, tool calls and invalid tool calls that say ``turn``."""
    if fmt == NATIVE:
        if turn.malformed:
            broken = [
                invalid_tool_call(name=name, args=malformed_args(args), id=_new_id(), error=None)
                for name, args in turn.calls
            ]
            return turn.text, [], broken
        calls = [tool_call(name=name, args=args, id=_new_id()) for name, args in turn.calls]
        return turn.text, calls, []
    if not turn.calls:
        return render_final(fmt, turn.text), [], []
    name, args = turn.calls[0]
    if turn.malformed:
        return render_malformed(fmt, name, args, turn.text), [], []
    return render_call(fmt, name, args, turn.text), [], []


def make_plan(
    messages: Sequence[Any],
    tools: Sequence[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    stop: Sequence[str] | None = None,
) -> DemoPlan:
    """Return the scripted reply to ``messages`` given the bound ``tools`` (OpenAI dicts).

    The format comes from the system message; a text format takes its tools from the
    prompt (the bound ones if the prompt lists none). The text ends before the first of
    the ``stop`` sequences.
    """
    clean = [m for m in messages or () if isinstance(m, BaseMessage)]
    fmt = NATIVE
    try:
        fmt = detect_format(clean)
        listed = prompt_tools(clean) if fmt != NATIVE else []
        infos = _select_tools(listed or tools, tool_choice)
        turn = decide(
            clean,
            infos,
            fmt=fmt,
            required=_is_required(tool_choice, infos),
            one_per_turn=parallel_tool_calls is False,
        )
        text, calls, broken = _write(turn, fmt)
    except Exception:  # a scripted demo must answer something, whatever it was sent
        logger.exception("demo model failed to plan a reply")
        text, calls, broken = _write(Turn(FALLBACK_REPLY, []), fmt)
    text = cut_at_stop(text, stop)
    seed = json.dumps([[m.type, message_text(m)] for m in clean], ensure_ascii=False)
    prompt_chars = len(seed) + len(json.dumps(list(tools or ()), default=str))
    output_chars = len(text) + sum(
        len(c["name"]) + len(json.dumps(c["args"], ensure_ascii=False)) for c in calls
    )
    output_chars += sum(len(c["name"] or "") + len(c["args"] or "") for c in broken)
    input_tokens, output_tokens = _count(prompt_chars), _count(output_chars)
    usage = UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
    return DemoPlan(text=text, tool_calls=calls, usage=usage, invalid_tool_calls=broken)


def _call_chunks(index: int, name: str, call_id: str, args: str) -> Iterator[AIMessageChunk]:
    for start in range(0, max(len(args), 1), _ARGS_PIECE):
        first = start == 0
        yield AIMessageChunk(
            content="",
            tool_call_chunks=[
                tool_call_chunk(
                    name=name if first else None,
                    args=args[start : start + _ARGS_PIECE],
                    id=call_id if first else None,
                    index=index,
                )
            ],
        )


def plan_chunks(plan: DemoPlan, model_name: str) -> Iterator[AIMessageChunk]:
    """Yield the plan as stream chunks: text pieces, tool-call chunks, then usage.

    Invalid calls come after the valid ones, their ``args`` streamed as written: merged,
    the chunks give the same ``invalid_tool_calls`` as ``invoke``.
    """
    for piece in _PIECE.findall(plan.text):
        yield AIMessageChunk(content=piece)
    index = 0
    for call in plan.tool_calls:
        args = json.dumps(call["args"], ensure_ascii=False)
        yield from _call_chunks(index, call["name"], call["id"] or _new_id(), args)
        index += 1
    for broken in plan.invalid_tool_calls:
        yield from _call_chunks(
            index, broken["name"] or "", broken["id"] or _new_id(), broken["args"] or ""
        )
        index += 1
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
        """Bind ``tools`` as OpenAI tool dicts.

        ``tool_choice``: "auto", "none", "required" (or "any") or a tool's name;
        ``parallel_tool_calls=False``: one call per turn.
        """
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        if parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = parallel_tool_calls
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _plan(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> DemoPlan:
        return make_plan(
            messages,
            kwargs.get("tools"),
            kwargs.get("tool_choice"),
            kwargs.get("parallel_tool_calls"),
            stop if stop is not None else kwargs.get("stop"),
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        plan = self._plan(messages, stop, kwargs)
        message = AIMessage(
            content=plan.text,
            tool_calls=plan.tool_calls,
            invalid_tool_calls=plan.invalid_tool_calls,
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
        for i, chunk in enumerate(plan_chunks(self._plan(messages, stop, kwargs), self.model_name)):
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
        for i, chunk in enumerate(plan_chunks(self._plan(messages, stop, kwargs), self.model_name)):
            if i and self.token_delay_s > 0:
                await asyncio.sleep(self.token_delay_s)
            yield ChatGenerationChunk(message=chunk)
