"""Publish a run's fragments to every socket watching its conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from agents.events import TextDelta
from chat import fragments
from chat.models import AgentRun
from chat.recorder import Update

FRAGMENT_MESSAGE_TYPE = "run.fragment"


def group_name(conversation_id: int) -> str:
    """Return the channel-layer group of a conversation's sockets."""
    return f"conversation-{conversation_id}"


class GroupPublisher:
    """A run listener that renders each update and sends it to the conversation's group.

    Streamed text is coalesced: consecutive deltas of one model turn are held for up to
    ``flush_s`` seconds (``CHAT_STREAM_FLUSH_MS``) and sent as one fragment, so a model
    streaming a token every few milliseconds costs a message to every socket only every
    ``flush_s``, not per token. Any other update sends the held text first, so fragments
    keep their order; a whole-text snapshot replaces it (the snapshot holds that text).
    """

    def __init__(
        self, channel_layer: Any, conversation_id: int, *, flush_s: float | None = None
    ) -> None:
        self.channel_layer = channel_layer
        self.group = group_name(conversation_id)
        self.flush_s = settings.CHAT_STREAM_FLUSH_MS / 1000 if flush_s is None else flush_s
        self._held: tuple[int, int | None, list[str]] | None = None  # step, offset, parts
        self._flush_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def publish(self, html: str) -> None:
        """Send ``html`` to every socket of the group."""
        await self.channel_layer.group_send(
            self.group, {"type": FRAGMENT_MESSAGE_TYPE, "html": html}
        )

    async def __call__(self, update: Update) -> None:
        async with self._lock:
            event = update.event
            if (
                isinstance(event, TextDelta)
                and update.text_snapshot is None
                and update.step_id is not None
                and self.flush_s > 0
            ):
                if self._held is not None and self._held[0] != update.step_id:
                    await self._send_held()  # another turn's text goes first
                if self._held is None:
                    self._held = (update.step_id, update.text_offset, [])
                self._held[2].append(event.text)
                self._schedule(self.flush_s)
                return
            if update.text_snapshot is not None:
                self._held = None  # the snapshot holds that text
            else:
                await self._send_held()
            html = fragments.for_update(update)
            if html:
                await self.publish(html)

    def _schedule(self, delay: float) -> None:
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.get_running_loop().create_task(self._flush_later(delay))

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        async with self._lock:
            await self._send_held()

    async def _send_held(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            step_id, offset, parts = held
            await self.publish(fragments.text_delta(step_id, "".join(parts), offset))


async def publish_run_statuses(channel_layer: Any, runs: Iterable[AgentRun]) -> None:
    """Send each ended run to its conversation's sockets (e.g. once interrupted)."""
    for run in runs:
        await GroupPublisher(channel_layer, run.conversation_id).publish(fragments.run_ended(run))


def publish_run_statuses_sync(runs: list[AgentRun]) -> None:
    """Like :func:`publish_run_statuses`, from sync code (views), on the default layer."""
    if runs:
        async_to_sync(publish_run_statuses)(get_channel_layer(), runs)
