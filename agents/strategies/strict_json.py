"""Strict JSON for tool arguments: what a tool may run with and a database may store.

Python's ``json`` module accepts more than RFC 8259 JSON, and more than the audit trail
can keep: ``NaN`` and ``Infinity``, numbers that overflow to ``inf`` (``1e999``), a
repeated key (the last one silently wins), ``"\\ud83d"`` (an unpaired surrogate that no
UTF-8 column stores), and nesting deep enough to raise ``RecursionError``. Arguments
with any of these are refused here with a message the model can act on.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

SURROGATE = re.compile("[\ud800-\udfff]")


class JSONArgumentError(ValueError):
    """Text that is not strict JSON; the message says why, for the model."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        raise JSONArgumentError(f"the key {repeated[0]!r} is repeated")
    return dict(pairs)


def _constant(name: str) -> Any:
    raise JSONArgumentError(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONArgumentError(f"the number {text[:40]} is too large")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float)


def _check_strings(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if SURROGATE.search(item):
                raise JSONArgumentError("a string holds an unpaired UTF-16 surrogate escape")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def raw_decode(text: str, start: int = 0) -> tuple[Any, int]:
    """Return ``(value, end)`` of the strict JSON value at ``text[start:]``.

    Raises :class:`JSONArgumentError` (a ``ValueError``) for anything but strict JSON,
    with the decoder's position for syntax errors.
    """
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise JSONArgumentError(str(exc)) from None
    except RecursionError:
        raise JSONArgumentError("it is nested too deeply") from None
    # A decoded string holds a lone surrogate only from a \u escape or from one in the
    # text itself: without either, the walk through every string is skipped.
    if "\\u" in text or SURROGATE.search(text):
        _check_strings(value)
    return value, end


def loads(text: str) -> Any:
    """Return the strict JSON value of the whole of ``text`` (white space around allowed).

    Raises :class:`JSONArgumentError` as :func:`raw_decode` does, and for text after it.
    """
    start = len(text) - len(text.lstrip())
    value, end = raw_decode(text, start)
    if text[end:].strip():
        raise JSONArgumentError(f"Extra data: line 1 column {end + 1} (char {end})")
    return value


def scrub(text: str) -> str:
    """Return ``text`` with unpaired surrogates replaced by U+FFFD, so it can be stored."""
    return SURROGATE.sub("\ufffd", text)
