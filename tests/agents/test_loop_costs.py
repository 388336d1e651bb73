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
from agents.events import RunFinished, RunStatus, TextDelta
from agents.model_turn import merged_message
from agents.runtime import RunLimits, run
from agents.strategies import StrategyOptions, get_strategy
from agents.strategies.react import format_react, format_react_final
from agents.strategies.structured_chat import format_structured, format_structured_final
from agents.strategies.xml import format_xml, format_xml_final
from agents.timing import Deadline
from agents.tool_calls import ToolTimer
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


async def test_a_deadline_charges_only_the_waits_never_the_caller_s_time_between_them():
    deadline = Deadline(0.01)

    async def answer() -> str:
        return "on time"

    assert await deadline.wait(answer()) == "on time"
    await asyncio.sleep(0.05)  # the caller's own work, five budgets long: not charged
    assert not deadline.expired
    assert await deadline.wait(answer()) == "on time"
    with pytest.raises(TimeoutError):  # a wait that never ends spends the budget
        await deadline.wait(asyncio.Event().wait())
    assert deadline.expired
    with pytest.raises(TimeoutError):  # and every later wait fails at once
        await deadline.wait(answer())
    deadline.cancel()


async def test_a_deadline_that_comes_during_a_wait_raises_time_out_and_leaves_the_task_usable():
    deadline = Deadline(0.01)
    with pytest.raises(TimeoutError):
        await deadline.wait(asyncio.Event().wait())
    deadline.cancel()
    assert asyncio.current_task().cancelling() == 0
    await asyncio.sleep(0)  # no cancellation left over for the next await


async def test_a_deadline_is_not_fooled_by_its_timer_coming_due_between_waits():
    """The timer is set for the first wait's budget; time spent outside the waits moves
    the true end later, and the timer, due during a later wait, is set again."""
    deadline = Deadline(0.05)

    async def answer() -> str:
        return "on time"

    await deadline.wait(answer())
    await asyncio.sleep(0.1)  # the first timer comes due here, outside any wait
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await deadline.wait(asyncio.Event().wait())
    # the whole budget was still there for this wait (a lower bound: never a premise on speed)
    assert asyncio.get_running_loop().time() - started >= 0.05 - 0.005
    deadline.cancel()


async def test_a_renewed_deadline_gives_the_next_turn_its_whole_budget_on_the_same_timer():
    """The run's one deadline, renewed per turn: the timer an earlier turn set comes due
    during a later turn's wait and is set again for what that turn has left."""
    deadline = Deadline(0.05)

    async def answer() -> str:
        return "on time"

    await deadline.wait(answer())  # the timer is set for 0.05 s from here
    deadline.renew(WAIT_S)
    # the first timer comes due during this wait: it must not end it
    assert await deadline.wait(asyncio.sleep(0.1, result="on time")) == "on time"
    assert not deadline.expired
    deadline.cancel()
    assert asyncio.current_task().cancelling() == 0


async def test_a_renewed_deadline_ends_a_turn_whose_budget_is_shorter_than_the_timer_set():
    deadline = Deadline(3600)

    async def answer() -> str:
        return "on time"

    await deadline.wait(answer())  # a timer an hour away

    async def next_turn() -> None:  # in a task of its own, which renewing makes the target
        deadline.renew(0.01)
        await deadline.wait(asyncio.Event().wait())

    waiting = asyncio.ensure_future(next_turn())
    done, _ = await asyncio.wait({waiting}, timeout=WAIT_S)
    assert done, "the renewed budget did not end the wait"
    with pytest.raises(TimeoutError):
        waiting.result()
    deadline.cancel()


async def test_a_deadline_renewed_after_it_expired_lets_the_next_turn_wait_again():
    deadline = Deadline(0.01)
    with pytest.raises(TimeoutError):
        await deadline.wait(asyncio.Event().wait())
    assert deadline.expired
    deadline.renew(WAIT_S)
    assert not deadline.expired

    async def answer() -> str:
        return "on time"

    assert await deadline.wait(answer()) == "on time"
    deadline.cancel()
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


async def test_the_closing_chunk_is_left_out_without_changing_the_turn_s_message():
    """The ids langchain-core gives a stream (``lc_run--``) and a provider's both survive."""
    for given_id in (None, "chatcmpl-7"):
        chunks = [AIMessageChunk(content="Done", id=given_id)]
        model = ScriptedChatModel(script=[chunks])
        events = await collect(model, get_strategy("tool_calling"), steps=0)
        raw_id = next(e for e in events if type(e).__name__ == "ModelTurnFinished").raw["id"]
        assert raw_id == given_id or (given_id is None and raw_id.startswith("lc_run-"))
        assert events[-1].output == "Done"


async def test_a_tool_timer_left_set_by_a_longer_call_still_times_out_a_shorter_one():
    timer = ToolTimer()

    async def quick() -> str:
        return "done"

    assert await timer.run(quick(), WAIT_S) == "done"  # leaves its timer set
    with pytest.raises(TimeoutError):
        await timer.run(asyncio.Event().wait(), 0.01)
    assert asyncio.current_task().cancelling() == 0
    assert await timer.run(quick(), WAIT_S) == "done"  # the task is usable
    timer.close()


async def test_a_tool_timer_due_for_an_earlier_call_waits_for_the_running_call_s_time_out():
    timer = ToolTimer()

    async def quick() -> str:
        return "done"

    await timer.run(quick(), 0.01)  # the timer stays set for 10 ms from now
    await asyncio.sleep(0.02)  # it fired with no call running, and lapsed
    gate = asyncio.Event()

    async def slow() -> str:
        await asyncio.sleep(0.03)  # past the first call's due time, long before its own
        gate.set()
        return "slow"

    assert await timer.run(quick(), 0.01) == "done"
    assert await timer.run(slow(), WAIT_S) == "slow"
    assert gate.is_set()
    timer.close()


async def test_cancelling_a_task_waiting_on_a_tool_timer_is_a_cancel_not_a_time_out():
    timer = ToolTimer()
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(timer.run(hang(), WAIT_S))
    await asyncio.wait_for(started.wait(), timeout=WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    timer.close()


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
