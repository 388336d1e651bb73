"""Render untrusted Markdown (model answers) to safe HTML.

markdown-it-py parses CommonMark (raw HTML disabled, so ``<script>`` stays text); nh3
(the Rust ``ammonia`` sanitizer) then keeps only an allow-list of tags, attributes and URL
schemes, so ``javascript:`` links and event-handler attributes never reach the page.
"""

from __future__ import annotations

import re

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)

ALLOWED_TAGS = {
    "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "a", "table", "thead", "tbody", "tr", "th",
    "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"style"}, "td": {"style"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


# Bidi controls would reorder the rendered text ("Trojan Source"); they are shown instead.
_BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def render_markdown(text: str) -> str:
    """Return ``text`` rendered from Markdown to sanitized HTML (a str, safe to mark safe).

    Bidi control characters become visible ``<U+202E>`` text before rendering.
    """
    text = _BIDI_CONTROLS.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", text or "")
    html = _md.render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
