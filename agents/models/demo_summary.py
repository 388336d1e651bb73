"""Summarise a tool's JSON result as short Markdown lines, from its shape alone.

Used by the scripted demo model's final answer; nothing here knows which tool produced the
data. A ``result``/``value`` key is shown as ``expression = result``. The main list of a
result (``results``, ``days``, ``available``, ``listings``...) is shown item by item: the
title-like fields (city, name, title, date) in bold, then up to four details ranked by key
(condition, snippet, low-high temperatures, prices, place, ...). Search-like lists (items
with a snippet or score) show only the top hit. Bilingual pairs (``name`` / ``name_zh``) are
folded into the answer's language. Values are Markdown-escaped so they show as written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agents.models.demo_text import clip, code_span, escape_markdown

_TITLE_KEYS = ("city", "town", "name", "title", "date", "day")
_LIST_KEYS = ("results", "hits", "matches", "items", "forecast", "daily", "days", "listings",
              "available", "options", "rooms", "data")  # fmt: skip
_DETAIL_RANK = ("local_time", "time", "condition", "weather", "temp", "summary", "snippet",
                "description", "text", "content", "best_season", "price", "total",
                "neighbourhood", "neighborhood", "address", "area", "rooms", "rating",
                "precipitation")  # fmt: skip
_PLAIN_TEXT_KEYS = frozenset(
    {"condition", "weather", "summary", "snippet", "description", "text", "content"}
)
_HEADER_KEYS = ("town", "city", "location", "check_in", "check_out", "note", "message")
_SKIP_KEYS = frozenset(
    {"id", "url", "source", "score", "rank", "index", "lat", "lon", "latitude", "longitude",
     "weekday", "topic", "currency", "units", "iso"}
)  # fmt: skip
_ZH_LABELS = {
    "town": "城市", "city": "城市", "location": "地点",
    "price per night": "每晚", "price": "价格", "total": "总价", "neighbourhood": "位置",
    "rooms free": "空房", "precipitation chance": "降水概率", "temp": "气温",
    "check in": "入住", "check out": "退房", "unavailable count": "已满", "rating": "评分",
    "address": "地址", "best season": "最佳季节", "max guests per room": "每间最多入住",
}  # fmt: skip
_UNIT_SUFFIX = re.compile(r"_(cny|rmb|yuan|pct|percent|c|f)$")
TEXT = {
    "en": {"top": "top hit", "more": "{n} more", "none": "no items",
           "unavailable": "not available"},
    "zh": {"top": "最相关结果", "more": "另有 {n} 条", "none": "没有结果",
           "unavailable": "无空房"},
}  # fmt: skip


def scalar(value: Any) -> bool:
    """Return True for a non-empty string, a number or a bool."""
    return isinstance(value, str | int | float | bool) and value != ""


def localise(item: dict[str, Any], lang: str) -> dict[str, Any]:
    """Return ``item`` with ``<key>_zh`` / ``<key>_en`` variants folded into ``<key>``."""
    out = {k: v for k, v in item.items() if not re.search(r"_(zh|en)$", k)}
    for key, value in item.items():
        base, _, suffix = key.rpartition("_")
        if suffix == lang and base and scalar(value):
            out[base] = value
    return out


def _label(key: str, lang: str) -> str:
    label = _UNIT_SUFFIX.sub("", key.lower()).replace("_", " ").strip()
    return escape_markdown(_ZH_LABELS.get(label, label) if lang == "zh" else label)


def _rank(key: str) -> int:
    parts = {key.lower(), *key.lower().split("_")}
    return next((i for i, word in enumerate(_DETAIL_RANK) if word in parts), 99)


def temperatures(item: dict[str, Any]) -> tuple[str | None, set[str]]:
    """Return an item's low-high range ("17–24°C") and the keys it came from, else None."""
    numeric = {k: v for k, v in item.items() if isinstance(v, int | float)}
    high = next((k for k in numeric if re.search(r"max|high", k, re.I)), None)
    low = next((k for k in numeric if re.search(r"min|low", k, re.I)), None)
    if high is None or low is None:
        return None, set()
    unit = "°F" if high.lower().endswith("_f") else "°C"
    return f"{numeric[low]}–{numeric[high]}{unit}", {high, low}


