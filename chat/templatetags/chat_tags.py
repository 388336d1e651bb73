"""Template filters for the chat page."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from chat.markdown import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text: str) -> SafeString:
    """Render Markdown to HTML that :func:`chat.markdown.render_markdown` sanitized."""
    # Safe: nh3 removed every tag, attribute and URL scheme outside the allow-list.
    return mark_safe(render_markdown(text))


@register.filter
def duration(ms: int | None) -> str:
    """Return milliseconds as "850 ms" or "2.4 s"."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"
