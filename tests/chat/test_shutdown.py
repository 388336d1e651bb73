"""A stopping server process (chat.owner.RunOwner.finish_runs) lets its runs finish for a
while, then ends the rest as cancelled at once instead of leaving them to the stale-run sweep. The
whole stop, with Daphne and SIGTERM, is in tests/deploy/test_two_processes.py."""

from __future__ import annotations

import asyncio
import sys

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from chat import owner
from chat.models import AgentRun, Conversation
from chat.owner import running_tasks
from chat.runs import CANCELLED, create_run
from tests.fakes import tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

STARTED: dict[str, asyncio.Event] = {}


@tool
async def endless_lookup(town: str) -> str:
    """Look a town up, forever."""
    STARTED["event"].set()
    await asyncio.Event().wait()  # answers only by being cancelled
    return town


@database_sync_to_async
def start(content: str) -> int:
    from django.contrib.auth.models import User

    user = User.objects.create_user("alice", password="pw")
    conversation = Conversation.objects.create(owner=user)
    return create_run(conversation_id=conversation.pk, content=content).pk


@database_sync_to_async
def stored(run_id: int) -> AgentRun:
    return AgentRun.objects.get(pk=run_id)


async def test_a_run_still_going_after_the_grace_is_cancelled_and_recorded_at_once(
    scripted_model, monkeypatch
):
    STARTED["event"] = asyncio.Event()
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [endless_lookup])
    scripted_model.script = [
        AIMessage("Looking.", tool_calls=[tool_call("endless_lookup", {"town": "Suzhou"}, "c1")]),
        AIMessage("never reached"),
    ]
    run_id = await start("Suzhou?")
    owner.current().start(run_id, listeners=[])
    await asyncio.wait_for(STARTED["event"].wait(), WAIT_S)

    assert await owner.current().finish_runs(grace_s=0) == (0, 1)

    assert running_tasks() == set()
    run = await stored(run_id)
    assert run.status == "cancelled"
    assert run.error == CANCELLED  # "the server stopped it", not "at your request"


async def test_a_run_that_ends_within_the_grace_is_let_finish(scripted_model):
    scripted_model.script = [AIMessage("Hello.")]
    run_id = await start("Hi")
    owner.current().start(run_id, listeners=[])

    assert await owner.current().finish_runs(grace_s=WAIT_S) == (1, 0)

    assert (await stored(run_id)).status == "succeeded"


async def test_with_no_run_going_the_stop_does_not_wait():
    assert await owner.current().finish_runs(grace_s=3600) == (0, 0)


class FakeReactor:
    """Records the triggers added, as Twisted's reactor would run them."""

    def __init__(self) -> None:
        self.triggers: list[tuple[str, str]] = []

    def addSystemEventTrigger(self, phase: str, event: str, callable, *args) -> None:
        self.triggers.append((phase, event))

    def callWhenRunning(self, callable, *args) -> None:
        self.triggers.append(("when", "running"))


def test_install_opens_the_owner_with_the_reactor_and_finishes_runs_before_it_stops(
    settings, monkeypatch
):
    reactor = FakeReactor()
    monkeypatch.setitem(sys.modules, "twisted.internet.reactor", reactor)
    settings.AGENT_GRACEFUL_SHUTDOWN = True
    assert owner.install() is True
    assert reactor.triggers == [("when", "running"), ("before", "shutdown")]

    reactor.triggers.clear()
    settings.AGENT_GRACEFUL_SHUTDOWN = False
    assert owner.install() is True
    assert reactor.triggers == [("when", "running")]  # the owner opens all the same

    settings.AGENT_GRACEFUL_SHUTDOWN = True
    monkeypatch.delitem(sys.modules, "twisted.internet.reactor")
    assert owner.install() is False  # manage.py, the tests: no Daphne, nothing to do
