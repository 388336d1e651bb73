"""Runs in processes of their own: Daphne with ``CHAT_RUN_WORKERS=1`` serves the pages and
sockets, ``manage.py runowner`` runs the runs, on one PostgreSQL database and one Redis
channel layer (docs/deploy.md, "Runs in processes of their own").
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from agents.demo.scenarios import EXAMPLES
from chat.models import AgentRun
from chat.runs import CANCELLED
from scripts.serving import RUN_OWNER_READY, daphne, run_owner
from tests.deploy.shared import server_env
from tests.deploy.test_two_processes import (
    FINAL,
    RUNNING_TOOL_CALL,
    Server,
    Tab,
    asking,
    new_conversation,
)
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Deployment:
    """The web process, and ``start_owner()`` to start a run owner's process: it returns
    the process and its log."""

    web: Server
    start_owner: Callable[[], tuple[subprocess.Popen[bytes], Path]]


ACCEPTED = re.compile(r'<section class="run" id="run-(\d+)"')


def unclaimed(run_id: int) -> bool:
    """Return whether no run owner has claimed run ``run_id`` (from a thread of its own:
    the caller's event loop may not use the ORM; its connection is closed after)."""
    try:
        return AgentRun.objects.get(pk=run_id).owner_channel == ""
    finally:
        connection.close()


def owner_channel(log: Path) -> str:
    """Return the channel a run owner's log says it listens on."""
    line = next(line for line in log.read_text().splitlines() if RUN_OWNER_READY in line)
    return line.split(RUN_OWNER_READY, 1)[1].split()[0]


@pytest.fixture
def deployment(tmp_path) -> Iterator[Callable[..., Deployment]]:
    """Return ``start(**env)``: Daphne with ``CHAT_RUN_WORKERS=1`` on the test database and
    Redis, and a way to start run owners beside it; all stopped, logs printed, at the end."""
    env = server_env(CHAT_RUN_WORKERS="1")
    stack = ExitStack()

    def start(**extra: str) -> Deployment:
        web_env = {**env, **extra}
        log = tmp_path / "daphne.log"
        process, port = stack.enter_context(daphne(web_env, timeout_s=WAIT_S, log=log))

        def start_owner() -> tuple[subprocess.Popen[bytes], Path]:
            owner_log = tmp_path / f"runowner-{len(list(tmp_path.glob('runowner-*')))}.log"
            owner = stack.enter_context(run_owner(web_env, timeout_s=WAIT_S, log=owner_log))
            return owner, owner_log

        web = Server(url=f"http://127.0.0.1:{port}", log=log, process=process)
        return Deployment(web=web, start_owner=start_owner)

    with stack:
        yield start
    for log in sorted(tmp_path.glob("*.log")):
        print(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}")


def test_a_run_sent_to_the_web_process_is_run_by_a_run_owner_and_streams_to_the_tab(deployment):
    site = deployment()
    logs = [site.start_owner()[1], site.start_owner()[1]]
    conversation_id, cookie = new_conversation(site.web)

    async def converse() -> Tab:
        async with asking(site.web, conversation_id, cookie, EXAMPLES[0]) as tab:
            await tab.wait_for(FINAL, "the run's final status line")
        return tab

    tab = asyncio.run(converse())
    run = AgentRun.objects.get(conversation_id=conversation_id)
    assert run.status == "succeeded", run.error
    assert run.owner_channel in {owner_channel(log) for log in logs}
    received = "".join(tab.frames)
    for step in run.steps.all():
        assert f'id="step-{step.pk}"' in received
    assert FINAL.search(received).group(2) == "succeeded"


def test_a_run_sent_while_no_run_owner_runs_starts_when_one_does(deployment):
    # The start message reaches nobody (Redis' pub/sub keeps nothing): the run waits,
    # and the first run owner's sweep, two heartbeats on, starts it.
    site = deployment(AGENT_HEARTBEAT_S="1", AGENT_STALE_AFTER_S="600")
    conversation_id, cookie = new_conversation(site.web)

    async def converse() -> str:
        async with asking(site.web, conversation_id, cookie, EXAMPLES[0]) as tab:
            run_id = int((await tab.wait_for(ACCEPTED, "the message accepted")).group(1))
            assert await asyncio.to_thread(unclaimed, run_id)
            await asyncio.to_thread(site.start_owner)
            return (await tab.wait_for(FINAL, "the run's end, once a run owner runs")).group(2)

    assert asyncio.run(converse()) == "succeeded"


def test_a_run_owner_stopping_ends_its_runs_and_the_tab_sees_it(deployment):
    site = deployment(
        DEMO_TOOL_DELAY_MS="600000", AGENT_TOOL_TIMEOUT_S="900", AGENT_HEARTBEAT_S="3600",
        AGENT_STALE_AFTER_S="10800", AGENT_SHUTDOWN_GRACE_S="0",
    )  # fmt: skip
    owner, _ = site.start_owner()
    conversation_id, cookie = new_conversation(site.web)

    async def converse() -> str:
        async with asking(site.web, conversation_id, cookie, EXAMPLES[0]) as tab:
            await tab.wait_for(RUNNING_TOOL_CALL, "a running tool call")
            owner.send_signal(signal.SIGTERM)
            final = await tab.wait_for(FINAL, "the run's end after its owner stopped")
            await asyncio.to_thread(owner.wait, WAIT_S)
        return final.group(2)

    assert asyncio.run(converse()) == "cancelled"
    assert owner.returncode == 0  # stopped, not killed
    run = AgentRun.objects.get(conversation_id=conversation_id)
    assert run.status == "cancelled" and run.error == CANCELLED
