"""Play the scenario table: decide the demo model's next turn from the messages so far.

The question is the newest HumanMessage that is not an observation (a text strategy's
scratchpad holds :class:`~agents.strategies.base.ObservationMessage`, told by its type,
not its text). Its calls are planned from :data:`~agents.demo.scenarios.SCENARIOS` the
same way on every turn; what was done since is read back from the messages after it
(native: the AIMessages' ``tool_calls`` and their ToolMessages; text: each reply the
strategy's own parser reads as a call, followed by its observation). A reply that broke
the format made no call. Planned calls not made yet go next (all at once, or one per
turn); then the answer from every result. Only scenarios of bound tools play: an agent
none of whose tools a scenario knows gets a reply saying so, not a pretence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agents.approvals import (
    DENIAL_REASON,
    EXPIRED,
    PERSON_DENIED,
    POLICY_DENIED,
    without_edited_note,
)
from agents.demo.scenarios import MALFORMED_TAG, SCENARIOS, SHOWCASES, TEXT, Scenario
from agents.demo.slots import fill, render
from agents.strategies import ParseError
from agents.strategies.base import (
    FINAL_ANSWER_REQUEST,
    ObservationMessage,
    TextStrategy,
    text_of,
)
from agents.tools.knowledge import contains_cjk
from agents.tools.places import PLACES, find_places

# A town the gazetteer does not know, written after "in", "at" or "for": "in Atlantis".
_NAMED_TOWN = re.compile(r"\b(?:in|at|for)\s+([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?)")
# What the runtime puts before a tool's own error message (agents.tool_calls.TOOL_RAISED).
_RUNTIME_PREFIX = re.compile(r"^Error: (?:tool '[^']*' failed: )?(?:\w*(?:Error|Exception): )?")


def _template(template: str, **fields: str) -> re.Pattern[str]:
    """Return a pattern matching ``template`` with each ``{field}`` matching ``fields``'s
    pattern for it (format specs such as ``!r`` and ``:g`` ignored)."""
    parts = re.split(r"\{(\w+)[^}]*\}", template)
    pattern = "".join(
        re.escape(part) if i % 2 == 0 else fields[part] for i, part in enumerate(parts)
    )
    return re.compile(pattern, re.S)


# The observations of calls that did not run (agents.approvals): said as such, not as a
# tool's failure, and without the instructions the model was given.
_REASON = _template(DENIAL_REASON, reason="(?P<reason>.*)").pattern
_REFUSALS = (
    ("denied", _template(PERSON_DENIED, name=".*?", reason=f"(?:{_REASON})?")),
    ("expired", _template(EXPIRED, name=".*?", timeout=".*?")),
    ("policy_denied", _template(POLICY_DENIED, name=".*?")),
)


@dataclass(frozen=True)
class Call:
    """A tool call: the tool's name and its arguments."""

    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    """A call that was made, the text that came back and whether it succeeded."""

    call: Call
    content: str
    ok: bool


@dataclass(frozen=True)
class Turn:
    """What to say next: ``calls`` to make after ``text``, or ``text`` as the final reply.

    ``malformed``: write the calls so that they break the format (the ``#malformed`` tag)."""

    text: str
    calls: list[Call]
    malformed: bool = False


def towns(text: str) -> list[str]:
    """Return the towns ``text`` names: known places (English names), else one it does not."""
    known = [place.name for place in find_places(text)]
    unknown = _NAMED_TOWN.search(text)
    return known or ([unknown[1]] if unknown else [])


def plan(question: str, earlier: Sequence[str], tools: Sequence[str]) -> tuple[list[Call], bool]:
    """Return the calls ``question`` asks for, and whether a town was needed but not named.

    ``earlier`` holds the user's earlier messages, oldest first; ``tools`` the callable
    tool names. A question that triggers nothing but names a town repeats the town-bound
    scenarios of the newest earlier message that had some.
    """
    matched = _matches(question, tools)
    if not matched and towns(question):
        for text in reversed(earlier):
            matched = [(m, s) for m, s in _matches(text, tools) if "{town" in str(s.args)]
            if matched:
                break
    places = _places(question, earlier)
    calls: list[Call] = []
    missing = False
    for match, scenario in matched:
        slots = {"question": question, **match.groupdict()}
        for town in (places or [None]) if "{town" in str(scenario.args) else [None]:
            call = _call(scenario, {**slots, "town": town})
            missing = missing or (call is None and town is None and "{town" in str(scenario.args))
            if call is not None and call not in calls:
                calls.append(call)
    return calls, missing


def _places(question: str, earlier: Sequence[str]) -> list[str]:
    return next((names for text in (question, *reversed(earlier)) if (names := towns(text))), [])


def _call(scenario: Scenario, slots: Mapping[str, str | None]) -> Call | None:
    args = {name: fill(template, slots) for name, template in scenario.args.items()}
    return None if None in args.values() else Call(scenario.tool, args)


