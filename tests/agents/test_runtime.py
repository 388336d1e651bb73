"""The native tool-calling loop, driven by a scripted model (no Django, no network)."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool

from agents.events import (
    ModelTurnFinished,
    ModelTurnStarted,
    RunStarted,
    RunStatus,
    StepStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.model_turn import MODEL_STILL_WRITING, MODEL_TIMED_OUT
from agents.runtime import RunLimits, run
from tests.fakes import ScriptedChatModel, tool_call
from tests.timing import WAIT_S


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def shout(text: str) -> dict:
    """Upper-case some text."""
    return {"text": text.upper()}


@tool
def explode(reason: str) -> str:
    """Always raise."""
    raise RuntimeError(f"boom: {reason}")


async def collect(model, tools, messages=None, **limits):
    messages = messages or [HumanMessage("question")]
    return [event async for event in run(model, tools, messages, limits=RunLimits(**limits))]


def of_type(events, kind):
    return [e for e in events if isinstance(e, kind)]


async def test_it_runs_sequential_tool_calls_then_answers():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("add", {"a": 2, "b": 3}, "call_1")]),
            AIMessage("", tool_calls=[tool_call("shout", {"text": "hi"}, "call_2")]),
            AIMessage("The sum is 5 and HI."),
        ]
    )
    events = await collect(model, [add, shout])

    assert isinstance(events[0], RunStarted)
    assert events[0].tools == ("add", "shout")
    assert [type(e).__name__ for e in events if not isinstance(e, TextDelta)] == [
        "RunStarted",
        "ModelTurnStarted", "ModelTurnFinished", "ToolCallStarted", "ToolCallFinished",
        "ModelTurnStarted", "ModelTurnFinished", "ToolCallStarted", "ToolCallFinished",
        "ModelTurnStarted", "ModelTurnFinished",
        "RunFinished",
    ]  # fmt: skip
    finished = of_type(events, ToolCallFinished)
    assert [(f.name, f.status, f.result) for f in finished] == [
        ("add", StepStatus.SUCCESS, "5"),
        ("shout", StepStatus.SUCCESS, '{"text": "HI"}'),
    ]
    end = events[-1]
    assert (end.status, end.output, end.iterations) == (
        RunStatus.SUCCEEDED,
        "The sum is 5 and HI.",
        3,
    )
    # The second prompt ends with the AIMessage and its ToolMessage, paired by id.
    second = model.prompts[1]
    assert isinstance(second[-1], ToolMessage)
    assert (second[-1].tool_call_id, second[-1].content) == ("call_1", "5")


async def test_it_runs_parallel_calls_concurrently_and_pairs_results_by_tool_call_id():
    started = asyncio.Event()

    async def slow(x: str) -> str:
        """Wait until the fast tool has run: deadlocks unless calls run concurrently."""
        await asyncio.wait_for(started.wait(), timeout=WAIT_S)
        return f"slow {x}"

    async def fast(x: str) -> str:
        """Return at once."""
        started.set()
        return f"fast {x}"

    tools = [
        StructuredTool.from_function(coroutine=slow, name="slow"),
        StructuredTool.from_function(coroutine=fast, name="fast"),
    ]
    model = ScriptedChatModel(
        script=[
            AIMessage(
                "",
                tool_calls=[
                    tool_call("slow", {"x": "a"}, "id_slow"),
                    tool_call("fast", {"x": "b"}, "id_fast"),
                ],
            ),
            AIMessage("done"),
        ]
    )
    events = await collect(model, tools)

    started_ids = [e.tool_call_id for e in of_type(events, ToolCallStarted)]
    finished_ids = [e.tool_call_id for e in of_type(events, ToolCallFinished)]
    assert started_ids == ["id_slow", "id_fast"]
    assert finished_ids == ["id_fast", "id_slow"]  # completion order
    tool_messages = [m for m in model.prompts[1] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [
        ("id_slow", "slow a"),
        ("id_fast", "fast b"),
    ]  # the order the model asked in
    assert all(e.iteration == 1 for e in of_type(events, ToolCallFinished))


async def test_a_raising_tool_becomes_an_error_observation_the_model_sees():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("explode", {"reason": "bad"}, "c1")]),
            AIMessage("Sorry, the tool failed."),
        ]
    )
    events = await collect(model, [explode])

    (finished,) = of_type(events, ToolCallFinished)
    assert finished.status is StepStatus.ERROR
    assert finished.error == "RuntimeError: boom: bad"
    assert "failed: RuntimeError: boom: bad" in finished.result
    tool_message = model.prompts[1][-1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.status == "error"
    assert "boom: bad" in tool_message.content
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_a_tool_raising_a_parser_exception_of_its_own_ran_and_is_no_format_error():
    # A tool built on a chain of its own may raise LangChain's OutputParserException: the
    # tool ran and failed; that is not model output that broke the strategy's format.
    @tool
    def summarise(text: str) -> str:
        """Summarise text with a sub-chain."""
        raise OutputParserException("the sub-chain's parser failed")

    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("summarise", {"text": "x"}, "c1")]),
            AIMessage("The summary failed."),
        ]
    )
    events = await collect(model, [summarise])

    (finished,) = of_type(events, ToolCallFinished)
    assert finished.status is StepStatus.ERROR
    assert not finished.is_format_error
    assert finished.error_type == "langchain_core.exceptions.OutputParserException"
    assert finished.error.startswith("OutputParserException: the sub-chain's parser failed")


async def test_arguments_that_fail_the_schema_become_an_error_observation():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("add", {"a": "two"}, "c1")]),
            AIMessage("", tool_calls=[tool_call("add", {"a": 2, "b": 2}, "c2")]),
            AIMessage("4"),
        ]
    )
    events = await collect(model, [add])

    first, second = of_type(events, ToolCallFinished)
    assert first.status is StepStatus.ERROR
    assert "do not match its schema" in first.result
    assert "a:" in first.result and "b:" in first.result
    assert first.error.startswith("ValidationError")
    assert (second.status, second.result) == (StepStatus.SUCCESS, "4")
    assert events[-1].output == "4"


async def test_an_unknown_tool_name_lists_the_available_tools():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("fly", {}, "c1")]),
            AIMessage("I cannot fly."),
        ]
    )
    events = await collect(model, [add, shout])

    (finished,) = of_type(events, ToolCallFinished)
    assert finished.status is StepStatus.ERROR
    assert finished.result == "Error: there is no tool named 'fly'. Available tools: add, shout."
    assert model.prompts[1][-1].content == finished.result


async def test_invalid_tool_calls_are_reported_not_dropped():
    model = ScriptedChatModel(
        script=[
            AIMessage(
                "",
                invalid_tool_calls=[
                    {"name": "add", "args": "a=1, b=2", "id": "bad1", "error": "Expecting value"}
                ],
            ),
            AIMessage("Retried in words: 1."),
        ]
    )
    events = await collect(model, [add])

    (started,) = of_type(events, ToolCallStarted)
    (finished,) = of_type(events, ToolCallFinished)
    assert started.args == "a=1, b=2"
    assert finished.status is StepStatus.ERROR
    assert "not valid JSON" in finished.result
    tool_message = model.prompts[1][-1]
    assert (tool_message.tool_call_id, tool_message.status) == ("bad1", "error")
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_the_iteration_limit_ends_a_runaway_run_with_its_own_status():
    model = ScriptedChatModel(
        script=[
            AIMessage(f"try {i}", tool_calls=[tool_call("add", {"a": i, "b": 1}, f"c{i}")])
            for i in range(10)
        ]
    )
    events = await collect(model, [add], max_iterations=3)

    assert len(of_type(events, ModelTurnStarted)) == 3
    end = events[-1]
    assert end.status is RunStatus.MAX_ITERATIONS
    assert end.iterations == 3
    assert "3 model turns" in end.error


async def test_a_model_that_raises_fails_the_run_in_plain_words_keeping_the_error():
    model = ScriptedChatModel(script=[ConnectionError("connection refused")])
    events = await collect(model, [add])

    turn = of_type(events, ModelTurnFinished)[0]
    assert turn.error == "ConnectionError: connection refused"  # for the audit trail
    end = events[-1]
    assert end.status is RunStatus.FAILED
    assert (
        end.error
        == "The model provider could not be reached (a connection error). Try again later."
    )


async def test_a_model_that_hangs_times_out():
    # Its first chunk waits for an event nobody sets: it never answers, on any machine.
    model = ScriptedChatModel(script=[AIMessage("slow words here")], gates={0: asyncio.Event()})
    events = await collect(model, [add], model_timeout_s=0.05)

    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == MODEL_TIMED_OUT.format(seconds=0.05)


async def test_a_model_still_writing_at_its_deadline_is_told_apart_from_one_that_never_answered():
    # Found with a small local model: a reply that streams on until the deadline was
    # reported as "did not answer". Two words arrive, then the stream holds for good. The
    # deadline leaves a busy machine room for the two (at 0.05 s one came in CI's load).
    model = ScriptedChatModel(script=[AIMessage("on and on and on")], gates={2: asyncio.Event()})
    events = await collect(model, [add], model_timeout_s=1.0)

    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == MODEL_STILL_WRITING.format(seconds=1.0)
    assert "AGENT_MAX_TOKENS" in events[-1].error
    (turn,) = of_type(events, ModelTurnFinished)
    assert turn.text == "on and"  # what arrived is kept


async def test_a_tool_that_hangs_times_out_as_an_error_observation():
    async def hang() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "never"

    model = ScriptedChatModel(
        script=[AIMessage("", tool_calls=[tool_call("hang", {}, "c1")]), AIMessage("gave up")]
    )
    tools = [StructuredTool.from_function(coroutine=hang, name="hang")]
    events = await collect(model, tools, tool_timeout_s=0.05)

    (finished,) = of_type(events, ToolCallFinished)
    assert finished.status is StepStatus.ERROR
    assert "did not finish within 0.05 seconds" in finished.result
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_an_empty_answer_is_a_failure_not_a_blank_success():
    events = await collect(ScriptedChatModel(script=[AIMessage("")]), [add])
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == "The model returned neither text nor tool calls."


async def test_oversized_results_are_clipped_for_the_model_but_kept_whole():
    @tool
    def big() -> str:
        """Return a lot of text."""
        return "x" * 500

    model = ScriptedChatModel(
        script=[AIMessage("", tool_calls=[tool_call("big", {}, "c1")]), AIMessage("ok")]
    )
    events = await collect(model, [big], max_observation_chars=100)

    (finished,) = of_type(events, ToolCallFinished)
    assert len(finished.result) == 500
    assert finished.observation.startswith("x" * 100)
    assert "showing the first 100 of 500 characters" in finished.observation
    assert model.prompts[1][-1].content == finished.observation


async def test_text_streams_as_deltas_and_usage_is_summed():
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    model = ScriptedChatModel(
        script=[
            AIMessage(
                "Let me add.",
                tool_calls=[tool_call("add", {"a": 1, "b": 1}, "c1")],
                usage_metadata=usage,
            ),
            AIMessage("It is two.", usage_metadata=usage),
        ]
    )
    events = await collect(model, [add])

    deltas = [e.text for e in of_type(events, TextDelta) if e.iteration == 2]
    assert len(deltas) > 1
    assert "".join(deltas) == "It is two."
    assert of_type(events, ModelTurnFinished)[0].usage["total_tokens"] == 15
    assert events[-1].usage == {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}


async def test_earlier_turns_of_the_conversation_are_part_of_the_prompt():
    history = [
        SystemMessage("be brief"),
        HumanMessage("first question"),
        AIMessage("first answer"),
        HumanMessage("follow-up"),
    ]
    model = ScriptedChatModel(script=[AIMessage("second answer")])
    await collect(model, [add], messages=history)
    assert [m.content for m in model.prompts[0]] == [
        "be brief",
        "first question",
        "first answer",
        "follow-up",
    ]


async def test_repeated_or_missing_tool_call_ids_are_made_unique():
    model = ScriptedChatModel(
        script=[
            AIMessage(
                "",
                tool_calls=[
                    tool_call("add", {"a": 1, "b": 1}, "same"),
                    tool_call("add", {"a": 2, "b": 2}, "same"),
                ],
            ),
            AIMessage("2 and 4"),
        ]
    )
    events = await collect(model, [add])
    ids = [e.tool_call_id for e in of_type(events, ToolCallStarted)]
    assert len(set(ids)) == 2
    paired = {m.tool_call_id: m.content for m in model.prompts[1] if isinstance(m, ToolMessage)}
    assert sorted(paired.values()) == ["2", "4"]


async def test_cancelling_the_run_cancels_pending_tool_calls():
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def wait_forever() -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = ScriptedChatModel(
        script=[AIMessage("", tool_calls=[tool_call("wait_forever", {}, "c1")])]
    )
    tools = [StructuredTool.from_function(coroutine=wait_forever, name="wait_forever")]

    async def consume():
        async for _ in run(model, tools, [HumanMessage("q")]):
            pass

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(started.wait(), timeout=WAIT_S)  # the call is pending
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(cancelled.wait(), timeout=WAIT_S)


async def test_closing_the_run_at_a_tool_call_s_end_cancels_the_calls_still_running_at_once():
    """A consumer stopped while it handles an event closes the run (``aclose``): the
    turn's other calls are cancelled then, not when the garbage collector finds the
    streams the run was relaying."""
    cancelled = asyncio.Event()

    async def quick() -> str:
        """Answer at once."""
        return "done"

    async def wait_forever() -> str:
        """Wait until cancelled."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[
        tool_call("wait_forever", {}, "c1"), tool_call("quick", {}, "c2")])])  # fmt: skip
    tools = [StructuredTool.from_function(coroutine=wait_forever, name="wait_forever"),
             StructuredTool.from_function(coroutine=quick, name="quick")]  # fmt: skip
    events = run(model, tools, [HumanMessage("q")])
    async for event in events:
        if isinstance(event, ToolCallFinished):  # quick's: wait_forever is still running
            break
    await events.aclose()
    await asyncio.sleep(0)  # one step of the event loop: the cancelled task runs its except
    assert cancelled.is_set()


