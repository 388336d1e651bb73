"""Conversation titles: one made from the question offline, one made by the model later.

A title tells a conversation apart from the owner's others, so the words that differ
(places, names, dates, numbers) must survive: the offline title drops the openers every
question shares ("Can you", "Plan 3 days in") and puts a trip's place first, squeezes
articles out before it cuts, and never cuts away a name. A question in a script written
without spaces (Chinese, Japanese) is cut into its clauses instead, their request verbs
dropped, the clauses naming a place put first, in a shorter title (its characters are twice
as wide, and the list shows about 11 of them). A model-made title
(:mod:`chat.titles`) replaces the offline one only while the conversation still has it
(``Conversation.title_source``): a title its owner gave is never overwritten.
"""

from __future__ import annotations

import re

from agents.tools.places import PLACES
from chat.models import Conversation, Message, TitleSource

TITLE_LENGTH = 60
WIDE_TITLE_LENGTH = 20
"""Characters in the title of a question in Chinese or Japanese: as wide as 40 letters."""
ELLIPSIS = "…"

# Courtesy and preamble that open many questions and tell none apart.
_OPENER = re.compile(
    r"^(?:(?:hi|hello|hey|ok|okay|so|please)\b[,!.]?\s+"
    r"|(?:can|could|would|will) you(?: please)?\s+"
    r"|(?:i(?:'d| would) like(?: you)? to|i (?:want|need)(?: you)? to|help me(?: to)?|let'?s)\s+"
    r"|(?:what(?:'s| is| are)|how(?:'s| is| are)|tell me about|show me|give me)\s+(?:the\s+)?"
    r"|请|帮我|麻烦你?|能不能|可以)",
    re.IGNORECASE,
)
_NUMBER = r"\d+|one|two|three|four|five|six|seven|eight|nine|ten|a"
_CLOSER = re.compile(r"[,\s]+(?:please|thanks?(?: you)?)$|(?<=\S)[,，]?(?:谢谢你?)$", re.IGNORECASE)
# "Plan 3 days in Hangzhou: ..." -> "Hangzhou, 3 days: ..."
_TRIP = re.compile(
    r"^(?i:(?:plan|planning|organi[sz]e|make|build|suggest)\s+(?:me\s+)?(?:an?\s+|my\s+)?"
    rf"(?P<length>{_NUMBER})[ -](?P<unit>day|night|week|weekend)s?"
    r"(?:[ -](?:trip|visit|itinerary|holiday|vacation|stay|tour|break))?"
    r"\s+(?:in|to|at|around|for|through)\s+)(?P<place>[A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*)*)"
    r"(?P<rest>.*)$",
)
_TRIP_PLAIN = re.compile(
    r"^(?:plan|planning|organi[sz]e|suggest)\s+(?:me\s+)?(?:an?\s+|my\s+)?"
    r"(?P<what>(?:trip|visit|itinerary|holiday|vacation|stay|tour|day|weekend)\b.*)$",
    re.IGNORECASE,
)
# Words a title can lose before it loses a word that matters.
_SQUEEZE = re.compile(r"\b(?:the|a|an|some|please|me|my)\s+|(?<=,)\s+and\b", re.IGNORECASE)
# A name, a date or a number: what usually tells two questions apart.
_DISTINCT = re.compile(r"^(?:[A-Z][\w'&.-]*[a-z0-9][\w'&.-]*|[\w-]*\d[\w:/.-]*)$")
_NOT_NAMES = {"I", "I'm", "I'd", "I'll", "I've"}


def title_from(content: str) -> str:
    """Return a conversation title from a question: one line, at most TITLE_LENGTH.

    The shared openers are dropped, a trip's place comes first ("Plan 3 days in
    Hangzhou: sights…" is "Hangzhou, 3 days: sights…"), articles go before words are
    cut, and a name the cut would lose is kept in front. A question written without
    spaces gets :func:`_unspaced_title`, at most WIDE_TITLE_LENGTH.
    """
    text = " ".join(content.split())
    if _is_unspaced(text):
        return _unspaced_title(text)
    core = _core(text) or text
    if len(core) > TITLE_LENGTH:
        core = _SQUEEZE.sub("", core)
        core = " ".join(core.split())
    if len(core) <= TITLE_LENGTH:
        return core
    cut = _cut(core, TITLE_LENGTH)
    lost = _names(core[len(cut) - 1 :], kept=cut)
    if lost:
        head = ", ".join(lost[:3])
        room = TITLE_LENGTH - len(head) - 2
        if room > 12:
            return f"{head}: {_cut(core, room)}"
        return _cut(head, TITLE_LENGTH)
    return cut


