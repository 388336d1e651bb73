"""What the loop does once per run instead of once per turn, and that nothing changed by it.

The loop binds the model once (twice with a forced ``tool_choice``), appends each turn's
steps to the scratchpad instead of rebuilding it, counts each message's tokens once,
awaits a lone tool call in place and keeps one deadline timer for all its model turns
(docs/benchmarks.md, "The agent loop per step"). These tests pin the behaviour those
shortcuts must keep; the speed itself is ``bench/loop.py``'s business.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool

from agents.context import ContextWindow
from agents.events import RunFinished, RunStatus, StepStatus, TextDelta, ToolCallFinished
from agents.model_turn import merged_message
from agents.runtime import RunLimits, run
from agents.strategies import StrategyOptions, get_strategy
from agents.strategies.base import ToolAgentAction
from agents.strategies.react import format_react, format_react_final
from agents.strategies.structured_chat import format_structured, format_structured_final
from agents.strategies.xml import format_xml, format_xml_final
from agents.timing import Deadline
from agents.tool_calls import ToolCallBatch, ToolLimits
from tests.fakes import ScriptedChatModel, tool_call
from tests.timing import WAIT_S


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class CountingModel(ScriptedChatModel):
    """A scripted model that counts its ``bind_tools`` and ``bind`` calls."""

    binds: list[dict[str, Any]] = []

    def bind_tools(self, tools, **kwargs):
        self.binds.append({"tools": [t.name for t in tools], **kwargs})
        return super().bind_tools(tools, **kwargs)


def native_script(steps: int) -> list[AIMessage]:
    calls = [
        AIMessage("", tool_calls=[tool_call("add", {"a": i, "b": 100}, f"call_{i}")])
        for i in range(steps)
    ]
    return [*calls, AIMessage(f"The last sum was {steps - 1 + 100}.")]


WRITERS = {
    "react": (format_react, format_react_final),
    "structured_chat": (format_structured, format_structured_final),
    "xml": (format_xml, lambda answer: format_xml_final(answer)),
}


def text_script(name: str, steps: int) -> list[AIMessage]:
    call, final = WRITERS[name]
    return [
        *[AIMessage(call("add", {"a": i, "b": 100}, "Add the next one.")) for i in range(steps)],
        AIMessage(final("Done.")),
    ]


async def collect(model, strategy, *, context=None, steps=4):
    messages = [SystemMessage("You add numbers."), HumanMessage("Add them.")]
    limits = RunLimits(max_iterations=steps + 1)
    return [
        event
        async for event in run(
            model, [add], messages, strategy=strategy, limits=limits, context=context
        )
    ]


async def test_a_run_binds_the_model_once_when_every_turn_binds_alike():
    model = CountingModel(script=native_script(4), binds=[])
    events = await collect(model, get_strategy("tool_calling"))

    assert events[-1].status is RunStatus.SUCCEEDED
    assert model.binds == [{"tools": ["add"]}]
    assert len(model.calls) == 5  # five turns, all with the tools
    assert all(call["tools"] == ["add"] for call in model.calls)


async def test_a_forced_tool_choice_binds_the_first_turn_apart_and_the_rest_once():
    model = CountingModel(script=native_script(4), binds=[])
    strategy = get_strategy("tool_calling", StrategyOptions(tool_choice="required"))
    await collect(model, strategy)

    assert model.binds == [{"tools": ["add"], "tool_choice": "required"}, {"tools": ["add"]}]
    assert [call.get("tool_choice") for call in model.calls] == ["required"] + [None] * 4


@pytest.mark.parametrize("name", ["tool_calling", *sorted(WRITERS)])
async def test_each_turn_s_scratchpad_is_what_formatting_every_step_so_far_gives(name):
    """The scratchpad is appended to turn by turn; it must equal a rebuild from all steps."""
    script = native_script(3) if name == "tool_calling" else text_script(name, 3)
    model = ScriptedChatModel(script=script)
    strategy = get_strategy(name)
    context = ContextWindow(max_tokens=100_000)
    events = await collect(model, strategy, context=context, steps=3)
    assert events[-1].status is RunStatus.SUCCEEDED

    prompt_length = len(model.prompts[0])
    scratchpads = [prompt[prompt_length:] for prompt in model.prompts]
    assert [len(pad) for pad in scratchpads] == [0, 2, 4, 6]
    for earlier, later in itertools.pairwise(scratchpads):
        assert later[: len(earlier)] == earlier  # only appended to
    # Every message the model was shown was counted once, as a whole request would be.
    last = model.prompts[-1]
    assert context.total(last) == sum(context.counter(message) for message in last)


async def test_a_scratchpad_that_outgrows_the_window_still_ends_the_run_as_counted():
    model = ScriptedChatModel(script=native_script(50))
    context = ContextWindow(max_tokens=1_200, reply_tokens=100)
    events = await collect(model, get_strategy("tool_calling"), context=context, steps=50)

    end = events[-1]
    assert isinstance(end, RunFinished) and end.status is RunStatus.FAILED
    assert "does not fit the model's context window" in end.error
    # The turn that did not fit was never sent; every turn sent fitted.
    assert len(model.prompts) == end.iterations
    assert all(context.total(prompt) <= context.budget for prompt in model.prompts)


def test_fit_with_the_scratchpad_s_count_given_equals_fit_counting_it():
    prompt = [SystemMessage("s"), HumanMessage("q " * 50)]
    pad = [AIMessage("a " * 40), HumanMessage("o " * 40)]
    counted = ContextWindow(max_tokens=10_000)
    given = ContextWindow(max_tokens=10_000)

    assert given.fit(prompt, pad, scratchpad_tokens=given.total(pad)) == counted.fit(prompt, pad)
    with pytest.raises(Exception, match="does not fit") as too_big:
        ContextWindow(max_tokens=200).fit(prompt, pad, scratchpad_tokens=10_000)
    assert too_big.value.needed > 10_000


async def test_cancelling_a_run_while_it_waits_for_the_model_is_a_cancel_not_a_time_out():
    release = asyncio.Event()  # never set: the model stops answering mid-stream
    model = ScriptedChatModel(script=[AIMessage("one two three")], gates={1: release})
    first_delta = asyncio.Event()

    async def consume():
        async for event in run(model, [add], [HumanMessage("q")],
                               limits=RunLimits(model_timeout_s=WAIT_S)):  # fmt: skip
            if isinstance(event, TextDelta):
                first_delta.set()

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(first_delta.wait(), timeout=WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def answer() -> str:
    return "on time"


async def test_a_deadline_charges_only_the_waits_never_the_caller_s_time_between_them():
    with pytest.raises(TimeoutError):  # a wait that never ends spends the budget
        async with Deadline(0.01) as deadline:
            assert await deadline.wait(answer()) == "on time"
            await asyncio.sleep(0.05)  # the caller's own work, five budgets long: not charged
            assert not deadline.expired
            assert await deadline.wait(answer()) == "on time"
            await deadline.wait(asyncio.Event().wait())
    assert deadline.expired
    with pytest.raises(TimeoutError):  # and every later wait fails at once
        await deadline.wait(answer())


async def test_a_deadline_that_comes_during_a_wait_raises_time_out_and_leaves_the_task_usable():
    with pytest.raises(TimeoutError):
        async with Deadline(0.01) as deadline:
            await deadline.wait(asyncio.Event().wait())
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0)  # no cancellation left over for the next await


async def test_a_deadline_whose_cancel_was_swallowed_is_not_waited_past():
    """A chunk that came although the deadline's cancel did (the stream swallowed it),
    and that gave the caller nothing: the next wait raises, it does not wait unarmed."""

    async def swallowing() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "a chunk after all"
        return "never"

    with pytest.raises(TimeoutError):
        async with Deadline(0.01) as deadline:
            deadline.arm()
            assert await swallowing() == "a chunk after all"
            deadline.arm()  # the next wait
            await asyncio.Event().wait()  # never reached
    assert asyncio.current_task().cancelling() == 0


async def test_a_deadline_is_not_fooled_by_time_spent_between_waits():
    """Time spent outside the waits is not charged: the whole budget is still there for a
    wait after it."""
    started = 0.0
    with pytest.raises(TimeoutError):
        async with Deadline(0.05) as deadline:
            await deadline.wait(answer())
            await asyncio.sleep(0.1)  # twice the budget, outside any wait
            started = asyncio.get_running_loop().time()
            await deadline.wait(asyncio.Event().wait())
    # the whole budget was still there for this wait (a lower bound: never a premise on speed)
    assert asyncio.get_running_loop().time() - started >= 0.05 - 0.005


async def test_each_model_turn_has_its_whole_time_limit_however_long_the_turns_before_it_waited():
    """Each turn has its own deadline: two turns that each wait for most of the limit
    both finish (a budget shared by the run's turns would end the second)."""
    model = ScriptedChatModel(
        script=[AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2}, "c1")]),
                [AIMessageChunk(content="It is 3.")]],
        # Before each turn's one chunk: 0.6 of the limit, with 0.4 s to spare for a busy
        # machine (0.1 of 0.15 left too little); the two together are over the limit.
        delay_s=0.6,
    )  # fmt: skip
    events = [event async for event in run(model, [add], [HumanMessage("q")],
                                           limits=RunLimits(model_timeout_s=1.0))]  # fmt: skip
    assert events[-1].status is RunStatus.SUCCEEDED, events[-1].error
    assert asyncio.current_task().cancelling() == 0


