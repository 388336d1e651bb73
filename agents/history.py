"""Earlier exchanges of a conversation as messages: questions, tool work, answers.

A run is sent the whole conversation so far, tool calls included, as the model saw it
then: so "which of those B&Bs was the cheapest?" is answered from the rooms fetched two
questions ago. The records here are plain data (no Django): :class:`Exchange` is one
question and the run that answered it, with its model turns (:class:`TurnRecord`) and tool
calls (:class:`CallRecord`) as stored; :func:`history_messages` turns them into messages
in the run's own strategy's form, built by the strategy itself
(:meth:`agents.strategies.Strategy.format_scratchpad`, as LangChain's
``format_to_tool_messages`` / ``format_log_to_messages`` build a scratchpad):

- native tool calling: ``HumanMessage(question)``, then per model turn that made calls an
  ``AIMessage(content=text, tool_calls=[...])`` followed by one ``ToolMessage`` per call
  (paired by ``tool_call_id``, ``status="error"`` for errors), then the answer as an
  ``AIMessage``;
- text strategies (react, structured_chat, xml): ``HumanMessage(question)``, then per
  call the model's text as an ``AIMessage`` and the observation (``Observation: ...``,
  ``<observation>...</observation>``) as a ``HumanMessage``, then the answer as written
  (``Final Answer: ...``).

What is left out, and why:

- Format errors (output that broke the strategy's format, native calls whose arguments
  were not JSON: :data:`agents.events.FORMAT_ERROR_TYPES`) and their error observations.
  They were the model's own slips, already corrected in the run; sent again they cost
  tokens, teach the broken form by example, and a native call with unparseable
  arguments is refused outright by servers that render the arguments as JSON.
- A model turn that failed or was cut off (a time-out, a cancel mid-stream): its text
  is partial and it asked for nothing that ran.
- A native call with no id, or with a name the strictest servers refuse (none, or not
  ``^[a-zA-Z0-9_-]{1,64}$``: :func:`agents.strategies.base.usable_tool_name`), whatever
  its stored error type (rows from before such a call was a format error say
  ``UnknownTool``): sent back once, it would make every later request of the chat fail.

Tool calls that ran and failed (an unknown tool, bad arguments, a tool error) stay: what
went wrong is data the next answer may need ("the B&B site was down"). A call with no
result (its run was cancelled or interrupted while it ran) is closed with an error
observation saying so, so every ``tool_call`` of an ``AIMessage`` has exactly one
``ToolMessage``. A call's observation is the one stored when the model first read it
(:attr:`CallRecord.observation`); for a call stored without it, the result clipped to the
run limits' ``max_observation_chars`` as :func:`agents.tool_calls.clip` clips it.

A run that ended without an answer (failed, cancelled, iteration limit, interrupted) is
closed with an assistant message saying so (:data:`NO_ANSWER`), worded as a note from
the app, so the roles still alternate and the model answers the next question rather than
the old one. :func:`role_order_problems` checks a request against the strictest common
server (vLLM and Mistral chat templates answer 400 "Conversation roles must alternate").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agents.approvals import Decision, Resume, with_edited_note
from agents.events import RunStatus, StepStatus, is_format_error
from agents.strategies import Strategy, ToolAgentAction
from agents.strategies.base import (
    TOOL_NAME_RULE,
    IntermediateStep,
    TextStrategy,
    usable_tool_name,
)
from agents.tool_calls import CLIPPED_NOTE

QUESTION_ID_PREFIX = "question-"
"""The ``id`` of an earlier question's ``HumanMessage`` starts with this (message ids are
not sent to the model): where an exchange starts, so that trimming the history
(:mod:`agents.context`) drops whole exchanges and never an action without its
observation."""

NO_ANSWER = {
    RunStatus.FAILED: "the run failed before it could answer",
    RunStatus.CANCELLED: "the run was stopped before it answered",
    RunStatus.MAX_ITERATIONS: "the run reached its limit of model turns before it answered",
    RunStatus.INTERRUPTED: "the run was interrupted (the server stopped) before it answered",
    RunStatus.TIME_LIMIT: "the run reached its time limit before it answered",
    RunStatus.REPEATED_FAILURE: "the run was stopped: the same tool call kept failing",
    RunStatus.BUDGET_EXCEEDED: "the run used up its token or cost budget before it answered",
}
"""Why an exchange has no answer, by the status its run ended with."""
ANSWERED = frozenset({RunStatus.SUCCEEDED, RunStatus.MAX_ITERATIONS})
"""The statuses of a run that may have an answer: ``max_iterations`` has one when it was
generated at the limit (``early_stopping_method="generate"``)."""
NO_ANSWER_NOTE = "(No answer: {why}. This is a note from the app, not a reply.)"
NO_RUN = "no answer was recorded for this message"
UNFINISHED_CALL = "Error: no result: the run ended before this tool call finished."
EMPTY_REPLY_SHOWN = "(empty reply)"


@dataclass(frozen=True)
class TurnRecord:
    """One stored model turn of an earlier run.

    ``iteration``: 1-based turn number; ``text``: what the model wrote; ``tool_calls``:
    the native calls it made as LangChain ``ToolCall`` dicts (``{"name", "args", "id"}``,
    the ids as the model's message had them; empty for the text strategies, whose calls
    are parsed from the text); ``finished``: the turn ended normally (False when the model
    call failed, timed out or was cut off by a cancel); ``reasoning``: the model's
    reasoning text, sent back as ``additional_kwargs["reasoning_content"]`` on a turn that
    made calls (DeepSeek refuses the next request without it); ``answer``: the final
    answer the turn gave ("" for a turn that asked for tools).
    """

    iteration: int
    text: str = ""
    tool_calls: tuple[dict[str, Any], ...] = ()
    finished: bool = True
    reasoning: str = ""
    answer: str = ""


@dataclass(frozen=True)
class CallRecord:
    """One stored tool call of an earlier run.

    ``iteration`` is its model turn's; ``status`` ``success``, ``error`` or ``running``;
    ``result`` the observation as stored (the tool's whole result, or the error message
    the model was sent; empty for a call its run's end closed); ``error_type`` the
    exception class (a format error's marks a call that never ran); ``log`` the text a
    text strategy parsed the call from; ``result_chars`` the length of the whole stored
    result when ``result`` holds only its beginning (loaded cut to what the model can be
    shown), else 0; ``observation`` what the model was given for it, as stored when it
    read it (None: not recorded, so it is made again from ``result``); ``edited_args``
    the arguments a person gave the call before approving it (None: not edited), which
    it ran with, and ``asked_args`` the model's own then, as it asked.
    """

    iteration: int
    tool_call_id: str
    name: str
    args: Any = None
    status: str = StepStatus.SUCCESS
    result: str = ""
    error_type: str = ""
    log: str = ""
    result_chars: int = 0
    observation: str | None = None
    edited_args: Any = None
    asked_args: Any = None

    @property
    def is_format_error(self) -> bool:
        """Return True for a call that never ran: the model's output did not parse."""
        return is_format_error(self.error_type)

    @property
    def is_unfinished(self) -> bool:
        """Return True for a call with no result: its run ended while it ran."""
        if self.status == StepStatus.RUNNING:
            return True
        return self.status == StepStatus.ERROR and not self.result and not self.is_format_error


@dataclass(frozen=True)
class Exchange:
    """One earlier question and the run that answered it (or did not).

    ``strategy``: the run's strategy name; ``status``: how it ended (a
    :class:`agents.events.RunStatus` value, "" when the question has no run); ``answer``:
    the final answer ("" without one); ``turns`` and ``calls`` in the order they were
    stored.
    """

    question: str
    strategy: str = "tool_calling"
    status: str = RunStatus.SUCCEEDED
    answer: str = ""
    turns: tuple[TurnRecord, ...] = ()
    calls: tuple[CallRecord, ...] = field(default=())


def history_messages(
    exchanges: Iterable[Exchange], strategy: Strategy, *, max_observation_chars: int
) -> list[BaseMessage]:
    """Return the messages of ``exchanges``, oldest first, for a run with ``strategy``.

    Each exchange becomes ``HumanMessage(question)`` (its ``id`` starting with
    :data:`QUESTION_ID_PREFIX`), its tool work in ``strategy``'s scratchpad form and one
    closing ``AIMessage`` (the answer, or a :data:`NO_ANSWER_NOTE`); see the module
    docstring for what is left out. An exchange of another strategy (the conversation's
    strategy is fixed, so only stored data from elsewhere has one) is sent as its
    question and answer only: its tool work is in a form the model was not told about.
    """
    messages: list[BaseMessage] = []
    for number, exchange in enumerate(exchanges, start=1):
        messages.append(HumanMessage(exchange.question, id=f"{QUESTION_ID_PREFIX}{number}"))
        if exchange.strategy == strategy.name:
            steps = intermediate_steps(exchange, strategy, max_observation_chars)
            messages.extend(strategy.format_scratchpad(steps))
        messages.append(AIMessage(closing_text(exchange, strategy)))
    return messages


def closing_text(exchange: Exchange, strategy: Strategy) -> str:
    """Return the text of the assistant message that closes ``exchange``.

    A text strategy's answer is the text of the turn that gave it, as written
    (``Thought: ... Final Answer: ...``), so earlier answers show the format the model is
    asked to use; a native answer is the answer itself. No answer: a
    :data:`NO_ANSWER_NOTE`.
    """
    if exchange.status not in ANSWERED or not exchange.answer.strip():
        why = NO_ANSWER.get(exchange.status, NO_RUN)  # type: ignore[call-overload]
        return NO_ANSWER_NOTE.format(why=why)
    if isinstance(strategy, TextStrategy) and exchange.strategy == strategy.name:
        answered = [t for t in exchange.turns if t.finished and t.answer and t.text.strip()]
        if answered:
            return answered[-1].text
    return exchange.answer


def intermediate_steps(
    exchange: Exchange,
    strategy: Strategy,
    max_observation_chars: int,
    *,
    format_slips: bool = False,
) -> list[IntermediateStep]:
    """Return ``(action, observation)`` pairs of the tool work of ``exchange``.

    The pairs are the ones the run's loop kept (:class:`agents.tool_calls.ToolCallBatch`),
    rebuilt from the records: for native calls each action's ``message_log`` holds its
    turn's ``AIMessage`` (one per turn, with only the calls sent back), for the text
    strategies each action's ``log`` is the text the call was parsed from. A text
    strategy's format slips (a reply that did not parse, and the format error the model
    was told) are left out of an earlier exchange's work; ``format_slips`` keeps them, as
    the run's live scratchpad had them (a paused run's, rebuilt to go on).
    """
    calls = {(c.iteration, c.tool_call_id): c for c in exchange.calls}
    if isinstance(strategy, TextStrategy):
        return [
            (_action(call, log=call.log), _observation(call, max_observation_chars))
            for call in exchange.calls
            if format_slips or (not call.is_format_error and call.log.strip())
        ]
    steps: list[IntermediateStep] = []
    for turn in exchange.turns:
        if not turn.finished:
            continue
        # A native call whose arguments were not JSON is in the message's
        # invalid_tool_calls, not here; a call id the loop did not record (a cancel between
        # the turn and its calls) is closed as unfinished. A turn whose stored message has
        # no calls but whose calls ran (read from markup in its text) sends the calls
        # as the model asked them. A call with no id or no usable name is never sent: a
        # strict server would refuse every later request of the chat.
        sent = [c for c in turn.tool_calls if c.get("id") and usable_tool_name(c.get("name"))]
        sent = sent or [
            {"name": c.name, "args": c.args if c.edited_args is None else c.asked_args,
             "id": c.tool_call_id}
            for c in exchange.calls
            if c.iteration == turn.iteration and not c.is_format_error and c.tool_call_id
            and usable_tool_name(c.name)
        ]  # fmt: skip
        if not sent:
            continue
        kwargs = {"reasoning_content": turn.reasoning} if turn.reasoning else {}
        message = AIMessage(
            content=turn.text,
            tool_calls=[{"name": c["name"], "args": _args(c.get("args")), "id": c["id"],
                         "type": "tool_call"} for c in sent],
            additional_kwargs=kwargs,
        )  # fmt: skip
        for call in sent:
            record = calls.get((turn.iteration, call["id"])) or CallRecord(
                iteration=turn.iteration, tool_call_id=call["id"], name=call["name"],
                status=StepStatus.RUNNING,
            )  # fmt: skip
            action = _action(record, message=message)
            steps.append((action, _observation(record, max_observation_chars)))
    return steps


def _args(args: Any) -> dict[str, Any]:
    return args if isinstance(args, dict) else {}


def _action(
    call: CallRecord, *, log: str = "", message: AIMessage | None = None
) -> ToolAgentAction:
    args = call.args if isinstance(call.args, dict | str) else {}
    return ToolAgentAction(
        tool=call.name, tool_input=args, log=log,
        message_log=[message] if message is not None else [AIMessage(log)],
        tool_call_id=call.tool_call_id,
    )  # fmt: skip


def _clip(call: CallRecord, limit: int) -> str:
    """Return the call's result as :func:`agents.tool_calls.clip` clipped it for the model,
    also when only its beginning was loaded (the note counts the whole result)."""
    total = max(len(call.result), call.result_chars)
    if total <= limit:
        return call.result
    return call.result[:limit] + CLIPPED_NOTE.format(shown=limit, total=total)


def _observation(call: CallRecord, max_observation_chars: int) -> ToolMessage:
    """Return the ToolMessage the model was given for ``call``: its stored observation
    (else its result clipped), starting with the note of a person's edit when the call
    had one, also where the row lacks it (stored before the note was on the event, or
    the run's end closed the call)."""
    if call.is_unfinished:
        content, status = UNFINISHED_CALL, StepStatus.ERROR
    else:
        content = call.observation if call.observation else _clip(call, max_observation_chars)
        status = StepStatus.ERROR if call.status == StepStatus.ERROR else StepStatus.SUCCESS
    if call.edited_args is not None:
        content = with_edited_note(content, call.edited_args)
    return ToolMessage(content=content, tool_call_id=call.tool_call_id, name=call.name,
                       status=status.value)  # fmt: skip


def fill_empty_replies(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Return ``messages`` with each empty assistant message that makes no calls filled.

    A text strategy's scratchpad shows the model its own replies, an empty one too (the
    format error that follows says it was empty); strict servers refuse an assistant
    message with no content and no calls, so it reads :data:`EMPTY_REPLY_SHOWN` instead.
    """
    return [
        AIMessage(EMPTY_REPLY_SHOWN)
        if isinstance(message, AIMessage)
        and not message.tool_calls
        and not message.invalid_tool_calls
        and not str(message.text).strip()
        else message
        for message in messages
    ]


class RoleOrderError(ValueError):
    """A request a strict server would refuse; the message lists every problem."""


def role_order_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Return what a strict chat template would refuse in ``messages`` ([] when none).

    The rules of the strictest common servers (vLLM and Mistral templates, which answer
    400 "Conversation roles must alternate user/assistant/user/assistant/..."): a system
    message only first and only once; after it a user message; then user and assistant
    alternate, never two of either in a row; tool messages only right after the
    assistant message whose calls they answer, each call answered exactly once, all of
    them before anything else; no assistant message that is empty and makes no calls;
    every tool call has an id and a name OpenAI and Mistral take
    (``^[a-zA-Z0-9_-]{1,64}$``: they answer 400 to any other); the request ends with a
    user message or with the results of the last calls.
    """
    problems: list[str] = []
    expect = "user"  # the role the next non-tool message must have
    open_calls: set[str] = set()
    answered: set[str] = set()
    for index, message in enumerate(messages):
        where = f"message {index} ({message.type})"
        if isinstance(message, SystemMessage):
            if index != 0:
                problems.append(f"{where}: a system message after the first message")
            continue
        if isinstance(message, ToolMessage):
            if message.tool_call_id in answered:
                problems.append(f"{where}: tool_call_id {message.tool_call_id!r} answered twice")
            elif message.tool_call_id not in open_calls:
                problems.append(f"{where}: tool_call_id {message.tool_call_id!r} answers no call "
                                "of the assistant message before it")  # fmt: skip
            open_calls.discard(message.tool_call_id)
            answered.add(message.tool_call_id)
            continue
        if open_calls:
            problems.append(f"{where}: calls {sorted(open_calls)} have no tool message")
            open_calls = set()
        role = "assistant" if isinstance(message, AIMessage) else "user"
        if not isinstance(message, AIMessage | HumanMessage):
            problems.append(f"{where}: a {message.type} message is neither user nor assistant")
        if role != expect:
            problems.append(f"{where}: roles must alternate, a {role} message after a {role} one")
        if isinstance(message, AIMessage):
            # langchain-openai sends invalid_tool_calls as tool_calls too (raw arguments).
            ids = [c.get("id") or "" for c in [*message.tool_calls, *message.invalid_tool_calls]]
            if not ids and not str(message.text).strip():
                problems.append(f"{where}: an empty assistant message with no tool calls")
            if len(set(ids)) != len(ids) or "" in ids:
                problems.append(f"{where}: tool call ids missing or repeated: {ids}")
            names = [c.get("name") for c in [*message.tool_calls, *message.invalid_tool_calls]]
            refused = [name for name in names if not usable_tool_name(name)]
            if refused:
                problems.append(f"{where}: tool call names not {TOOL_NAME_RULE}: {refused}")
            open_calls, answered = set(ids), set()
            expect = "assistant" if ids else "user"
        else:
            expect = "assistant"
    if open_calls:
        problems.append(f"the end: calls {sorted(open_calls)} have no tool message")
    last = messages[-1] if messages else None
    if last is None or not isinstance(last, HumanMessage | ToolMessage):
        problems.append("the request must end with a user message or tool results")
    return problems


def check_role_order(messages: Sequence[BaseMessage]) -> None:
    """Raise :class:`RoleOrderError` if a strict server would refuse ``messages``."""
    problems = role_order_problems(messages)
    if problems:
        raise RoleOrderError("; ".join(problems))


def describe(messages: Sequence[BaseMessage], width: int = 60) -> str:
    """Return one line per message (role, calls, text cut to ``width``), for test output."""
    lines = []
    for message in messages:
        calls = getattr(message, "tool_calls", None) or ""
        if calls:
            calls = " calls=" + json.dumps([c.get("id") for c in calls])
        reply_to = f" to={message.tool_call_id}" if isinstance(message, ToolMessage) else ""
        text = " ".join(str(message.text).split())[:width]
        lines.append(f"{message.type}{calls}{reply_to}: {text}")
    return "\n".join(lines)


def resume_from(
    turns: Sequence[TurnRecord],
    calls: Sequence[CallRecord],
    *,
    strategy: Strategy,
    decisions: Mapping[str, Decision],
    max_observation_chars: int,
    usage: Mapping[str, int] | None = None,
    spent_s: float = 0.0,
) -> Resume:
    """Return the :class:`agents.approvals.Resume` of a paused run from its stored turns
    and calls (in the order stored; the last turn is the paused one).

    The scratchpad is rebuilt as an earlier exchange's tool work is
    (:func:`intermediate_steps`), with a text strategy's format slips kept: the model's
    next request is the one it would have got had the run not paused.
    """
    iteration = max((turn.iteration for turn in turns), default=1)

    def pairs(keep: Callable[[int], bool]) -> list[IntermediateStep]:
        exchange = Exchange(
            question="", strategy=strategy.name,
            turns=tuple(t for t in turns if keep(t.iteration)),
            calls=tuple(c for c in calls if keep(c.iteration)),
        )  # fmt: skip
        return intermediate_steps(exchange, strategy, max_observation_chars, format_slips=True)

    return Resume(
        iteration=iteration,
        steps=pairs(lambda it: it < iteration),
        turn=pairs(lambda it: it == iteration),
        decisions=dict(decisions),
        usage=dict(usage or {}),
        spent_s=spent_s,
    )
