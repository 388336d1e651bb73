"""AgentExecutor's other controls in the one loop, under every strategy, with a scripted model.

``return_direct`` tools, ``max_execution_time``, ``early_stopping_method`` and the end of a
model that repeats the same failing call (:mod:`agents.stopping`).
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from agents.events import (
    ModelTurnFinished,
    ModelTurnStarted,
    RunFinished,
    RunStatus,
    StepStatus,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.runtime import ITERATION_LIMIT, RunLimits, run
from agents.stopping import GENERATE_ASKED_FOR_TOOLS, GENERATE_UNREADABLE
from agents.strategies import get_strategy
from agents.strategies.base import FINAL_ANSWER_REQUEST
from agents.strategies.react import format_react, format_react_final
from agents.strategies.structured_chat import format_structured, format_structured_final
from agents.strategies.xml import format_xml, format_xml_final
from agents.tool_calls import TOOL_RUN_TIME_LIMIT
from tests.fakes import ScriptedChatModel, tool_call

STRATEGIES = ["tool_calling", "react", "structured_chat", "xml"]
CALL = {"react": format_react, "structured_chat": format_structured, "xml": format_xml}
FINAL = {"react": format_react_final, "structured_chat": format_structured_final,
         "xml": format_xml_final}  # fmt: skip


def call(strategy: str, name: str, args: dict, call_id: str = "call_1") -> AIMessage:
    """Return the reply that calls ``name`` with ``args`` in ``strategy``'s format."""
    if strategy == "tool_calling":
        return AIMessage("", tool_calls=[tool_call(name, args, call_id)])
    return AIMessage(CALL[strategy](name, args, "I will use a tool"))


def answer(strategy: str, text: str) -> AIMessage:
    """Return the reply that answers ``text`` in ``strategy``'s format."""
    return AIMessage(text if strategy == "tool_calling" else FINAL[strategy](text))


@tool(return_direct=True)
def book_room(town: str) -> str:
    """Book a room in a town; the confirmation is the answer."""
    return f"Booked: a room in {town}, confirmation BK-42."


@tool(return_direct=True)
def book_broken(town: str) -> str:
    """Book a room (always fails)."""
    raise RuntimeError(f"no rooms left in {town}")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always raise."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def hang(town: str) -> str:
    """Never return (a server that stopped answering)."""
    await asyncio.Event().wait()
    return town


TOOLS = [book_room, book_broken, add, explode, hang]


async def collect(model, strategy: str, **limits) -> list:
    messages = [SystemMessage("You are a travel assistant."), HumanMessage("Book me a room.")]
    return [
        e async for e in run(model, TOOLS, messages, strategy=get_strategy(strategy),
                             limits=RunLimits(**limits))
    ]  # fmt: skip


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


# return_direct


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_return_direct_tools_result_is_the_answer_without_another_model_turn(strategy):
    model = ScriptedChatModel(script=[call(strategy, "book_room", {"town": "Suzhou"})])
    events = await collect(model, strategy)

    end = events[-1]
    assert end.status is RunStatus.SUCCEEDED and end.iterations == 1
    assert end.output == "Booked: a room in Suzhou, confirmation BK-42." and end.error == ""
    assert len(model.prompts) == 1  # the model was not asked again
    assert len(of_type(events, ModelTurnStarted)) == 1


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_return_direct_tool_that_raises_is_an_error_the_model_answers_around(strategy):
    script = [call(strategy, "book_broken", {"town": "Suzhou"}),
              answer(strategy, "No rooms are left in Suzhou.")]  # fmt: skip
    model = ScriptedChatModel(script=script)
    events = await collect(model, strategy)

    (failed,) = of_type(events, ToolCallFinished)
    assert failed.status is StepStatus.ERROR and "no rooms left" in failed.error
    end = events[-1]
    assert end.status is RunStatus.SUCCEEDED and end.iterations == 2
    assert end.output == "No rooms are left in Suzhou."  # the error is not the answer


async def test_a_return_direct_call_among_several_ends_the_run_after_the_whole_batch():
    calls = [tool_call("add", {"a": 2, "b": 3}, "call_a"),
             tool_call("book_room", {"town": "Hangzhou"}, "call_b")]  # fmt: skip
    turn = AIMessage("", tool_calls=calls)
    model = ScriptedChatModel(script=[turn])
    events = await collect(model, "tool_calling")

    assert {e.tool_call_id for e in of_type(events, ToolCallFinished)} == {"call_a", "call_b"}
    end = events[-1]
    assert end.status is RunStatus.SUCCEEDED
    assert end.output == "Booked: a room in Hangzhou, confirmation BK-42."
    assert len(model.prompts) == 1


