"""Tests for the offline scripted demo chat model (no network, no Django)."""

from __future__ import annotations

import json
import operator
import subprocess
import sys
from datetime import date
from functools import reduce
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import StructuredTool

from agents.models.demo import DemoChatModel, make_plan
from agents.models.demo_args import find_count, find_expression

GARDENS_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
MIXED_QUESTION = "What's the weather in Hangzhou, and what is 17*23?"


# Stand-ins for the app's tools: same names, argument names and description keywords.
def search_travel_info(query: str) -> dict:
    """Search the bundled travel knowledge base about Chinese cities: sights, food, culture,
    best season; use to recommend a city or look up facts. Keywords: travel 旅游 recommend 推荐
    city 城市 sights 景点 gardens 园林 food 美食 culture"""
    return {}


def weather_forecast(town: str, days: int = 3) -> dict:
    """Return the weather forecast 天气 预报 temperature 气温 rain 下雨 for a town."""
    return {}


def check_bnb_availability(
    town: str,
    rooms: int = 1,
    check_in: date | None = None,
    nights: int = 1,
    guests: int | None = None,
) -> dict:
    """Check B&B 民宿 room 房间 hotel 住宿 availability in a town."""
    return {}


def calculator(expression: str) -> dict:
    """Evaluate an arithmetic math 计算 expression."""
    return {}


def current_time(timezone: str = "UTC") -> dict:
    """Return the current time 时间 now in a timezone or city."""
    return {}


TOOLS = [
    StructuredTool.from_function(f)
    for f in (
        search_travel_info,
        weather_forecast,
        check_bnb_availability,
        calculator,
        current_time,
    )
]

SEARCH_RESULT = {
    "query": "江南园林",
    "results": [
        {
            "city": "Suzhou",
            "title": "Classical Gardens",
            "snippet": "Suzhou's classical gardens, such as the Humble Administrator's Garden, "
            "are UNESCO World Heritage sites.",
            "score": 3.5,
        },
        {
            "city": "Hangzhou",
            "title": "West Lake",
            "snippet": "A lake ringed by hills.",
            "score": 1,
        },
    ],
}
WEATHER_RESULT = {
    "town": "Suzhou",
    "forecast": [
        {"date": "2025-05-01", "condition": "light rain", "temp_min_c": 17, "temp_max_c": 24},
        {"date": "2025-05-02", "condition": "cloudy", "temp_min_c": 18, "temp_max_c": 26},
    ],
}
BNB_RESULT = {
    "town": "Suzhou",
    "listings": [
        {"name": "Lotus Courtyard", "available": False, "price_per_night_cny": 520},
        {"name": "Pingjiang Lane Inn", "available": True, "price_per_night_cny": 480},
    ],
}


@pytest.fixture
def model():
    return DemoChatModel().bind_tools(TOOLS)


def calls_of(message: AIMessage) -> list[tuple[str, dict]]:
    return [(call["name"], call["args"]) for call in message.tool_calls]


def without_ids(calls: list[dict]) -> list[dict]:
    """Return tool calls without their ids (random, as a provider's are)."""
    return [{k: v for k, v in call.items() if k != "id"} for call in calls]


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return reduce(operator.add, chunks)


def results_turn(question: str) -> list:
    """Return a conversation that ends with the results of the gardens question's calls."""
    request = DemoChatModel().bind_tools(TOOLS).invoke([HumanMessage(question)])
    contents = {
        "search_travel_info": json.dumps(SEARCH_RESULT, ensure_ascii=False),
        "weather_forecast": json.dumps(WEATHER_RESULT),
        "check_bnb_availability": json.dumps(BNB_RESULT),
        "calculator": json.dumps({"expression": "17*23", "result": 391}),
    }
    results = [
        ToolMessage(contents[c["name"]], tool_call_id=c["id"], name=c["name"])
        for c in request.tool_calls
    ]
    return [HumanMessage(question), request, *results]


