"""The Markdown policy for the page's script: ``{% markdown_policy_script %}``."""

from __future__ import annotations

from django import template
from django.utils.html import json_script
from django.utils.safestring import SafeString

from chat.markdown import markdown_policy

register = template.Library()


@register.simple_tag
def markdown_policy_script() -> SafeString:
    """Return ``<script id="markdown-policy" type="application/json">`` holding
    :func:`chat.markdown.markdown_policy`, which static/js/markdown-live.js reads.

    ``json_script`` escapes ``<``, ``>`` and ``&``, so the data cannot end the element.
    """
    return json_script(markdown_policy(), "markdown-policy")
