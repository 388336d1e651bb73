"""A run stays stoppable after a tool swallowed its time-out's cancellation
(agents.tool_calls.ToolTimer, agents.timing.Deadline).

A tool that swallows the time-out's cancellation (catches ``CancelledError`` and returns,
as a tool cleaning up after itself may, or Python 3.11's ``asyncio.wait_for`` when the
inner call ends at the same moment) left the run's task counted as cancelling: Stop, the
heartbeat's stop and the graceful stop all skip a task that is ``cancelling()``, so the
rest of that run could no longer be stopped. ``asyncio.timeout`` (before ToolTimer)
always took its own cancel back when it had fired.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agents.tool_calls import ToolTimer
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


async def test_a_timer_whose_cancel_was_swallowed_leaves_the_task_not_cancelling():
    timer = ToolTimer()
    try:
        assert await timer.run(swallowing(), 0.01) == "cleaned up and returned"
    finally:
        timer.close()
    assert asyncio.current_task().cancelling() == 0


async def test_a_time_out_cancel_that_was_swallowed_gives_its_count_back_like_asyncio_timeout():
    async with asyncio.timeout(0.01):
        assert await swallowing() == "cleaned up and returned"
    assert asyncio.current_task().cancelling() == 0  # what ToolTimer must match


@tool
async def cleanup_lookup(town: str) -> str:
    """Look a town up; on a time-out, clean up and say so."""
    return await swallowing()


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

    deadline = Deadline(0.01)
    try:
        assert await deadline.wait(swallowing()) == "cleaned up and returned"
        with pytest.raises(TimeoutError):  # the budget is spent: the next wait says so
            await deadline.wait(asyncio.sleep(0))
    finally:
        deadline.cancel()
    assert asyncio.current_task().cancelling() == 0


async def test_a_stop_during_a_timed_out_tool_call_is_still_a_stop():
    """The timer's cancel and a Stop at once: the Stop wins, and is not eaten."""
    timer = ToolTimer()
    task = asyncio.current_task()

    async def call() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # the timer's
            task.cancel()  # the Stop, while the call cleans up
            await asyncio.Event().wait()

    with pytest.raises(asyncio.CancelledError):
        await timer.run(call(), 0.01)
    timer.close()
    assert task.uncancel() == 0  # only the Stop's cancel is left