async def test_a_huge_result_is_stored_up_to_the_cap_with_a_note():
    @tool
    def flood() -> str:
        """Return far too much."""
        return "x" * 50_000

    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[tool_call("flood", {}, "f1")]),
                                      AIMessage("done")])  # fmt: skip
    events = await collect(model, [flood], max_observation_chars=1_000, max_result_chars=20_000)
    (finished,) = of_type(events, ToolCallFinished)
    assert finished.result.startswith("x" * 20_000)
    assert "[clipped: showing the first 20,000 of 50,000 characters]" in finished.result
    assert "[clipped: showing the first 1,000 of 50,000 characters]" in finished.observation


async def test_the_model_time_limit_never_fires_inside_the_caller():
    """Found under load: the deadline fired while the caller wrote a delta's row, which
    cancelled the write and ended the run as cancelled instead of timed out. The model's
    own pauses (0.15 s before each of 4 pieces) still run past its 0.3 s."""
    model = ScriptedChatModel(script=[AIMessage("one two three four")], delay_s=0.15)
    events = []
    async for event in run(model, [add], [HumanMessage("q")],
                           limits=RunLimits(model_timeout_s=0.3)):  # fmt: skip
        events.append(event)
        if isinstance(event, TextDelta):
            await asyncio.sleep(0.15)  # not interrupted: no CancelledError here
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == MODEL_STILL_WRITING.format(seconds=0.3)


