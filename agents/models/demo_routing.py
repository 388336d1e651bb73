"""Route a user question to the bound tools for the scripted demo model.

Not an LLM: the question is split into clauses, each clause is scored against every bound
tool by overlapping tokens (English words, Chinese character bigrams) with the tool's name
(weight 2), description (1) and parameter names (0.5), each divided by how many bound tools
share the token. Clues keyed on parameter names add a bonus: an arithmetic expression for an
``expression`` parameter (+2), an IANA zone for a ``timezone`` one (+1), a place for a place
parameter (+0.5). A tool with a required ``expression`` parameter only matches a clause that
holds arithmetic (numbers with an operator between them), so a stray "x" or "=" does not
make a calculator question. City names themselves are not matching tokens (tools may all
list the known towns). The best tool scoring at least 1 wins the clause; a separator (comma,
"and", "并", "和"...) only splits the text when the pieces on both sides route on their own
to different tools, or the right one brings its own place or expression.

Places are the gazetteer's cities and names it does not know (see
:mod:`agents.models.demo_places`), which are passed on as written so the tool reports the
error. A clause naming several places calls a place-bound tool once per place; one naming
none takes the nearest place before it in the question, else the newest one the user named
in an earlier message (never one from the assistant's or a tool's text).

``Router.repeat`` handles follow-ups that name only a city ("And in Chengdu?"): the previous
turn's calls whose tool takes a place or time zone are made again for the new city.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from agents.models.demo_args import (
    EXPRESSION_PARAMS,
    TIMEZONE_PARAMS,
    fill_args,
    find_count,
    find_expression,
    find_timezone,
    find_zone,
    is_place_param,
    param_type,
)
from agents.models.demo_places import PlaceRef, find_place_refs
from agents.models.demo_text import message_text, tokens
from agents.tools.places import find_places

THRESHOLD = 1.0
_SEPARATOR = re.compile(
    r"([,，、;；。?？!！\n]+|\.(?=\s)|(?<![A-Za-z])(?:and|then|also)(?![A-Za-z])"
    r"|并且|然后|还有|以及|另外|顺便|并|再|和)",
    re.IGNORECASE,
)
_LEADING = re.compile(
    r"^(?:[\s,，、;；。.?？!！:：]+|(?:and|then|also|so|please)(?![A-Za-z])"
    r"|并且|然后|还有|以及|另外|顺便|并|再|和|请|帮我)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ToolInfo:
    """A bound tool as the router sees it: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]
    vocab: dict[str, float] = field(default_factory=dict)

    def has_param(self, names: frozenset[str]) -> bool:
        return any(p.lower() in names for p in self.properties)

    @property
    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def place_bound(self) -> bool:
        return any(is_place_param(p) for p in self.properties) or self.has_param(TIMEZONE_PARAMS)

    @property
    def needs_expression(self) -> bool:
        required = self.parameters.get("required") or ()
        return any(isinstance(r, str) and r.lower() in EXPRESSION_PARAMS for r in required)


@dataclass(frozen=True)
class Clause:
    """One clause of the question, with the clues found in it."""

    raw: str
    text: str
    tokens: set[str]
    places: list[PlaceRef]
    expression: str | None
    timezone: str | None


def tool_infos(tools: Sequence[Any] | None) -> list[ToolInfo]:
    """Return router views of OpenAI-format tool dicts, skipping anything malformed."""
    infos: list[ToolInfo] = []
    for tool in tools or ():
        spec = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            continue
        description = spec.get("description") if isinstance(spec.get("description"), str) else ""
        parameters = spec.get("parameters") or spec.get("input_schema") or {}
        parameters = parameters if isinstance(parameters, dict) else {}
        vocab: dict[str, float] = {}
        props = parameters.get("properties")
        props = props if isinstance(props, dict) else {}
        for weight, text in ((0.5, " ".join(props)), (1.0, description), (2.0, spec["name"])):
            for token in tokens(text.replace("_", " ")):
                vocab[token] = max(vocab.get(token, 0.0), weight)
        infos.append(ToolInfo(spec["name"], description, parameters, vocab))
    return infos


def clean_clause(text: str) -> str:
    """Return ``text`` without leading conjunctions and surrounding punctuation."""
    previous = None
    while previous != text:
        previous, text = text, _LEADING.sub("", text, count=1)
    return text.strip().rstrip(",，、;；。.?？!！:：").strip()


def _clause(raw: str) -> Clause:
    text = clean_clause(raw)
    places = find_place_refs(text)
    # City names route nothing by themselves (every town tool may list them); the place
    # bonus in Router.score accounts for them.
    wordy = text
    for place in find_places(text):
        for alias in sorted(place.aliases, key=len, reverse=True):
            pattern = rf"\b{re.escape(alias)}\b" if alias.isascii() else re.escape(alias)
            wordy = re.sub(pattern, " ", wordy, flags=re.IGNORECASE)
    return Clause(raw, text, tokens(wordy), places, find_expression(text), find_timezone(text))


