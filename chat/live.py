"""Publish a run's fragments to every socket watching its conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from chat import fragments, store
from chat.recorder import Update

# The channel-layer messages a conversation's group carries (handled by chat.consumers).
FRAGMENT_MESSAGE_TYPE = "run.fragment"  # {"html": ...}: relay to the page
CANCEL_MESSAGE_TYPE = "run.cancel"  # {"run_id": ...}: cancel it where it runs
DELETED_MESSAGE_TYPE = "conversation.deleted"  # close the socket (4404)

Addressed = tuple[int, str]
"""A fragment and the conversation whose pages it is for: ``(conversation_id, html)``."""


def group_name(conversation_id: int) -> str:
    """Return the channel-layer group of a conversation's sockets."""
    return f"conversation-{conversation_id}"


class GroupPublisher:
    """A run listener that sends each update's fragment to the conversation's group.

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
        # (step, target element, offset, parts)
        self._held: tuple[int, str, int | None, list[str]] | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def publish(self, html: str) -> None:
        """Send ``html`` to every socket of the group."""
        await self.channel_layer.group_send(
            self.group, {"type": FRAGMENT_MESSAGE_TYPE, "html": html}
        )

    async def __call__(self, update: Update) -> None:
        async with self._lock:
            streamed = update.streamed
            key = (streamed.step_id, streamed.target) if streamed is not None else None
            if streamed is not None and not streamed.whole and self.flush_s > 0:
                if self._held is not None and self._held[:2] != key:
                    await self._send_held()  # another element's text goes first
                if self._held is None:
                    self._held = (streamed.step_id, streamed.target, streamed.offset, [])
                self._held[3].append(streamed.text)
                self._schedule(self.flush_s)
                return
            if (
                streamed is not None
                and streamed.whole
                and self._held is not None
                and (self._held[:2] == key)
            ):
                self._held = None  # the snapshot holds that text
            else:
                await self._send_held()
            if update.html:
                await self.publish(update.html)

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
            step_id, target, offset, parts = held
            await self.publish(fragments.text_delta(step_id, "".join(parts), offset, target=target))


def interrupt_stale_runs(*, now: datetime, conversation_id: int | None = None) -> list[Addressed]:
    """Mark runs of a dead process interrupted and render what their pages need (sync).

    See :func:`chat.store.runs_interrupt_stale`; each run is rendered whole, in the same
    call that loaded it.
    """
    runs = store.runs_interrupt_stale(now=now, conversation_id=conversation_id)
    return [(run.conversation_id, fragments.run_ended(run)) for run in runs]


async def publish_each(channel_layer: Any, addressed: Iterable[Addressed]) -> None:
    """Send each fragment to its conversation's sockets."""
    for conversation_id, html in addressed:
        await GroupPublisher(channel_layer, conversation_id).publish(html)


def publish_each_sync(addressed: list[Addressed]) -> None:
    """Like :func:`publish_each`, from sync code (views), on the default layer."""
    if addressed:
        async_to_sync(publish_each)(get_channel_layer(), addressed)


async def conversation_deleted(
    channel_layer: Any, conversation_id: int, *, run_id: int | None
) -> None:
    """Tell the sockets of a conversation its owner deleted, in every process, to close.

    ``run_id``, a run still going (its stop already stored, see
    :func:`chat.store.run_request_cancel`), is cancelled in the process that runs it first.
    """
    group = group_name(conversation_id)
    if run_id is not None:
        await channel_layer.group_send(group, {"type": CANCEL_MESSAGE_TYPE, "run_id": run_id})
    await channel_layer.group_send(group, {"type": DELETED_MESSAGE_TYPE})


def conversation_deleted_sync(conversation_id: int, *, run_id: int | None) -> None:
    """Like :func:`conversation_deleted`, from sync code (views), on the default layer."""
    async_to_sync(conversation_deleted)(get_channel_layer(), conversation_id, run_id=run_id)


def conversation_renamed_sync(conversation_id: int, html: str) -> None:
    """Send a renamed conversation's title to its open pages, from sync code (views)."""
    publish_each_sync([(conversation_id, html)])
