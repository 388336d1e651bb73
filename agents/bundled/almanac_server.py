"""The almanac: an offline MCP server (stdio) with four deterministic tools.

``convert_units`` (length, mass, temperature), ``days_between`` (ISO dates),
``moon_phase`` (computed from the mean synodic month) and ``bar_chart`` (a PNG drawn in
pure Python with zlib). Run it as ``python almanac_server.py``; the app starts it through
:func:`agents.bundled.almanac_config`. It imports nothing of the app.
"""

from __future__ import annotations

import math
import struct
import zlib
from datetime import UTC, date, datetime, time
from typing import TypedDict

from mcp.server.fastmcp import FastMCP, Image

server = FastMCP("almanac", log_level="WARNING")

# Each unit in its quantity's base unit (metre, kilogram).
LENGTH = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048,
          "yd": 0.9144, "mi": 1609.344, "nmi": 1852.0}  # fmt: skip
MASS = {"mg": 1e-6, "g": 0.001, "kg": 1.0, "t": 1000.0, "oz": 0.028349523125,
        "lb": 0.45359237, "st": 6.35029318}  # fmt: skip
TEMPERATURE = ("C", "F", "K")
ALIASES = {"celsius": "C", "fahrenheit": "F", "kelvin": "K", "°c": "C", "°f": "F",
           "metre": "m", "meter": "m", "kilometre": "km", "kilometer": "km", "mile": "mi",
           "miles": "mi", "foot": "ft", "feet": "ft", "inch": "in", "inches": "in",
           "gram": "g", "grams": "g", "kilogram": "kg", "kilograms": "kg", "pound": "lb",
           "pounds": "lb", "ounce": "oz", "ounces": "oz", "tonne": "t", "stone": "st"}  # fmt: skip

SYNODIC_MONTH_DAYS = 29.530588853
# A new moon: 2000-01-06 18:14 UTC (Meeus, Astronomical Algorithms, ch. 49).
NEW_MOON = datetime(2000, 1, 6, 18, 14, tzinfo=UTC)
PHASES = ("new moon", "waxing crescent", "first quarter", "waxing gibbous", "full moon",
          "waning gibbous", "last quarter", "waning crescent")  # fmt: skip

MAX_BARS = 12
PALETTE = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75))  # fmt: skip


class Conversion(TypedDict):
    value: float
    from_unit: str
    to_unit: str
    result: float
    quantity: str


class DaySpan(TypedDict):
    start: str
    end: str
    days: int
    weeks: int
    extra_days: int
    start_weekday: str
    end_weekday: str


class MoonPhase(TypedDict):
    date: str
    phase: str
    age_days: float
    illumination: float


def _unit(name: str) -> str:
    key = name.strip()
    return ALIASES.get(key.lower(), key if key in TEMPERATURE else key.lower())


def _known() -> str:
    return (f"length: {', '.join(LENGTH)}; mass: {', '.join(MASS)}; "
            f"temperature: {', '.join(TEMPERATURE)}")  # fmt: skip


