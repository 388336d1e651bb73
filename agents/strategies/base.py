"""What every strategy supplies to the one agent loop, and the pieces they share.

A strategy is the four-stage pipeline of LangChain's classic agents (format the
scratchpad -> build the prompt -> bind the model -> parse the output), see
``langchain_classic.agents`` (``create_tool_calling_agent``, ``create_react_agent``,
``create_structured_chat_agent``, ``create_xml_agent``). The loop in
:mod:`agents.runtime` stays one loop: it asks the strategy for the prompt and the bound
model, streams the model's reply, asks the strategy to parse it into a list of
:class:`ToolAgentAction` or an ``AgentFinish``, runs the actions and keeps the
``(action, observation)`` pairs (the intermediate steps) that the strategy formats into
the next turn's scratchpad.
"""

from __future__ import annotations

import json
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from langchain_core.agents import AgentActionMessageLog, AgentFinish
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.strategies import strict_json
from agents.strategies.code_blocks import sole_block
from agents.strategies.tool_markup import find_tool_markup

IntermediateStep = tuple["ToolAgentAction", ToolMessage]
"""One ``(action, observation)`` pair: what the model asked for and what it was told.

The observation is a ToolMessage (``content``, ``tool_call_id``, ``status`` of
``"success"`` or ``"error"``); the text strategies show the model its ``content``.
"""

FINAL_ANSWER = "Final Answer"

# Parse-error observations shared by the text strategies (what the model reads next).
EMPTY_REPLY = "Your reply was empty. {format_hint}"
EMPTY_FINAL_ANSWER = "Your final answer was empty. Write the answer itself. {format_hint}"
BAD_JSON_INPUT = (
    "The input for tool {name!r} looks like JSON but does not parse ({error}). "
    "Give the arguments as one JSON object, e.g. {example}."
)


# The last call at the iteration limit (early_stopping_method "generate"): no more tools.
FINAL_ANSWER_REQUEST = (
    "You have reached the limit of steps for this question: no more tools can be used. "
    "Give your final answer now, from what the steps above found; say what is still "
    "unknown."
)
FINAL_ANSWER_FORMAT = "Reply with a final answer only, in this format:"


TOOL_NAME_RULE = "letters, digits, _ and -, 1 to 64 of them"
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def usable_tool_name(name: object, tools: frozenset[str] = frozenset()) -> bool:
    """Return True if a tool call named ``name`` may be sent back to a server.

    The strictest common servers (OpenAI, Mistral) refuse a request holding a call whose
    name is not ``^[a-zA-Z0-9_-]{1,64}$`` (:data:`TOOL_NAME_RULE`); one of ``tools`` (the
    names offered this run) is usable whatever it is, as the server took it already.
    """
    return isinstance(name, str) and (name in tools or _TOOL_NAME.fullmatch(name) is not None)


def new_tool_call_id() -> str:
    """Return a fresh id in the shape OpenAI uses (``call_`` + 24 hex digits)."""
    return f"call_{uuid.uuid4().hex[:24]}"


class ToolAgentAction(AgentActionMessageLog):
    """One tool call the model asked for: LangChain's AgentAction plus a ``tool_call_id``.

    The same class as ``ToolAgentAction`` of
    ``langchain_classic.agents.output_parsers.tools`` (langchain-classic is not a run-time
    dependency), with two fields of ours. ``tool`` and ``tool_input`` (a dict of
    arguments, or a string for a tool with one argument) say what to run; ``log`` is the
    raw model text the call was parsed from (empty for native tool calls, whose
    ``message_log`` holds the AIMessage); ``tool_call_id`` pairs the call with its
    observation. ``error`` is set when the call cannot run (its output did not parse):
    the loop then reports ``error`` as the observation instead of calling a tool, and
    ``error_type`` says which kind of format error it was (one of
    :data:`agents.events.FORMAT_ERROR_TYPES`).
    """

    tool_call_id: str
    error: str = ""
    error_type: str = ""

    @classmethod
    def of_fields(
        cls, *, tool: str, tool_input: str | dict[str, Any], log: str,
        message_log: list[BaseMessage], tool_call_id: str, error: str = "",
        error_type: str = "",
    ) -> ToolAgentAction:  # fmt: skip
        """Return the action of fields a parser built with their types, unvalidated.

        For a parser that made every field itself (a native reply's tool calls), whose
        validation would find nothing yet is a noticeable share of the loop's own work per
        turn (docs/benchmarks.md, "The agent loop per step"). A dict ``tool_input`` is
        copied, as validation copies it. The result equals ``ToolAgentAction(**fields)``.
        """
        if isinstance(tool_input, dict):
            tool_input = dict(tool_input)
        return cls.model_construct(tool=tool, tool_input=tool_input, log=log,
                                   message_log=message_log, tool_call_id=tool_call_id,
                                   error=error, error_type=error_type)  # fmt: skip


