"""A run stays stoppable after a tool swallowed its time-out's cancellation (a tool call's
``asyncio.timeout``), and a model turn's deadline (agents.timing.Deadline) likewise.

A tool that swallows the time-out's cancellation (catches ``CancelledError`` and returns,
as a tool cleaning up after itself may, or Python 3.11's ``asyncio.wait_for`` when the
inner call ends at the same moment) once left the run's task counted as cancelling: Stop,
the heartbeat's stop and the graceful stop all skip a task that is ``cancelling()``, so
the rest of that run could no longer be stopped. ``asyncio.timeout`` takes its own cancel
back when it has fired; these tests keep it that way.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agents.strategies.base import ToolAgentAction
from agents.tool_calls import ToolCallBatch, ToolLimits
from chat import owner
from chat.runs import create_run
from tests.chat.conftest import wait_for_runs
from tests.chat.test_cancel import run_state
from tests.chat.test_consumer import make_conversation
from tests.fakes import tool_call

RUN: dict[str, int] = {}


async def swallowing() -> str:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        return "cleaned up and returned"
    return "never"


@tool
async def cleanup_lookup(town: str) -> str:
    """Look a town up; on a time-out, clean up and say so."""
    return await swallowing()


def _batch(tool_, timeout_s: float) -> ToolCallBatch:
    action = ToolAgentAction(tool=tool_.name, tool_input={"town": "Suzhou"}, log="",
                             message_log=[], tool_call_id="c1")  # fmt: skip
    limits = ToolLimits(timeout_s=timeout_s, max_observation_chars=1_000,
                        max_result_chars=1_000)  # fmt: skip
    return ToolCallBatch([action], {tool_.name: tool_}, iteration=1, limits=limits)


async def test_a_tool_call_whose_time_out_was_swallowed_leaves_the_task_not_cancelling():
    events = [event async for event in _batch(cleanup_lookup, 0.01).run()]
    assert events[-1].result == "cleaned up and returned"
    assert asyncio.current_task().cancelling() == 0


async def test_a_time_out_cancel_that_was_swallowed_gives_its_count_back_like_asyncio_timeout():
    async with asyncio.timeout(0.01):
        assert await swallowing() == "cleaned up and returned"
    assert asyncio.current_task().cancelling() == 0  # what a tool call's time-out must match


@tool
async def stop_myself(town: str) -> str:
    """Press Stop on the run from inside its own tool call, then answer."""
    assert owner.current().stop_local(RUN["id"])
    for _ in range(5):
        await asyncio.sleep(0)
    return f"{town}: done"


@pytest.mark.django_db(transaction=True)
async def test_stop_still_works_after_a_tool_swallowed_its_time_out(
    scripted_model, monkeypatch, settings
):
    settings.AGENT_TOOL_TIMEOUT_S = 0.1
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [cleanup_lookup, stop_myself])
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("cleanup_lookup", {"town": "Suzhou"}, "c1")]),
        AIMessage("", tool_calls=[tool_call("stop_myself", {"town": "Suzhou"}, "c2")]),
        AIMessage("never reached: the run was stopped"),
    ]
    _, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    RUN["id"] = run.pk
    owner.current().start(run.pk, listeners=[])
    await wait_for_runs()
    status, _, _ = await run_state(run.pk)
    assert status == "cancelled"


async def test_a_deadline_whose_cancel_was_swallowed_leaves_the_task_not_cancelling():
    from agents.timing import Deadline

    with pytest.raises(TimeoutError):  # the budget is spent, whatever the wait returned
        async with Deadline(0.01) as deadline:
            await deadline.wait(swallowing())
    with pytest.raises(TimeoutError):  # and the next wait says so
        await deadline.wait(asyncio.sleep(0))
    assert asyncio.current_task().cancelling() == 0


async def test_a_stop_during_a_timed_out_tool_call_is_still_a_stop():
    """The time-out's cancel and a Stop at once: the Stop wins, and is not eaten."""
    task = asyncio.current_task()

    @tool
    async def call(town: str) -> str:
        """Look a town up; pressed Stop while cleaning up after its time-out."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # the time-out's
            task.cancel()  # the Stop, while the call cleans up
            await asyncio.Event().wait()
        return "never"

    with pytest.raises(asyncio.CancelledError):
        async for _ in _batch(call, 0.01).run():
            pass
    assert task.uncancel() == 0  # only the Stop's cancel is left
