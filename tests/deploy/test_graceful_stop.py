"""The graceful stop on two Daphne processes (PostgreSQL + Redis): a grace long enough
lets the run finish, seen from the other tab."""

from __future__ import annotations

import asyncio
import signal

import pytest

from chat.models import AgentRun
from tests.deploy.test_two_processes import (
    FINAL,
    RUNNING_TOOL_CALL,
    new_conversation,
    two_servers,  # noqa: F401 (the fixture)
    two_tabs,
)
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_sigterm_with_grace_lets_the_run_finish_and_the_other_tab_sees_it(two_servers):  # noqa: F811
    # Tool calls of 1.5 s, a grace far longer: SIGTERM mid-tool-call must not cancel.
    a, b = two_servers(
        DEMO_TOOL_DELAY_MS="1500", AGENT_SHUTDOWN_GRACE_S="120", AGENT_HEARTBEAT_S="3600",
        AGENT_STALE_AFTER_S="10800",
    )  # fmt: skip
    conversation_id, cookie = new_conversation(a)

    async def converse() -> str:
        async with two_tabs(a, b, conversation_id, cookie) as (tab_a, _, _):
            await tab_a.wait_for(RUNNING_TOOL_CALL, "a running tool call on A")
            b.process.send_signal(signal.SIGTERM)
            final = await tab_a.wait_for(FINAL, "the run's end on A")
            await asyncio.to_thread(b.process.wait, WAIT_S)
        return final.group(2)

    assert asyncio.run(converse()) == "succeeded"
    assert b.process.returncode == 0
    run = AgentRun.objects.get(conversation_id=conversation_id)
    assert run.status == "succeeded", run.error