class ObservationMessage(HumanMessage):
    """An observation in a text strategy's scratchpad: a HumanMessage, marked by its class.

    Providers send it as any HumanMessage (a ``user`` message: langchain-openai converts
    by ``isinstance``). The class lets code that reads a prompt (the offline demo model)
    tell the scratchpad's observations from a user's message that merely looks like one
    ("Observation: the sky is green. What is 2+2?").
    """


class ParseError(OutputParserException):
    """The model's output did not follow the strategy's format.

    ``observation`` is the text the model reads next turn (what was wrong, how to fix
    it); ``tool`` and ``tool_input`` are what could be read of the call, if anything, so
    the error step still names the tool the model meant.
    """

    def __init__(self, observation: str, *, llm_output: str, tool: str = "",
                 tool_input: str | dict[str, Any] = "") -> None:  # fmt: skip
        super().__init__(
            observation, observation=observation, llm_output=llm_output, send_to_llm=True
        )
        self.observation: str = observation
        self.tool = tool
        self.tool_input = tool_input


@dataclass(frozen=True)
class StrategyOptions:
    """Per-conversation settings of a strategy.

    ``tool_choice``: ``"auto"``, ``"required"`` or a tool's name; only the native strategy
    uses it, and only on the first model turn (later turns are ``auto``, so a run whose
    model has its answer can end). ``parallel_tool_calls``: False asks the provider for
    one call per turn (the text formats always make one). ``text_tool_calls``: read
    tool-call markup written into a native reply's text as tool calls (the provider's
    :class:`agents.providers.Quirks` says when).
    """

    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    text_tool_calls: bool = False


