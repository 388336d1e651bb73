"""Native tool calling: ``bind_tools``, ``AIMessage.tool_calls`` and ToolMessages.

The default strategy, after LangChain's ``create_tool_calling_agent``: the provider
returns structured tool calls, several per turn when it likes; each result goes back as a
ToolMessage paired by ``tool_call_id`` (``format_to_tool_messages``). Unlike LangChain's
classic ``ToolsAgentOutputParser``, calls in ``AIMessage.invalid_tool_calls`` (arguments
that are not JSON) are not dropped, which would turn them into an empty final answer: each
becomes an action that carries its error, so the model is told and can call again.

A reply with no ``tool_calls`` whose text holds tool-call markup (a server without its
tool parser, :mod:`agents.strategies.tool_markup`) is never a final answer: with
``StrategyOptions.text_tool_calls`` (the provider's ``Quirks.text_tool_calls``) its calls
are read from the markup, each with a fresh ``tool_call_id``, the text outside the markup
staying the turn's text; without it, it is a format error (``TextToolCall``) whose
observation tells the model to call tools through the API. A reply that is entirely a
bare call (Llama 3.x's ``{"name": ..., "parameters": {...}}``, a pythonic
``[name(key=value)]`` list) counts as markup only when every name in it is one of the
run's tools, which the strategy learns from :meth:`ToolCallingStrategy.bind` and
:meth:`ToolCallingStrategy.build_prompt`: an answer that happens to be JSON stays an
answer.

A call with no name, or a name the strictest servers refuse (OpenAI and Mistral take only
``^[a-zA-Z0-9_-]{1,64}$``, :func:`agents.strategies.base.usable_tool_name`), is a format
error (``InvalidToolName``) that never runs, and its name never goes back over the wire:
sent back in the next turn's request, one such call makes every later request of the chat
fail. The scratchpad's copy of its turn's message names it :data:`UNUSABLE_NAME`, paired
with its error observation as any format error is (a user message after the turn's tool
results is refused by Mistral's template); an earlier exchange leaves it out, as it does
every format error. The rows keep what the model sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.agents import AgentFinish
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from agents.strategies.base import (
    TOOL_NAME_RULE,
    IntermediateStep,
    Strategy,
    StrategyOptions,
    ToolAgentAction,
    new_tool_call_id,
    text_of,
    usable_tool_name,
)
from agents.strategies.tool_markup import MarkupCalls, find_tool_markup

TEXT_TOOL_CALL = "TextToolCall"  # agents.events.TEXT_TOOL_CALL (strategies import no events)
INVALID_TOOL_NAME = "InvalidToolName"  # agents.events.INVALID_TOOL_NAME
UNUSABLE_NAME = "unusable_tool_name"
"""The name a call whose own name a server would refuse goes back under (a name no tool
has, so the model is not told it called a real tool)."""

INVALID_ARGUMENTS = (
    "Error: the arguments for tool {name!r} are not valid JSON ({error}). "
    "Call the tool again with a JSON object of arguments."
)
NO_TOOL_NAME = (
    "Error: your tool call had {what} (shown as {shown!r}), so nothing was run. Call a "
    "tool by its exact name ({rule}): {tools}."
)
NAMELESS = "no name"
BAD_NAME = "the name {name!r}, which is not a tool name"
CALL_IN_TEXT = (
    "Error: your reply wrote a tool call into its text ({markup}) instead of calling the "
    "tool. Nothing was run. Call tools through the API's tool calls (the tools you were "
    "given), not as text; if you need no tool, answer in plain words."
)


class ToolCallingStrategy(Strategy):
    """Native tool calls; see the module docstring."""

    name = "tool_calling"
    label = "Native tool calling"

    def __init__(self, options: StrategyOptions | None = None) -> None:
        super().__init__(options)
        # The names of the tools offered (bind/build_prompt), for telling a bare call
        # from an answer; empty until then, when no bare call is read.
        self.tool_names: frozenset[str] = frozenset()

    def build_prompt(
        self, messages: Sequence[BaseMessage], tools: Sequence[BaseTool]
    ) -> list[BaseMessage]:
        """Return ``messages`` unchanged: the tools travel in the request, not the prompt.

        The tools' names are kept (``tool_names``) to read bare calls by.
        """
        self.tool_names = frozenset(tool.name for tool in tools)
        return list(messages)

    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], *, iteration: int
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return ``model.bind_tools(tools)`` with this conversation's options.

        ``tool_choice`` other than ``auto`` applies to the first turn only: a choice forced
        on every turn would make the model call a tool even after it has its answer, and
        the run would loop until its iteration limit. The tools' names are kept
        (``tool_names``) to read bare calls by.
        """
        self.tool_names = frozenset(tool.name for tool in tools)
        if not tools:
            return model
        kwargs: dict[str, object] = {}
        if iteration == 1 and self.options.tool_choice not in ("", "auto"):
            kwargs["tool_choice"] = self.options.tool_choice
        if not self.options.parallel_tool_calls:
            kwargs["parallel_tool_calls"] = False
        return model.bind_tools(list(tools), **kwargs)

    @property
    def first_turn_binds_apart(self) -> bool:
        """Return True if a ``tool_choice`` is forced (it applies to the first turn only)."""
        return self.options.tool_choice not in ("", "auto")

    def format_scratchpad(
        self, intermediate_steps: Sequence[IntermediateStep]
    ) -> list[BaseMessage]:
        """Return each turn's AIMessage once, then a ToolMessage per call in it.

        A call whose name a server would refuse goes back under :data:`UNUSABLE_NAME`
        (:func:`wire_message`), answered by its error like any format error. A reply that
        wrote its call into its text made no call a ToolMessage could answer (servers
        refuse an unpaired one): its observation goes back as a HumanMessage.
        """
        messages: list[BaseMessage] = []
        seen: set[int] = set()
        for action, observation in intermediate_steps:
            for message in action.message_log:
                if id(message) not in seen:
                    seen.add(id(message))
                    wired = isinstance(message, AIMessage)
                    messages.append(wire_message(message, self.tool_names) if wired else message)
            if action.error_type == TEXT_TOOL_CALL:
                messages.append(HumanMessage(text_of(observation)))
            elif action.error_type == INVALID_TOOL_NAME:
                messages.append(observation.model_copy(update={"name": UNUSABLE_NAME}))
            else:
                messages.append(observation)
        return messages

    def parse(self, message: AIMessage) -> list[ToolAgentAction] | AgentFinish:
        """Return one action per tool call (invalid ones carry an error), else the text.

        Missing or repeated ``tool_call_id`` values (some servers send them) are replaced
        with fresh ones, on ``message`` too, so every result pairs with its call. A call
        whose name is missing or not :func:`usable_tool_name` carries an
        ``InvalidToolName`` error, one whose arguments are not JSON an ``InvalidToolCall``
        error. Text with no calls is the final answer, even empty: the loop decides what
        an empty one means.
        """
        seen: set[str] = set()
        for call in [*message.tool_calls, *message.invalid_tool_calls]:
            if not call.get("id") or call["id"] in seen:
                call["id"] = new_tool_call_id()
            seen.add(call["id"])  # type: ignore[arg-type]
        invalid = [
            self._unusable(call, message)
            or ToolAgentAction.of_fields(
                tool=call.get("name") or "",
                tool_input=call.get("args") or "",
                log="",
                message_log=[message],
                tool_call_id=call["id"],
                error=INVALID_ARGUMENTS.format(
                    name=call.get("name") or "", error=call.get("error") or "unparseable"
                ),
                error_type="InvalidToolCall",
            )
            for call in message.invalid_tool_calls
        ]
        valid = [
            self._unusable(call, message)
            or ToolAgentAction.of_fields(
                tool=call["name"],
                tool_input=call["args"],
                log="",
                message_log=[message],
                tool_call_id=call["id"],
            )
            for call in message.tool_calls
        ]
        actions = invalid + valid
        if actions:
            return actions
        text = text_of(message)
        markup = find_tool_markup(text, tool_names=self.tool_names)
        if markup is not None:
            if self.options.text_tool_calls:
                return self.parse(_with_markup_calls(message, markup))
            return [_call_in_text(message, markup)]
        return AgentFinish({"output": text}, log=text)

    def _unusable(self, call: Any, message: AIMessage) -> ToolAgentAction | None:
        """Return the format error of ``call`` when its name cannot go to a server."""
        name = call.get("name") or ""
        if usable_tool_name(name, self.tool_names):
            return None
        what = BAD_NAME.format(name=name) if name else NAMELESS
        tools = ", ".join(sorted(self.tool_names)) or "(no tools)"
        return ToolAgentAction.of_fields(
            tool=name, tool_input=call.get("args") or "", log="", message_log=[message],
            tool_call_id=call["id"], error_type=INVALID_TOOL_NAME,
            error=NO_TOOL_NAME.format(what=what, shown=UNUSABLE_NAME, rule=TOOL_NAME_RULE,
                                      tools=tools),
        )  # fmt: skip


