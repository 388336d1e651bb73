"""The one loop under each strategy, with a scripted model: prompts, binding, retries."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from agents.events import (
    ModelTurnFinished,
    RunFinished,
    RunStarted,
    RunStatus,
    StepStatus,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.runtime import RunLimits, run
from agents.strategies import StrategyOptions, get_strategy
from tests.fakes import ScriptedChatModel, tool_call


@tool
def weather_forecast(town: str, days: int = 3) -> dict:
    """Give the weather forecast for a town."""
    return {"town": town, "days": days, "forecast": "sunny"}


MALFORMED = {
    "react": "Thought: check the weather\nAction: weather_forecast",
    "structured_chat": '```json\n{"action": "weather_forecast", "action_input": {"town": "Suzhou",}}\n```',
    "xml": "<tool>weather_forecast</tool>",
}
CALL = {
    "react": 'Thought: check the weather\nAction: weather_forecast\nAction Input: {"town": "苏州"}',
    "structured_chat": '```json\n{"action": "weather_forecast", "action_input": {"town": "苏州"}}\n```',
    "xml": '<tool>weather_forecast</tool><tool_input>{"town": "苏州"}',
}
ANSWER = {
    "react": "Thought: I now know the final answer\nFinal Answer: 苏州晴。",
    "structured_chat": '```json\n{"action": "Final Answer", "action_input": "苏州晴。"}\n```',
    "xml": "<final_answer>苏州晴。</final_answer>",
}
STOPS = {"react": ["\nObservation"], "structured_chat": ["\nObservation"], "xml": ["</tool_input>"]}
TEXT_STRATEGIES = sorted(MALFORMED)


async def collect(model, strategy, *, max_iterations=6, question="苏州天气？"):
    messages = [SystemMessage("You are a travel assistant."), HumanMessage(question)]
    limits = RunLimits(max_iterations=max_iterations)
    return [
        e async for e in run(model, [weather_forecast], messages, strategy=strategy, limits=limits)
    ]


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


@pytest.mark.parametrize("name", TEXT_STRATEGIES)
async def test_a_malformed_reply_becomes_an_error_step_then_the_retry_succeeds(name):
    model = ScriptedChatModel(script=[AIMessage(MALFORMED[name]), AIMessage(CALL[name]),
                                      AIMessage(ANSWER[name])])  # fmt: skip
    events = await collect(model, get_strategy(name))

    assert of_type(events, RunStarted)[0].strategy == name
    bad, good = of_type(events, ToolCallFinished)
    assert bad.status is StepStatus.ERROR and bad.error.startswith("OutputParserException: ")
    assert bad.name == "weather_forecast"  # what could be read of the call is kept
    assert good.status is StepStatus.SUCCESS and '"苏州"' in good.result
    started = of_type(events, ToolCallStarted)
    assert started[0].log == MALFORMED[name] and started[1].log.startswith(CALL[name])
    assert started[1].args == {"town": "苏州"}
    # The model read what was wrong on its next turn, then the tool's result.
    assert bad.observation in model.prompts[1][-1].text
    assert "sunny" in model.prompts[2][-1].text
    end = events[-1]
    assert isinstance(end, RunFinished) and end.status is RunStatus.SUCCEEDED
    assert end.output == "苏州晴。" and end.iterations == 3
    final_turn = of_type(events, ModelTurnFinished)[-1]
    assert final_turn.final_answer == "苏州晴。" and final_turn.text == ANSWER[name]


@pytest.mark.parametrize("name", TEXT_STRATEGIES)
async def test_text_strategies_put_tools_and_format_in_the_system_prompt_and_bind_stop(name):
    model = ScriptedChatModel(script=[AIMessage(ANSWER[name])])
    await collect(model, get_strategy(name))

    system = model.prompts[0][0]
    assert isinstance(system, SystemMessage)
    assert system.text.startswith("You are a travel assistant.")
    assert '{"name": "weather_forecast", "description": "Give the weather forecast' in system.text
    assert '"required": ["town"]' in system.text
    assert model.calls[0]["stop"] == STOPS[name]
    assert "tools" not in model.calls[0]  # text strategies bind no tools


@pytest.mark.parametrize("name", TEXT_STRATEGIES)
async def test_parse_retries_count_toward_the_iteration_limit(name):
    model = ScriptedChatModel(script=[AIMessage(MALFORMED[name])] * 3)
    events = await collect(model, get_strategy(name), max_iterations=3)

    assert len(of_type(events, ToolCallFinished)) == 3
    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS and end.output == ""
    assert "3 model turns" in end.error


@pytest.mark.parametrize("name", TEXT_STRATEGIES)
async def test_an_unknown_tool_name_is_an_error_the_model_can_correct(name):
    wrong = CALL[name].replace("weather_forecast", "get_weather")
    model = ScriptedChatModel(script=[AIMessage(wrong), AIMessage(ANSWER[name])])
    events = await collect(model, get_strategy(name))

    (finished,) = of_type(events, ToolCallFinished)
    assert finished.error == "UnknownTool: get_weather"
    assert "weather_forecast" in model.prompts[1][-1].text
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_native_invalid_tool_call_is_an_error_step_and_the_retry_succeeds():
    # Not JSON at all: LangChain's chunk merging repairs a truncated JSON prefix such as
    # '{"town": ' into {} (parse_partial_json), which the tool's schema then rejects.
    broken = AIMessage("", invalid_tool_calls=[{"name": "weather_forecast", "args": "town=Suzhou",
                       "id": "bad", "error": "Expecting value", "type": "invalid_tool_call"}])  # fmt: skip
    model = ScriptedChatModel(
        script=[
            broken,
            AIMessage("", tool_calls=[tool_call("weather_forecast", {"town": "苏州"}, "c1")]),
            AIMessage("苏州晴。"),
        ]
    )
    events = await collect(model, get_strategy("tool_calling"))

    bad, good = of_type(events, ToolCallFinished)
    assert bad.status is StepStatus.ERROR and bad.error.startswith("InvalidToolCall: ")
    assert good.status is StepStatus.SUCCESS
    tool_message = model.prompts[1][-1]
    assert tool_message.tool_call_id == "bad" and tool_message.status == "error"
    assert events[-1].status is RunStatus.SUCCEEDED and events[-1].output == "苏州晴。"


async def test_native_tool_choice_applies_to_the_first_turn_only():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("weather_forecast", {"town": "苏州"}, "c1")]),
            AIMessage("苏州晴。"),
        ]
    )
    options = StrategyOptions(tool_choice="required", parallel_tool_calls=False)
    events = await collect(model, get_strategy("tool_calling", options))

    first, second = model.calls
    assert first["tool_choice"] == "required" and first["parallel_tool_calls"] is False
    assert "tool_choice" not in second and second["parallel_tool_calls"] is False
    assert first["tools"] == ["weather_forecast"]
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_native_defaults_send_neither_tool_choice_nor_parallel_tool_calls():
    model = ScriptedChatModel(script=[AIMessage("Hello.")])
    await collect(model, get_strategy("tool_calling"))

    assert "tool_choice" not in model.calls[0] and "parallel_tool_calls" not in model.calls[0]
    assert model.calls[0]["stop"] is None


async def test_an_empty_final_answer_fails_the_run_with_a_reason():
    model = ScriptedChatModel(script=[AIMessage("")])
    events = await collect(model, get_strategy("tool_calling"))

    end = events[-1]
    assert end.status is RunStatus.FAILED and "neither text nor tool calls" in end.error


def test_an_unknown_strategy_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="tool_calling, react, structured_chat, xml"):
        get_strategy("langgraph")


async def test_truncated_streamed_arguments_are_an_invalid_call_not_a_guess():
    """LangChain's partial-JSON parser would complete '{"town": "Suz' to {"town": "Suz"}."""
    cut_off = AIMessage("", invalid_tool_calls=[{"name": "weather_forecast", "args": '{"town": "Suz',
                        "id": "cut", "error": None, "type": "invalid_tool_call"}])  # fmt: skip
    model = ScriptedChatModel(script=[cut_off, AIMessage("Sorry.")])
    events = await collect(model, get_strategy("tool_calling"))

    (finished,) = of_type(events, ToolCallFinished)
    assert finished.status is StepStatus.ERROR and finished.error.startswith("InvalidToolCall: ")
    assert of_type(events, ToolCallStarted)[0].args == '{"town": "Suz'
    assert "not valid JSON" in model.prompts[1][-1].text


async def test_a_call_with_empty_arguments_runs_with_no_arguments():
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    empty = AIMessage("", invalid_tool_calls=[{"name": "ping", "args": "", "id": "p1",
                      "error": None, "type": "invalid_tool_call"}])  # fmt: skip
    model = ScriptedChatModel(script=[empty, AIMessage("pong it is")])
    messages = [HumanMessage("ping?")]
    events = [e async for e in run(model, [ping], messages)]
    (finished,) = of_type(events, ToolCallFinished)
    assert finished.status is StepStatus.SUCCESS and finished.result == "pong"


CODE = {  # a final answer holding code that shows the format's own delimiters
    "react": "运行这个：\n```text\nThought: 查天气\nAction: weather_forecast\n"
    'Action Input: {"town": "苏州"}\nObservation: sunny\nFinal Answer: 晴\n```',
    "structured_chat": 'Write:\n```json\n{"action": "weather_forecast", "action_input": '
    '{"town": "苏州"}}\n```\nObservation: sunny',
    "xml": "Write:\n```xml\n<tool>weather_forecast</tool><tool_input>{}</tool_input>\n"
    "<observation>sunny</observation>\n<final_answer>晴</final_answer>\n```",
}


@pytest.mark.parametrize("name", TEXT_STRATEGIES)
async def test_a_final_answer_with_the_format_in_a_code_block_ends_the_run_with_the_code_intact(
    name,
):
    written = {
        "react": f"Thought: I now know the final answer\nFinal Answer: {CODE[name]}",
        "structured_chat": "Thought: I know what to respond\nAction:\n```json\n"
        + json.dumps({"action": "Final Answer", "action_input": CODE[name]}, ensure_ascii=False)
        + "\n```",
        "xml": f"<final_answer>{CODE[name]}</final_answer>",
    }[name]
    model = ScriptedChatModel(script=[AIMessage(written)])
    events = await collect(model, get_strategy(name))

    assert not of_type(events, ToolCallStarted)  # no format error, no tool call
    end = events[-1]
    assert isinstance(end, RunFinished) and end.status is RunStatus.SUCCEEDED
    assert end.output == CODE[name] and end.iterations == 1