async def test_the_time_the_caller_takes_is_not_charged_to_the_model():
    """The deadline counts only waiting for the model: a caller slower than the whole
    deadline (our own queue under load) does not end the turn as timed out."""
    model = ScriptedChatModel(script=[AIMessage("one two three four")])
    events = []
    async for event in run(model, [add], [HumanMessage("q")],
                           limits=RunLimits(model_timeout_s=0.3)):  # fmt: skip
        events.append(event)
        if isinstance(event, TextDelta):
            await asyncio.sleep(0.15)  # 4 pieces: 0.6 s in the caller, twice the deadline
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_reasoning_is_streamed_as_its_own_events_before_the_text_and_kept_on_the_turn():
    from agents.events import ReasoningDelta

    model = ScriptedChatModel(
        script=[
            AIMessage(
                "", tool_calls=[tool_call("add", {"a": 2, "b": 3}, "call_1")],
                additional_kwargs={"reasoning_content": "Add them."},
            ),
            AIMessage("<think>It is 5.</think>\n\nThe sum is 5."),
        ]
    )  # fmt: skip
    events = await collect(model, [add])

    assert [type(e).__name__ for e in events] == [
        "RunStarted",
        "ModelTurnStarted", "ReasoningDelta", "ModelTurnFinished",
        "ToolCallStarted", "ToolCallFinished",
        "ModelTurnStarted", "ReasoningDelta", "ReasoningDelta", "ReasoningDelta",
        "TextDelta", "TextDelta", "TextDelta", "TextDelta", "ModelTurnFinished",
        "RunFinished",
    ]  # fmt: skip
    assert [e.text for e in of_type(events, ReasoningDelta)] == ["Add them.", "It ", "is ", "5."]
    assert "".join(e.text for e in of_type(events, TextDelta)) == "The sum is 5."
    turns = of_type(events, ModelTurnFinished)
    assert [(t.reasoning, t.text) for t in turns] == [
        ("Add them.", ""),
        ("It is 5.", "The sum is 5."),
    ]
    assert events[-1].output == "The sum is 5."
    # The second request sends the first reply back with its reasoning_content.
    sent = model.prompts[1][-2]
    assert isinstance(sent, AIMessage)
    assert sent.additional_kwargs["reasoning_content"] == "Add them."
