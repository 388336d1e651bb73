"""Tests for how the offline demo model fills tool arguments, including in follow-ups."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from agents.models.demo import DemoChatModel
from agents.models.demo_args import find_count, find_expression
from agents.models.demo_places import find_place_refs
from agents.tools import default_tools
from tests.agents.demo_support import GARDENS_QUESTION, MIXED_QUESTION, calls_of, results_turn

# --- Places: named, unknown, or carried over from earlier user messages -----------------


@pytest.mark.parametrize("follow_up", ["And in Chengdu?", "那成都呢？"])
def test_a_follow_up_naming_a_city_repeats_the_place_bound_calls(model, follow_up):
    history = [*results_turn(MIXED_QUESTION), AIMessage("It is rainy; 17*23 = 391.")]

    message = model.invoke([*history, HumanMessage(follow_up)])

    assert calls_of(message) == [("weather_forecast", {"town": "Chengdu", "days": 3})]


def test_a_follow_up_repeats_several_place_bound_calls(model):
    history = [*results_turn(GARDENS_QUESTION), AIMessage("苏州很适合。")]

    message = model.invoke([*history, HumanMessage("那成都呢？")])

    assert [(n, a["town"]) for n, a in calls_of(message)] == [
        ("weather_forecast", "Chengdu"),
        ("check_bnb_availability", "Chengdu"),
    ]


def test_a_follow_up_works_when_history_keeps_only_texts(model):
    history = [HumanMessage(MIXED_QUESTION), AIMessage("Rainy in Hangzhou; 17*23 = 391.")]

    message = model.invoke([*history, HumanMessage("那成都呢？")])

    assert calls_of(message) == [("weather_forecast", {"town": "Chengdu", "days": 3})]


def test_a_tool_question_without_a_city_uses_the_city_from_earlier_messages(model):
    history = [*results_turn(GARDENS_QUESTION), AIMessage("苏州很适合。")]

    message = model.invoke([*history, HumanMessage("What time is it there?")])

    assert calls_of(message) == [("current_time", {"timezone": "Asia/Shanghai"})]


TIME_TURN = [
    HumanMessage("What time is it?"),
    AIMessage(
        "",
        tool_calls=[{"name": "current_time", "args": {"timezone": "UTC"}, "id": "call_t"}],
    ),
    ToolMessage(
        '{"timezone": "Asia/Shanghai", "time": "10:00:00"}',
        tool_call_id="call_t",
        name="current_time",
    ),
    AIMessage("It is 10:00 in Asia/Shanghai."),
]


def test_places_in_assistant_or_tool_text_are_not_taken_as_the_users_place(model):
    message = model.invoke([*TIME_TURN, HumanMessage("What's the weather like?")])

    assert message.tool_calls == []
    assert message.content.startswith("Which town?")


def test_an_unknown_town_after_a_time_turn_is_passed_on_not_replaced_by_shanghai(model):
    message = model.invoke([*TIME_TURN, HumanMessage("What's the weather in Atlantis?")])

    assert calls_of(message) == [("weather_forecast", {"town": "Atlantis", "days": 3})]


@pytest.mark.parametrize(
    ("question", "town"),
    [
        ("What's the weather in Atlantis?", "Atlantis"),
        ("Weather for New York please", "New York"),
        ("天气 in 巴黎", "巴黎"),
        ("巴黎的天气怎么样？", "巴黎"),
        ("查一下明天东京天气", "东京"),
    ],
)
def test_a_town_the_gazetteer_does_not_know_is_passed_to_the_tool_as_written(model, question, town):
    message = model.invoke([HumanMessage(question)])

    assert calls_of(message) == [("weather_forecast", {"town": town, "days": 3})]


@pytest.mark.parametrize(
    "text",
    [
        "What time is it in Europe/London?",
        "weather for Monday",
        "未来三天的天气",
        "现在几点",
        "找一个民宿房间",
        GARDENS_QUESTION,
    ],
)
def test_words_that_are_not_places_are_not_taken_for_unknown_towns(text):
    assert all(not isinstance(ref, str) for ref in find_place_refs(text))


def test_a_user_named_unknown_town_is_the_fallback_for_a_later_question(model):
    history = [
        HumanMessage("Weather in Suzhou?"),
        AIMessage("Rainy."),
        HumanMessage("What's the weather in Atlantis?"),
        AIMessage("The tool failed."),
    ]

    message = model.invoke([*history, HumanMessage("Any B&B rooms there?")])

    assert calls_of(message) == [
        ("check_bnb_availability", {"town": "Atlantis", "rooms": 1, "nights": 1})
    ]


# --- Missing arguments are asked for ----------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What's the weather like?", "Which town? I know: Hangzhou, Suzhou, Xi'an, Beijing,"),
        ("天气怎么样？", "哪个城市？我知道这些：杭州、苏州、西安、北京"),
    ],
)
def test_a_missing_town_is_asked_for_by_listing_the_known_towns(model, question, expected):
    message = model.invoke([HumanMessage(question)])

    assert message.tool_calls == []
    assert message.content.startswith(expected)
    assert "bracket" not in message.content and "括号" not in message.content


def test_a_missing_argument_other_than_a_place_is_asked_for_by_its_description():
    class ConvertArgs(BaseModel):
        amount: int = Field(description="How much money. Whole units only.")
        currency: str = Field(description="Target currency as an ISO code, e.g. EUR. Not a name.")

    def convert_currency(amount: int, currency: str) -> dict:
        """Convert money 换算 between currencies."""
        return {}

    tool = StructuredTool.from_function(convert_currency, args_schema=ConvertArgs)
    model = DemoChatModel().bind_tools([tool])

    message = model.invoke([HumanMessage("Convert some money please")])

    assert message.tool_calls == []
    assert message.content == (
        "What amount (How much money) should I use for convert_currency? "
        "What currency (Target currency as an ISO code, e.g. EUR) should I use for "
        "convert_currency?"
    )


# --- Numbers, expressions and zones: passed as the user gave them -----------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("17 × 23", "17*23"), ("计算 17乘以23", "17*23"), ("sqrt(16) + 2^3?", "sqrt(16)+2**3")],
)
def test_it_extracts_arithmetic_expressions(text, expected):
    assert find_expression(text) == expected


def test_it_ignores_dates_when_looking_for_arithmetic():
    assert find_expression("check in on 2025-05-01 for a 3-day trip") is None


@pytest.mark.parametrize(
    ("text", "param", "expected"),
    [("2 rooms", "rooms", 2), ("两个房间", "rooms", 2), ("一个民宿房间", "rooms", 1),
     ("住三晚", "nights", 3), ("for five days", "days", 5), ("查一下苏州天气", "days", None)],
)  # fmt: skip
def test_it_reads_counts_next_to_the_parameter_word(text, param, expected):
    assert find_count(text, param) == expected


def test_a_number_the_user_did_not_give_keeps_the_schema_default():
    model = DemoChatModel().bind_tools(default_tools())

    message = model.invoke([HumanMessage("B&B in Suzhou please")])

    assert message.tool_calls[0]["args"]["rooms"] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is sqrt(-1)", "sqrt(-1)"),
        ("log(-2) please", "log(-2)"),
        ("sin(-pi/2)", "sin(-pi/2)"),
        ("log10(1000)", "log10(1000)"),
        ("2 * -3", "2*-3"),
        ("what is -5", None),
        ("sqrt(x)", None),
    ],
)
def test_function_calls_and_unary_minus_count_as_arithmetic(text, expected):
    assert find_expression(text) == expected


SUZHOU_TURN = [HumanMessage("Weather in Suzhou?"), AIMessage("Rainy in Suzhou.")]


@pytest.mark.parametrize("history", [[], SUZHOU_TURN], ids=["fresh", "after-suzhou"])
@pytest.mark.parametrize(
    ("question", "zone"),
    [
        ("What time is it in Mars/Olympus?", "Mars/Olympus"),
        ("What time is it in Europe/Londn?", "Europe/Londn"),
        ("What time is it in UTC+8?", "UTC+8"),
        ("What time is it in Narnia?", "Narnia"),
        ("What time is it in europe/london?", "Europe/London"),
    ],
)
def test_a_zone_the_user_wrote_is_passed_as_written_not_replaced(model, history, question, zone):
    message = model.invoke([*history, HumanMessage(question)])

    assert calls_of(message) == [("current_time", {"timezone": zone})]
