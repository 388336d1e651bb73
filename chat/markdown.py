"""Render untrusted Markdown (model answers) to safe HTML.

markdown-it-py parses CommonMark (raw HTML disabled, so ``<script>`` stays text); nh3
(the Rust ``ammonia`` sanitizer) then keeps only an allow-list of tags, attributes and URL
schemes, so ``javascript:`` links and event-handler attributes never reach the page.
"""

from __future__ import annotations

import re
from typing import Any

import nh3
from markdown_it import MarkdownIt

# The parser's preset, options and extra rules; static/js/markdown-live.js builds the
# browser's markdown-it from the same values (markdown_policy), so a streaming answer
# renders as the final one does.
PRESET = "commonmark"
OPTIONS = {"html": False, "linkify": False, "breaks": True}
ENABLED_RULES = ["table", "strikethrough"]
_md = MarkdownIt(PRESET, OPTIONS).enable(ENABLED_RULES)

ALLOWED_TAGS = {
    "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "a", "table", "thead", "tbody", "tr", "th",
    "td",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"style"}, "td": {"style"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_REL = "noopener noreferrer nofollow"
STYLE_PROPERTIES = {"text-align"}


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
        link_rel=LINK_REL,
        filter_style_properties=STYLE_PROPERTIES,
    )


def markdown_policy() -> dict[str, Any]:
    """Return the parser's settings and the sanitizer's allow-list as JSON-ready data.

    The page hands it to static/js/markdown-live.js (``json_script``), which renders a
    streaming answer with markdown-it and DOMPurify under exactly these lists: one list,
    so the live render cannot allow what the final one removes. Lists are sorted, so the
    page's bytes do not change between processes.
    """
    return {
        "preset": PRESET,
        "options": OPTIONS,
        "enable": ENABLED_RULES,
        "tags": sorted(ALLOWED_TAGS),
        "attributes": {tag: sorted(names) for tag, names in sorted(ALLOWED_ATTRIBUTES.items())},
        "url_schemes": sorted(URL_SCHEMES),
        "link_rel": LINK_REL,
        "style_properties": sorted(STYLE_PROPERTIES),
        "bidi_controls": _BIDI_CONTROLS.pattern,
    }


# Markdown syntax dropped by plain_text, for one-line previews. Line marks: a heading's #s,
# a quote's >, a list item's bullet or number, a rule. Inline: code spans (their text kept
# as written), links and images (their label), and emphasis or strikethrough delimiters
# that open after no word character and close before none, so snake_case and 2*3*4 stay.
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)[^\n]*$", re.MULTILINE)
_RULE = re.compile(r"^ {0,3}([-*_])(?: *\1){2,} *$", re.MULTILINE)
_LINE_MARK = re.compile(r"^ {0,3}(?:#{1,6} +|> ?|[-*+] +|\d{1,9}[.)] +)", re.MULTILINE)
# Spans are bounded (200 characters, 500 for a URL) so that a line of unclosed openers
# costs a bounded scan each, never the rest of the line: linear in the text.
_INLINE = re.compile(
    r"(`+)(?P<code>[^\n]{1,200}?)\1"
    r"|!?\[(?P<label>[^\]\n]{0,200})\]\([^)\n]{0,500}\)"
    r"|(?<![\w*~])(?P<mark>\*\*|__|\*|_|~~)(?=\S)(?P<inner>[^\n]{1,200}?)(?<=\S)(?P=mark)(?![\w*~])"
)


def _inline_text(match: re.Match[str]) -> str:
    if match.group("code") is not None:
        return match.group("code").strip()
    inner = match.group("label") if match.group("label") is not None else match.group("inner")
    return _INLINE.sub(_inline_text, inner)


def plain_text(text: str) -> str:
    """Return ``text`` with its common Markdown syntax dropped, its words kept.

    For previews (the conversation list's search snippet), not a renderer: a few regular
    expressions; what they miss shows as written. The result is
    plain text, to be autoescaped like any other. Linear in ``text`` (spans are bounded).
    """
    text = _FENCE.sub("", text)
    text = _RULE.sub("", text)
    text = _LINE_MARK.sub("", text)
    return _INLINE.sub(_inline_text, text)