class Strategy(ABC):
    """How a model asks for tools: prompt, binding, scratchpad and parser.

    Subclasses set ``name`` (stored on runs), ``label`` (shown to people) and implement
    the four stages. ``parse`` raises :class:`ParseError` for output that breaks the
    format; the loop turns it into an error step and an observation, so the model can
    try again on its next turn.
    """

    name: ClassVar[str]
    label: ClassVar[str]

    def __init__(self, options: StrategyOptions | None = None) -> None:
        self.options = options or StrategyOptions()

    @abstractmethod
    def build_prompt(
        self, messages: Sequence[BaseMessage], tools: Sequence[BaseTool]
    ) -> list[BaseMessage]:
        """Return the prompt (before the scratchpad) for ``messages`` and ``tools``."""

    @abstractmethod
    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], *, iteration: int
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return ``model`` bound for the ``iteration``-th model turn (1-based).

        The loop binds twice per run at most, for the first turn and once for every later
        turn, and reuses the binding (binding converts every tool's schema): the result
        may differ between the first turn and the others, never among the others; when
        :attr:`first_turn_binds_apart` is False it binds once.
        """

    @property
    def first_turn_binds_apart(self) -> bool:
        """Return True if the first turn's binding differs from the later turns'."""
        return True

    @abstractmethod
    def format_scratchpad(
        self, intermediate_steps: Sequence[IntermediateStep]
    ) -> list[BaseMessage]:
        """Return the messages that show the model its earlier actions and observations.

        The loop calls this with each turn's new steps only and appends the result to
        the scratchpad so far, so the messages of a step must not depend on other turns'
        steps.
        """

    @abstractmethod
    def parse(self, message: AIMessage) -> list[ToolAgentAction] | AgentFinish:
        """Return the actions ``message`` asks for, or its final answer.

        Raises :class:`ParseError` when the message breaks the format.
        """

    def final_answer_request(self) -> str:
        """Return the message that asks for a final answer at the iteration limit.

        Sent as the last message of one last model call without tools
        (``early_stopping_method="generate"``, after ``return_stopped_response`` of
        langchain-classic's ``Agent``, which appends "I now need to return a final answer
        based on the previous steps:" to the scratchpad). A text strategy adds its final
        answer's format.
        """
        return FINAL_ANSWER_REQUEST

    def bind_final(
        self, model: BaseChatModel, tools: Sequence[BaseTool]
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return ``model`` bound for the last call at the iteration limit: no tools.

        Native tool calling binds none (the model cannot ask for one); the text
        strategies keep their stop sequences, their tools being text in the prompt.
        """
        return model


class TextStrategy(Strategy):
    """A strategy whose model writes its calls as text: react, structured_chat, xml.

    Subclasses set ``stop`` (the stop sequences bound to the model), ``instructions`` (a
    ``str.format`` template with ``{tools}`` and ``{tool_names}``, appended to the system
    prompt), ``observation_template`` (with ``{observation}``) and the two functions
    ``parse_text`` and ``cut_observation`` (plain functions of the text). The scratchpad
    is LangChain's ``format_log_to_messages``: each step's log as an AIMessage, its
    observation as a HumanMessage (an :class:`ObservationMessage`).
    """

    stop: ClassVar[list[str]]
    instructions: ClassVar[str]
    observation_template: ClassVar[str]
    parse_text: ClassVar[Callable[[str], tuple[str, str | dict[str, Any]] | str]]
    """Return ``(tool, tool_input)`` or the final answer text; raise :class:`ParseError`."""
    cut_observation: ClassVar[Callable[[str], str]]
    """Return the text up to an observation the model wrote itself (stop ignored)."""
    quote_tool_names: ClassVar[bool] = False
    final_answer_example: ClassVar[str]
    """A final answer in this format, shown when the answer is asked for at the limit."""

    def build_prompt(
        self, messages: Sequence[BaseMessage], tools: Sequence[BaseTool]
    ) -> list[BaseMessage]:
        """Return ``messages`` with the tools and the format in the system message."""
        names = [json.dumps(t.name) if self.quote_tool_names else t.name for t in tools]
        text = self.instructions.format(tools=render_tools(tools), tool_names=", ".join(names))
        return with_instructions(messages, text)

    def bind(
        self, model: BaseChatModel, tools: Sequence[BaseTool], *, iteration: int
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return ``model`` bound to stop before it writes an observation itself."""
        return model.bind(stop=list(self.stop))

    @property
    def first_turn_binds_apart(self) -> bool:
        """Return False: every turn has the same stop sequences."""
        return False

    def final_answer_request(self) -> str:
        """Return the request for a final answer, with this format's answer shape."""
        return f"{FINAL_ANSWER_REQUEST} {FINAL_ANSWER_FORMAT}\n\n{self.final_answer_example}"

    def bind_final(
        self, model: BaseChatModel, tools: Sequence[BaseTool]
    ) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return ``model`` bound as for every turn (the stop sequences)."""
        return self.bind(model, tools, iteration=2)

    def format_scratchpad(
        self, intermediate_steps: Sequence[IntermediateStep]
    ) -> list[BaseMessage]:
        """Return each step's log as an AIMessage and its observation as an ObservationMessage."""
        messages: list[BaseMessage] = []
        for action, observation in intermediate_steps:
            messages.append(AIMessage(self.format_log(action)))
            messages.append(ObservationMessage(self.format_observation(text_of(observation))))
        return messages

    def format_log(self, action: ToolAgentAction) -> str:
        """Return the model text to show for ``action`` in the scratchpad."""
        return action.log

    def format_observation(self, observation: str) -> str:
        """Return ``observation`` in this format's ``observation_template``."""
        return self.observation_template.format(observation=observation)

    def parse(self, message: AIMessage) -> list[ToolAgentAction] | AgentFinish:
        """Return the one action or the final answer in ``message``'s text.

        The action's ``log`` is the text up to any observation the model made up.
        """
        text = text_of(message)
        parsed = type(self).parse_text(text)
        if isinstance(parsed, str):
            _refuse_markup_answer(parsed, text)
            return AgentFinish({"output": parsed}, log=text)
        tool, tool_input = parsed
        return [
            ToolAgentAction(
                tool=tool,
                tool_input=tool_input,
                log=type(self).cut_observation(text),
                message_log=[message],
                tool_call_id=new_tool_call_id(),
            )
        ]


MARKUP_ANSWER = (
    "Your final answer holds a tool call written as markup ({markup}), which nothing "
    "runs. Use this format's own Action lines to call a tool, or answer in plain words."
)


def _refuse_markup_answer(answer: str, text: str) -> None:
    """Raise :class:`ParseError` when a final answer is tool-call markup (never an answer).

    A model used to a native tool-call template (Hermes ``<tool_call>``, Mistral
    ``[TOOL_CALLS]``) may write its call that way; markup inside a code block is content.
    """
    markup = find_tool_markup(answer)
    if markup is None:
        return
    first = markup.calls[0]
    raise ParseError(
        MARKUP_ANSWER.format(markup=first.raw.strip()[:200]), llm_output=text,
        tool=first.name, tool_input=first.args if first.args is not None else first.raw,
    )  # fmt: skip


def render_tools(tools: Sequence[BaseTool]) -> str:
    """Return the tools as JSON Lines: ``{"name", "description", "parameters"}`` per tool.

    The schemas come from langchain-core's ``convert_to_openai_tool``, so a text strategy
    shows the model the same JSON schema a native call gets. langchain-core's text
    renderers do not fit here: ``render_text_description`` drops the arguments of tools
    without a sync ``func`` and ``render_text_description_and_args`` prints Python reprs
    (``None``, single quotes) and leaves out which arguments are required.
    """
    lines = []
    for tool in tools:
        function = convert_to_openai_tool(tool)["function"]
        entry = {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": function.get("parameters", {}),
        }
        lines.append(json.dumps(entry, ensure_ascii=False))
    return "\n".join(lines)


def with_instructions(messages: Sequence[BaseMessage], instructions: str) -> list[BaseMessage]:
    """Return ``messages`` with ``instructions`` appended to the system message.

    A prompt without a system message gets one in front.
    """
    out = list(messages)
    for i, message in enumerate(out):
        if isinstance(message, SystemMessage):
            out[i] = SystemMessage(f"{message.text}\n\n{instructions}")
            return out
    return [SystemMessage(instructions), *out]


_FENCE = re.compile(r"^```[\w-]*[ \t]*\n?(?P<body>.*?)\n?```$", re.DOTALL)


def strip_fence(text: str) -> str:
    """Return ``text`` without one surrounding Markdown code fence (```` ```json ````).

    A fenced block of ``` or ~~~ of any length (:func:`.code_blocks.sole_block`), closed
    or not (a reply cut short), or ```` ```json {...}``` ```` on one line.
    """
    text = text.strip()
    block = sole_block(text)
    if block is not None:
        return text[block.body_start : block.body_end].strip()
    match = _FENCE.match(text)
    return match["body"].strip() if match else text


def parse_tool_input(raw: str, *, tool: str, llm_output: str) -> str | dict[str, Any]:
    """Return a text strategy's tool input: a JSON object as a dict, else the text.

    A fenced block is unwrapped; empty input means no arguments (``{}``). Input that
    starts like a JSON object or array must be strict JSON (:mod:`.strict_json`) or
    raises :class:`ParseError`; a JSON string becomes its value; anything else
    (``Suzhou``) is passed on as text, which a LangChain tool reads as its first argument.
    """
    text = strip_fence(raw)
    if not text:
        return {}
    if text[0] in "{[":
        try:
            value = strict_json.loads(text)
        except ValueError as exc:
            raise ParseError(
                BAD_JSON_INPUT.format(name=tool, error=exc, example='{"town": "Suzhou"}'),
                llm_output=llm_output, tool=tool, tool_input=raw,
            ) from exc  # fmt: skip
        if not isinstance(value, dict):
            raise ParseError(
                f"The input for tool {tool!r} must be a JSON object of arguments, "
                f"not a JSON {type(value).__name__}.",
                llm_output=llm_output, tool=tool, tool_input=raw,
            )  # fmt: skip
        return value
    if text.startswith('"'):
        try:
            value = strict_json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    return text


def text_of(message: BaseMessage) -> str:
    """Return a message's text content as one plain ``str``."""
    return str(message.text)