async def test_a_failed_return_direct_call_beside_a_good_one_does_not_answer():
    turn = AIMessage("", tool_calls=[tool_call("book_broken", {"town": "A"}, "call_a"),
                                     tool_call("book_room", {"town": "B"}, "call_b")])  # fmt: skip
    model = ScriptedChatModel(script=[turn])
    events = await collect(model, "tool_calling")

    assert events[-1].output == "Booked: a room in B, confirmation BK-42."


# max_execution_time


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_time_limit_ends_a_tool_call_in_progress_and_the_run(strategy):
    model = ScriptedChatModel(script=[call(strategy, "hang", {"town": "Suzhou"})])
    events = await collect(model, strategy, max_execution_time_s=0.4, tool_timeout_s=30)

    (stopped,) = of_type(events, ToolCallFinished)
    assert stopped.status is StepStatus.ERROR and stopped.error_type == "TimeoutError"
    assert (
        stopped.observation.startswith(TOOL_RUN_TIME_LIMIT.split("{")[0])
        and "run's time limit" in stopped.observation
    )
    end = events[-1]
    assert end.status is RunStatus.TIME_LIMIT and end.iterations == 1 and end.output == ""
    assert "time limit of 0.4 seconds" in end.error and "AGENT_MAX_EXECUTION_TIME_S" in end.error
    assert len(model.prompts) == 1


async def test_the_time_limit_ends_a_model_turn_in_progress():
    never = asyncio.Event()
    model = ScriptedChatModel(script=[AIMessage("I am thinking about it")], gates={1: never})
    events = await collect(model, "tool_calling", max_execution_time_s=0.4, model_timeout_s=60)

    (turn,) = of_type(events, ModelTurnFinished)
    assert turn.error_type == "TimeoutError" and turn.text == "I"  # the words before the gate
    end = events[-1]
    assert end.status is RunStatus.TIME_LIMIT and end.iterations == 1
    assert "time limit of 0.4 seconds" in end.error


async def test_the_time_limit_is_checked_between_steps_on_the_wall_clock():
    """Time the caller spends (writing rows) counts: the run's budget is wall-clock."""
    model = ScriptedChatModel(script=[call("tool_calling", "add", {"a": 1, "b": 2}),
                                      answer("tool_calling", "3")])  # fmt: skip
    events = []
    async for event in run(model, TOOLS, [HumanMessage("q")],
                           limits=RunLimits(max_execution_time_s=0.3)):  # fmt: skip
        events.append(event)
        if isinstance(event, ToolCallFinished):
            await asyncio.sleep(0.4)
    assert events[-1].status is RunStatus.TIME_LIMIT and events[-1].iterations == 1
    assert len(of_type(events, ModelTurnStarted)) == 1 and len(model.prompts) == 1


async def test_no_time_limit_by_default():
    model = ScriptedChatModel(script=[answer("tool_calling", "done")], delay_s=0.05)
    events = await collect(model, "tool_calling")
    assert events[-1].status is RunStatus.SUCCEEDED


# a model that repeats itself


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_the_same_failing_call_three_times_in_a_row_ends_the_run(strategy):
    same = call(strategy, "explode", {"reason": "x"})
    model = ScriptedChatModel(script=[same, same, same, answer(strategy, "never asked")])
    events = await collect(model, strategy)

    end = events[-1]
    assert end.status is RunStatus.REPEATED_FAILURE and end.iterations == 3
    assert "same failing call 3 times in a row" in end.error
    assert "'explode'" in end.error and '"reason": "x"' in end.error and "boom: x" in end.error
    assert len(model.prompts) == 3


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_different_call_between_failures_starts_the_count_again(strategy):
    x, y = call(strategy, "explode", {"reason": "x"}), call(strategy, "explode", {"reason": "y"})
    model = ScriptedChatModel(script=[x, x, y, x, x, answer(strategy, "gave up on x")])
    events = await collect(model, strategy)

    assert events[-1].status is RunStatus.SUCCEEDED and events[-1].iterations == 6