def _match(scenario: Scenario, text: str) -> re.Match[str] | None:
    """Return the earliest match of the scenario's trigger (or triggers) in ``text``."""
    triggers = (scenario.trigger,) if isinstance(scenario.trigger, str) else scenario.trigger
    found = [m for t in triggers if (m := re.search(t, text, re.IGNORECASE))]
    return min(found, key=lambda m: m.start(), default=None)


def _matches(text: str, tools: Sequence[str]) -> list[tuple[re.Match[str], Scenario]]:
    found = [(_match(s, text), s) for s in SCENARIOS if s.tool in tools]
    return sorted([(m, s) for m, s in found if m], key=lambda pair: pair[0].start())


def _is_observation(message: BaseMessage, strategy: type[TextStrategy] | None) -> bool:
    """Return whether ``message`` is a tool's result shown to the model, by its type.

    Native: a ToolMessage. Text: the scratchpad's :class:`ObservationMessage`; never a
    user's message, whatever its text ("Observation: the sky is green. What is 2+2?").
    """
    if strategy is None:
        return isinstance(message, ToolMessage)
    return isinstance(message, ObservationMessage)


def made_calls(after: Sequence[BaseMessage], strategy: type[TextStrategy] | None) -> list[Outcome]:
    """Return the calls made since the question, with what came back, in order.

    Native (``strategy`` None): each ToolMessage paired with its AIMessage's tool call;
    one answering an invalid call is left out. Text: each observation after a reply that
    ``strategy.parse_text`` reads as a call (an observation after a reply that broke the
    format answered no call).
    """
    outcomes: list[Outcome] = []
    calls: dict[str, Call] = {}
    for before, message in zip([None, *after], after, strict=False):
        if isinstance(message, AIMessage):
            calls.update({c["id"]: Call(c["name"], c["args"]) for c in message.tool_calls})
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            ok = message.status != "error"
            # A call a person approved with other arguments: its result after the note.
            content = without_edited_note(text_of(message))
            outcomes.append(Outcome(calls[message.tool_call_id], content, ok))
        elif strategy and isinstance(before, AIMessage) and _is_observation(message, strategy):
            head, _, tail = strategy.observation_template.partition("{observation}")
            # The request for a final answer may follow the last observation's text.
            content = text_of(message).split(f"\n\n{FINAL_ANSWER_REQUEST}")[0]
            content = content.removeprefix(head).removesuffix(tail)
            content = without_edited_note(content)
            try:
                parsed = strategy.parse_text(text_of(before))
            except ParseError:
                continue
            if not isinstance(parsed, str):
                tool, tool_input = parsed
                args = tool_input if isinstance(tool_input, dict) else {}
                outcomes.append(Outcome(Call(tool, args), content, not content.startswith("Error")))
    return outcomes


def decide(
    messages: Sequence[BaseMessage],
    tools: Sequence[str],
    *,
    strategy: type[TextStrategy] | None = None,
    required: bool = False,
    one_per_turn: bool = False,
    bound: Sequence[str] | None = None,
) -> Turn:
    """Return the next turn for ``messages`` (see the module docstring).

    ``tools``: the names that may be called this turn; ``strategy``: the text format the
    prompt asks for (None: native calls); ``required``: a call must be made (a forced
    ``tool_choice``); ``one_per_turn``: one call per turn (``parallel_tool_calls=False``
    or a text format); ``bound``: all the agent's tools, callable now or not (default:
    ``tools``), which tell a bundled agent from one the script does not know.
    """
    spoken = [m for m in messages if isinstance(m, HumanMessage | AIMessage | ToolMessage)]
    if spoken and FINAL_ANSWER_REQUEST in text_of(spoken[-1]):
        tools = ()  # asked for the answer at the limit: a text format still lists its tools
    # The loop's request for a final answer at its limit (early_stopping_method
    # "generate") is not a question: the answer is to the question before it.
    asked = [i for i, m in enumerate(spoken) if isinstance(m, HumanMessage)
             and not _is_observation(m, strategy)
             and not text_of(m).startswith(FINAL_ANSWER_REQUEST)]  # fmt: skip
    index = asked[-1] if asked else -1
    question, tags = re.subn(MALFORMED_TAG, "", text_of(spoken[index]) if index >= 0 else "")
    question = " ".join(question.split())
    lang = "zh" if contains_cjk(question) else "en"
    if not question:
        return Turn(TEXT[lang]["greeting"], [])
    earlier = [text_of(m) for m in spoken[:index] if isinstance(m, HumanMessage)]
    outcomes = made_calls(spoken[index + 1 :], strategy)
    bound = list(tools if bound is None else bound)
    if not outcomes and not any(s.tool in bound for s in SCENARIOS):
        return Turn(unknown_agent(bound, lang), [])
    planned, missing = plan(question, earlier, tools)
    first = len(spoken) == index + 1
    if tools and not planned and not outcomes and (required or (tags and first)):
        # A call nothing asked for: the first scenario whose arguments fill (the travel
        # search takes any question), else the first tool with no arguments.
        places = _places(question, earlier)
        slots = {"question": question, "town": places[0] if places else None}
        forced = [c for s in SCENARIOS if s.tool in tools and (c := _call(s, slots))]
        planned = forced[:1] or [Call(tools[0], {})]
    if tags and first and planned:
        return Turn(plan_line(planned[:1], lang), planned[:1], malformed=True)
    remaining = [call for call in planned if call not in [o.call for o in outcomes]]
    # One call more than planned at most: a run whose calls never match the plan ends.
    if remaining and len(outcomes) <= len(planned):
        batch = remaining[:1] if one_per_turn else remaining
        return Turn(plan_line(batch, lang), batch)
    if outcomes:
        return Turn(answer(outcomes, lang), [])
    if missing:
        known = TEXT[lang]["and"].join(p.name_zh if lang == "zh" else p.name for p in PLACES)
        return Turn(TEXT[lang]["which_town"].format(towns=known), [])
    if not tools:
        return Turn(TEXT[lang]["no_tools"], [])
    return Turn(help_text(tools, lang), [])


