"""Decide the scripted demo model's next turn: which calls to make, or what to answer.

The question is the newest HumanMessage that is not a text strategy's observation; its
calls are planned the same way on every turn (deterministic routing, see
:mod:`agents.models.demo_routing`). What has been done since is read back from the
messages after it: ToolMessages paired with their AIMessage's ``tool_calls`` (native), or
observation HumanMessages whose preceding AIMessage parses as a call in the prompt's format
(text). A ToolMessage answering an ``invalid_tool_calls`` entry, or an observation after a
reply that does not parse, was a format error: no call was made, so it is not counted.

* Parallel native calls (the default): all planned calls in one turn; once results are
  back, the answer from them.
* One call per turn (text formats, or ``parallel_tool_calls=False``): the next planned
  call not made yet (matched by name and arguments), while fewer calls were made than
  planned; then the answer from ALL results since the question.
* ``tool_choice="required"`` (or a tool's name) and nothing routed: a call anyway, to the
  first tool whose only required argument is a string (not a place, zone or expression
  preferred), with the question as its value (see :func:`required_call`).
* ``#malformed`` in the question: the first turn for it (nothing observed yet) breaks the
  format (see :mod:`agents.models.demo_formats`); the tag itself is removed before routing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call

from agents.models.demo_answer import (
    answer_from_results,
    capabilities_reply,
    missing_reply,
    plan_line,
)
from agents.models.demo_args import (
    EXPRESSION_PARAMS,
    TIMEZONE_PARAMS,
    is_place_param,
    param_type,
)
from agents.models.demo_formats import (
    NATIVE,
    is_observation,
    observation_text,
    parse_log,
    strip_tag,
)
from agents.models.demo_routing import Router, ToolInfo
from agents.models.demo_text import has_cjk, message_text

GREETING = "Hello! I'm the offline demo model. Ask me something to get started."

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Turn:
    """The demo's decision for one turn.

    ``calls`` to make (``(name, args)``), each said with ``text`` before it (the plan
    line); no calls: ``text`` is the reply (an answer, a question back, a greeting).
    ``malformed``: write the calls in a broken form (the ``#malformed`` trigger).
    """

    text: str
    calls: list[Call]
    malformed: bool = False


def _observes(fmt: str, message: BaseMessage) -> bool:
    """Return True if ``message`` reports a call's outcome in format ``fmt``."""
    if isinstance(message, ToolMessage):
        return True
    return fmt != NATIVE and is_observation(message)


def _question_index(fmt: str, messages: Sequence[BaseMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, HumanMessage) and not _observes(fmt, message):
            return i
    return -1


def _untagged(message: BaseMessage) -> BaseMessage:
    if isinstance(message, HumanMessage):
        text, tagged = strip_tag(message_text(message))
        if tagged:
            return HumanMessage(text)
    return message


def _native_results(after: Sequence[BaseMessage]) -> tuple[list[ToolMessage], list[dict]]:
    """Return the ToolMessages for real calls since the question, and those calls."""
    calls: dict[str, dict] = {}
    invalid: set[str] = set()
    for message in after:
        if isinstance(message, AIMessage):
            calls.update({c["id"]: dict(c) for c in message.tool_calls if c.get("id")})
            invalid.update(c["id"] for c in message.invalid_tool_calls if c.get("id"))
    results = [
        m
        for m in after
        if isinstance(m, ToolMessage) and (m.tool_call_id in calls or m.tool_call_id not in invalid)
    ]
    made = [calls[m.tool_call_id] for m in results if m.tool_call_id in calls]
    return results, made


def _text_results(fmt: str, after: Sequence[BaseMessage]) -> tuple[list[ToolMessage], list[dict]]:
    """Return synthetic ToolMessages and calls for the observations of parsed earlier replies."""
    results: list[ToolMessage] = []
    made: list[dict] = []
    for i, message in enumerate(after):
        if not is_observation(message) or i == 0 or not isinstance(after[i - 1], AIMessage):
            continue
        parsed = parse_log(fmt, message_text(after[i - 1]))
        if parsed is None:
            continue
        name, args = parsed
        call_id = f"call_demo_{len(made) + 1}"
        content = observation_text(message)
        status = "error" if content.lower().startswith("error") else "success"
        results.append(ToolMessage(content, tool_call_id=call_id, name=name, status=status))
        made.append(dict(tool_call(name=name, args=args, id=call_id)))
    return results, made


def _remaining(planned: Sequence[Call], made: Sequence[dict]) -> list[Call]:
    left = list(planned)
    for call in made:
        if (call["name"], call["args"]) in left:
            left.remove((call["name"], call["args"]))
    return left


def required_call(infos: Sequence[ToolInfo], question: str) -> Call | None:
    """Return a call to make when a tool is required but routing found none.

    The first tool whose only required argument is a plain string (not a place, zone or
    expression) gets the question; else the first whose only required argument is a
    string; else the first with no required arguments, called with none.
    """
    singles: list[tuple[ToolInfo, str]] = []
    for info in infos:
        required = info.parameters.get("required") or []
        schema = info.properties.get(required[0]) if len(required) == 1 else None
        if isinstance(schema, dict) and param_type(schema) == "string":
            singles.append((info, required[0]))
    for info, param in singles:
        if not is_place_param(param) and param.lower() not in EXPRESSION_PARAMS | TIMEZONE_PARAMS:
            return info.name, {param: question}
    if singles:
        return singles[0][0].name, {singles[0][1]: question}
    bare = next((info for info in infos if not info.parameters.get("required")), None)
    return (bare.name, {}) if bare else None


def _broken_call(planned: Sequence[Call], infos: Sequence[ToolInfo], question: str) -> Call:
    """Return the call to write in a broken form: the first planned, else any tool."""
    if planned:
        return planned[0]
    forced = required_call(infos, question)
    if forced:
        return forced
    return (infos[0].name, {}) if infos else ("tool", {})


def decide(
    messages: Sequence[BaseMessage],
    infos: Sequence[ToolInfo],
    *,
    fmt: str = NATIVE,
    required: bool = False,
    one_per_turn: bool = False,
) -> Turn:
    """Return what to say and call next for ``messages`` (see the module docstring).

    ``fmt`` is the prompt's format (text formats make one call per turn); ``required``
    forces a call when routing finds none; ``one_per_turn`` is ``parallel_tool_calls=False``.
    """
    one_per_turn = one_per_turn or fmt != NATIVE
    index = _question_index(fmt, messages)
    question, tagged = strip_tag(message_text(messages[index]) if index >= 0 else "")
    lang = "zh" if has_cjk(question) else "en"
    after = messages[index + 1 :]
    observed = bool(messages) and _observes(fmt, messages[-1])
    results: list[ToolMessage] = []
    made: list[dict] = []
    if observed:
        results, made = _native_results(after) if fmt == NATIVE else _text_results(fmt, after)
    else:
        spoken = [m for m in messages if not isinstance(m, SystemMessage)]
        if index < 0 or spoken[-1] is not messages[index] or not (question.strip() or tagged):
            return Turn(GREETING, [])

    router = Router(infos)
    earlier = [_untagged(m) for m in messages[: max(index, 0)] if not _observes(fmt, m)]
    planned = router.route(question, earlier) or router.repeat(question, earlier)
    if not planned and required:
        forced = required_call(infos, question)
        planned = [forced] if forced else []
    if tagged and not observed:
        broken = [_broken_call(planned, infos, question)]
        return Turn(plan_line(broken, lang), broken, malformed=True)
    remaining = _remaining(planned, made)
    # Planned calls not made yet go next: after a first turn forced to another tool (a
    # named tool_choice), or one at a time. The cap (one call more than planned) ends a
    # run whose calls never match the plan.
    if remaining and len(made) <= len(planned):
        batch = remaining[:1] if one_per_turn else remaining
        return Turn(plan_line(batch, lang), batch)
    if results:
        return Turn(answer_from_results(results, AIMessage("", tool_calls=made), lang), [])
    if not question.strip():
        return Turn(GREETING, [])
    if router.missing:
        return Turn(missing_reply(router.missing, infos, lang), [])
    return Turn(capabilities_reply(question, [(t.name, t.description) for t in infos], lang), [])
