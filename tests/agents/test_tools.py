"""The bundled tools: knowledge search, offline weather and B&B data, calculator, clock."""

import json
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from langchain_core.messages import ToolMessage
from pydantic import ValidationError

from agents.tools import (
    calculator,
    check_bnb_availability,
    current_time,
    default_tools,
    search_travel_info,
    weather_forecast,
)
from agents.tools.clock import time_in
from agents.tools.knowledge import load_documents, search_knowledge, tokenize
from agents.tools.places import PLACES, find_place
from agents.tools.travel import LISTINGS_SOURCE, availability, forecast

# --- default_tools ----------------------------------------------------------------


def test_it_returns_the_five_tools_in_order():
    names = [tool.name for tool in default_tools()]

    assert names == [
        "search_travel_info",
        "weather_forecast",
        "check_bnb_availability",
        "calculator",
        "current_time",
    ]


def test_it_returns_a_new_list_each_call():
    first = default_tools()
    first.clear()

    assert len(default_tools()) == 5


def test_it_imports_without_django():
    code = "import sys, agents.tools; assert 'django' not in sys.modules"

    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_argument_has_a_description():
    for tool in default_tools():
        for name, field in tool.args_schema.model_fields.items():
            assert field.description, f"{tool.name}.{name}"


def test_descriptions_are_dedented():
    for tool in default_tools():
        assert "\n    " not in tool.description


def test_a_tool_call_becomes_a_tool_message_with_json_content():
    call = {"name": "calculator", "args": {"expression": "6*7"}, "id": "call-1"}
    call["type"] = "tool_call"

    message = calculator.invoke(call)

    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call-1"
    assert json.loads(message.content) == {"expression": "6*7", "result": 42}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (search_travel_info, {"query": "西湖"}),
        (weather_forecast, {"town": "Hangzhou", "days": 7}),
        (check_bnb_availability, {"town": "Suzhou", "rooms": 2, "nights": 3, "guests": 3}),
        (calculator, {"expression": "sqrt(2)"}),
        (current_time, {"timezone": "Beijing"}),
    ],
)
def test_outputs_are_json_serialisable(tool, args):
    result = tool.invoke(args)

    assert json.loads(json.dumps(result, ensure_ascii=False)) == result


# --- knowledge base ----------------------------------------------------------------


def test_it_ranks_suzhou_first_for_gardens():
    hits = search_knowledge("推荐一个适合看江南园林的城市")

    assert hits[0]["city"] == "Suzhou"


def test_it_ranks_chengdu_first_for_pandas_and_hotpot():
    hits = search_knowledge("pandas and hotpot")

    assert hits[0]["city"] == "Chengdu"
    assert {hit["city"] for hit in hits[:2]} == {"Chengdu"}


def test_it_ranks_xian_first_for_terracotta_warriors():
    assert search_knowledge("terracotta warriors")[0]["city"] == "Xi'an"
    assert search_knowledge("兵马俑")[0]["city"] == "Xi'an"


@pytest.mark.parametrize(
    ("query", "city"),
    [
        ("West Lake and Longjing tea", "Hangzhou"),
        ("龙井茶", "Hangzhou"),
        ("Great Wall", "Beijing"),
        ("故宫", "Beijing"),
        ("the Bund at night", "Shanghai"),
        ("外滩夜景", "Shanghai"),
        ("熊猫和火锅", "Chengdu"),
        ("water towns and canals", "Suzhou"),
        ("Li River cruise", "Guilin"),
        ("玉龙雪山", "Lijiang"),
    ],
)
def test_it_finds_each_city_by_its_landmarks(query, city):
    assert search_knowledge(query)[0]["city"] == city


def test_it_prefers_the_city_the_query_names():
    hits = search_knowledge("best time to visit Beijing")

    assert hits[0]["city"] == "Beijing"
    assert hits[0]["topic"] == "season"


