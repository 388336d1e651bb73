"""Tool calls written into a reply's text: read as calls where the provider says so, never
an answer."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from agents.events import (
    FORMAT_ERROR_TYPES,
    ModelTurnFinished,
    RunStatus,
    StepStatus,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.runtime import RunLimits, run
from agents.strategies import StrategyOptions, get_strategy
from agents.strategies.tool_markup import find_tool_markup
from tests.fakes import ScriptedChatModel

SUZHOU = '<tool_call>\n{"name": "weather_forecast", "arguments": {"town": "Suzhou"}}\n</tool_call>'


@tool
def weather_forecast(town: str) -> dict:
    """Give the weather forecast for a town."""
    return {"town": town, "forecast": "sunny"}


def calls_of(text: str) -> list[tuple[str, dict | None, str]]:
    found = find_tool_markup(text)
    assert found is not None
    return [(c.name, c.args, c.error) for c in found.calls]


def test_hermes_markup_is_read_with_several_calls_and_the_text_around_them():
    text = f"Let me check both.\n{SUZHOU}\n" + SUZHOU.replace("Suzhou", "Chengdu") + "\nDone."
    found = find_tool_markup(text)
    assert found is not None
    assert [(c.name, c.args) for c in found.calls] == [
        ("weather_forecast", {"town": "Suzhou"}),
        ("weather_forecast", {"town": "Chengdu"}),
    ]
    assert found.text == "Let me check both.\n\n\nDone."


def test_an_unclosed_last_tool_call_and_arguments_as_a_json_string_are_read():
    text = '<tool_call>{"name": "weather_forecast", "arguments": "{\\"town\\": \\"苏州\\"}"}'
    assert calls_of(text) == [("weather_forecast", {"town": "苏州"}, "")]


def test_function_markup_with_json_or_parameters_is_read():
    assert calls_of('<function=weather_forecast>{"town": "Suzhou"}</function>') == [
        ("weather_forecast", {"town": "Suzhou"}, "")
    ]
    qwen3_coder = (
        "<tool_call>\n<function=weather_forecast>\n<parameter=town>\nSuzhou\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    )
    assert calls_of(qwen3_coder) == [("weather_forecast", {"town": "Suzhou", "days": 3}, "")]


def test_mistral_markup_in_both_shapes_is_read():
    old = '[TOOL_CALLS][{"name": "weather_forecast", "arguments": {"town": "Suzhou"}}]'
    new = '[TOOL_CALLS]weather_forecast[ARGS]{"town": "Suzhou"}'
    assert calls_of(old) == calls_of(new) == [("weather_forecast", {"town": "Suzhou"}, "")]


def test_broken_json_is_a_call_with_its_error_and_the_name_when_it_can_be_read():
    [(name, args, error)] = calls_of(
        '<tool_call>{"name": "weather_forecast", "arguments": {"town": </tool_call>'
    )
    assert (name, args) == ("weather_forecast", None)
    assert error


def test_markup_inside_a_code_block_or_no_markup_at_all_is_no_call():
    shown = f"Hermes models write calls like this:\n```\n{SUZHOU}\n```\nThat is all."
    assert find_tool_markup(shown) is None
    assert find_tool_markup("It is sunny in Suzhou.") is None


async def collect(model, strategy):
    messages = [SystemMessage("You are a travel assistant."), HumanMessage("Weather in Suzhou?")]
    limits = RunLimits(max_iterations=4)
    return [
        e async for e in run(model, [weather_forecast], messages, strategy=strategy, limits=limits)
    ]


async def test_with_the_quirk_markup_calls_run_with_fresh_ids_and_the_outside_text_is_the_turn_s():
    model = ScriptedChatModel(
        script=[AIMessage(f"Checking.\n{SUZHOU}\n{SUZHOU}"), AIMessage("Sunny in Suzhou.")]
    )
    strategy = get_strategy("tool_calling", StrategyOptions(text_tool_calls=True))
    events = await collect(model, strategy)

    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(s.name, s.args) for s in started] == [("weather_forecast", {"town": "Suzhou"})] * 2
    ids = [s.tool_call_id for s in started]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert all(f.status == StepStatus.SUCCESS for f in events if isinstance(f, ToolCallFinished))
    first = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert first.text == "Checking."
    assert [c["id"] for c in first.tool_calls] == ids
    assert (events[-1].status, events[-1].output) == (RunStatus.SUCCEEDED, "Sunny in Suzhou.")
    # The next request pairs each ToolMessage with a call on the AIMessage before it.
    sent = model.prompts[1]
    assert [c["id"] for c in sent[2].tool_calls] == ids
    assert [m.tool_call_id for m in sent[3:]] == ids


async def test_with_the_quirk_a_markup_call_that_does_not_parse_is_an_error_the_model_is_told():
    broken = '<tool_call>{"name": "weather_forecast", "arguments": {"town": "Suzhou"</tool_call>'
    model = ScriptedChatModel(script=[AIMessage(broken), AIMessage(SUZHOU), AIMessage("Sunny.")])
    events = await collect(
        model, get_strategy("tool_calling", StrategyOptions(text_tool_calls=True))
    )

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(f.status, f.error_type) for f in finished] == [
        (StepStatus.ERROR, "InvalidToolCall"),
        (StepStatus.SUCCESS, ""),
    ]
    told = model.prompts[1][-1]
    assert isinstance(told, ToolMessage) and "not valid JSON" in told.text
    assert events[-1].status == RunStatus.SUCCEEDED


async def test_without_the_quirk_markup_is_a_format_error_never_a_successful_answer():
    model = ScriptedChatModel(script=[AIMessage(SUZHOU)] * 4)
    events = await collect(model, get_strategy("tool_calling"))

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished and all(f.error_type == "TextToolCall" for f in finished)
    assert "TextToolCall" in FORMAT_ERROR_TYPES
    assert all(f.is_format_error and "through the API" in f.observation for f in finished)
    assert events[-1].status == RunStatus.MAX_ITERATIONS
    assert events[-1].output == ""
    # The model is told in a user turn (no ToolMessage without a call before it).
    second = model.prompts[1]
    assert [type(m).__name__ for m in second] == [
        "SystemMessage", "HumanMessage", "AIMessage", "HumanMessage",
    ]  # fmt: skip
    assert "through the API" in second[-1].text


async def test_without_the_quirk_the_model_can_recover_by_calling_the_tool_properly():
    from tests.fakes import tool_call

    model = ScriptedChatModel(
        script=[
            AIMessage(SUZHOU),
            AIMessage("", tool_calls=[tool_call("weather_forecast", {"town": "Suzhou"}, "c1")]),
            AIMessage("Sunny."),
        ]
    )
    events = await collect(model, get_strategy("tool_calling"))
    assert (events[-1].status, events[-1].output) == (RunStatus.SUCCEEDED, "Sunny.")


ANSWERS = {
    "react": f"Thought: I will call it\nFinal Answer: {SUZHOU}",
    "structured_chat": '{"action": "Final Answer", "action_input": "[TOOL_CALLS][{\\"name\\": '
    '\\"weather_forecast\\", \\"arguments\\": {}}]"}',
    "xml": f"<final_answer>{SUZHOU}</final_answer>",
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
async def test_a_text_strategy_s_final_answer_that_is_markup_is_a_format_error(name):
    model = ScriptedChatModel(script=[AIMessage(ANSWERS[name])] * 4)
    events = await collect(model, get_strategy(name))

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished and all(f.error_type == "OutputParserException" for f in finished)
    assert "markup" in finished[0].observation
    assert events[-1].status == RunStatus.MAX_ITERATIONS


async def test_a_native_answer_that_shows_markup_in_a_code_block_is_an_answer():
    answer = f"Hermes models write:\n```\n{SUZHOU}\n```"
    model = ScriptedChatModel(script=[AIMessage(answer)])
    events = await collect(model, get_strategy("tool_calling"))
    assert (events[-1].status, events[-1].output) == (RunStatus.SUCCEEDED, answer)


@pytest.mark.parametrize("quirk", [False, True])
async def test_markup_inside_the_thinking_is_neither_a_call_nor_an_error(quirk):
    reply = f"<think>I could write {SUZHOU} but I know it.</think>\n\nSunny in Suzhou."
    model = ScriptedChatModel(script=[AIMessage(reply)])
    strategy = get_strategy("tool_calling", StrategyOptions(text_tool_calls=quirk))
    events = await collect(model, strategy)

    assert not [e for e in events if isinstance(e, ToolCallStarted)]
    assert (events[-1].status, events[-1].output) == (RunStatus.SUCCEEDED, "Sunny in Suzhou.")


def test_prose_and_inline_code_that_name_the_tags_are_no_calls():
    assert (
        find_tool_markup("Hermes wraps calls in `<tool_call>` tags; see `<function=f>{}`.") is None
    )
    assert find_tool_markup("Say <tool_call> when you mean it, or <function= with a space.") is None
    assert calls_of("Sure: <function=weather_forecast>{}</function>") == [
        ("weather_forecast", {}, "")
    ]
