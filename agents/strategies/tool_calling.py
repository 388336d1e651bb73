"""Native tool calling: ``bind_tools``, ``AIMessage.tool_calls`` and ToolMessages.

The default strategy, after LangChain's ``create_tool_calling_agent``: the provider
returns structured tool calls, several per turn when it likes; each result goes back as a
ToolMessage paired by ``tool_call_id`` (``format_to_tool_messages``). Unlike LangChain's
classic ``ToolsAgentOutputParser``, calls in ``AIMessage.invalid_tool_calls`` (arguments
that are not JSON) are not dropped, which would turn them into an empty final answer: each
becomes an action that carries its error, so the model is told and can call again.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.agents import AgentFinish
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from agents.strategies.base import (
    IntermediateStep,
    Strategy,
    ToolAgentAction,
    new_tool_call_id,
    text_of,
)

INVALID_ARGUMENTS = (
    "Error: the arguments for tool {name!r} are not valid JSON ({error}). "
    "Call the tool again with a JSON object of arguments."
)


class ToolCallingStrategy(Strategy):
    """Native tool calls; see the module docstring."""

    name = "tool_calling"
    label = "Native tool calling"

    def build_prompt(
        self, messages: Sequence[BaseMessage], tools: Sequence[BaseTool]
    ) -> list[BaseMessage]:
        """Return ``messages`` unchanged: the tools travel in the request, not the prompt."""
        return list(messages)

    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], *, iteration: int
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return ``model.bind_tools(tools)`` with this conversation's options.

        ``tool_choice`` other than ``auto`` applies to the first turn only: a choice forced
        on every turn would make the model call a tool even after it has its answer, and
        the run would loop until its iteration limit.
        """
        if not tools:
            return model
        kwargs: dict[str, object] = {}
        if iteration == 1 and self.options.tool_choice not in ("", "auto"):
            kwargs["tool_choice"] = self.options.tool_choice
        if not self.options.parallel_tool_calls:
            kwargs["parallel_tool_calls"] = False
        return model.bind_tools(list(tools), **kwargs)

    def format_scratchpad(
        self, intermediate_steps: Sequence[IntermediateStep]
    ) -> list[BaseMessage]:
        """Return each turn's AIMessage once, then a ToolMessage per call in it."""
        messages: list[BaseMessage] = []
        seen: set[int] = set()
        for action, observation in intermediate_steps:
            for message in action.message_log:
                if id(message) not in seen:
                    seen.add(id(message))
                    messages.append(message)
            messages.append(observation)
        return messages

    def parse(self, message: AIMessage) -> list[ToolAgentAction] | AgentFinish:
        """Return one action per tool call (invalid ones carry an error), else the text.

        Missing or repeated ``tool_call_id`` values (some servers send them) are replaced
        with fresh ones, on ``message`` too, so every result pairs with its call. Text with
        no calls is the final answer, even empty: the loop decides what an empty one means.
        """
        seen: set[str] = set()
        for call in [*message.tool_calls, *message.invalid_tool_calls]:
            if not call.get("id") or call["id"] in seen:
                call["id"] = new_tool_call_id()
            seen.add(call["id"])  # type: ignore[arg-type]
        invalid = [
            ToolAgentAction(
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
            ToolAgentAction(
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
        return AgentFinish({"output": text}, log=text)