@pytest.mark.parametrize(
    ("query", "city"),
    [
        ("Plan 2 days in Suzhou", "Suzhou"),
        ("Plan 2 days in Suzhou: sights, food and a day trip", "Suzhou"),
        ("Plan a day in Chengdu", "Chengdu"),
        ("计划在苏州玩两天", "Suzhou"),
    ],
)  # fmt: skip
def test_a_named_citys_notes_come_before_other_cities_that_share_more_words(query, city):
    """West Lake's note (a "day trip", "plan") outscored Suzhou's for "Plan 2 days in
    Suzhou", and the demo answered with Hangzhou's notes."""
    hits = search_knowledge(query)

    assert {hit["city"] for hit in hits} == {city}


def test_it_answers_a_chinese_query_in_chinese():
    hit = search_knowledge("成都有什么好吃的")[0]

    assert hit["city"] == "Chengdu"
    assert hit["title"] == "火锅与川菜"
    assert "火锅" in hit["snippet"]


def test_it_answers_an_english_query_in_english():
    hit = search_knowledge("pandas")[0]

    assert hit["title"] == "Giant pandas in Chengdu"
    assert hit["snippet"].startswith("The Chengdu Research Base")
    assert hit["city_zh"] == "成都"


def test_it_returns_nothing_for_words_it_does_not_know():
    assert search_knowledge("quantum chromodynamics") == []
    assert search_knowledge("the and of") == []


def test_it_honours_the_limit_and_rounds_scores():
    hits = search_knowledge("food 美食", limit=5)

    assert len(hits) == 5
    assert all(hit["score"] == round(hit["score"], 2) for hit in hits)
    assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)


def test_it_rejects_a_limit_out_of_range():
    with pytest.raises(ValueError, match="limit"):
        search_knowledge("pandas", limit=0)


def test_it_tokenizes_chinese_into_bigrams_and_english_into_stems():
    assert {"江南", "南园", "园林"} <= tokenize("江南园林")
    assert tokenize("Gardens, WARRIORS and noodles") == {"garden", "warrior", "noodle"}
    assert "什么" not in tokenize("有什么好吃的")
    assert "好吃" in tokenize("有什么好吃的")


def test_every_city_has_several_bilingual_documents():
    documents = load_documents()

    for place in PLACES:
        own = [doc for doc in documents if doc.city == place.name]
        assert len(own) >= 3, place.name
        for doc in own:
            for field in (doc.title, doc.text):
                assert field["en"] and field["zh"], doc.id
            assert doc.tags["en"] and doc.tags["zh"], doc.id


def test_search_travel_info_wraps_the_hits_with_the_query():
    result = search_travel_info.invoke({"query": "pandas and hotpot"})

    assert result["query"] == "pandas and hotpot"
    assert result["results"][0]["city"] == "Chengdu"


def test_search_travel_info_rejects_an_empty_query():
    with pytest.raises(ValidationError):
        search_travel_info.invoke({"query": ""})


# --- weather_forecast --------------------------------------------------------------


def test_weather_is_deterministic():
    first = weather_forecast.invoke({"town": "Hangzhou", "days": 5})
    second = weather_forecast.invoke({"town": "Hangzhou", "days": 5})

    assert first == second
    assert len(first["days"]) == 5


def test_weather_for_a_fixed_date_never_changes():
    place = find_place("Beijing")
    start = date(2025, 7, 1)

    assert forecast(place, 3, start) == forecast(place, 3, start)
    assert [day["date"] for day in forecast(place, 3, start)["days"]] == [
        "2025-07-01",
        "2025-07-02",
        "2025-07-03",
    ]


def test_weather_accepts_chinese_town_names():
    assert weather_forecast.invoke({"town": "杭州"}) == weather_forecast.invoke(
        {"town": "Hangzhou"}
    )
    assert weather_forecast.invoke({"town": "西安"})["town"] == "Xi'an"


def test_weather_rejects_an_unknown_town_listing_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown town 'Atlantis'.*Hangzhou 杭州.*Lijiang"):
        weather_forecast.invoke({"town": "Atlantis"})


@pytest.mark.parametrize("days", [0, 8])
def test_weather_rejects_days_out_of_range(days):
    with pytest.raises(ValidationError):
        weather_forecast.invoke({"town": "Hangzhou", "days": days})