async def test_a_deadline_shorter_than_one_before_it_ends_its_wait():
    async with Deadline(3600) as deadline:
        await deadline.wait(answer())  # an hour of budget, nearly all left

    async def next_turn() -> None:  # in a task of its own, as a run's is
        async with Deadline(0.01) as later:
            await later.wait(asyncio.Event().wait())

    waiting = asyncio.ensure_future(next_turn())
    done, _ = await asyncio.wait({waiting}, timeout=WAIT_S)
    assert done, "the shorter budget did not end the wait"
    with pytest.raises(TimeoutError):
        waiting.result()


async def test_a_turn_after_one_that_timed_out_waits_again():
    with pytest.raises(TimeoutError):
        async with Deadline(0.01) as deadline:
            await deadline.wait(asyncio.Event().wait())
    assert deadline.expired
    async with Deadline(WAIT_S) as deadline:
        assert not deadline.expired
        assert await deadline.wait(answer()) == "on time"
    assert asyncio.current_task().cancelling() == 0


def test_the_merged_message_keeps_the_provider_s_id_and_drops_only_chunk_fields():
    chunk = AIMessageChunk(
        content="Hi", id="chatcmpl-1",
        tool_call_chunks=[{"name": "add", "args": '{"a": 1, "b": 2}', "id": "c1", "index": 0}],
        response_metadata={"finish_reason": "tool_calls"},
    )  # fmt: skip
    closing = AIMessageChunk(content="", chunk_position="last", id="lc_run--x")
    message = merged_message(chunk + closing, usage_metadata={"input_tokens": 3,
                             "output_tokens": 1, "total_tokens": 4})  # fmt: skip

    assert message.id == "chatcmpl-1"
    assert message.tool_calls == [{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1",
                                   "type": "tool_call"}]  # fmt: skip
    assert message.response_metadata["finish_reason"] == "tool_calls"
    assert message.usage_metadata["total_tokens"] == 4
    assert message.text == "Hi"


