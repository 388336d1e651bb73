"""Mark runs of dead processes interrupted while nobody touches their conversation.

A run whose process died is found stale on a page load, a socket connecting or a new
message in its conversation; a tab already open (reconnected to another or a restarted
process) would otherwise show "Working…" until it is reloaded. Each server process runs
this sweep once it serves a socket: every ``AGENT_HEARTBEAT_S`` it marks stale runs
interrupted (:func:`chat.store.runs_interrupt_stale`, all conversations) and sends them to
their tabs. Several processes sweeping at once is harmless: the rows are locked and a run
is only interrupted once.
"""

from __future__ import annotations

import asyncio
import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from agents.events import utcnow
from chat.live import interrupt_stale_runs, publish_each

logger = logging.getLogger(__name__)

_task: asyncio.Task[None] | None = None


def ensure_started() -> None:
    """Start this process's sweep of stale runs, once per event loop."""
    global _task
    loop = asyncio.get_running_loop()
    if _task is None or _task.done() or _task.get_loop() is not loop:
        _task = loop.create_task(_sweep(), name="stale-run-sweep")


async def _sweep() -> None:
    """Every ``AGENT_HEARTBEAT_S``, mark stale runs interrupted and tell their tabs."""
    layer = get_channel_layer()
    while True:
        await asyncio.sleep(settings.AGENT_HEARTBEAT_S)
        try:
            interrupted = await database_sync_to_async(interrupt_stale_runs)(now=utcnow())
            await publish_each(layer, interrupted)
        except Exception:
            logger.exception("sweeping stale runs failed")
