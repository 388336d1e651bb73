"""Text helpers for what runs and steps show: JSON as people read it, previews, clip notes.

Plain functions of text and JSON values; they know no model. The words said of a row
(badges, headings, labels) are in :mod:`chat.presenters`, which uses these.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from django.conf import settings

from agents.tool_calls import CLIPPED_NOTE

# A folded tool card's one line of arguments, and the lines a long result opens with.
ARGUMENTS_PREVIEW_CHARS = 120
RESULT_CLIP_LINES = 30
RESULT_LINE_CHARS = 100  # about a line of a result at the chat's width

PREVIEW_NOTE = (
    "\n[the chat is showing the first {shown:,} of {total:,} characters stored; the admin's "
    "run page and the CSV export hold them all]"
)


def previewed(text: str) -> str:
    """Return ``text`` cut to ``CHAT_RESULT_PREVIEW_CHARS`` with :data:`PREVIEW_NOTE`, for
    the chat (whole when it fits)."""
    limit = settings.CHAT_RESULT_PREVIEW_CHARS
    if len(text) <= limit:
        return text
    return text[:limit] + PREVIEW_NOTE.format(shown=limit, total=len(text))


# The note agents.tool_calls.clip puts at the end of a clipped text: (shown, total).
CLIP_NOTE = re.compile(
    re.escape(CLIPPED_NOTE)
    .replace(r"\{shown:,\}", r"([\d,]+)")
    .replace(r"\{total:,\}", r"([\d,]+)")
    + r"\Z"
)


def clip_note(text: str) -> tuple[int, int] | None:
    """Return ``(shown, total)`` of the :data:`CLIP_NOTE` ending ``text``, or None."""
    cut = CLIP_NOTE.search(text)
    if cut is None:
        return None
    shown, total = (int(group.replace(",", "")) for group in cut.groups())
    return shown, total


def arguments_json(arguments: Any, indent: int | None = 2) -> str:
    """Return a tool call's stored arguments as JSON, Chinese kept readable: pretty, or
    on one line with keys sorted (``indent`` None); as stored when the model sent text
    that is not JSON, and ``""`` for none."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=indent is None, indent=indent)


def clipped_line(text: str, limit: int) -> str:
    """Return ``text`` on one line (whitespace runs as one space), cut to ``limit`` with "…"."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[: limit - 1].rstrip() + "…"


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-standard constant {name}")


def pretty_json(text: str) -> str:
    """Return ``text`` indented if it is a JSON object or array and that is lossless.

    Anything else comes back as it is: text that is not JSON, JSON that is not strict, and
    JSON nested deeper than Python's recursion limit (``[[[…]]]`` a few thousand deep, which
    a tool may return and ``json.loads`` cannot read).
    """
    strict = {"object_pairs_hook": _no_duplicate_keys, "parse_constant": _reject_constant}
    try:
        exact = json.loads(text, parse_float=Decimal, **strict)
        value = json.loads(text, **strict)
        if not isinstance(value, dict | list):
            return text
        pretty = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
        if json.loads(pretty, parse_float=Decimal, **strict) != exact:
            return text
    except (TypeError, ValueError, RecursionError):
        return text
    return pretty
