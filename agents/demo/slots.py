"""Fill the script's templates: slots from a question, paths into a tool's result, typed.

A field is ``{path}``, ``{path:type}`` or ``{path|default}`` (both: ``{path:type|default}``).
A path is keys and list indexes, ``days[0].condition``; a type is a name in
:data:`SLOT_TYPES`. :func:`render` writes a sentence or an argument as text;
:func:`fill` gives a tool argument that is one typed field its typed value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from agents.demo.scenarios import PAIR, UNITS

_FIELD = re.compile(r"\{([\w.\[\]]+)(?::(\w+))?(?:\|([^{}]*))?\}")


def _number(value: Any) -> int | float:
    """Return ``value`` as a number, an int when it is whole: "30" -> 30, 48.28 -> 48.28."""
    number = float(value)
    return int(number) if number.is_integer() and abs(number) < 1e15 else number


def _series(value: Any) -> list[tuple[str, int | float]]:
    pairs = re.findall(PAIR, str(value))
    return [(re.sub(r"^(?:and\s+|和)", "", label.strip()), _number(n)) for label, n in pairs]


SLOT_TYPES: Mapping[str, Callable[[Any], Any]] = {
    "number": _number,
    "unit": lambda name: UNITS.get(str(name).lower(), str(name)),
    "labels": lambda series: [label for label, _ in _series(series)],
    "values": lambda series: [number for _, number in _series(series)],
    "percent": lambda fraction: f"{_number(round(float(fraction) * 100, 1))}%",
}
"""Slot types, ``{value:number}``: each turns a slot's text (or a result's value) into
what a tool takes or a sentence says. ``labels`` and ``values`` read a chart's series,
"Jan 12, Feb 30" (:data:`agents.demo.scenarios.PAIR`)."""


def _value(path: str, kind: str, default: str, source: Any) -> Any:
    """Return the value at ``path`` in ``source`` (or ``default``) as ``kind``, else None."""
    value = source
    for step in re.findall(r"[^.\[\]]+", path):
        if isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            value = value.get(step) if isinstance(value, dict) else None
    if value is None or isinstance(value, dict | list):
        value = default or None
    if value is None or not kind:
        return value
    try:
        return SLOT_TYPES[kind](value)
    except (TypeError, ValueError):
        return None


def render(template: str, source: Any) -> str | None:
    """Return ``template`` with each ``{path}`` replaced by its value in ``source``.

    ``source`` is JSON-like; a path is keys and list indexes, ``days[0].condition``. A
    field may give a type, ``{result:number}`` (:data:`SLOT_TYPES`), and a default,
    ``{town|UTC}``. None if a path has no value (or only a list or an object) and no
    default, or its value is not of its type.
    """
    values = [_value(*field, source) for field in _FIELD.findall(template)]
    if None in values:
        return None
    pieces = iter(values)
    return _FIELD.sub(lambda _: str(next(pieces)), template)


def fill(template: str, source: Any) -> Any:
    """Return a tool argument: ``template`` rendered, or the typed value when it is one
    typed field (``{value:number}`` -> ``30``, ``{series:labels}`` -> ``["Jan"]``)."""
    field = _FIELD.fullmatch(template)
    if field and field[2]:
        return _value(*field.groups(default=""), source)
    return render(template, source)
