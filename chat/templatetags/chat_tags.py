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


# Characters that reorder or hide text (bidi controls, zero-width): shown as visible
# markers in the audit views, so "\u202eexe.txt" cannot pose as "txt.exe" (CVE-2021-42574
# "Trojan Source" is the same trick in code).
_HIDDEN = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


@register.filter(needs_autoescape=True)
def reveal_hidden(text: str, autoescape: bool = True) -> SafeString:
    """Escape ``text`` and show invisible/bidi control characters as ``<U+202E>`` markers."""
    escaped = conditional_escape(text) if autoescape else text
    # Safe: the text was escaped above and the markers are fixed text.
    return mark_safe(
        _HIDDEN.sub(lambda m: f'<span class="ctl">&lt;U+{ord(m.group(0)):04X}&gt;</span>', escaped)
    )


@register.filter
def duration(ms: int | None) -> str:
    """Return milliseconds as "850 ms" or "2.4 s"."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"
