"""The in-memory channel layer, with its expiry sweep paid per second rather than per message.

Channels' :class:`channels.layers.InMemoryChannelLayer` calls ``_clean_expired`` on every
``receive`` and every ``group_send``, and that walks every channel and every group of the
process: with N sockets listening, each message costs O(N), so a process relaying
messages to N sockets spends O(N²) (4% of the server's CPU at 50 conversations in
bench/load.py, more at 200; docs/benchmarks.md, "Where a run's CPU goes").

:class:`InMemoryChannelLayer` keeps the same rules and pays them differently:

- a message older than ``expiry`` is never delivered: ``receive`` drops the expired
  messages at the head of its own channel (and, as Channels does, removes that channel
  from every group) before it waits;
- the walk over every channel (a message expired on a channel nobody reads, such as a
  socket that stopped reading) and every group (a membership older than
  ``group_expiry`` ends) runs at most once every ``clean_interval`` seconds, so such a
  message may linger up to ``clean_interval`` past its expiry before its channel leaves
  its groups, instead of until the next message of the process.

Configured in ``project/settings.py`` (the in-memory branch of ``CHANNEL_LAYERS``).
"""

from __future__ import annotations

import time
from typing import Any

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer


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

    async def flush(self) -> None:
        """Drop every channel and group, and let the next call walk again."""
        await super().flush()
        self._next_clean = float("-inf")
