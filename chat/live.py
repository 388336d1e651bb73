"""Publish a run's fragments to every socket watching its conversation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from chat import fragments, store
from chat.recorder import StreamedText, Update

logger = logging.getLogger(__name__)

# The channel-layer messages a conversation's group carries (handled by chat.consumers).
FRAGMENT_MESSAGE_TYPE = "run.fragment"  # {"html": ...}: relay to the page
DELETED_MESSAGE_TYPE = "conversation.deleted"  # close the socket (4404)

Addressed = tuple[int, str]
"""A fragment and the conversation whose pages it is for: ``(conversation_id, html)``."""

Element = tuple[int, str]
"""A model turn's streamed element: ``(step_id, target)``, target ``text`` or ``reasoning``."""


def group_name(conversation_id: int) -> str:
    """Return the channel-layer group of a conversation's sockets."""
    return f"conversation-{conversation_id}"


class StreamLoad:
    """How many streamed elements (a turn's text or reasoning) this process is sending.

    An element counts while it has sent a text fragment in the last :attr:`window_s`
    seconds. :meth:`interval` shares a budget of text fragments a second
    (``CHAT_STREAM_FRAMES_PER_S``) among them: the least time between two fragments of
    one element. A few conversations get the rate cap alone; at 200 a process spends its
    CPU on runs and pages instead of a relay per token, each page getting bigger pieces
    of the same text, as the Redis pub/sub layer's publishes already coalesce.
    """

    window_s = 1.0
    longest_s = 0.25  # an element waits at most this long for its next fragment

    def __init__(self) -> None:
        self._sent_at: dict[tuple[str, Element], float] = {}
        self._pruned_at = 0.0

    def sent(self, group: str, element: Element, now: float) -> None:
        """Count a text fragment of ``element`` (of ``group``'s run) sent at ``now``."""
        self._sent_at[(group, element)] = now

    def interval(self, floor_s: float, now: float) -> float:
        """Return the least seconds between an element's text fragments: ``floor_s``
        (``CHAT_STREAM_FLUSH_MS``), or the budget's share when more elements stream
        than it allows at that rate, at most :attr:`longest_s`."""
        budget = settings.CHAT_STREAM_FRAMES_PER_S
        if not budget:
            return floor_s
        if now - self._pruned_at > 0.1:
            self._pruned_at = now
            stale = [key for key, at in self._sent_at.items() if now - at > self.window_s]
            for key in stale:
                del self._sent_at[key]
        return min(max(floor_s, len(self._sent_at) / budget), max(floor_s, self.longest_s))


STREAM_LOAD = StreamLoad()
"""The process's :class:`StreamLoad`, shared by every :class:`GroupPublisher`."""


@dataclass
class _Outgoing:
    """One fragment waiting for the line: a whole ``html`` fragment (with ``sent``, the
    future its publisher's caller awaits), or text deltas of ``element`` held together
    (``parts``, starting at ``offset``), which later deltas of that element may join."""

    html: str = ""
    sent: asyncio.Future[None] | None = None
    element: Element | None = None
    offset: int | None = None
    parts: list[str] = field(default_factory=list)

    def render(self) -> str:
        if self.element is None:
            return self.html
        step_id, target = self.element
        return fragments.text_delta(step_id, "".join(self.parts), self.offset, target=target)


