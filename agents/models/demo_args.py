"""Fill a bound tool's arguments from a clause of the user's question (scripted demo model).

Heuristics are keyed on parameter names and JSON-schema types, never on the tool's
identity: a place-like string parameter (``town``, ``city``, ``location``...) gets the place
(a known city's English name, or an unknown name as the user wrote it), ``query``-like ones
the clause text, ``expression``-like ones the arithmetic found in the clause,
``timezone``-like ones a zone the user wrote (an IANA name, or anything shaped like one,
"Mars/Olympus", "UTC+8", passed as written), else the known place's zone or the unknown
place's name (the time tool accepts city names), integers a number written next to the
parameter's word ("2 rooms", "两个房间", "住三晚"). Values are passed as the user gave
them, never clamped or swapped for a guess, so the tool's own validation error shows.
``fill_args`` also returns the required arguments it could not fill, so the tool is not
called.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from datetime import date
from typing import Any

from agents.models.demo_places import PlaceRef, place_name
from agents.models.demo_text import CJK_CHARS, EN_NUMBERS, ZH_NUMBER, parse_number
from agents.tools.places import Place

PLACE_PARAMS = frozenset({"town", "city", "location", "place", "destination", "where"})
QUERY_PARAMS = frozenset({"query", "q", "question", "text", "topic", "keywords", "search"})
EXPRESSION_PARAMS = frozenset({"expression", "expr", "formula", "equation", "math"})
TIMEZONE_PARAMS = frozenset({"timezone", "tz", "time_zone", "zone"})

# Chinese words for counted things, by parameter name; English words come from the name.
_ZH_UNITS: dict[str, tuple[str, ...]] = {
    "rooms": ("房间", "间房", "间"),
    "days": ("天",),
    "nights": ("晚", "夜"),
    "guests": ("客人", "人", "位"),
    "people": ("人", "位"),
    "adults": ("成人", "大人", "人"),
}
_EN_NUMBER = r"\d+|" + "|".join(EN_NUMBERS)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_OPERATOR_WORDS: tuple[tuple[str, str], ...] = (
    (r"multiplied\s+by|times|乘以|乘|[x×✕*]", "*"),
    (r"divided\s+by|over|除以|÷|/", "/"),
    (r"plus|加上|加|\+", "+"),
    (r"minus|减去|减|-", "-"),
)
_FUNCTIONS = ("sqrt", "sin", "cos", "tan", "log10", "log", "ln", "exp", "abs", "round", "pi")
_EXPR_RUN = re.compile(
    r"(?:\b(?:" + "|".join(_FUNCTIONS) + r")\b|\d+(?:\.\d+)?|\*\*|[-+*/()^]|[ \t])+", re.I
)
# An operand may carry signs: "2*-3", "10**-1000", "sqrt(-1)".
_BINARY = re.compile(r"[\d)]\s*(?:\*\*|[-+*/^])[-+\s]*[\d(a-z]", re.I)
_FUNCTION_CALL = re.compile(r"\b(?:" + "|".join(_FUNCTIONS) + r")\s*\([-+\s]*(?:[\d(]|pi\b)", re.I)
_TZ_CANDIDATE = re.compile(r"\b(?:[A-Za-z_]+/[A-Za-z_+\-0-9]+(?:/[A-Za-z_]+)?|UTC|GMT)\b")
# Written like a zone, known or not: "Mars/Olympus", "America/Argentina/Buenos_Aires",
# "UTC+8", "GMT-05:00". Lower-case "a/b" is too often "and/or" or "km/h" to count.
_ZONE_LIKE = re.compile(
    r"(?<![\w/])(?:[A-Z][a-z][A-Za-z_]*(?:/[A-Z][A-Za-z0-9_+\-]*){1,2}"
    r"|(?i:UTC|GMT)\s*[+\-\u2212]\s*\d{1,2}(?::?\d{2})?)(?![\w/])"
)


def param_type(schema: dict[str, Any]) -> str:
    """Return the JSON-schema type of a parameter, looking through ``anyOf`` and nullables."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        for option in schema.get("anyOf") or schema.get("oneOf") or ():
            if isinstance(option, dict) and option.get("type") not in (None, "null"):
                return param_type(option)
    return kind if isinstance(kind, str) else "string"


def _param_format(schema: dict[str, Any]) -> str:
    for option in (schema, *(schema.get("anyOf") or ())):
        if isinstance(option, dict) and isinstance(option.get("format"), str):
            return option["format"]
    return ""


def is_place_param(name: str) -> bool:
    """Return True for a parameter that names a city (``town``, ``city``, ``location``...)."""
    return name.lower() in PLACE_PARAMS or name.lower().endswith(("_city", "_town"))