@server.tool()
def convert_units(value: float, from_unit: str, to_unit: str) -> Conversion:
    """Convert a length, mass or temperature from one unit to another.

    Use it whenever a question needs a number in other units (miles to km, pounds to kg,
    Fahrenheit to Celsius); do not convert in your head. Units: length mm, cm, m, km, in,
    ft, yd, mi, nmi; mass mg, g, kg, t, oz, lb, st; temperature C, F, K (full names such
    as "miles" or "celsius" work too). Both units must measure the same quantity.

    Returns {"value", "from_unit", "to_unit", "result", "quantity"}, the result rounded to
    6 significant digits.
    """
    source, target = _unit(from_unit), _unit(to_unit)
    tables = {"length": LENGTH, "mass": MASS}
    quantity = next((q for q, t in tables.items() if source in t and target in t), None)
    if quantity is not None:
        result = value * tables[quantity][source] / tables[quantity][target]
    elif source in TEMPERATURE and target in TEMPERATURE:
        kelvin = {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[source]
        if kelvin < 0:
            raise ValueError(f"{value} {source} is below absolute zero")
        result = {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[target]
        quantity = "temperature"
    else:
        raise ValueError(f"cannot convert {from_unit!r} to {to_unit!r}: both must be units "
                         f"of the same quantity. Known units: {_known()}")  # fmt: skip
    return {"value": value, "from_unit": source, "to_unit": target,
            "result": float(f"{result:.6g}"), "quantity": quantity}  # fmt: skip


def _date(text: str, argument: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{argument}: {text!r} is not an ISO date such as 2024-03-01") from None


@server.tool()
def days_between(start: str, end: str) -> DaySpan:
    """Count the days from one date to another.

    Use it for "how many days until...", ages in days, or the length of a stay. Both
    dates are ISO dates (YYYY-MM-DD); the count is negative when ``end`` is before
    ``start`` and does not include the end date (2024-03-01 to 2024-03-02 is 1 day).

    Returns {"start", "end", "days", "weeks" (whole weeks), "extra_days" (after the
    whole weeks), "start_weekday", "end_weekday"}.
    """
    first, last = _date(start, "start"), _date(end, "end")
    days = (last - first).days
    weeks, extra = divmod(abs(days), 7)
    return {"start": first.isoformat(), "end": last.isoformat(), "days": days,
            "weeks": weeks, "extra_days": extra, "start_weekday": first.strftime("%A"),
            "end_weekday": last.strftime("%A")}  # fmt: skip


@server.tool()
def moon_phase(date: str) -> MoonPhase:
    """Give the moon's phase on a date (at noon UTC), computed, not looked up.

    Use it for questions about the moon on a given day (is it full, how much is lit, a
    good night to see stars). ``date`` is an ISO date (YYYY-MM-DD). The mean synodic
    month is used, so a phase may be off by up to about a day.

    Returns {"date", "phase" (one of: new moon, waxing crescent, first quarter, waxing
    gibbous, full moon, waning gibbous, last quarter, waning crescent), "age_days" (days
    since the last new moon), "illumination" (the lit fraction, 0 to 1)}.
    """
    day = _date(date, "date")
    noon = datetime.combine(day, time(12), tzinfo=UTC)
    age = ((noon - NEW_MOON).total_seconds() / 86400) % SYNODIC_MONTH_DAYS
    fraction = age / SYNODIC_MONTH_DAYS
    illumination = (1 - math.cos(2 * math.pi * fraction)) / 2
    phase = PHASES[int(fraction * 8 + 0.5) % 8]
    return {"date": day.isoformat(), "phase": phase, "age_days": round(age, 1),
            "illumination": round(illumination, 2)}  # fmt: skip


def png(width: int, height: int, pixels: list[bytearray]) -> bytes:
    """Return an RGB PNG of ``pixels`` (rows of 3 bytes a pixel), made with zlib."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))  # fmt: skip


def draw_bars(values: list[float], width: int = 320, height: int = 200) -> bytes:
    """Return a PNG of one bar a value, tallest bar at 90% of the height, on white."""
    pixels = [bytearray(b"\xff" * (width * 3)) for _ in range(height)]
    top = max(values) or 1.0
    margin, baseline = 10, height - 10
    slot = (width - 2 * margin) / len(values)
    for i, value in enumerate(values):
        bar_height = round(value / top * (baseline - margin) * 0.9) if value > 0 else 0
        left = round(margin + i * slot + slot * 0.15)
        right = max(left + 1, round(margin + (i + 1) * slot - slot * 0.15))
        colour = bytes(PALETTE[i % len(PALETTE)])
        for y in range(baseline - bar_height, baseline):
            pixels[y][left * 3 : right * 3] = colour * (right - left)
    pixels[baseline][margin * 3 : (width - margin) * 3] = b"\x40" * ((width - 2 * margin) * 3)
    return png(width, height, pixels)


@server.tool()
def bar_chart(title: str, labels: list[str], values: list[float]) -> list:
    """Draw a bar chart of a few numbers as a PNG image for the person to see.

    Use it when a comparison of up to 12 quantities is easier to see than to read (after
    computing them with the other tools). ``labels`` and ``values`` go together, one
    label a value, in the order to draw; values must be zero or more.

    Returns a line describing the chart (the title, then each label with its value) and
    the image (320x200 pixels, bars left to right in the order given; the image has no
    text, so mention the labels in your answer).
    """
    if not labels or len(labels) != len(values):
        raise ValueError("labels and values must be non-empty lists of the same length")
    if len(values) > MAX_BARS:
        raise ValueError(f"at most {MAX_BARS} bars; got {len(values)}")
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError("values must be finite numbers, zero or more")
    legend = ", ".join(f"{label}: {value:g}" for label, value in zip(labels, values, strict=True))
    return [f"{title}: {legend}", Image(data=draw_bars(list(values)), format="png")]


if __name__ == "__main__":
    server.run("stdio")
