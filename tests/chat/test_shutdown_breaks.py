"""Faults found trying to break the graceful stop (chat/shutdown.py) through a socket.

On SIGTERM the graceful stop takes the process's run tasks, then Daphne cancels every
consumer. A consumer cancelled after it stored a message's run but before it started the
run's task (while it publishes the run's first fragment, or while the store call is in
the ORM thread: a queue of about 0.5 s p95 under load, docs/benchmarks.md) leaves a run
row ``running`` that no task will end: the conversation refuses new messages ("still
working") until another process's sweep, 61-70 s later, which is what the graceful stop
was built to avoid. The consumer now ends such a run as cancelled itself.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage

from chat import shutdown
from chat.models import AgentRun
from chat.runs import CANCELLED
from tests.chat.test_consumer import connect, make_conversation
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_consumer_killed_between_storing_a_run_and_starting_it_leaves_no_run_going(
    scripted_model, monkeypatch
):
    scripted_model.script = [AIMessage("Hello.")]
    reached = asyncio.Event()

    async def stuck_publish(self, html: str) -> None:
        if not reached.is_set():
            reached.set()  # the run row is stored; its task is not started yet
            await asyncio.Event().wait()

    monkeypatch.setattr("chat.live.GroupPublisher.publish", stuck_publish)
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "Hi"}))
    await asyncio.wait_for(reached.wait(), WAIT_S)

    # SIGTERM: the graceful stop looks at the run tasks, then Daphne kills the consumers.
    stopping = asyncio.ensure_future(shutdown.finish_runs(grace_s=0))
    communicator.future.cancel()
    await asyncio.wait_for(asyncio.gather(communicator.future, return_exceptions=True), WAIT_S)
    await asyncio.wait_for(stopping, WAIT_S)

    statuses = await database_sync_to_async(
        lambda: list(AgentRun.objects.values_list("status", flat=True))
    )()
    assert statuses and "running" not in statuses


async def test_a_consumer_killed_while_its_run_is_being_stored_leaves_no_run_going(
    scripted_model, monkeypatch
):
    import threading

    from chat import consumers

    scripted_model.script = [AIMessage("Hello.")]
    in_thread, go_on = threading.Event(), threading.Event()
    real = consumers._accept_message

    def slow_accept(**kwargs):
        in_thread.set()
        go_on.wait(WAIT_S)  # the ORM thread's queue, under load
        return real(**kwargs)

    monkeypatch.setattr("chat.consumers._accept_message", slow_accept)
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "Hi"}))
    await asyncio.get_running_loop().run_in_executor(None, in_thread.wait, WAIT_S)

    stopping = asyncio.ensure_future(shutdown.finish_runs(grace_s=0))
    communicator.future.cancel()
    await asyncio.sleep(0)  # the cancel reaches the consumer while the store call runs
    go_on.set()
    await asyncio.wait_for(asyncio.gather(communicator.future, return_exceptions=True), WAIT_S)
    await asyncio.wait_for(stopping, WAIT_S)

    statuses = await database_sync_to_async(
        lambda: list(AgentRun.objects.values_list("status", "error"))
    )()
    assert statuses == [("cancelled", CANCELLED)]