# early_stopping_method


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_force_ends_at_the_limit_without_an_answer(strategy):
    adding = call(strategy, "add", {"a": 1, "b": 2})
    model = ScriptedChatModel(script=[adding, adding])
    events = await collect(model, strategy, max_iterations=2, early_stopping_method="force")

    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS and end.output == ""
    assert end.error == ITERATION_LIMIT.format(limit=2) and len(model.prompts) == 2


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_generate_asks_once_more_without_tools_and_keeps_the_answer_marked(strategy):
    adding = call(strategy, "add", {"a": 1, "b": 2})
    model = ScriptedChatModel(script=[adding, adding, answer(strategy, "1 + 2 is 3.")])
    events = await collect(model, strategy, max_iterations=2, early_stopping_method="generate")

    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS and end.output == "1 + 2 is 3."
    assert end.iterations == 3 and "generated at the limit" in end.error
    assert [e.iteration for e in of_type(events, ModelTurnStarted)] == [1, 2, 3]
    last_prompt = model.prompts[-1]
    assert FINAL_ANSWER_REQUEST in last_prompt[-1].text
    if strategy == "tool_calling":
        assert "tools" in model.calls[0] and "tools" not in model.calls[-1]
        assert isinstance(last_prompt[-2], ToolMessage)  # the observations stay before it
    else:
        assert model.calls[-1]["stop"] == model.calls[0]["stop"]
        assert FINAL[strategy]("(your answer)") in last_prompt[-1].text
        # One user message: the request joins the last observation (roles alternate).
        assert "3" in last_prompt[-1].text and last_prompt[-2].type == "ai"


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_generate_whose_last_call_fails_ends_without_an_answer(strategy):
    adding = call(strategy, "add", {"a": 1, "b": 2})
    model = ScriptedChatModel(script=[adding, RuntimeError("server down")])
    events = await collect(model, strategy, max_iterations=1, early_stopping_method="generate")

    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS and end.output == ""
    assert "the last call for an answer at the limit" in end.error and "failed" in end.error


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_generate_whose_last_call_asks_for_tools_runs_none_and_has_no_answer(strategy):
    adding = call(strategy, "add", {"a": 1, "b": 2})
    model = ScriptedChatModel(script=[adding, call(strategy, "add", {"a": 3, "b": 4}, "c2")])
    events = await collect(model, strategy, max_iterations=1, early_stopping_method="generate")

    assert len(of_type(events, ToolCallStarted)) == 1  # the first turn's only
    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS and end.output == ""
    assert end.error.endswith(GENERATE_ASKED_FOR_TOOLS) and end.iterations == 2


@pytest.mark.parametrize("strategy", sorted(CALL))
async def test_generate_whose_last_reply_breaks_the_format_has_no_answer(strategy):
    adding = call(strategy, "add", {"a": 1, "b": 2})
    model = ScriptedChatModel(script=[adding, AIMessage("")])
    events = await collect(model, strategy, max_iterations=1, early_stopping_method="generate")

    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS and end.output == ""
    assert end.error.endswith(GENERATE_UNREADABLE) and len(of_type(events, ToolCallStarted)) == 1


def test_an_unknown_early_stopping_method_is_refused():
    with pytest.raises(ValueError, match="early_stopping_method"):
        RunLimits(early_stopping_method="think harder")


async def test_every_ending_is_one_run_finished_last():
    model = ScriptedChatModel(script=[call("react", "book_room", {"town": "X"})])
    events = await collect(model, "react")
    assert isinstance(events[-1], RunFinished) and len(of_type(events, RunFinished)) == 1


# what a later question's history says of such runs


def test_an_answer_generated_at_the_limit_is_the_exchanges_answer_in_later_history():
    from agents.history import NO_ANSWER_NOTE, Exchange, closing_text

    generated = Exchange(question="q", strategy="tool_calling", status=RunStatus.MAX_ITERATIONS,
                         answer="3, from what was found.")  # fmt: skip
    assert closing_text(generated, get_strategy("tool_calling")) == "3, from what was found."
    for status in (RunStatus.TIME_LIMIT, RunStatus.REPEATED_FAILURE):
        stopped = Exchange(question="q", strategy="tool_calling", status=status)
        note = closing_text(stopped, get_strategy("tool_calling"))
        assert note.startswith(NO_ANSWER_NOTE.split("{")[0]) and "run" in note
