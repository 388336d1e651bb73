"""Write the sentence that leads the scripted demo model's final answer, from a result's shape.

Nothing here knows which tool produced the data. Three shapes answer the question outright:

* an ``expression`` with a ``result`` (or ``value``): "17*23 = 391";
* search hits (``results``/``hits``/``matches``) whose first item has a ``city``: that city
  is recommended with the first sentence of the hit's snippet, unless the call already
  named it (then the city is just introduced);
* a list of days (``days``/``forecast``/``daily``) whose first item has a condition or a
  low and high temperature: a one-line summary of that first day.

Anything else has no lead; the per-tool details below the lead still show it. Values from
the result are escaped (:func:`agents.models.demo_text.escape_markdown`) to show as written.
"""

from __future__ import annotations

import re
from typing import Any

from agents.models.demo_summary import localise, scalar, temperatures
from agents.models.demo_text import clip, escape_markdown

_HIT_KEYS = ("results", "hits", "matches")
_DAY_KEYS = ("days", "forecast", "daily")
_SNIPPET_KEYS = ("snippet", "summary", "description", "text", "content")
_CONDITION_KEYS = ("condition", "weather", "summary")
_PLACE_KEYS = ("town", "city", "location")
_SENTENCE = re.compile(r"^.+?(?:[。！？]|[.!?](?=\s|$))")
_LEAD_CHARS = 160


def _first_dict(payload: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    for key in keys:
        items = payload.get(key)
        if isinstance(items, list) and items and isinstance(items[0], dict):
            return items[0]
    return None


def _first_of(item: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((str(item[k]) for k in keys if scalar(item.get(k))), None)


def _calculation(payload: dict[str, Any]) -> str | None:
    expression = payload.get("expression")
    result = payload.get("result", payload.get("value"))
    if scalar(expression) and scalar(result):
        return f"{escape_markdown(expression)} = {escape_markdown(result)}."
    return None


def _recommendation(payload: dict[str, Any], lang: str, known: frozenset[str]) -> str | None:
    raw = _first_dict(payload, _HIT_KEYS)
    if raw is None:
        return None
    hit = localise(raw, lang)
    city = hit.get("city")
    if not scalar(city):
        return None
    snippet = _first_of(hit, _SNIPPET_KEYS) or _first_of(hit, ("title",)) or ""
    sentence = _SENTENCE.match(" ".join(snippet.split()))
    detail = sentence.group(0) if sentence else snippet
    if len(detail) > _LEAD_CHARS and " " in detail[:_LEAD_CHARS]:  # cut between words
        detail = detail[:_LEAD_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + "…"
    detail = escape_markdown(clip(detail, _LEAD_CHARS))
    names = {str(raw.get(k)) for k in ("city", "city_zh", "city_en") if scalar(raw.get(k))}
    asked = any(name.lower() in value.lower() for name in names for value in known)
    city = escape_markdown(city)
    if lang == "zh":
        head = f"**{city}**" if asked else f"推荐去**{city}**"
        return f"{head}：{detail}" if detail else f"{head}。"
    head = f"**{city}**" if asked else f"I'd suggest **{city}**"
    return f"{head}: {detail}" if detail else f"{head}."


def _first_day(payload: dict[str, Any], lang: str) -> str | None:
    raw = _first_dict(payload, _DAY_KEYS)
    if raw is None:
        return None
    day = localise(raw, lang)
    condition = _first_of(day, _CONDITION_KEYS)
    temps, _ = temperatures(day)  # made of numbers: nothing to escape
    if condition is None and temps is None:
        return None
    rain = next(
        (v for k, v in day.items() if re.search(r"precip|rain", k, re.I) and scalar(v)), None
    )
    top = localise(payload, lang)
    where, when = _first_of(top, _PLACE_KEYS), _first_of(day, ("date", "day"))
    condition, rain, where, when = (
        None if value is None else escape_markdown(value)
        for value in (condition, rain, where, when)
    )
    facts = [fact for fact in (condition, temps) if fact]
    if lang == "zh":
        facts += [f"降水概率 {rain}%"] if rain is not None else []
        subject = " ".join(part for part in (where, when) if part)
        return f"{subject}：{'，'.join(facts)}。" if subject else f"{'，'.join(facts)}。"
    facts += [f"{rain}% chance of rain"] if rain is not None else []
    subject = f"{where} on {when}" if where and when else where or (f"On {when}" if when else "")
    return f"{subject}: {', '.join(facts)}." if subject else f"{', '.join(facts).capitalize()}."


def lead_sentence(payload: Any, lang: str, known: frozenset[str] = frozenset()) -> str | None:
    """Return one sentence answering from a parsed tool result, or None if its shape has none.

    ``known`` holds the call's argument values: a recommended city the call already named
    is introduced, not recommended.
    """
    if not isinstance(payload, dict):
        return None
    return (
        _calculation(payload) or _recommendation(payload, lang, known) or _first_day(payload, lang)
    )
