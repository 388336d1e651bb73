"""The bundled gazetteer: cities the offline tools and the demo model know.

Each :class:`Place` has a canonical English name, a Chinese name, aliases (lower-case
English spellings and Chinese forms) and the IANA time zone. ``find_place`` and
``find_places`` resolve free text in either language to places.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Place:
    """A city: ``name`` (English, canonical), ``name_zh``, ``aliases`` and ``timezone``."""

    name: str
    name_zh: str
    aliases: tuple[str, ...]
    timezone: str
    latitude: float


PLACES: tuple[Place, ...] = (
    Place("Hangzhou", "杭州", ("hangzhou", "hang zhou", "杭州"), "Asia/Shanghai", 30.3),
    Place("Suzhou", "苏州", ("suzhou", "su zhou", "soochow", "苏州"), "Asia/Shanghai", 31.3),
    Place("Xi'an", "西安", ("xi'an", "xian", "xi an", "xi’an", "西安"), "Asia/Shanghai", 34.3),
    Place("Beijing", "北京", ("beijing", "peking", "北京"), "Asia/Shanghai", 39.9),
    Place("Shanghai", "上海", ("shanghai", "上海"), "Asia/Shanghai", 31.2),
    Place("Chengdu", "成都", ("chengdu", "cheng du", "成都"), "Asia/Shanghai", 30.7),
    Place("Guilin", "桂林", ("guilin", "桂林"), "Asia/Shanghai", 25.3),
    Place("Lijiang", "丽江", ("lijiang", "丽江"), "Asia/Shanghai", 26.9),
)

_BY_ALIAS: dict[str, Place] = {alias: place for place in PLACES for alias in place.aliases}
# Longest alias first, so "xi an" wins over a shorter overlapping alias.
_ALIAS_PATTERN = re.compile(
    "|".join(
        rf"\b{re.escape(a)}\b" if a.isascii() else re.escape(a)
        for a in sorted(_BY_ALIAS, key=len, reverse=True)
    ),
    re.IGNORECASE,
)


def find_places(text: str) -> list[Place]:
    """Return the known places named in ``text``, in order of first mention, no repeats."""
    seen: list[Place] = []
    for match in _ALIAS_PATTERN.finditer(text):
        place = _BY_ALIAS[match.group(0).lower()]
        if place not in seen:
            seen.append(place)
    return seen


def find_place(text: str) -> Place | None:
    """Return the place ``text`` names (an exact alias first, else the first mention), or None."""
    exact = _BY_ALIAS.get(text.strip().lower())
    if exact is not None:
        return exact
    found = find_places(text)
    return found[0] if found else None