def find_expression(text: str) -> str | None:
    """Return the longest arithmetic expression in ``text`` ("17 × 23" -> "17*23"), or None.

    Operator words (times, plus, 乘以, 除以...) between numbers become operators, ``^``
    becomes ``**`` and ISO dates are ignored. An expression needs a binary operator between
    operands, which may carry a sign ("2*-3"), or a function call such as ``sqrt(-1)``; a
    lone number such as "-5" is not one.
    """
    text = _ISO_DATE.sub(" ", text.replace("（", "(").replace("）", ")"))
    for words, symbol in _OPERATOR_WORDS:
        text = re.sub(rf"(?<=[\d)])\s*(?:{words})\s*(?=[\d(])", symbol, text, flags=re.I)
    best = ""
    for match in _EXPR_RUN.finditer(text):
        run = match.group(0).strip()
        run = re.sub(r"^[*/^+)\s]+|[-+*/^(\s]+$", "", run)
        while run.count("(") > run.count(")") and run.startswith("("):
            run = run[1:]
        while run.count(")") > run.count("(") and run.endswith(")"):
            run = run[:-1]
        if (_BINARY.search(run) or _FUNCTION_CALL.search(run)) and len(run) > len(best):
            best = run
    if not best:
        return None
    return re.sub(r"\s+", "", best).replace("^", "**")


@functools.cache
def _timezones() -> dict[str, str]:
    try:
        names = zoneinfo.available_timezones()
    except Exception:  # no tz database on this machine: IANA names just go undetected
        names = set()
    return {name.lower(): name for name in names | {"UTC"}}


def find_timezone(text: str) -> str | None:
    """Return the first IANA time zone name written in ``text`` ("Asia/Tokyo", "UTC")."""
    for match in _TZ_CANDIDATE.finditer(text):
        found = _timezones().get(match.group(0).lower())
        if found:
            return found
    return None


def find_zone(text: str) -> str | None:
    """Return the time zone ``text`` asks for: an IANA name, else one shaped like a zone.

    "asia/tokyo" -> "Asia/Tokyo"; "Mars/Olympus" and "UTC+8" come back as written, for the
    tool to reject or accept, rather than being replaced by a guess.
    """
    shaped = _ZONE_LIKE.search(text)
    if shaped and shaped.group(0).lower() not in _timezones():  # "UTC+8" is not UTC
        return shaped.group(0)
    return find_timezone(text)


def find_count(text: str, param: str) -> int | None:
    """Return the number written next to ``param``'s word in ``text`` ("2 rooms" -> 2)."""
    word = param.lower().removesuffix("s")
    english = re.search(rf"\b({_EN_NUMBER})\s*-?\s*(?:[a-z]+\s+)?{re.escape(word)}s?\b", text, re.I)
    if english:
        return parse_number(english.group(1))
    units = _ZH_UNITS.get(param.lower())
    if not units:
        return None
    chinese = re.search(
        rf"({ZH_NUMBER}|\d+)\s*(?:(?:个|间|位|名)[{CJK_CHARS}]{{0,3}}?)?(?:{'|'.join(units)})",
        text,
    )
    return parse_number(chinese.group(1)) if chinese else None


def _find_date(text: str) -> str | None:
    for match in _ISO_DATE.finditer(text):
        try:
            return date(*(int(part) for part in match.groups())).isoformat()
        except ValueError:
            continue
    return None


def _fill_one(
    name: str, schema: dict[str, Any], clause: str, question: str, place: PlaceRef | None
) -> Any:
    lowered, kind = name.lower(), param_type(schema)
    if kind == "string":
        if is_place_param(name):
            return place_name(place) if place else None
        if lowered in QUERY_PARAMS:
            return clause or None
        if lowered in EXPRESSION_PARAMS:
            return find_expression(clause) or find_expression(question)
        if lowered in TIMEZONE_PARAMS:
            explicit = find_zone(clause) or find_zone(question)
            if explicit or place:
                return explicit or (place.timezone if isinstance(place, Place) else place)
            return schema.get("default") or "UTC"
        if _param_format(schema).startswith("date") or "date" in lowered:
            return _find_date(clause) or _find_date(question)
        for option in schema.get("enum") or ():
            if isinstance(option, str) and option.lower() in clause.lower():
                return option
        return None
    if kind in ("integer", "number"):
        # Out of the schema's range ("50 rooms") is passed on: the tool's error says why.
        count = find_count(clause, name)
        return count if count is not None else find_count(question, name)
    return None


def fill_args(
    parameters: dict[str, Any], clause: str, question: str, place: PlaceRef | None
) -> tuple[dict[str, Any], list[str]]:
    """Return arguments for a tool's JSON-schema ``parameters`` and the required ones missing.

    Found values win; otherwise a non-null schema default is used; optional parameters with
    neither are left out. A required string no heuristic fills gets the clause text when it
    is the tool's only required parameter. The tool is only called if nothing is missing.
    """
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = [r for r in parameters.get("required") or () if isinstance(r, str)]
    args: dict[str, Any] = {}
    for name, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        value = _fill_one(name, schema, clause, question, place)
        if value is None and schema.get("default") is not None:
            value = schema["default"]
        if (
            value is None
            and required == [name]
            and param_type(schema) == "string"
            and not _is_special(name)
        ):
            value = clause or None
        if value is not None:
            args[name] = value
    return args, [name for name in required if name not in args]


def _is_special(name: str) -> bool:
    lowered = name.lower()
    return is_place_param(name) or lowered in EXPRESSION_PARAMS | TIMEZONE_PARAMS
