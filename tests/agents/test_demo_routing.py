"""Tests for how the offline demo model picks tools, streams and copes with odd input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool

from agents.models.demo import DemoChatModel, make_plan
from agents.tools import default_tools
from tests.agents.demo_support import (
    GARDENS_QUESTION,
    MIXED_QUESTION,
    TOOLS,
    calls_of,
    merged,
    without_ids,
)


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


def test_an_unmatched_message_lists_the_bound_tools_without_calling_any(model):
    message = model.invoke([HumanMessage("hello")])

    assert message.tool_calls == []
    for tool in TOOLS:
        assert tool.name in message.content


@pytest.mark.parametrize(
    "question", ["<img src=x onerror=alert(1)> **bold** hello", "calculator: x = 1"]
)
def test_a_message_without_arithmetic_gets_the_capabilities_reply_not_a_calculator_question(
    question,
):
    model = DemoChatModel().bind_tools(default_tools())  # whose calculator mentions "x"

    message = model.invoke([HumanMessage(question)])

    assert message.tool_calls == []
    assert message.content.startswith("I'm the offline demo model (a script, not an LLM) and")
    assert "couldn't match your message to a tool" in message.content


def test_the_calculator_is_called_for_numbers_with_an_operator_between_them():
    model = DemoChatModel().bind_tools(default_tools())

    message = model.invoke([HumanMessage("calculator: 2 + 3")])

    assert calls_of(message) == [("calculator", {"expression": "2+3"})]


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


# --- Streaming: chunks merge to what invoke returns, usage comes last -------------------


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


# --- Odd input: a polite reply, never an exception --------------------------------------


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