# Chinese and Japanese: ideographs and kana, written without spaces between words.
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CLAUSE_BREAK = re.compile(r"[，。；：！？,;:!?()（）「」『』\s]+")
# What opens a clause of a request and tells none apart: courtesy, "look up", "find me a",
# "and also", counters ("一个" a, "一下" a bit); Japanese polite requests at the end.
_WIDE_OPENER = re.compile(
    r"^(?:请问|请|麻烦你?|帮忙|帮我|给我|告诉我|能不能|能否|可不可以|可以|我想知道|我想|我要|想|"
    r"并且|并|而且|还有|还要|还|然后|再|另外|顺便|以及|和|也|"
    r"推荐|介绍|查询|查查|查一下|查|搜索|搜一下|找找|找一下|找|看看|看一下|订|预订|"
    r"一下|一个|一家|一间|一些|几个|个)"
)
_WIDE_CLOSER = re.compile(
    r"(?:谢谢你?|多谢|好吗|可以吗|吗|呢|吧|啊|"
    r"を?教えてください|を?教えて|を?お願いします|をください|ください|してください)$"
)
# Places in a script without capitals: the gazetteer's, and two-character "X州" (Suzhou,
# Guangzhou, Lanzhou...), which is a place name whatever X is.
_WIDE_PLACE = re.compile(
    "|".join(sorted((re.escape(p.name_zh) for p in PLACES), key=len, reverse=True))
    + r"|[\u4e00-\u9fff]州"
)


def _is_unspaced(text: str) -> bool:
    """Return whether ``text`` is mostly Chinese or Japanese (wide letters, few spaces)."""
    wide = len(_WIDE.findall(text))
    return wide > text.count(" ") and wide * 2 >= len(text.replace(" ", ""))


def _unspaced_title(text: str) -> str:
    """Return the title of a question written without spaces: its clauses, each without
    its request verbs and counters, those naming a place first, joined with "，"; at most
    WIDE_TITLE_LENGTH.

    "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。" is
    "苏州天气，适合看江南园林的城市，民宿房间".
    """
    clauses = []
    for raw in _CLAUSE_BREAK.split(text):
        clause = _WIDE_CLOSER.sub("", raw)
        while (opener := _WIDE_OPENER.match(clause)) and opener.end() < len(clause):
            clause = clause[opener.end() :]
        if clause and clause not in clauses:
            clauses.append(clause)
    if not clauses:
        return _cut(text, WIDE_TITLE_LENGTH)
    placed = [c for c in clauses if _WIDE_PLACE.search(c)]
    title = "，".join(placed + [c for c in clauses if c not in placed])
    if len(title) <= WIDE_TITLE_LENGTH:
        return title
    places = list(dict.fromkeys(_WIDE_PLACE.findall(title)))
    lost = [p for p in places if p not in title[: WIDE_TITLE_LENGTH - 1]]
    if lost:  # only when one clause names more places than the title has room for
        head = "、".join(places) + "："
        return _cut(head + title, WIDE_TITLE_LENGTH)
    return _cut(title, WIDE_TITLE_LENGTH)


def _core(text: str) -> str:
    """Return the question without its openers and a trip's place first (then
    capitalised), or as asked."""
    asked = text = _CLOSER.sub("", text.rstrip(" ?？!！.。"))
    while (opener := _OPENER.match(text)) and opener.end() < len(text):
        text = text[opener.end() :]
    if trip := _TRIP.match(text):
        length, unit = trip["length"].lower(), trip["unit"].lower()
        length = "1" if length in ("a", "one") else length
        if unit == "weekend":
            span = "weekend" if length == "1" else f"{length} weekends"
        else:
            span = f"{length} {unit}" + ("" if length == "1" else "s")
        text = f"{trip['place']}, {span}{trip['rest']}"
    elif plain := _TRIP_PLAIN.match(text):
        text = plain["what"]
    if text == asked:
        return text
    return text[:1].upper() + text[1:]


def _cut(text: str, limit: int) -> str:
    """Return ``text`` cut at a word boundary to at most ``limit`` characters with an
    ellipsis (within a word only when one word is that long, as CJK text is)."""
    if len(text) <= limit:
        return text
    head = text[: limit - len(ELLIPSIS)]
    if " " in head and not text[len(head)].isspace():
        word_start = head.rstrip().rsplit(" ", 1)[0]
        if len(word_start) > limit // 2:
            head = word_start
    return head.rstrip(" ,;:·-—") + ELLIPSIS


def _names(text: str, *, kept: str) -> list[str]:
    """Return the names, dates and numbers of ``text`` that ``kept`` does not hold."""
    found: list[str] = []
    for raw in text.split():
        word = raw.strip(".,;:!?()[]\"'“”‘’…")
        if not word or word in _NOT_NAMES or not _DISTINCT.match(word):
            continue
        if word not in kept and word not in found:
            found.append(word)
    return found


def conversation_title_from_model(*, conversation_id: int, offline: str, title: str) -> bool:
    """Set a model-made title if the conversation still has its offline one; return
    whether it did.

    One conditional UPDATE (made from the question, and still ``offline``, in its WHERE),
    so a rename by its owner, before or while the model answered, always wins.
    """
    return bool(
        Conversation.objects.filter(
            pk=conversation_id, title=offline, title_source=TitleSource.QUESTION
        ).update(title=title, title_source=TitleSource.MODEL)
    )


def first_question(*, conversation_id: int) -> Message | None:
    """Return the conversation's first question (its offline title's source)."""
    return (
        Message.objects.filter(conversation_id=conversation_id, role=Message.Role.USER)
        .order_by("created_at", "id")
        .first()
    )