class GroupPublisher:
    """A run listener that sends each update's fragment to the conversation's group.

    Streamed text is coalesced adaptively, as Nagle's algorithm does for TCP segments
    (RFC 896): a delta goes at once when nothing of this publisher is in flight, so the
    first token of a turn reaches the page without waiting; deltas that arrive while a
    ``group_send`` is still being awaited are held, joined per element (a turn's text or
    its reasoning) and sent as one fragment as soon as the line is free. A model slower
    than the channel layer therefore costs a fragment per token, as a bare consumer does,
    and a loaded process (whose sends take longer) sends fewer, bigger fragments instead
    of falling behind.

    Fragments leave in the order the updates came, except that held text of different
    elements may pass each other (each goes to its own place on the page): a delta joins
    its element's held text unless a whole fragment has queued since, so interleaved
    reasoning and text are held as two fragments, not one per switch; any other update
    queues behind what is held; a whole-text snapshot drops the held deltas of its
    element (it holds their text). Each fragment's ``data-offset`` is its first
    delta's. A call with a delta returns at once (the run never waits for the network on a
    token); a call with any other fragment returns once that fragment (and so everything
    before it) has been sent, and raises what ``group_send`` raised for it. A failing
    ``group_send`` of held text is logged and dropped (the next whole-text snapshot
    repairs the page, which ignores a delta that does not start where its text ends); the
    updates after it still go.

    ``flush_s`` (``CHAT_STREAM_FLUSH_MS`` / 1000 by default, 10 ms; 0 turns it off) is the
    least time between two fragments of one element's text after its first: a cap on the
    rate of text fragments, for the browser (which swaps each one) and for deployments
    that pay per message; with many replies streaming in the process it is their share
    of ``CHAT_STREAM_FRAMES_PER_S`` (:class:`StreamLoad`). Held text still goes early
    when any other fragment queues behind it.
    """

    def __init__(
        self, channel_layer: Any, conversation_id: int, *, flush_s: float | None = None
    ) -> None:
        self.channel_layer = channel_layer
        self.group = group_name(conversation_id)
        self.flush_s = settings.CHAT_STREAM_FLUSH_MS / 1000 if flush_s is None else flush_s
        self._queue: deque[_Outgoing] = deque()
        self._sender: asyncio.Task[None] | None = None
        self._queued = asyncio.Event()  # set when the queue grows (ends a flush_s wait)
        self._last_sent: dict[Element, float] = {}  # monotonic s its last text send began

    async def publish(self, html: str) -> None:
        """Send ``html`` to every socket of the group now (not queued behind held text)."""
        await self.channel_layer.group_send(
            self.group, {"type": FRAGMENT_MESSAGE_TYPE, "html": html}
        )

    async def __call__(self, update: Update) -> None:
        streamed = update.streamed
        if streamed is not None and not streamed.whole:
            self._hold(streamed)
            return
        if streamed is not None:  # a snapshot: the element's whole text so far
            element = (streamed.step_id, streamed.target)
            self._queue = deque(item for item in self._queue if item.element != element)
        if not update.html:
            return
        sent = asyncio.get_running_loop().create_future()
        # Retrieved here too, so a caller cancelled while waiting leaves no warning behind.
        sent.add_done_callback(lambda future: future.cancelled() or future.exception())
        self._enqueue(_Outgoing(html=update.html, sent=sent))
        # Shielded: a run cancelled while waiting must not cancel the fragment itself.
        await asyncio.shield(sent)

    async def drain(self) -> None:
        """Return once everything queued so far has been sent (or failed)."""
        while self._sender is not None and not self._sender.done():
            await asyncio.shield(self._sender)

    def _hold(self, streamed: StreamedText) -> None:
        element = (streamed.step_id, streamed.target)
        # Joined to its element's held text if no whole fragment queued after it: a turn's
        # reasoning and text, interleaved, are two held fragments, not one per switch.
        for held in reversed(self._queue):
            if held.element is None:
                break
            if held.element == element:
                held.parts.append(streamed.text)  # not sent yet: the line is busy
                return
        self._enqueue(_Outgoing(element=element, offset=streamed.offset, parts=[streamed.text]))

    def _enqueue(self, item: _Outgoing) -> None:
        self._queue.append(item)
        self._queued.set()
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_queued())

    def _sent_at(self, item: _Outgoing) -> float:
        """Return when the last text fragment of ``item``'s element began to be sent."""
        assert item.element is not None
        return self._last_sent.get(item.element, -1e9)

    async def _send_queued(self) -> None:
        """Send the queue's fragments one at a time, in order, until it is empty."""
        try:
            while self._queue:
                if all(held.element is not None for held in self._queue):
                    # Only held text: the element sent longest ago goes first, once the
                    # rate cap allows, unless a new element or a whole fragment queues.
                    item = min(self._queue, key=self._sent_at)
                    now = time.monotonic()
                    wait = self._sent_at(item) + STREAM_LOAD.interval(self.flush_s, now) - now
                    if wait > 0:
                        self._queued.clear()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._queued.wait(), wait)
                        continue
                    self._queue.remove(item)
                else:
                    item = self._queue.popleft()
                started = time.monotonic()  # the cap spaces sends' starts: a rate
                try:
                    await self.publish(item.render())
                except Exception as exc:
                    if item.sent is None:
                        logger.exception("publishing streamed text to %s failed", self.group)
                    elif not item.sent.done():
                        item.sent.set_exception(exc)
                else:
                    if item.sent is not None and not item.sent.done():
                        item.sent.set_result(None)
                if item.element is not None:
                    self._last_sent[item.element] = started
                    STREAM_LOAD.sent(self.group, item.element, started)
        finally:
            # Cancelled (the loop is closing): no caller may wait forever for its fragment.
            for item in self._queue:
                if item.sent is not None and not item.sent.done():
                    item.sent.cancel()


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


def conversation_deleted_sync(conversation_id: int) -> None:
    """Tell the sockets of a conversation its owner deleted, in every process, to close
    (from sync code: views)."""
    async_to_sync(get_channel_layer().group_send)(
        group_name(conversation_id), {"type": DELETED_MESSAGE_TYPE}
    )


def conversation_renamed_sync(conversation_id: int, html: str) -> None:
    """Send a renamed conversation's title to its open pages, from sync code (views)."""
    publish_each_sync([(conversation_id, html)])