def test_it_routes_the_gardens_question_to_three_parallel_calls(model):
    message = model.invoke([HumanMessage(GARDENS_QUESTION)])

    calls = calls_of(message)
    assert [name for name, _ in calls] == [
        "search_travel_info",
        "weather_forecast",
        "check_bnb_availability",
    ]
    assert "园林" in calls[0][1]["query"]
    assert calls[1][1]["town"] == "Suzhou"
    assert calls[2][1]["town"] == "Suzhou"
    assert calls[2][1]["rooms"] == 1


def test_it_routes_weather_and_arithmetic_in_one_english_question(model):
    message = model.invoke([HumanMessage(MIXED_QUESTION)])

    calls = calls_of(message)
    assert [name for name, _ in calls] == ["weather_forecast", "calculator"]
    assert calls[0][1]["town"] == "Hangzhou"
    assert calls[1][1] == {"expression": "17*23"}


def test_parallel_tool_call_ids_are_unique_and_openai_style(model):
    message = model.invoke([HumanMessage(GARDENS_QUESTION)])

    ids = [call["id"] for call in message.tool_calls]
    assert len(set(ids)) == len(ids) == 3
    assert all(i.startswith("call_") and len(i) > len("call_") for i in ids)


@pytest.mark.parametrize("question", [GARDENS_QUESTION, MIXED_QUESTION, "hello"])
def test_merged_stream_equals_generate(model, question):
    messages = [HumanMessage(question)]
    generated = model.invoke(messages)

    streamed = merged(list(model.stream(messages)))

    assert streamed.content == generated.content
    assert without_ids(streamed.tool_calls) == without_ids(generated.tool_calls)
    assert streamed.usage_metadata == generated.usage_metadata
    assert streamed.invalid_tool_calls == []


async def test_async_stream_matches_generate_and_splits_tool_call_args(model):
    messages = [HumanMessage(GARDENS_QUESTION)]
    generated = await model.ainvoke(messages)

    chunks = [chunk async for chunk in model.astream(messages)]

    assert without_ids(merged(chunks).tool_calls) == without_ids(generated.tool_calls)
    arg_pieces = [tc for chunk in chunks for tc in chunk.tool_call_chunks]
    assert len(arg_pieces) > len(generated.tool_calls)  # args arrive split across chunks
    assert {tc["index"] for tc in arg_pieces} == {0, 1, 2}


async def test_text_streams_in_small_pieces_with_a_delay():
    model = DemoChatModel(token_delay_s=0.001)

    chunks = [chunk async for chunk in model.astream([HumanMessage("hello there")])]

    texts = [c.content for c in chunks if c.content]
    assert len(texts) > 5
    assert max(len(t) for t in texts) < 30


def test_last_chunk_carries_usage_metadata(model):
    chunks = list(model.stream([HumanMessage(MIXED_QUESTION)]))

    usage = next(c.usage_metadata for c in reversed(chunks) if c.usage_metadata)
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert sum(1 for c in chunks if c.usage_metadata) == 1


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


def test_the_answer_uses_the_tool_results(model):
    messages = results_turn("Weather in Suzhou and a B&B room there, and what is 17*23?")

    answer = model.invoke(messages)

    assert answer.tool_calls == []
    assert "light rain" in answer.content
    assert "17–24°C" in answer.content
    assert "Pingjiang Lane Inn" in answer.content
    assert "¥480" in answer.content
    assert "391" in answer.content
    assert "Here is what the tools returned" in answer.content


def test_the_answer_is_chinese_for_a_chinese_question(model):
    answer = model.invoke(results_turn(GARDENS_QUESTION))

    assert "以下是工具返回的结果" in answer.content
    assert "Suzhou" in answer.content and "Classical Gardens" in answer.content
    assert "气温 17–24°C" in answer.content
    assert answer.tool_calls == []