def test_weather_starts_today_in_the_city_time_zone_and_says_it_is_offline():
    result = weather_forecast.invoke({"town": "Chengdu", "days": 1})

    today = datetime.now(ZoneInfo("Asia/Shanghai")).date()
    assert result["days"][0]["date"] in {today.isoformat(), (today + timedelta(1)).isoformat()}
    assert result["source"] == "offline demo forecast"


def test_weather_values_are_plausible_all_year():
    for place in PLACES:
        days = forecast(place, 7, date(2025, 1, 1))["days"]
        days += forecast(place, 7, date(2025, 7, 15))["days"]
        for day in days:
            assert -25 <= day["low_c"] <= day["high_c"] <= 42
            assert 0 <= day["precipitation_chance_pct"] <= 100
            assert day["condition"] and day["condition_zh"]


def test_weather_is_warmer_in_summer_than_in_winter():
    place = find_place("Beijing")

    def mean_high(start):
        days = forecast(place, 7, start)["days"]
        return sum(day["high_c"] for day in days) / len(days)

    assert mean_high(date(2025, 7, 10)) > mean_high(date(2025, 1, 10)) + 15


# --- check_bnb_availability --------------------------------------------------------


def _future(days: int = 30) -> str:
    return (datetime.now(ZoneInfo("Asia/Shanghai")).date() + timedelta(days)).isoformat()


def test_bnb_rejects_zero_rooms():
    with pytest.raises(ValidationError):
        check_bnb_availability.invoke({"town": "Suzhou", "rooms": 0})


def test_bnb_rejects_too_many_nights():
    with pytest.raises(ValidationError):
        check_bnb_availability.invoke({"town": "Suzhou", "nights": 31})


def test_bnb_is_deterministic_and_accepts_chinese_names():
    args = {"rooms": 2, "check_in": _future(), "nights": 3}

    english = check_bnb_availability.invoke({"town": "Suzhou", **args})
    chinese = check_bnb_availability.invoke({"town": "苏州", **args})

    assert english == chinese
    assert english["source"] == "offline demo data"
    assert len(english["available"]) + english["unavailable_count"] >= 3


def test_bnb_defaults_to_one_room_one_night_from_tomorrow():
    result = check_bnb_availability.invoke({"town": "Chengdu"})

    tomorrow = datetime.now(ZoneInfo("Asia/Shanghai")).date() + timedelta(1)
    assert result["check_in"] in {tomorrow.isoformat(), (tomorrow + timedelta(1)).isoformat()}
    assert (result["rooms"], result["nights"], result["guests"]) == (1, 1, None)


def test_bnb_totals_price_by_rooms_and_nights():
    place = find_place("Shanghai")

    for check_in in (date(2030, 1, 1) + timedelta(days) for days in range(10)):
        result = availability(place, 2, check_in, 3, None)
        for listing in result["available"]:
            assert listing["total_cny"] == listing["price_per_night_cny"] * 2 * 3
            assert listing["rooms_free"] >= 2
            assert listing["name"] and listing["name_zh"]


def test_bnb_leaves_out_listings_too_small_for_the_guests():
    place = find_place("Beijing")

    result = availability(place, 1, date(2030, 5, 1), 1, guests=40)

    assert result["available"] == []
    assert result["unavailable_count"] == 4
    assert result["source"] == LISTINGS_SOURCE


def test_bnb_rejects_a_check_in_in_the_past():
    with pytest.raises(ValueError, match="in the past"):
        check_bnb_availability.invoke({"town": "Guilin", "check_in": "2020-01-01"})


def test_bnb_rejects_an_unknown_town():
    with pytest.raises(ValueError, match="Unknown town"):
        check_bnb_availability.invoke({"town": "Gotham"})


