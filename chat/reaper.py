"""Mark runs of dead processes interrupted while nobody touches their conversation.

A run whose process died is found stale on a page load, a socket connecting or a new
message in its conversation; a tab already open (reconnected to another or a restarted
process) would otherwise show "Working…" until it is reloaded. Each server process runs
this sweep once it serves a socket: every ``AGENT_HEARTBEAT_S`` it marks stale runs
interrupted (:func:`chat.store.runs_interrupt_stale`, all conversations) and sends them to
their tabs. Several processes sweeping at once is harmless: the rows are locked and a run
is only interrupted once.

The same sweep moves paused runs on (:mod:`chat.approvals`): approvals past
``AGENT_APPROVAL_TIMEOUT_S`` expire (a denial the model reads), and every waiting run with
no call left waiting is resumed by the process that claims it first: decided in the
admin, expired, or decided in a process that died before resuming it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from agents.events import utcnow
from chat import store
from chat.live import GroupPublisher, interrupt_stale_runs, publish_each
from chat.runs import resume_ready

logger = logging.getLogger(__name__)

_task: asyncio.Task[None] | None = None


def ensure_started() -> None:
    """Start this process's sweep of stale runs, once per event loop."""
    global _task
    loop = asyncio.get_running_loop()
    if _task is None or _task.done() or _task.get_loop() is not loop:
        _task = loop.create_task(_sweep(), name="stale-run-sweep")


async def _sweep() -> None:
    """Every ``AGENT_HEARTBEAT_S``, mark stale runs interrupted and tell their tabs, then
    expire approvals and resume the runs ready to go on (:func:`sweep_approvals`)."""
    layer = get_channel_layer()
    while True:
        await asyncio.sleep(settings.AGENT_HEARTBEAT_S)
        try:
            interrupted = await database_sync_to_async(interrupt_stale_runs)(now=utcnow())
            await publish_each(layer, interrupted)
        except Exception:
            logger.exception("sweeping stale runs failed")
        try:
            await sweep_approvals(layer)
        except Exception:
            logger.exception("sweeping approvals failed")


def _ready(*, now: datetime) -> list[int]:
    """Expire the approvals past their time and return the runs ready to resume (sync)."""
    store.approvals_expire(now=now)
    return store.runs_ready()


async def sweep_approvals(layer: Any) -> list[int]:
    """Expire approvals past their time and resume every run ready to go on that this
    process claims first; return the ids it resumed."""
    ready = await database_sync_to_async(_ready)(now=utcnow())
    return await resume_ready(
        ready, lambda conversation_id: [GroupPublisher(layer, conversation_id)]
    )