def test_a_failed_tool_is_reported_plainly(model):
    request = model.invoke([HumanMessage(MIXED_QUESTION)])
    weather, calc = request.tool_calls
    messages = [
        HumanMessage(MIXED_QUESTION),
        request,
        ToolMessage("Error: weather service timed out", tool_call_id=weather["id"], status="error"),
        ToolMessage('{"expression": "17*23", "result": 391}', tool_call_id=calc["id"]),
    ]

    answer = model.invoke(messages)

    assert (
        "**weather_forecast** (town=Hangzhou, days=3) failed: Error: weather service timed out"
        in (answer.content)
    )
    assert "391" in answer.content
    assert answer.tool_calls == []


def test_an_unmatched_message_lists_the_bound_tools_without_calling_any(model):
    message = model.invoke([HumanMessage("hello")])

    assert message.tool_calls == []
    for tool in TOOLS:
        assert tool.name in message.content


def test_a_matched_tool_missing_a_required_argument_is_not_called(model):
    message = model.invoke([HumanMessage("What's the weather like?")])

    assert message.tool_calls == []
    assert "`weather_forecast` (town)" in message.content


def test_without_tools_it_replies_in_text():
    message = DemoChatModel().invoke([HumanMessage(MIXED_QUESTION)])

    assert message.tool_calls == []
    assert "No tools are available" in message.content


def test_it_routes_using_only_the_bound_tools_descriptions():
    def museum_hours(city: str) -> dict:
        """Opening hours of museums 博物馆 in a city."""
        return {}

    model = DemoChatModel().bind_tools([StructuredTool.from_function(museum_hours)])

    message = model.invoke([HumanMessage("西安的博物馆几点开门？")])

    assert calls_of(message) == [("museum_hours", {"city": "Xi'an"})]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (GARDENS_QUESTION, ["search_travel_info", "weather_forecast", "check_bnb_availability"]),
        (MIXED_QUESTION, ["weather_forecast", "calculator"]),
    ],
)
def test_it_routes_the_bundled_tools_when_they_are_available(question, expected):
    default_tools = getattr(pytest.importorskip("agents.tools"), "default_tools", None)
    if default_tools is None:
        pytest.skip("the bundled tools are not built yet")
    model = DemoChatModel().bind_tools(default_tools())

    message = model.invoke([HumanMessage(question)])

    assert [name for name, _ in calls_of(message)] == expected


def test_tool_choice_none_and_no_parallel_calls_are_honoured():
    base = DemoChatModel()

    assert base.bind_tools(TOOLS, tool_choice="none").invoke(GARDENS_QUESTION).tool_calls == []
    single = base.bind_tools(TOOLS, parallel_tool_calls=False).invoke(GARDENS_QUESTION)
    assert len(single.tool_calls) == 1


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


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [SystemMessage("You are helpful.")],
        [HumanMessage("")],
        [HumanMessage(content=[{"type": "text", "text": "weather in Suzhou"}, {"x": 1}])],
        [AIMessage("I already answered.")],
        [ToolMessage("not json at all", tool_call_id="call_orphan")],
        [HumanMessage("1/0 ** 99999 ((("), ToolMessage("[1, {}, null]", tool_call_id="x")],
        [HumanMessage("😀" * 500)],
    ],
)
async def test_odd_input_gets_a_polite_text_reply_not_an_exception(model, messages):
    message = await model.ainvoke(messages)
    chunks = [chunk async for chunk in model.astream(messages)]

    assert isinstance(message.content, str) and message.content
    assert merged(chunks).content == message.content


def test_make_plan_tolerates_malformed_tool_specs():
    plan = make_plan([HumanMessage("weather in Suzhou")], [{"nonsense": True}, "x", None])

    assert plan.tool_calls == []
    assert plan.text


def test_the_agents_package_does_not_import_django():
    code = "import sys, agents.models.demo; assert 'django' not in sys.modules"
    root = Path(__file__).resolve().parents[2]

    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
