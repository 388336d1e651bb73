"""Find the places a question names, known to the gazetteer or not (scripted demo model).

Known cities come from :mod:`agents.tools.places`. A place the gazetteer does not know is
spotted by where it stands, not by what it is: capitalised English words after "in", "at",
"for", "to" or "near" ("weather in Atlantis"), or a run of CJK characters after those words
or "去"/"到", or before "(的)天气", "(的)民宿", "(的)时间"... ("巴黎的天气"). Such a name is
passed to the tool as written, so the tool itself says it does not know it, rather than the
demo guessing another city; showing that error is the point of the demo.
"""

from __future__ import annotations

import re

from agents.models.demo_text import CJK_CHARS
from agents.tools.places import Place, find_places

PlaceRef = Place | str
"""A gazetteer place, or a place name the gazetteer does not know, as the user wrote it."""

_CJK = f"[{CJK_CHARS}]"
_PREPOSITION = r"(?i:\b(?:in|at|for|to|near)\b)"
_EN_WORD = r"[A-Z][A-Za-z\u00c0-\u024f'’-]*"
_EN_NAME = re.compile(rf"{_PREPOSITION}\s+({_EN_WORD}(?:[ \t]+{_EN_WORD}){{0,2}})(?![\w&/])")
_ZH_AFTER = re.compile(rf"(?:{_PREPOSITION}\s*|去|到)({_CJK}+)")
_ZH_BEFORE = re.compile(rf"({_CJK}+?)(?=的?(?:天气|气温|温度|民宿|酒店|住宿|客栈|时间|几点|时区))")
# Words that end a place name written after 去/到/in ("去巴黎玩" -> "巴黎").
_ZH_CUT = re.compile(
    r"的|玩|旅游|旅行|看|住|吃|逛|天气|气温|温度|民宿|酒店|住宿|客栈|时间|几点|时区|现在|今天"
    r"|明天|后天|有|呢|吗|吧|怎|什么|哪|要|想|订|找|和|并|也|都"
)
# Words a question puts before the place ("查一下巴黎的天气" -> "巴黎").
_ZH_LEAD = re.compile(
    r"^(?:请问|请|帮我|帮忙|麻烦|查一下|查查|查询|查|看一下|看看|问一下|告诉我|我想知道|想知道"
    r"|说说|给我|一下|那么|那|在|的|现在|今天|明天|后天|这几天|未来几天|最近|周末)"
)
_ZH_NOT_PLACE = re.compile(
    r"[我你他她它这那哪几么吗呢吧个一]|今天|明天|后天|未来|最近|周末|现在|每天|城市|地方|附近|当地"
)
# fmt: off
_EN_NOT_PLACE = frozenset([
    "i", "me", "you", "we", "us", "it", "the", "a", "an", "today", "tomorrow", "tonight",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
    "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "utc", "gmt", "english", "chinese", "celsius", "fahrenheit",
    "markdown", "json", "html", "python",
])
# fmt: on


def _clean_zh(run: str, *, lead: bool) -> str | None:
    if lead:
        previous = None
        while previous != run:
            previous, run = run, _ZH_LEAD.sub("", run, count=1)
    else:
        run = _ZH_CUT.split(run, maxsplit=1)[0]
    if not 2 <= len(run) <= 6 or _ZH_NOT_PLACE.search(run):
        return None
    return run


def _unknown_names(text: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for match in _EN_NAME.finditer(text):
        name = match.group(1)
        if len(name) >= 3 and name.split()[0].lower() not in _EN_NOT_PLACE:
            found.append((match.start(1), name))
    for pattern, lead in ((_ZH_AFTER, False), (_ZH_BEFORE, True)):
        for match in pattern.finditer(text):
            name = _clean_zh(match.group(1), lead=lead)
            if name:
                found.append((match.start(1) + match.group(1).find(name), name))
    return found


def _position(place: Place, text: str) -> int:
    lowered = text.lower()
    return min((i for alias in place.aliases if (i := lowered.find(alias)) >= 0), default=0)


def find_place_refs(text: str) -> list[PlaceRef]:
    """Return the places ``text`` names, known or not, in order of mention, no repeats.

    A candidate that contains a known city ("去苏州玩") counts as that city, not as a new name.
    """
    spotted: list[tuple[int, PlaceRef]] = [(_position(p, text), p) for p in find_places(text)]
    seen: set[str] = set()
    for start, name in _unknown_names(text):
        if find_places(name) or name.casefold() in seen:
            continue
        seen.add(name.casefold())
        spotted.append((start, name))
    return [ref for _, ref in sorted(spotted, key=lambda pair: pair[0])]


def place_name(ref: PlaceRef) -> str:
    """Return the name to pass to a tool: the canonical English name, or the raw text."""
    return ref.name if isinstance(ref, Place) else ref