async def test_the_closing_chunk_changes_nothing_in_the_turn_s_message():
    """The ids langchain-core gives a stream (``lc_run--``) and a provider's both survive
    the merge of the empty closing chunk it appends to every stream."""
    for given_id in (None, "chatcmpl-7"):
        chunks = [AIMessageChunk(content="Done", id=given_id)]
        model = ScriptedChatModel(script=[chunks])
        events = await collect(model, get_strategy("tool_calling"), steps=0)
        raw_id = next(e for e in events if type(e).__name__ == "ModelTurnFinished").raw["id"]
        assert raw_id == given_id or (given_id is None and raw_id.startswith("lc_run-"))
        assert events[-1].output == "Done"


def _batch(tool_, timeout_s: float, call_id: str = "c1") -> ToolCallBatch:
    action = ToolAgentAction(tool=tool_.name, tool_input={}, log="", message_log=[],
                             tool_call_id=call_id)  # fmt: skip
    limits = ToolLimits(timeout_s=timeout_s, max_observation_chars=1_000,
                        max_result_chars=1_000)  # fmt: skip
    return ToolCallBatch([action], {tool_.name: tool_}, iteration=1, limits=limits)


async def _run_batch(batch: ToolCallBatch) -> ToolCallFinished:
    events = [event async for event in batch.run()]
    assert isinstance(events[-1], ToolCallFinished)
    return events[-1]


@tool
async def quick() -> str:
    """Answer at once."""
    return "done"


@tool
async def hang() -> str:
    """Never answer."""
    await asyncio.Event().wait()
    return "never"