def examples(tools: Sequence[str]) -> list[str]:
    """Return the example questions ``tools`` can answer: of each bundled agent
    (:data:`~agents.demo.scenarios.SHOWCASES`) whose tools are bound, those that plan a
    call with the bound ones among its tools."""
    found = []
    for showcase in SHOWCASES:
        mine = [tool for tool in tools if tool in showcase.tools]
        found += [q for q in showcase.examples if mine and plan(q, [], mine)[0]]
    return found


def help_text(tools: Sequence[str], lang: str) -> str:
    """Return the reply to a question no scenario matched: the examples that fit ``tools``."""
    text = TEXT[lang]
    said = text["help"].format(examples="\n".join(f"- {q}" for q in examples(tools)))
    town_bound = any("{town}" in str(s.args) and s.tool in tools for s in SCENARIOS)
    return said + text["follow_up"] if town_bound else said


def unknown_agent(tools: Sequence[str], lang: str) -> str:
    """Return the reply for an agent none of whose ``tools`` the script knows (or none)."""
    text = TEXT[lang]
    has = text["unknown_tools"].format(tools=", ".join(tools)) if tools else text["no_agent_tools"]
    agents = text["and"].join(showcase.agent for showcase in SHOWCASES)
    return text["unknown_agent"].format(agents=agents, has=has)


def plan_line(calls: Sequence[Call], lang: str) -> str:
    """Return the line said before ``calls``: "Checking weather_forecast (Hangzhou)."."""
    return TEXT[lang]["plan"].format(calls=TEXT[lang]["and"].join(_label(c, lang) for c in calls))


def _label(call: Call, lang: str) -> str:
    values = [v if len(v) <= 24 else v[:23] + "…" for v in map(str, call.args.values())]
    args = TEXT[lang]["and"].join(values)
    return TEXT[lang]["call"].format(tool=call.tool, args=args) if values else call.tool


def _failure(outcome: Outcome, label: str, text: Mapping[str, str]) -> str:
    """Return the sentence of a call that failed or did not run (denied, expired)."""
    for kind, pattern in _REFUSALS:
        refused = pattern.fullmatch(outcome.content)
        if refused is not None:
            said = refused.groupdict().get("reason")
            reason = text["denied_reason"].format(reason=said) if said else ""
            return text[kind].format(call=label, reason=reason)
    error = _RUNTIME_PREFIX.sub("", outcome.content)
    return text["failed"].format(call=label, error=error)


def answer(outcomes: Sequence[Outcome], lang: str) -> str:
    """Return the Markdown answer: a sentence per call made, then a footer.

    A result is said with the first answer template of the tool's scenario whose paths
    all resolve in its JSON object (else in ``{"text", "lines"}``, its text and lines),
    beside ``args``, the call's arguments; a failed call with the tool's own error.
    """
    text, lines = TEXT[lang], []
    for outcome in outcomes:
        label = _label(outcome.call, lang)
        if not outcome.ok:
            lines.append(_failure(outcome, label, text))
            continue
        try:
            result = json.loads(outcome.content)
        except ValueError:
            result = None
        if not isinstance(result, dict):
            result = {"text": outcome.content, "lines": outcome.content.splitlines()}
        source = {"args": outcome.call.args, **result}
        scenario = next((s for s in SCENARIOS if s.tool == outcome.call.tool), None)
        templates = scenario.answer[lang] if scenario else ()
        said = (render(template, source) for template in templates)
        lines.append(next((line for line in said if line), text["no_sentence"].format(call=label)))
    return "\n\n".join([*lines, text["footer"]])
