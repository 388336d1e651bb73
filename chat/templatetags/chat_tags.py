"""Template filters for the chat page."""

from __future__ import annotations

import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from chat.markdown import render_markdown

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


@register.filter
def duration(ms: int | None) -> str:
    """Return milliseconds as "850 ms" or "2.4 s"."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"
