"""The current_time tool: the date and time now in a time zone or a known city."""

from __future__ import annotations

import functools
from datetime import datetime
from zoneinfo import ZoneInfo, available_timezones

from pydantic import BaseModel, Field

from agents.tools.base import known_towns, make_tool
from agents.tools.places import find_place

EXAMPLE_ZONES = (
    "UTC",
    "Asia/Shanghai",
    "Europe/London",
    "America/New_York",
    "Beijing",
    "北京",
    "Tokyo",
)
WEEKDAYS_ZH = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")

UNKNOWN_ZONE = "Unknown time zone or city {timezone!r}; try e.g. {examples}."


@functools.cache
def _zone_names() -> tuple[dict[str, str], dict[str, str]]:
    """Return IANA names by lower-cased full name and by lower-cased last part ("paris")."""
    by_name: dict[str, str] = {}
    by_city: dict[str, str] = {}
    for name in sorted(available_timezones()):
        by_name[name.lower()] = name
        if "/" in name:
            by_city.setdefault(name.rsplit("/", 1)[1].lower(), name)
    return by_name, by_city


def resolve_zone(timezone: str) -> tuple[ZoneInfo, str | None]:
    """Return the zone ``timezone`` names and the city it came from, if it named one.

    Accepts IANA names in any case ("Asia/Shanghai", "utc"), the gazetteer's cities in
    English or Chinese ("Beijing", "北京" -> Asia/Shanghai) and the city part of an IANA
    name ("Paris", "new york"). Raises ValueError with examples for anything else.
    """
    text = timezone.strip()
    place = find_place(text)
    if place is not None and text.lower() in place.aliases:
        return ZoneInfo(place.timezone), place.name
    by_name, by_city = _zone_names()
    key = by_name.get(text.lower())
    if key is not None:
        return ZoneInfo(key), None
    if place is not None:
        return ZoneInfo(place.timezone), place.name
    key = by_city.get(text.lower().replace(" ", "_"))
    if key is not None:
        return ZoneInfo(key), None
    raise ValueError(UNKNOWN_ZONE.format(timezone=timezone, examples=", ".join(EXAMPLE_ZONES)))


def time_in(zone: ZoneInfo, now: datetime) -> dict:
    """Return ``now`` (an aware datetime) as seen in ``zone``.

    Shape: ``{"timezone", "iso", "date", "time", "weekday", "weekday_zh", "utc_offset"}``,
    with ``iso`` to the second and ``utc_offset`` like "+08:00".
    """
    local = now.astimezone(zone).replace(microsecond=0)
    offset = local.strftime("%z")
    return {
        "timezone": zone.key,
        "iso": local.isoformat(),
        "date": local.date().isoformat(),
        "time": local.strftime("%H:%M:%S"),
        "weekday": local.strftime("%A"),
        "weekday_zh": WEEKDAYS_ZH[local.weekday()],
        "utc_offset": f"{offset[:3]}:{offset[3:]}",
    }


class CurrentTimeArgs(BaseModel):
    """Arguments of current_time."""

    timezone: str = Field(
        default="UTC",
        min_length=1,
        max_length=100,
        description=(
            "An IANA time zone such as 'Asia/Shanghai' or 'Europe/London', or a known city "
            "in English or Chinese such as 'Beijing' or '北京'. Defaults to UTC."
        ),
    )


def _current_time(timezone: str = "UTC") -> dict:
    """Tell the current date and time, now, in a time zone or city.

    Use it when the user asks what time it is, the date or the day of the week somewhere,
    or the time difference between places (call it once per place). It only reads the
    clock. Returns {"timezone", "iso", "date", "time", "weekday", ...}; an unknown zone is
    an error with examples.
    """
    zone, city = resolve_zone(timezone)
    result = time_in(zone, datetime.now(ZoneInfo("UTC")))
    if city is not None:
        result["city"] = city
    return result


current_time = make_tool(
    _current_time,
    name="current_time",
    args_schema=CurrentTimeArgs,
    notes=f"Cities accepted besides IANA zones: {known_towns()}.",
)