class Router:
    """Score clauses against a set of bound tools and turn questions into tool calls."""

    def __init__(self, tools: Sequence[ToolInfo]) -> None:
        self.tools = list(tools)
        self.missing: dict[str, list[str]] = {}  # tool name -> required args not found
        self.df: dict[str, int] = {}
        for tool in self.tools:
            for token in tool.vocab:
                self.df[token] = self.df.get(token, 0) + 1

    def score(self, clause: Clause, tool: ToolInfo) -> float:
        total = sum(tool.vocab[t] / self.df[t] for t in clause.tokens if t in tool.vocab)
        if clause.expression and tool.has_param(EXPRESSION_PARAMS):
            total += 2.0
        if clause.timezone and tool.has_param(TIMEZONE_PARAMS):
            total += 1.0
        if clause.places and any(is_place_param(p) for p in tool.properties):
            total += 0.5
        return total

    def best(self, clause: Clause) -> ToolInfo | None:
        scored = [
            (self.score(clause, tool), -i, tool)
            for i, tool in enumerate(self.tools)
            if clause.expression or not tool.needs_expression
        ]
        if not scored:
            return None
        score, _, tool = max(scored, key=lambda item: (item[0], item[1]))
        return tool if score >= THRESHOLD else None

    def split(self, question: str) -> list[Clause]:
        """Split ``question`` into clauses that each route to one tool (see module doc)."""
        parts = _SEPARATOR.split(question)
        current = parts[0]
        clauses: list[Clause] = []
        for separator, piece in zip(parts[1::2], parts[2::2], strict=True):
            left, right = _clause(current), _clause(piece)
            left_tool, right_tool = self.best(left), self.best(right)
            if (
                left_tool is not None
                and right_tool is not None
                and (left_tool is not right_tool or right.places or right.expression)
            ):
                clauses.append(left)
                current = piece
            else:
                current = current + separator + piece
        clauses.append(_clause(current))
        return clauses

    def route(self, question: str, earlier: Sequence[BaseMessage]) -> list[tuple[str, dict]]:
        """Return ``(tool name, args)`` for each call the question asks for, in order."""
        calls: list[tuple[str, dict]] = []
        for clause in self.split(question):
            tool = self.best(clause)
            if tool is None:
                continue
            places = clause.places if tool.place_bound else []
            if not places:
                fallback = _place_before(question, clause.raw) or earlier_place(earlier)
                places = [fallback] if fallback else []
            for place in places or [None]:
                args, missing = fill_args(tool.parameters, clause.text, question, place)
                if missing:
                    self.missing[tool.name] = missing
                else:
                    _add(calls, tool.name, args)
        return calls

    def repeat(self, question: str, earlier: Sequence[BaseMessage]) -> list[tuple[str, dict]]:
        """Return the last turn's place-bound calls again, for the places ``question`` names.

        The last turn's calls are the newest AIMessage's ``tool_calls`` or, when the history
        keeps only texts, what the newest earlier question routes to, whichever comes later.
        """
        places = find_places(question)
        if not places:
            return []
        by_name = {tool.name: tool for tool in self.tools}
        calls: list[tuple[str, dict]] = []
        for name, old in self._previous_calls(earlier):
            tool = by_name.get(name)
            if tool is None or not tool.place_bound:
                continue
            for place in places:
                args = dict(old)
                for param, schema in tool.properties.items():
                    if is_place_param(param):
                        args[param] = place.name
                    elif param.lower() in TIMEZONE_PARAMS:
                        args[param] = find_zone(question) or place.timezone
                    elif isinstance(schema, dict) and param_type(schema) == "integer":
                        count = find_count(question, param)
                        args[param] = count if count is not None else args.get(param)
                _add(calls, tool.name, {k: v for k, v in args.items() if v is not None})
        return calls

    def _previous_calls(self, earlier: Sequence[BaseMessage]) -> list[tuple[str, dict]]:
        for i in range(len(earlier) - 1, max(len(earlier) - 12, -1), -1):
            message = earlier[i]
            if isinstance(message, AIMessage) and message.tool_calls:
                return [
                    (call["name"], call["args"])
                    for call in message.tool_calls
                    if isinstance(call.get("args"), dict)
                ]
            if isinstance(message, HumanMessage):
                # A fresh router: what the old question lacked is not missing from this one.
                routed = Router(self.tools).route(message_text(message), earlier[:i])
                if routed:
                    return routed
        return []


def _add(calls: list[tuple[str, dict]], name: str, args: dict) -> None:
    key = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    if all(
        n != name or json.dumps(a, sort_keys=True, ensure_ascii=False, default=str) != key
        for n, a in calls
    ):
        calls.append((name, args))


def _place_before(question: str, raw_clause: str) -> PlaceRef | None:
    """Return the last place named before the clause in the question, else the first after."""
    start = max(question.find(raw_clause), 0)
    before = find_place_refs(question[:start])
    if before:
        return before[-1]
    anywhere = find_place_refs(question)
    return anywhere[0] if anywhere else None


def earlier_place(messages: Sequence[BaseMessage]) -> PlaceRef | None:
    """Return the first place named in the user's most recent earlier message naming one.

    Only HumanMessages count: a zone such as "Asia/Shanghai" in a tool result or in the
    assistant's text is not the user asking about Shanghai.
    """
    for message in reversed(messages):
        if not isinstance(message, HumanMessage):
            continue
        found = find_place_refs(message_text(message))
        if found:
            return found[0]
    return None
