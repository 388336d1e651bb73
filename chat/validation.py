"""What a user message must be, wherever it comes from (the websocket, ``manage.py ask``)."""

from __future__ import annotations

import re
import unicodedata

EMPTY_MESSAGE = "Type a message first: an empty message was not sent."
# The page's composer says the same before anything is sent (its count, Send disabled).
TOO_LONG_REASON = "Your message is {length:,} characters long; the limit is {limit:,}."
TOO_LONG = TOO_LONG_REASON + " Nothing was sent."
BAD_CHARACTERS = "The message contains characters that cannot be stored ({what}). Nothing was sent."
# Letters and symbols that draw nothing (fillers, a blank braille cell), beside the
# format, control, mark and separator categories that draw nothing either.
BLANK_LOOKING = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# The blank lines a message starts with (up to its first line's own indentation, kept).
LEADING_BLANK_LINES = re.compile(r"\A\s*\n")


class MessageError(ValueError):
    """A message the chat will not send to the agent; the text says why, for the user."""


def _visible(char: str) -> bool:
    category = unicodedata.category(char)
    return category[0] not in "CZM" and char not in BLANK_LOOKING


def unstorable(text: str) -> str | None:
    """Return what in ``text`` no database stores, or None: a NUL character (Postgres
    refuses it in text and jsonb) or an unpaired UTF-16 surrogate (no UTF-8 encoding)."""
    if "\x00" in text:
        return "a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired surrogate"
    return None


def clean_message(content: str, *, max_chars: int) -> str:
    """Return ``content`` without the blank lines it starts with and the white space it
    ends with; its first line keeps its indentation (pasted code lines up as it did).

    Raises :class:`MessageError` when nothing visible is left (white space, zero-width,
    bidi controls, combining marks, fillers), when it holds characters no database stores
    (NUL, an unpaired UTF-16 surrogate, as from undecodable command-line bytes), or when it
    is longer than ``max_chars`` characters.
    """
    content = LEADING_BLANK_LINES.sub("", content.rstrip())
    bad = unstorable(content)
    if bad is not None:
        raise MessageError(BAD_CHARACTERS.format(what=bad))
    if not any(_visible(char) for char in content):
        raise MessageError(EMPTY_MESSAGE)
    if len(content) > max_chars:
        raise MessageError(TOO_LONG.format(length=len(content), limit=max_chars))
    return content
