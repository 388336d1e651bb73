"""The offline demo model with the bundled almanac's MCP tools, and with agents it does not know."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool

from agents.bundled import almanac_config
from agents.demo import DemoChatModel
from agents.demo.scenarios import ALMANAC_EXAMPLES, EXAMPLES, SHOWCASES
from agents.demo.script import plan
from agents.demo.slots import fill, render
from agents.events import RunFinished, ToolCallFinished, ToolCallStarted
from agents.mcp import open_mcp_tools
from agents.runtime import run
from agents.strategies import STRATEGIES, get_strategy
from agents.tools import default_tools
from tests.timing import WAIT_S

DAYS_AND_MILES, MOON, RAINFALL, MOON_ZH = ALMANAC_EXAMPLES
ALMANAC_PROMPT = "You are an almanac: you convert units, count days and draw bar charts."


@dataclass
class Call:
    name: str
    args: dict
    iteration: int
    error: str
    result: str
    blocks: list | None


@dataclass
class Answered:
    calls: list[Call]
    output: str
    status: str


async def ask(question: str, tools: list[BaseTool], strategy: str = "tool_calling") -> Answered:
    """Run ``question`` through the agent loop with the demo model and ``tools``."""
    messages = [SystemMessage(ALMANAC_PROMPT), HumanMessage(question)]
    events = [e async for e in run(DemoChatModel(), tools, messages,
                                   strategy=get_strategy(strategy))]  # fmt: skip
    finished = {e.tool_call_id: e for e in events if isinstance(e, ToolCallFinished)}
    calls = [
        Call(e.name, e.args, e.iteration, (f := finished[e.tool_call_id]).error, f.result, f.blocks)
        for e in events
        if isinstance(e, ToolCallStarted)
    ]
    end = events[-1]
    assert isinstance(end, RunFinished)
    return Answered(calls, end.output, end.status)


async def ask_almanac(question: str, strategy: str = "tool_calling") -> Answered:
    """Ask with the almanac's real tools, its server started for this run. Not a fixture:
    the MCP session must close in the task that opened it."""
    async with open_mcp_tools([almanac_config(connect_timeout_s=WAIT_S)]) as toolset:
        assert toolset.unavailable == {}
        return await ask(question, list(toolset.tools), strategy)


def assert_one_call_per_turn_or_all_at_once(answered: Answered, strategy: str) -> None:
    iterations = [call.iteration for call in answered.calls]
    if strategy == "tool_calling":
        assert iterations == [1] * len(iterations)
    else:
        assert iterations == list(range(1, len(iterations) + 1))


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_days_between_and_a_conversion_are_two_calls_whose_numbers_the_answer_says(
    strategy,
):
    answered = await ask_almanac(DAYS_AND_MILES, strategy)

    assert answered.status == "succeeded"
    assert [(c.name, c.args) for c in answered.calls] == [
        ("almanac_days_between", {"start": "2026-01-01", "end": "2026-12-25"}),
        ("almanac_convert_units", {"value": 30, "from_unit": "mi", "to_unit": "km"}),
    ]
    assert not any(call.error for call in answered.calls)
    assert_one_call_per_turn_or_all_at_once(answered, strategy)
    days, converted = (json.loads(call.result) for call in answered.calls)
    assert (days["days"], converted["result"]) == (358, 48.2803)
    assert "**358 days**" in answered.output and "(51 × 7 + 1)" in answered.output
    assert "30 mi is **48.2803 km**" in answered.output
    for residue in ("Final Answer", "<final_answer>", '"action"', "Thought:"):
        assert residue not in answered.output


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_moon_question_calls_moon_phase_and_says_the_phase_it_computed(strategy):
    answered = await ask_almanac(MOON, strategy)

    assert answered.status == "succeeded"
    ((call),) = answered.calls
    assert (call.name, call.args, call.error) == ("almanac_moon_phase", {"date": "2026-12-24"}, "")
    phase = json.loads(call.result)
    assert f"**{phase['phase']}**" in answered.output
    assert f"{phase['illumination']:.0%} lit" in answered.output
    assert f"{phase['age_days']} days after the new moon" in answered.output


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_chart_question_draws_the_series_and_points_to_the_card(strategy):
    answered = await ask_almanac(RAINFALL, strategy)

    assert answered.status == "succeeded"
    ((call),) = answered.calls
    assert (call.name, call.error) == ("almanac_bar_chart", "")
    assert call.args == {"title": "rainfall", "labels": ["Jan", "Feb", "Mar"],
                         "values": [12, 30, 45]}  # fmt: skip
    assert any(block.get("type") == "image" for block in call.blocks or ())
    assert "open the almanac_bar_chart card above to see it" in answered.output
    assert "rainfall: Jan: 12, Feb: 30, Mar: 45" in answered.output
    assert "[image:" not in answered.output


@pytest.mark.parametrize("strategy", ["tool_calling", "xml"])
async def test_a_question_in_chinese_gets_its_calls_and_a_chinese_answer(strategy):
    answered = await ask_almanac(MOON_ZH, strategy)

    assert [(c.name, c.args) for c in answered.calls] == [
        ("almanac_moon_phase", {"date": "2026-12-24"}),
        ("almanac_convert_units", {"value": 100, "from_unit": "F", "to_unit": "C"}),
    ]
    assert "2026-12-24 的月相" in answered.output
    assert "100 F = **37.7778 C**。" in answered.output


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_travel_question_to_the_almanac_calls_no_travel_tool_and_lists_its_examples(
    strategy,
):
    answered = await ask_almanac("What's the weather in Hangzhou, and what is 17*23?", strategy)

    assert answered.calls == [] and answered.status == "succeeded"
    assert all(example in answered.output for example in ALMANAC_EXAMPLES)
    assert not any(example in answered.output for example in EXAMPLES)
    assert "Chengdu" not in answered.output  # the travel follow-up hint


@tool
def almanac_moon_phase(date: str) -> dict:
    """Stand in for the almanac's moon tool (only its name matters here)."""
    return {"date": date}


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order in a shop the demo knows nothing about."""
    return "shipped"


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"


@pytest.mark.parametrize(
    ("tools", "listed", "not_listed"),
    [
        (default_tools(), EXAMPLES, ALMANAC_EXAMPLES),
        ([almanac_moon_phase], [MOON, MOON_ZH], [DAYS_AND_MILES, RAINFALL, *EXAMPLES]),
    ],
    ids=["travel", "moon-only"],
)
async def test_the_help_reply_lists_the_examples_the_bound_tools_can_answer(
    tools, listed, not_listed
):
    reply = await DemoChatModel().bind_tools(tools).ainvoke([HumanMessage("Tell me a joke")])

    assert reply.tool_calls == []
    assert all(example in reply.text for example in listed)
    assert not any(example in reply.text for example in not_listed)


def test_every_example_plans_a_call_with_its_agents_tools():
    for showcase in SHOWCASES:
        for example in showcase.examples:
            calls, _ = plan(example, [], showcase.tools)
            assert calls and {c.tool for c in calls} <= set(showcase.tools), example


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("tools", [[lookup_order, refund], []], ids=["own-tools", "no-tools"])
async def test_an_agent_the_demo_does_not_know_gets_a_plain_scripted_model_reply(strategy, tools):
    answered = await ask("Where is my order 1234? Refund it.", tools, strategy)

    assert answered.calls == [] and answered.status == "succeeded"
    said = answered.output
    assert "scripted model, not an LLM" in said
    assert "bundled agents (travel, almanac)" in said
    assert "`OPENAI_API_KEY`" in said and "`AGENT_PROVIDER`" in said
    assert "model picker" in said and "docs/models.md" in said
    assert ("lookup_order, refund" if tools else "has no tools") in said
    for residue in ("Final Answer", "<final_answer>", '"action"', "Thought:"):
        assert residue not in said


async def test_an_agent_the_demo_does_not_know_is_told_so_in_chinese_too():
    answered = await ask("我的订单到哪了？", [lookup_order])

    assert answered.calls == [] and "离线演示模型" in answered.output
    assert "docs/models.md" in answered.output and "lookup_order" in answered.output


async def test_tool_choice_required_does_not_make_an_unknown_agent_call_a_tool():
    model = DemoChatModel().bind_tools([lookup_order], tool_choice="required")
    reply = await model.ainvoke([HumanMessage("Where is my order?")])

    assert reply.tool_calls == [] and "docs/models.md" in reply.text


def test_a_typed_slot_gives_a_tool_the_value_not_its_text():
    slots = {"value": "26.2", "unit": "Miles", "series": "Jan 12, Feb 30.5 and Mar 0"}

    assert fill("{value:number}", slots) == 26.2
    assert fill("{unit:unit}", slots) == "mi"
    assert fill("{series:labels}", slots) == ["Jan", "Feb", "Mar"]
    assert fill("{series:values}", slots) == [12, 30.5, 0]
    assert fill("{missing|Chart}", slots) == "Chart"
    assert fill("{value} {unit}", slots) == "26.2 Miles"


def test_a_typed_field_says_a_result_the_way_a_person_would():
    result = {"value": 30.0, "result": 48.2803, "illumination": 0.98}

    assert render("{value:number} mi = {result:number} km", result) == "30 mi = 48.2803 km"
    assert render("{illumination:percent} lit", result) == "98% lit"
    assert render("{value:percent}", {"value": "not a number"}) is None
