"""Each step's start, finish and duration are measured where its work happens and agree.

The runtime's finishing events carry ``started_at`` and ``at`` (the finish) measured around
the model's stream and the tool's ``ainvoke`` (agents/timing.py); ``at - started_at`` is
exactly ``duration_ms``. No test asserts how long anything took: only equality and order.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool

from agents.events import ModelTurnFinished, ToolCallFinished, ToolCallStarted
from agents.runtime import RunLimits, run
from agents.timing import Stopwatch, whole_ms
from tests.fakes import ScriptedChatModel, tool_call


def _barrier(parties: int):
    """Return a coroutine function that returns once ``parties`` callers are in it."""
    arrived: list[None] = []
    everyone = asyncio.Event()

    async def meet() -> None:
        arrived.append(None)
        if len(arrived) >= parties:
            everyone.set()
        await everyone.wait()

    return meet


def _parallel_tools(parties: int = 2):
    meet = _barrier(parties)

    @tool
    async def lookup(town: str) -> str:
        """Look a town up."""
        await meet()  # every call has started before any ends
        await asyncio.sleep(0.02)
        return town.upper()

    return [lookup]


async def _events(model, tools, **kwargs):
    return [e async for e in run(model, tools, [HumanMessage("q")], limits=RunLimits(), **kwargs)]


def _ms_between(event) -> int:
    return whole_ms(event.at - event.started_at)


def test_a_stopwatch_finish_is_its_start_plus_its_duration_exactly():
    watch = Stopwatch()
    finished_at, duration_ms = watch.stop()
    assert finished_at - watch.started_at == timedelta(milliseconds=duration_ms)
    assert watch.started_at.tzinfo is UTC


def test_whole_ms_never_comes_out_one_short_as_float_seconds_can():
    delta = timedelta(milliseconds=431)
    assert whole_ms(delta) == 431
    assert whole_ms(timedelta(microseconds=999)) == 0


async def test_model_turns_and_tool_calls_carry_a_start_and_finish_that_agree_with_their_duration():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("lookup", {"town": "suzhou"}, "c1"),
                                      tool_call("lookup", {"town": "hangzhou"}, "c2")]),
            AIMessage("Both found."),
        ]
    )  # fmt: skip
    events = await _events(model, _parallel_tools())
    turns = [e for e in events if isinstance(e, ModelTurnFinished)]
    calls = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(turns) == 2 and len(calls) == 2
    for event in [*turns, *calls]:
        assert isinstance(event.started_at, datetime)
        assert event.started_at <= event.at
        assert _ms_between(event) == event.duration_ms
        assert event.at - event.started_at == timedelta(milliseconds=event.duration_ms)
    # The tools ran after the turn that asked for them, and before the next turn.
    assert all(turns[0].at <= call.started_at for call in calls)
    assert all(call.at <= turns[1].started_at for call in calls)


async def test_parallel_tool_calls_of_one_turn_are_timed_overlapping():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("lookup", {"town": t}, f"c{i}")
                                      for i, t in enumerate(["a", "b", "c"])]),
            AIMessage("Done."),
        ]
    )  # fmt: skip
    events = await _events(model, _parallel_tools(3))
    calls = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(calls) == 3
    for a in calls:
        for b in calls:
            assert a.started_at < b.at and b.started_at < a.at


async def test_a_tool_call_is_timed_from_its_invocation_not_from_its_announcement():
    model = ScriptedChatModel(
        script=[AIMessage("", tool_calls=[tool_call("lookup", {"town": "x"}, "c1")]),
                AIMessage("Done.")]
    )  # fmt: skip
    events = await _events(model, _parallel_tools(1))
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert started.at <= finished.started_at < finished.at


async def test_the_time_to_first_token_is_the_first_chunk_with_text_and_within_the_turn():
    chunks = [
        AIMessageChunk(content=""),  # a role-only first chunk is not a token
        AIMessageChunk(content="Hello"),
        AIMessageChunk(content=" there."),
    ]
    model = ScriptedChatModel(script=[chunks])
    events = await _events(model, [])
    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert turn.first_token_ms is not None
    assert 0 <= turn.first_token_ms <= turn.duration_ms


async def test_a_turn_that_only_calls_tools_has_its_first_token_at_the_first_tool_call_chunk():
    chunks = [
        AIMessageChunk(content="", tool_call_chunks=[
            {"name": "lookup", "args": '{"town": ', "id": "c1", "index": 0}]),
        AIMessageChunk(content="", tool_call_chunks=[
            {"name": None, "args": '"x"}', "id": None, "index": 0}]),
    ]  # fmt: skip
    model = ScriptedChatModel(script=[chunks, AIMessage("Done.")])
    events = await _events(model, _parallel_tools(1))
    first = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert first.tool_calls and first.first_token_ms is not None


async def test_a_turn_that_failed_before_any_token_has_no_first_token_but_a_consistent_duration():
    model = ScriptedChatModel(script=[RuntimeError("server down")])
    events = await _events(model, [])
    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert turn.error and turn.first_token_ms is None
    assert _ms_between(turn) == turn.duration_ms


async def test_a_format_error_is_reported_as_an_instant():
    broken_call = [
        AIMessageChunk(content="", tool_call_chunks=[
            {"name": "lookup", "args": '{"town": oops', "id": "c1", "index": 0}]),
    ]  # fmt: skip
    model = ScriptedChatModel(script=[broken_call, AIMessage("Sorry.")])
    events = await _events(model, _parallel_tools(1))
    broken = [e for e in events if isinstance(e, ToolCallFinished)]
    assert len(broken) == 1 and broken[0].is_format_error
    assert broken[0].duration_ms == 0 and broken[0].at == broken[0].started_at