# --- calculator --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("-(2 + 3)", -5),
        ("+4", 4),
        ("2 ** 10", 1024),
        ("2^10", 1024),
        ("880 × 3 ÷ 4", 660.0),
        ("0.1 + 0.2", 0.3),
        ("sqrt(16)", 4.0),
        ("abs(-3)", 3),
        ("round(pi, 2)", 3.14),
        ("log(8, 2)", 3.0),
        ("exp(0) + cos(0)", 2.0),
        ("3 + 4 =", 7),
    ],
)
def test_calculator_computes(expression, result):
    assert calculator.invoke({"expression": expression}) == {
        "expression": expression,
        "result": result,
    }


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "Unknown function '__import__'"),
        ("2**10**10", "Exponent .* too large"),
        ("9**999", "too large"),
        ("x + 1", "Unknown name 'x'"),
        ("(1).real", "Attribute is not allowed"),
        ("().__class__", "Attribute is not allowed"),
        ("'a' * 3", "not allowed"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("1 / 0", "Division by zero"),
        ("5 % 0", "Division by zero"),
        ("sqrt(-1)", "undefined"),
        ("1 +", "Cannot parse"),
    ],
)
def test_calculator_rejects(expression, message):
    with pytest.raises(ValueError, match=message):
        calculator.invoke({"expression": expression})


def test_calculator_rejects_overlong_expressions():
    with pytest.raises(ValidationError):
        calculator.invoke({"expression": "1+" * 150 + "1"})


# --- current_time ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Beijing", "北京", "shanghai", "Asia/Shanghai"])
def test_current_time_accepts_city_names_and_iana_zones(name):
    result = current_time.invoke({"timezone": name})

    assert result["timezone"] == "Asia/Shanghai"
    assert result["iso"].endswith("+08:00")


def test_current_time_defaults_to_utc():
    result = current_time.invoke({})

    assert result["timezone"] == "UTC"
    assert result["utc_offset"] == "+00:00"


def test_current_time_rejects_an_unknown_zone_with_examples():
    with pytest.raises(ValueError, match=r"Unknown time zone .*Asia/Shanghai"):
        current_time.invoke({"timezone": "Mars/Olympus_Mons"})


def test_time_in_formats_a_fixed_instant():
    instant = datetime(2025, 1, 31, 20, 30, 15, 999, tzinfo=UTC)

    assert time_in(ZoneInfo("Asia/Shanghai"), instant) == {
        "timezone": "Asia/Shanghai",
        "iso": "2025-02-01T04:30:15+08:00",
        "date": "2025-02-01",
        "time": "04:30:15",
        "weekday": "Saturday",
        "weekday_zh": "星期六",
        "utc_offset": "+08:00",
    }


async def test_simulated_latency_keeps_the_tool_and_its_result():
    from agents.tools import default_tools
    from agents.tools.base import with_latency

    plain = {tool.name: tool for tool in default_tools()}
    slow = {tool.name: tool for tool in default_tools(latency_s=0.01)}
    assert slow.keys() == plain.keys()
    assert slow["calculator"] is not plain["calculator"]
    assert slow["calculator"].args_schema is plain["calculator"].args_schema
    assert slow["calculator"].description == plain["calculator"].description
    assert await slow["calculator"].ainvoke({"expression": "17*23"}) == {
        "expression": "17*23",
        "result": 391,
    }
    assert with_latency(plain["calculator"], 0) is plain["calculator"]
    # Made once per process: a run's requests and counts reuse the schema built for it.
    again = {tool.name: tool for tool in default_tools(latency_s=0.01)}
    assert all(again[name] is slow[name] for name in slow)
    assert default_tools(latency_s=0.02)[0] is not slow[default_tools()[0].name]


async def test_the_booking_search_is_the_slow_tool_of_the_demo(monkeypatch):
    import agents.tools.base as base
    from agents.tools import LATENCY_FACTORS, default_tools

    waited: list[float] = []

    async def record(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(base.asyncio, "sleep", record)
    tools = {tool.name: tool for tool in default_tools(latency_s=0.4)}
    assert LATENCY_FACTORS.keys() == tools.keys()
    await tools["weather_forecast"].ainvoke({"town": "Hangzhou"})
    await tools["check_bnb_availability"].ainvoke({"town": "Hangzhou"})
    assert waited == [pytest.approx(0.4), pytest.approx(1.2)]
