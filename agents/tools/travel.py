"""The travel tools: knowledge search, an offline weather forecast and B&B availability.

Everything here is offline and deterministic. The forecast and the listings are derived
from a SHA-256 of their inputs (never Python's salted ``hash()``), so the same question
gets the same answer in every process; outputs say ``"source": "offline demo ..."`` so
nobody mistakes them for real data. ``docs/tools.md`` shows how to swap in a real API.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from importlib import resources
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from agents.tools.base import known_towns, make_tool
from agents.tools.knowledge import search_knowledge
from agents.tools.places import Place, find_place

FORECAST_SOURCE = "offline demo forecast"
LISTINGS_SOURCE = "offline demo data"
LISTINGS_FILE = "data/bnb_listings.json"
MAX_BOOKING_DAYS_AHEAD = 365

UNKNOWN_TOWN = "Unknown town {town!r}. Known towns: {known}."
CHECK_IN_IN_PAST = "check_in {check_in} is in the past; today in {town} is {today}."
CHECK_IN_TOO_FAR = "check_in {check_in} is more than {days} days ahead; bookings are not open yet."


def resolve_town(town: str) -> Place:
    """Return the gazetteer place ``town`` names, in English or Chinese.

    Raises ValueError, listing the known towns, when ``town`` names none of them.
    """
    place = find_place(town)
    if place is None:
        raise ValueError(UNKNOWN_TOWN.format(town=town, known=known_towns()))
    return place


def _today(place: Place) -> date:
    return datetime.now(ZoneInfo(place.timezone)).date()


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("|".join(str(part) for part in parts).encode()).digest()


# --- search_travel_info -------------------------------------------------------------


class SearchTravelInfoArgs(BaseModel):
    """Arguments of search_travel_info."""

    query: str = Field(
        min_length=1,
        max_length=500,
        description=(
            "What the traveller wants to know, in English or Chinese, in their own words, "
            "e.g. 'classical gardens', 'pandas and hotpot', '推荐一个适合看江南园林的城市'."
        ),
    )


def _search_travel_info(query: str) -> dict:
    """Search bundled travel guide notes on Chinese cities and return the best matches.

    Use it to recommend a destination or answer travel questions: which city to visit, sights
    and attractions, food and dishes, the best season and when to go, getting around. Pass
    the traveller's own words, in English or Chinese; naming a city ranks its notes first.
    Not for anything live (weather, rooms, the time): other tools cover that. Results come
    in the query's language (Chinese for a Chinese query) as {"query", "results": [{"city",
    "title", "snippet", "score", ...}]}, best first; an empty list means the notes have
    nothing on it.
    """
    return {"query": query, "results": search_knowledge(query)}


search_travel_info = make_tool(
    _search_travel_info,
    name="search_travel_info",
    args_schema=SearchTravelInfoArgs,
    notes=f"Cities covered: {known_towns()}.",
)


# --- weather_forecast ---------------------------------------------------------------


@dataclass(frozen=True)
class Climate:
    """A monthly baseline: mid-January and mid-July highs (°C), day-night range, rain %."""

    january_high: float
    july_high: float
    diurnal_range: float
    winter_rain: float
    summer_rain: float


# Rough climatology, enough to make the demo plausible; Lijiang's altitude makes it mild.
CLIMATES: dict[str, Climate] = {
    "Hangzhou": Climate(8, 33, 8, 35, 50),
    "Suzhou": Climate(8, 32, 7, 35, 50),
    "Xi'an": Climate(5, 32, 10, 15, 40),
    "Beijing": Climate(2, 31, 11, 5, 45),
    "Shanghai": Climate(8, 32, 6, 35, 50),
    "Chengdu": Climate(10, 30, 6, 30, 60),
    "Guilin": Climate(12, 33, 7, 35, 60),
    "Lijiang": Climate(15, 23, 13, 5, 70),
}


def climate_for(place: Place) -> Climate:
    """Return the climate baseline for ``place``, estimated from latitude if not listed."""
    if place.name in CLIMATES:
        return CLIMATES[place.name]
    return Climate(26 - 1.2 * (abs(place.latitude) - 20), 32, 8, 25, 50)


def _condition(chance: int, high: float, summer: bool, roll: int) -> tuple[str, str]:
    cold = high <= 2
    if chance < 20:
        return "sunny", "晴"
    if chance < 35:
        return "partly cloudy", "多云"
    if chance < 50:
        return "overcast", "阴"
    if chance < 65:
        return ("light snow", "小雪") if cold else ("light rain", "小雨")
    if summer and roll % 2:
        return "thunderstorms", "雷阵雨"
    if chance < 80:
        return ("moderate snow", "中雪") if cold else ("moderate rain", "中雨")
    return ("heavy snow", "大雪") if cold else ("heavy rain", "大雨")


def forecast_day(place: Place, day: date) -> dict:
    """Return the offline forecast of one day for ``place``.

    Shape: ``{"date", "weekday", "condition", "condition_zh", "high_c", "low_c",
    "precipitation_chance_pct"}``; temperatures in °C, the chance in whole percent. The
    same place and date always give the same answer.
    """
    climate = climate_for(place)
    # 0 in mid-January, 1 in mid-July.
    season = (1 - math.cos(2 * math.pi * (day.timetuple().tm_yday - 15) / 365)) / 2
    h = _digest(place.name, day.isoformat())
    chance_base = climate.winter_rain + (climate.summer_rain - climate.winter_rain) * season
    chance = min(95, max(0, round((chance_base + (h[1] / 255 - 0.5) * 70) / 5) * 5))
    high = climate.january_high + (climate.july_high - climate.january_high) * season
    high += (h[0] / 255 - 0.5) * 6 - chance / 30  # rainy days run cooler
    low = high - climate.diurnal_range * (1 - chance / 200) + (h[2] / 255 - 0.5) * 2
    condition, condition_zh = _condition(chance, high, season > 0.6, h[3])
    return {
        "date": day.isoformat(),
        "weekday": day.strftime("%A"),
        "condition": condition,
        "condition_zh": condition_zh,
        "high_c": round(high),
        "low_c": round(low),
        "precipitation_chance_pct": chance,
    }


def forecast(place: Place, days: int, start: date) -> dict:
    """Return ``days`` days of offline forecast for ``place`` from ``start``.

    Shape: ``{"town", "town_zh", "timezone", "days": [forecast_day...], "units",
    "source"}``, ``source`` always being ``FORECAST_SOURCE``.
    """
    return {
        "town": place.name,
        "town_zh": place.name_zh,
        "timezone": place.timezone,
        "days": [forecast_day(place, start + timedelta(days=i)) for i in range(days)],
        "units": {"temperature": "°C", "precipitation_chance": "%"},
        "source": FORECAST_SOURCE,
    }


class WeatherForecastArgs(BaseModel):
    """Arguments of weather_forecast."""

    town: str = Field(
        min_length=1,
        max_length=100,
        description="Town name in English or Chinese, e.g. 'Hangzhou' or '杭州'.",
    )
    days: int = Field(
        default=3,
        ge=1,
        le=7,
        description="How many days to forecast, starting today (local time), 1 to 7.",
    )


def _weather_forecast(town: str, days: int = 3) -> dict:
    """Give the weather forecast for a town in China for the next 1 to 7 days.

    Use it for the weather, temperature or chance of rain today, tomorrow or in the coming
    days, or whether to pack an umbrella. Only the next 7 days: not for long-term averages
    or the best season to visit. Each entry gives the day, a condition in English and
    Chinese (e.g. "light rain" / "小雨"), high and low in °C and the chance of
    precipitation in percent. An unknown town is an error that lists the known towns. This
    is an offline demo forecast, not real data: say so if it matters.
    """
    place = resolve_town(town)
    return forecast(place, days, _today(place))


weather_forecast = make_tool(
    _weather_forecast,
    name="weather_forecast",
    args_schema=WeatherForecastArgs,
    notes=f"Known towns: {known_towns()}.",
)


# --- check_bnb_availability -----------------------------------------------------------


@dataclass(frozen=True)
class Listing:
    """One demo B&B: names in both languages, nightly price per room (CNY), room count."""

    id: str
    town: str
    name: str
    name_zh: str
    neighbourhood: str
    neighbourhood_zh: str
    price_cny: int
    rooms: int
    max_guests_per_room: int


@functools.cache
def load_listings() -> tuple[Listing, ...]:
    """Return the demo listings, read once from ``data/bnb_listings.json``."""
    raw = json.loads(resources.files(__package__).joinpath(LISTINGS_FILE).read_text("utf-8"))
    return tuple(Listing(**item) for item in raw["listings"])


def rooms_free(listing: Listing, check_in: date, nights: int, rooms: int) -> int:
    """Return how many rooms of ``listing`` are free for the stay (0 when fully booked)."""
    h = _digest(listing.id, check_in.isoformat(), nights, rooms)
    if h[0] < 64:  # about one stay in four finds the place full
        return 0
    return 1 + h[1] % listing.rooms


def availability(place: Place, rooms: int, check_in: date, nights: int, guests: int | None) -> dict:
    """Return the offline availability of ``place``'s listings for one stay.

    Shape: ``{"town", "town_zh", "check_in", "check_out", "nights", "rooms", "guests",
    "available": [listing...], "unavailable_count", "currency", "source"}``; a listing is
    available when enough rooms are free and they sleep ``guests``. Prices are CNY.
    """
    available = []
    town_listings = [listing for listing in load_listings() if listing.town == place.name]
    for listing in town_listings:
        free = rooms_free(listing, check_in, nights, rooms)
        fits = guests is None or guests <= rooms * listing.max_guests_per_room
        if free >= rooms and fits:
            available.append(
                {
                    "id": listing.id,
                    "name": listing.name,
                    "name_zh": listing.name_zh,
                    "neighbourhood": listing.neighbourhood,
                    "neighbourhood_zh": listing.neighbourhood_zh,
                    "price_per_night_cny": listing.price_cny,
                    "total_cny": listing.price_cny * rooms * nights,
                    "rooms_free": free,
                    "max_guests_per_room": listing.max_guests_per_room,
                }
            )
    return {
        "town": place.name,
        "town_zh": place.name_zh,
        "check_in": check_in.isoformat(),
        "check_out": (check_in + timedelta(days=nights)).isoformat(),
        "nights": nights,
        "rooms": rooms,
        "guests": guests,
        "available": available,
        "unavailable_count": len(town_listings) - len(available),
        "currency": "CNY",
        "source": LISTINGS_SOURCE,
    }


class CheckBnbAvailabilityArgs(BaseModel):
    """Arguments of check_bnb_availability."""

    town: str = Field(
        min_length=1,
        max_length=100,
        description="Town name in English or Chinese, e.g. 'Suzhou' or '苏州'.",
    )
    rooms: int = Field(default=1, ge=1, le=10, description="Rooms needed, 1 to 10.")
    check_in: date | None = Field(
        default=None,
        description="Arrival date as YYYY-MM-DD; leave out for tomorrow (local time).",
    )
    nights: int = Field(default=1, ge=1, le=30, description="Nights to stay, 1 to 30.")
    guests: int | None = Field(
        default=None,
        ge=1,
        le=40,
        description="Total number of guests, if known; listings too small are left out.",
    )


def _check_bnb_availability(
    town: str,
    rooms: int = 1,
    check_in: date | None = None,
    nights: int = 1,
    guests: int | None = None,
) -> dict:
    """Check which B&Bs in a town in China have free rooms for a stay, with prices.

    Use it when the user wants somewhere to stay (a B&B, guesthouse or hotel room) or asks
    about vacancies or the price per night. It cannot book, only report availability.
    Arguments: the town, rooms needed, check_in day (default tomorrow), nights and
    optionally guests.
    Returns the available listings (English and Chinese names, neighbourhood, price per night
    and total in CNY, rooms free) and how many are unavailable. Offline demo data, not real
    bookings.
    """
    place = resolve_town(town)
    today = _today(place)
    if check_in is None:
        check_in = today + timedelta(days=1)
    if check_in < today:
        raise ValueError(CHECK_IN_IN_PAST.format(check_in=check_in, town=place.name, today=today))
    if check_in > today + timedelta(days=MAX_BOOKING_DAYS_AHEAD):
        raise ValueError(CHECK_IN_TOO_FAR.format(check_in=check_in, days=MAX_BOOKING_DAYS_AHEAD))
    return availability(place, rooms, check_in, nights, guests)


check_bnb_availability = make_tool(
    _check_bnb_availability,
    name="check_bnb_availability",
    args_schema=CheckBnbAvailabilityArgs,
    notes=f"Known towns: {known_towns()}.",
)
