"""The in-memory channel layer, with its expiry sweep paid per second rather than per message.

Channels' :class:`channels.layers.InMemoryChannelLayer` calls ``_clean_expired`` on every
``receive`` and every ``group_send``, and that walks every channel and every group of the
process: with N sockets listening, each message costs O(N), so a process relaying
messages to N sockets spends O(N²) (docs/benchmarks.md, "Where a run's CPU goes").

:class:`InMemoryChannelLayer` keeps the same rules and pays them differently:

- a message older than ``expiry`` is never delivered: ``receive`` drops the expired
  messages at the head of its own channel (and, as Channels does, removes that channel
  from every group) before it waits;
- the walk over every channel (a message expired on a channel nobody reads, such as a
  socket that stopped reading) and every group (a membership older than
  ``group_expiry`` ends) runs at most once every ``clean_interval`` seconds, so such a
  message may linger up to ``clean_interval`` past its expiry before its channel leaves
  its groups, instead of until the next message of the process.

It also sends a group's message without a task per channel, and copies a message of
flat values (a fragment) without ``deepcopy`` (bench/layer.py compares it with Channels'
layer; docs/benchmarks.md, "Where a run's CPU goes").

Configured in ``project/settings.py`` (the in-memory branch of ``CHANNEL_LAYERS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

# Value types a message may hold that no receiver can change: copied shallowly.
FLAT = frozenset({str, int, float, bool, type(None)})


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    """Channels' in-memory layer, its full expiry walk run at most every ``clean_interval``.

    ``clean_interval`` is in seconds (default 1.0; 0 walks at every call, as Channels
    does). ``full_cleans`` counts the walks (for tests and benchmarks). Other options
    (``expiry``, ``group_expiry``, ``capacity``, ``channel_capacity``) are Channels'.
    Raises ``ValueError`` for a negative ``clean_interval``.
    """

    def __init__(self, *, clean_interval: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if clean_interval < 0:
            raise ValueError(f"clean_interval must be >= 0 seconds, not {clean_interval!r}")
        self.clean_interval = clean_interval
        self.full_cleans = 0
        self._next_clean = float("-inf")

    async def receive(self, channel: str) -> dict[str, Any]:
        """Receive the next unexpired message of ``channel`` (Channels' ``receive``)."""
        self.require_valid_channel_name(channel)
        self._clean_channel(channel)
        return await super().receive(channel)

    def _clean_channel(self, channel: str) -> None:
        """Drop the expired messages at the head of ``channel``; an expired one removes
        the channel from every group, as Channels' full walk does."""
        queue = self.channels.get(channel)
        if queue is None:
            return
        now = time.time()
        expired = False
        while not queue.empty() and queue._queue[0][0] < now:
            queue.get_nowait()
            expired = True
        if expired:
            self._remove_from_groups(channel)
            if queue.empty():
                self.channels.pop(channel, None)

    def _clean_expired(self) -> None:
        """Walk every channel and group (Channels' sweep) unless one ran within the last
        ``clean_interval`` seconds."""
        now = time.monotonic()
        if now < self._next_clean:
            return
        self._next_clean = now + self.clean_interval
        self.full_cleans += 1
        super()._clean_expired()

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Put ``message`` on ``channel`` (Channels' ``send``): a copy the receiver may
        change. Raises ``ChannelFull`` when the channel holds ``capacity`` messages.

        A message whose values are all strings, numbers, booleans or None (a fragment:
        ``{"type": ..., "html": ...}``) is copied shallowly, which is as good as
        Channels' ``deepcopy`` for immutable values and a fifth of its cost.
        """
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        flat = all(type(value) in FLAT for value in message.values())
        copied = dict(message) if flat else deepcopy(message)
        try:
            queue.put_nowait((time.time() + self.expiry, copied))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every channel of ``group`` (Channels' ``group_send``); a
        full channel misses it, as there.

        Channels starts a task per channel and waits for them all; a send here never
        waits (``put_nowait``), so the channels are sent to one after the other.
        """
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, {})):
            with contextlib.suppress(ChannelFull):
                await self.send(channel, message)

    async def flush(self) -> None:
        """Drop every channel and group, and let the next call walk again."""
        await super().flush()
        self._next_clean = float("-inf")
