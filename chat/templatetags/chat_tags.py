"""Template filters for the chat page."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from chat.markdown import render_markdown
from chat.presenters import presented

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    """Render Markdown to HTML that :func:`chat.markdown.render_markdown` sanitized."""
    # Safe: nh3 removed every tag, attribute and URL scheme outside the allow-list.
    return mark_safe(render_markdown(text))


# Characters that reorder or hide text. Bidi controls are shown as visible markers
# wherever text is shown, so "\u202eexe.txt" cannot pose as "txt.exe" (the trick of
# CVE-2021-42574, "Trojan Source"); zero-width characters too in the audit views (tool
# arguments and results), but not in chat text, where they join emoji and scripts.
BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _marker(match: re.Match[str]) -> str:
    return f'<span class="ctl">&lt;U+{ord(match.group(0)):04X}&gt;</span>'


@register.filter(needs_autoescape=True)
def reveal_hidden(text: str, autoescape: bool = True) -> SafeString:
    """Escape ``text``; show bidi and zero-width characters as ``<U+202E>`` markers."""
    escaped = conditional_escape(text) if autoescape else text
    # Safe: the text was escaped above and the markers are fixed text.
    return mark_safe(HIDDEN.sub(_marker, escaped))


@register.filter(needs_autoescape=True)
def reveal_bidi(text: str, autoescape: bool = True) -> SafeString:
    """Escape ``text``; show bidi control characters as ``<U+202E>`` markers."""
    escaped = conditional_escape(text) if autoescape else text
    # Safe: the text was escaped above and the markers are fixed text.
    return mark_safe(BIDI_CONTROLS.sub(_marker, escaped))


@register.filter(needs_autoescape=True)
def bidi_as_references(text: str, autoescape: bool = True) -> SafeString:
    """Escape ``text`` with its bidi control characters as numeric character references
    (``&#x202E;``): a form field's value keeps them (an edit sends the question as
    stored), while the page's source holds none raw (no Trojan Source reordering)."""
    escaped = conditional_escape(text) if autoescape else text
    # Safe: the text was escaped above and the references are fixed text.
    return mark_safe(BIDI_CONTROLS.sub(lambda m: f"&#x{ord(m.group(0)):04X};", escaped))


def streamed_html(text: str) -> SafeString:
    """Return streamed model text escaped, its carriage returns as ``&#13;``.

    The browser's HTML parser turns a raw "\\r\\n" or "\\r" into "\\n" before anything
    else, which would leave the element's text shorter than the server counts it: every
    delta after it would start past the element's end (``data-offset``) and be dropped
    until a snapshot. A character reference is kept as the CR it names.
    """
    # Safe: the text was escaped first; the references are fixed text.
    return mark_safe(conditional_escape(text).replace("\r", "&#13;"))


@register.filter(name="streamed")
def streamed_filter(text: str) -> SafeString:
    """Escape streamed model text for its live element (:func:`streamed_html`)."""
    return streamed_html(text or "")


@register.filter
def duration(ms: int | None) -> str:
    """Return milliseconds as "850 ms" or "2.4 s"."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"


# One JSON token at a time: a string (a key when a colon follows), a number, a literal,
# punctuation or whitespace. Text with anything else is not JSON and is shown plain.
JSON_TOKEN = re.compile(
    r'(?P<str>"(?:[^"\\\n]|\\.)*")(?P<colon>\s*:)?'
    r"|(?P<num>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<lit>true|false|null)"
    r"|(?P<plain>[\s{}\[\],:]+)"
)
JSON_CLASSES = {"str": "j-str", "num": "j-num", "lit": "j-lit"}


@register.filter(needs_autoescape=True)
def highlight_json(text: str, autoescape: bool = True) -> SafeString:
    """Escape ``text`` as :func:`reveal_hidden` does; colour it when it is JSON.

    Keys, strings, numbers and literals are wrapped in ``<span class="j-key">`` (``j-str``,
    ``j-num``, ``j-lit``), styled by static/css/cards.css. Text that is not a JSON object
    or array from end to end (a text argument, a clipped result with its note) comes back
    as :func:`reveal_hidden` would return it.

    Each token is escaped with :func:`html.escape` (what Django's ``escape`` calls), and
    the hidden characters' markers are looked for only when the text has one: the same
    output as :func:`reveal_hidden` per token, for less (every card renders its JSON).
    """
    if not text.lstrip().startswith(("{", "[")):
        return reveal_hidden(text, autoescape)
    hidden = HIDDEN.search(text) is not None

    def shown(token: str) -> str:
        escaped = html.escape(token) if autoescape else token
        return HIDDEN.sub(_marker, escaped) if hidden else escaped

    parts: list[str] = []
    position = 0
    for match in JSON_TOKEN.finditer(text):
        if match.start() != position:
            return reveal_hidden(text, autoescape)
        position = match.end()
        kind = match.lastgroup if match.lastgroup != "colon" else "str"
        token = match.group(kind)
        if kind == "plain":
            parts.append(shown(token))
            continue
        colon = match.group("colon") if kind == "str" else None
        css = "j-key" if colon else JSON_CLASSES[kind]
        parts.append(f'<span class="{css}">{shown(token)}</span>')
        if colon:
            parts.append(shown(colon))
    if position != len(text):
        return reveal_hidden(text, autoescape)
    # Safe: every token was escaped above; the markers and spans are fixed text.
    return mark_safe("".join(parts))


@register.filter(needs_autoescape=True)
def pretty_json(value: object, autoescape: bool = True) -> SafeString:
    """Return ``value`` as indented JSON (keys sorted, UTF-8 kept), coloured and escaped
    as :func:`highlight_json` does."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return highlight_json(text, autoescape)


@register.filter(name="presented")
def presented_filter(row: Any) -> Any:
    """Return what a run or a step shows (:func:`chat.presenters.presented`):
    ``{% with words=step|presented %}``."""
    return presented(row)
