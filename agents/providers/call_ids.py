"""Tool-call ids as each server accepts them, paired as the model's were.

Servers disagree on what a ``tool_call_id`` may be. OpenAI takes at most 40 characters
("string too long. Expected a string with maximum length 40"); Mistral's API, and vLLM
serving a Mistral model with its own tokenizer, take exactly nine letters and digits
("Tool call id was call_98660886 but must be a-z, A-Z, 0-9, with a length of 9."); some
templates refuse an id seen twice in one request, while llama.cpp-style servers number
every turn's calls ``call_0`` again. A conversation gathers ids from every model it was
run with and from the app itself (``call_`` + 24 hex digits for a call read from text),
so the ids are rewritten in each request, never in the rows: :func:`sendable_ids` maps
every id of a request's assistant ``tool_calls`` to one of the target's :data:`STYLES`,
unique within the request, and each ``tool`` message's ``tool_call_id`` to the new id
of the call it answers. The mapping depends only on the id and how often it was seen
before in the request, so a request that adds messages keeps its earlier ids (and a
server's prompt cache).

The nine-character form is langchain-mistralai's
(``_convert_tool_call_id_to_mistral_compatible``, langchain-ai/langchain#24668: base-62
digits of the id's SHA-256), with a counter added so two ids never meet.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable
from typing import Any

_BASE62 = string.digits + string.ascii_letters

PORTABLE = "portable"
ALNUM9 = "alnum9"
STYLES = {
    # Every server we know takes these: OpenAI's length cap, Anthropic's character set.
    PORTABLE: re.compile(r"[A-Za-z0-9_-]{1,40}"),
    # Mistral's API and Mistral chat templates.
    ALNUM9: re.compile(r"[A-Za-z0-9]{9}"),
}
"""The id styles a :class:`~agents.providers.base.Quirks` profile may name, each with the
pattern an id must match whole to be sent as it is."""


def _base62(number: int) -> str:
    digits = []
    while number:
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits)) or "0"


def derived_id(original: str, style: str, attempt: int = 0) -> str:
    """Return an id of ``style`` made from ``original`` (``attempt`` > 0 for another one)."""
    seed = original if not attempt else f"{original}#{attempt}"
    digits = _base62(int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big"))
    if style == ALNUM9:
        return digits[:9].rjust(9, "0")
    return f"call_{digits[:24]}"


def sendable_ids(messages: Iterable[dict[str, Any]], style: str) -> dict[str, str]:
    """Rewrite the tool-call ids of request ``messages`` (OpenAI chat dicts) in place.

    An id that matches ``style``'s pattern (:data:`STYLES`) and was not used earlier in
    the request is kept; any other (empty, too long, other characters, or a repeat) gets
    :func:`derived_id`. A ``tool`` message takes the new id of the call it answers in
    the latest assistant message before it (a ``tool_call_id`` answering none is
    rewritten the same way, so it still matches nothing). Returns the last assistant
    message's mapping (for tests). Raises ``ValueError`` for an unknown ``style``.
    """
    if style not in STYLES:
        raise ValueError(f"tool_call_ids is one of {sorted(STYLES)}, not {style!r}")
    pattern = STYLES[style]
    used: set[str] = set()
    seen: dict[str, int] = {}
    current: dict[str, str] = {}
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if isinstance(calls, list) and calls:
            current = {}
            for call in calls:
                if not isinstance(call, dict):
                    continue
                original = str(call.get("id") or "")
                new = _fresh(original, style, pattern, used, seen)
                current.setdefault(original, new)
                call["id"] = new
        elif message.get("role") == "tool":
            original = str(message.get("tool_call_id") or "")
            if original in current:
                message["tool_call_id"] = current[original]
            elif not pattern.fullmatch(original):
                message["tool_call_id"] = derived_id(original, style)
    return current


def _fresh(
    original: str, style: str, pattern: re.Pattern[str], used: set[str], seen: dict[str, int]
) -> str:
    """Return the id to send for ``original``, not in ``used`` (which it joins)."""
    count = seen.get(original, 0)
    seen[original] = count + 1
    if not count and pattern.fullmatch(original) and original not in used:
        used.add(original)
        return original
    attempt = count
    new = derived_id(original, style, attempt)
    while new in used or new == original:
        attempt += 1
        new = derived_id(original, style, attempt)
    used.add(new)
    return new