async def test_a_quick_tool_call_then_a_hanging_one_each_get_their_own_time_out():
    assert (await _run_batch(_batch(quick, WAIT_S))).result == "done"
    timed_out = await _run_batch(_batch(hang, 0.01))
    assert timed_out.status is StepStatus.ERROR and timed_out.error_type == "TimeoutError"
    assert asyncio.current_task().cancelling() == 0
    assert (await _run_batch(_batch(quick, WAIT_S))).result == "done"  # the task is usable


async def test_a_tool_call_is_timed_out_from_its_own_start_not_an_earlier_call_s():
    await _run_batch(_batch(quick, 0.01))
    await asyncio.sleep(0.02)  # the earlier call's time-out has passed
    gate = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take longer than the earlier call's time-out, far less than its own."""
        await asyncio.sleep(0.03)
        gate.set()
        return "slow"

    assert (await _run_batch(_batch(quick, 0.01))).result == "done"
    assert (await _run_batch(_batch(slow, WAIT_S))).result == "slow"
    assert gate.is_set()


async def test_cancelling_a_task_waiting_on_a_tool_call_is_a_cancel_not_a_time_out():
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.ensure_future(_run_batch(_batch(wait_forever, WAIT_S)))
    await asyncio.wait_for(started.wait(), timeout=WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_native_reply_s_actions_equal_validated_ones_and_own_their_arguments():
    """The native parser builds its actions unvalidated (ToolAgentAction.of_fields)."""
    from agents.strategies.base import ToolAgentAction
    from agents.strategies.tool_calling import ToolCallingStrategy

    message = AIMessage(
        "", tool_calls=[tool_call("add", {"a": 1, "b": 2}, "c1")],
        invalid_tool_calls=[{"name": "add", "args": '{"a": 1', "id": "c2", "error": "cut",
                             "type": "invalid_tool_call"}],
    )  # fmt: skip
    invalid, valid = ToolCallingStrategy().parse(message)

    assert valid == ToolAgentAction(tool="add", tool_input={"a": 1, "b": 2}, log="",
                                    message_log=[message], tool_call_id="c1")  # fmt: skip
    assert valid.tool_input is not message.tool_calls[0]["args"]
    assert invalid.tool_input == '{"a": 1' and invalid.error_type == "InvalidToolCall"
    assert invalid == ToolAgentAction(**{**invalid.__dict__})


def test_one_chunk_s_plain_counts_are_the_response_s_usage_copied_and_completed():
    from agents.model_turn import response_usage

    reported = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 0}
    usage = response_usage([reported])

    assert usage == {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    assert reported["total_tokens"] == 0  # the chunk's own dict is left as it was
    nested = {"input_tokens": 7, "input_token_details": {"cache_read": 2}, "x": None}
    assert response_usage([nested]) == {"input_tokens": 7, "input_token_details": {"cache_read": 2}}


async def test_a_turn_s_chunks_are_merged_once_not_once_a_chunk(monkeypatch):
    """LangChain's ``+`` builds and validates a whole message per merge: a reply of 600
    chunks is merged in three (one per ``MERGE_EVERY`` and the rest), as langchain-core's
    own ``astream`` merges its chunks once, and comes out as merging them one by one
    would."""
    from langchain_core.messages import ai

    from agents import model_turn

    merges: list[int] = []
    add = ai.add_ai_message_chunks

    def counted(left, *others):  # type: ignore[no-untyped-def]
        merges.append(len(others))
        return add(left, *others)

    words = [f"w{i} " for i in range(600)]
    one_by_one = AIMessageChunk(content=words[0], id="chatcmpl-9")
    for word in words[1:]:
        one_by_one = one_by_one + AIMessageChunk(content=word, id="chatcmpl-9")
    monkeypatch.setattr(ai, "add_ai_message_chunks", counted)
    chunks = [AIMessageChunk(content=word, id="chatcmpl-9") for word in words]
    model = ScriptedChatModel(script=[chunks])
    events = await collect(model, get_strategy("tool_calling"), steps=0)

    # langchain-core's astream merges its 600 chunks once for its callbacks (599 others);
    # ours: 600 chunks after the first (599 and the closing one) in two whole batches
    # and the rest.
    assert merges == [256, 256, 599, 88]
    assert model_turn.MERGE_EVERY == 256
    finished = next(e for e in events if type(e).__name__ == "ModelTurnFinished")
    assert finished.text == one_by_one.content
    assert finished.raw["id"] == "chatcmpl-9"
