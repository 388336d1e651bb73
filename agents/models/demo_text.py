"""Text helpers shared by the scripted demo model's routing and answering.

Tokens for matching: English words of two letters or more, lower-cased with a crude plural
strip, and Chinese as character bigrams of each run of CJK characters. Numbers in English
and Chinese words. Escaping for any value (an argument, the question, a tool result) put
into the Markdown the model writes.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import BaseMessage

CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff"
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
_WORD = re.compile(r"[a-z][a-z0-9&']*")
# CommonMark lets a backslash escape any ASCII punctuation. These act wherever they stand
# ("~" strikes through, "|" makes tables, "&amp;" is an entity); "_" only outside a word.
_MD_INLINE = re.compile(r"[\\`*\[\]()<>#|~]|(?<![^\W_])_|_(?![^\W_])|&(?=#?\w+;)")
# Block markers only count at the start of a line: a list ("- ", "1. ") or a rule ("---").
_MD_LINE_START = re.compile(r"^(?:([-+=])(?=\1|\s|$)|(\d{1,9})([.)])(?=\s|$))")

# fmt: off
STOPWORDS = frozenset([
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "by", "with", "from",
    "as", "is", "are", "be", "am", "was", "it", "its", "this", "that", "these", "those", "what",
    "what's", "whats", "which", "who", "how", "when", "where", "do", "does", "did", "can",
    "could", "would", "should", "will", "please", "me", "my", "i", "i'm", "you", "your", "we",
    "our", "us", "use", "used", "using", "about", "any", "some", "one", "each", "not", "no",
    "if", "then", "also", "there", "here", "into", "up", "out", "get", "give", "tell", "show",
    "find", "look", "check", "want", "need", "know", "like", "let", "let's", "just", "today",
    "tomorrow", "day", "days", "week", "next", "via", "etc", "than", "more", "most", "一个", "一下",
    "什么", "怎么", "可以", "我们", "你们", "这个", "那个", "帮我", "一些", "看看", "查查",
])
# fmt: on

EN_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "俩": 2, "三": 3, "四": 4, "五": 5,
              "六": 6, "七": 7, "八": 8, "九": 9}  # fmt: skip
ZH_NUMBER = "[零一二两俩三四五六七八九十]+"


def content_text(content: Any) -> str:
    """Return the plain text of a message ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return " ".join(parts)
    return "" if content is None else str(content)


def message_text(message: BaseMessage) -> str:
    """Return the plain text of ``message``, never raising."""
    return content_text(getattr(message, "content", ""))


def has_cjk(text: str) -> bool:
    """Return True if ``text`` contains any CJK ideograph."""
    return bool(_CJK_RUN.search(text))


def _stem(word: str) -> str:
    word = word.strip("'")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def tokens(text: str) -> set[str]:
    """Return the matching tokens of ``text``: stemmed English words and CJK bigrams."""
    found: set[str] = set()
    lowered = text.lower()
    for word in _WORD.findall(lowered):
        if len(word) > 1 and word not in STOPWORDS:  # "x" in "src=x" says nothing
            stem = _stem(word)
            if stem and stem not in STOPWORDS:
                found.add(stem)
    for run in _CJK_RUN.findall(text):
        grams = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
        found.update(g for g in grams if g not in STOPWORDS)
    return found


def parse_number(word: str) -> int | None:
    """Return the integer an Arabic, English or Chinese number word spells (up to 99)."""
    word = word.strip().lower()
    if word.isdigit():
        return int(word)
    if word in EN_NUMBERS:
        return EN_NUMBERS[word]
    if not word or any(ch not in _ZH_DIGITS and ch != "十" for ch in word):
        return None
    if "十" in word:
        tens, _, ones = word.partition("十")
        high = _ZH_DIGITS.get(tens, 0) if tens else 1
        low = _ZH_DIGITS.get(ones, 0) if ones else 0
        return high * 10 + low if len(tens) <= 1 and len(ones) <= 1 else None
    return _ZH_DIGITS[word] if len(word) == 1 else None


def clip(text: str, limit: int = 160) -> str:
    """Return ``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def escape_markdown(value: Any) -> str:
    """Return ``value`` as one line of Markdown that renders as exactly its text.

    Used for every value (argument, question, tool result) put into the model's Markdown.
    Significant characters get a backslash (an underscore inside a word is left alone, it
    cannot emphasise), so does an ``&`` that would start an entity, and so does a leading
    list or rule marker ("1. ", "- ", "---"), since the value may start a line. Clip
    before escaping, never after: a cut could strand a backslash that escapes what follows.
    """
    escaped = _MD_INLINE.sub(r"\\\g<0>", " ".join(str(value).split()))
    return _MD_LINE_START.sub(
        lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", escaped, count=1
    )


def code_span(value: Any) -> str:
    """Return ``value`` as an inline code span, fenced with more backticks than it holds."""
    flat = " ".join(str(value).split())
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