def _detail(key: str, value: Any, lang: str) -> str | None:
    lowered, label = key.lower(), _label(key, lang)
    if isinstance(value, bool):
        return TEXT[lang]["unavailable"] if lowered == "available" and not value else None
    if not scalar(value):
        return None
    if re.search(r"cny|rmb|yuan", lowered):
        return f"{label} ¥{escape_markdown(value)}"
    if lowered.endswith(("_pct", "_percent")):
        return f"{label} {escape_markdown(value)}%"
    if lowered in _PLAIN_TEXT_KEYS or (isinstance(value, str) and len(value) > 40):
        return escape_markdown(clip(str(value), 140))
    return f"{label} {escape_markdown(value)}"


def item_line(raw: dict[str, Any], lang: str, known: frozenset[str] = frozenset()) -> str:
    """Return one Markdown line for a result item: bold title, then a few details.

    Details whose value is in ``known`` (the call's own arguments) are left out.
    """
    item = localise(raw, lang)
    used = {k for k in _TITLE_KEYS if scalar(item.get(k))}
    titles = [str(item[k]) for k in _TITLE_KEYS if k in used][:2]
    if len(titles) == 2 and titles[0] in titles[1]:  # "Suzhou — Gardens of Suzhou"
        titles = titles[1:]
    titles = [escape_markdown(title) for title in titles]
    temps, temp_keys = temperatures(item)
    details = [(_rank("temp"), f"{_label('temp', lang)} {temps}")] if temps else []
    for key, value in item.items():
        if key in used | temp_keys or key.lower() in _SKIP_KEYS or str(value) in known:
            continue
        text = _detail(key, value, lang)
        if text:
            details.append((_rank(key), text))
    shown = [text for _, text in sorted(details, key=lambda pair: pair[0])[:4]]
    head = f"**{' — '.join(titles)}**" if titles else ""
    if head and shown:
        return f"{head}: {', '.join(shown)}"
    return head or ", ".join(shown)


def dump(value: Any) -> str:
    """Return ``value`` as compact JSON on one line, clipped, in a code span."""
    return code_span(clip(json.dumps(value, ensure_ascii=False, default=str), 200))


def summarise(payload: Any, lang: str, known: frozenset[str] = frozenset()) -> list[str]:
    """Return Markdown lines summarising one tool's parsed result.

    ``known`` holds the call's argument values, left out of the header line.
    """
    if scalar(payload):
        return [escape_markdown(clip(str(payload), 300))]
    if isinstance(payload, list):
        return _list_lines(payload, lang)
    if not isinstance(payload, dict):
        return [TEXT[lang]["none"]]
    for key in ("result", "value", "answer"):
        if scalar(payload.get(key)):
            expr = payload.get("expression")
            value = escape_markdown(payload[key])
            return [f"{code_span(expr)} = **{value}**" if scalar(expr) else value]
    list_key = next((k for k in _LIST_KEYS if isinstance(payload.get(k), list)), None)
    list_key = list_key or next((k for k, v in payload.items() if isinstance(v, list)), None)
    if list_key is None:
        return [item_line(payload, lang, known) or dump(payload)]
    top = localise(payload, lang)
    head = [
        f"{_label(k, lang)}: {escape_markdown(clip(str(v), 80))}"
        for k, v in top.items()
        if (k in _HEADER_KEYS or k.endswith("_count"))
        and scalar(v)
        and not {str(v), str(payload.get(k))} & known
    ][:3]
    return ([", ".join(head)] if head else []) + _list_lines(payload[list_key], lang)


def _list_lines(items: list[Any], lang: str) -> list[str]:
    text = TEXT[lang]
    dicts = [item for item in items if isinstance(item, dict)]
    if not items:
        return [text["none"]]
    if not dicts:
        return [", ".join(escape_markdown(clip(str(item), 60)) for item in items[:5])]
    search_like = any(k in dicts[0] for k in ("snippet", "score", "excerpt"))
    dicts.sort(key=lambda d: d.get("available") is False)  # available ones first
    shown = dicts[:1] if search_like else dicts[:3]
    lines = [item_line(d, lang) or dump(d) for d in shown]
    if search_like:
        lines[0] = f"{text['top']}: {lines[0]}"
    if len(dicts) > len(shown):
        lines.append(text["more"].format(n=len(dicts) - len(shown)))
    return lines