def wire_message(message: AIMessage, tools: frozenset[str] = frozenset()) -> AIMessage:
    """Return ``message`` as it goes back to a server: each call whose name is not
    :func:`usable_tool_name` (``tools``: the run's, usable whatever they are) named
    :data:`UNUSABLE_NAME` instead.

    ``message`` itself when every name is usable; else a copy, without the raw
    ``additional_kwargs`` ``tool_calls`` / ``function_call`` (the calls as received,
    which langchain-openai would send for a message without parsed ones).
    """
    calls = [*message.tool_calls, *message.invalid_tool_calls]
    if all(usable_tool_name(call.get("name"), tools) for call in calls):
        return message

    def renamed(call: Any) -> Any:
        usable = usable_tool_name(call.get("name"), tools)
        return call if usable else {**call, "name": UNUSABLE_NAME}

    kwargs = {k: v for k, v in message.additional_kwargs.items()
              if k not in ("tool_calls", "function_call")}  # fmt: skip
    return message.model_copy(update={
        "tool_calls": [renamed(c) for c in message.tool_calls],
        "invalid_tool_calls": [renamed(c) for c in message.invalid_tool_calls],
        "additional_kwargs": kwargs,
    })  # fmt: skip


def _with_markup_calls(message: AIMessage, markup: MarkupCalls) -> AIMessage:
    """Return ``message`` with the markup's calls as its tool calls, its text outside it.

    Each call gets a fresh ``tool_call_id``; one whose arguments do not parse is an
    invalid tool call carrying the reason and the markup as written.
    """
    calls, invalid = [], []
    for call in markup.calls:
        if call.args is not None and call.name:
            calls.append(tool_call(name=call.name, args=call.args, id=new_tool_call_id()))
        else:
            invalid.append(invalid_tool_call(name=call.name, args=call.raw,
                                             id=new_tool_call_id(), error=call.error))  # fmt: skip
    return message.model_copy(
        update={"content": markup.text, "tool_calls": calls, "invalid_tool_calls": invalid}
    )


def _call_in_text(message: AIMessage, markup: MarkupCalls) -> ToolAgentAction:
    """Return the format error of a reply that wrote its tool call(s) as text."""
    first = markup.calls[0]
    return ToolAgentAction(
        tool=first.name,
        tool_input=first.args if first.args is not None else first.raw,
        log=text_of(message),
        message_log=[message],
        tool_call_id=new_tool_call_id(),
        error=CALL_IN_TEXT.format(markup=_preview(first.raw)),
        error_type=TEXT_TOOL_CALL,
    )


def _preview(raw: str, limit: int = 200) -> str:
    """Return markup to quote back to the model, clipped to ``limit`` characters."""
    raw = raw.strip()
    return raw if len(raw) <= limit else raw[:limit] + "…"
