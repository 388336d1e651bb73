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

A message a full channel cannot take (``capacity``, per channel) is not delivered, as in
Channels' layer, but no longer without a word: :class:`Undelivered` counts it, and logs
a WARNING naming the group and channel, at most once per ``WARN_INTERVAL_S``. The count
is the process's (:data:`UNDELIVERED`, shown by ``/healthz``). The rows are the truth,
fragments only news of them: a channel that missed a group's message is sent
``{"type": "layer.missed"}`` once it has read what it holds, and its socket sends the
page the list a reload shows, so the tab is right without one. channels-redis' core
layer drops over its capacity too, with an INFO line; :class:`RedisOverCapacity` counts
those in the same place (docs/deploy.md, "Redis"), but cannot tell which socket missed
them.

Configured in ``project/settings.py`` (the in-memory branch of ``CHANNEL_LAYERS``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

logger = logging.getLogger(__name__)

# The message a channel that missed a group's message gets once it has read its backlog.
MISSED = "layer.missed"
# Value types a message may hold that no receiver can change: copied shallowly.
FLAT = frozenset({str, int, float, bool, type(None)})
# Seconds between two warnings of undelivered messages: a flood logs one line per interval.
WARN_INTERVAL_S = 10.0
# Targets (group and channel) one warning names, the most missed first.
WARN_TARGETS = 5
UNDELIVERED_WARNING = (
    "channel layer over capacity: %d message(s) not delivered (%s); %d since the process "
    "started (at most one such line every %g s). Their pages show them after a reload."
)


class Undelivered:
    """Count messages a channel layer dropped, and warn of them at most every interval.

    :meth:`add` counts ``n`` messages for a target (``"group 'conversation-7', channel
    'specific.x!y'"``). ``count`` is the total since the process started. The first drop
    is logged at once (WARNING, ``chat.layers``); later ones within ``warn_interval_s``
    seconds are summed and logged together when the interval is over (at the next drop,
    or by a timer of the running event loop). ``time.monotonic`` seconds.
    """

    def __init__(self, *, warn_interval_s: float = WARN_INTERVAL_S) -> None:
        self.count = 0
        self.warn_interval_s = warn_interval_s
        self._pending: Counter[str] = Counter()
        self._next_warning = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def add(self, target: str, n: int = 1) -> None:
        """Count ``n`` undelivered messages of ``target``; warn now or schedule a warning."""
        self.count += n
        self._pending[target] += n
        now = time.monotonic()
        if now >= self._next_warning:
            self.warn()
        elif self._timer is None or self._timer_loop.is_closed():
            # A closed loop (async_to_sync's own, in a sync caller) never runs its timer.
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: the next drop after the interval warns
                return
            self._timer_loop = loop
            self._timer = loop.call_later(self._next_warning - now, self.warn)

    def warn(self) -> None:
        """Log the drops counted since the last warning, if any (one WARNING line)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        targets = self._pending.most_common()
        named = ", ".join(f"{target}: {n}" for target, n in targets[:WARN_TARGETS])
        if len(targets) > WARN_TARGETS:
            named += f", and {len(targets) - WARN_TARGETS} more"
        logger.warning(
            UNDELIVERED_WARNING,
            sum(self._pending.values()),
            named,
            self.count,
            self.warn_interval_s,
        )
        self._pending.clear()
        self._next_warning = time.monotonic() + self.warn_interval_s


# The process's count: every layer of the process reports here, /healthz reads it.
UNDELIVERED = Undelivered()


class RedisOverCapacity(logging.Filter):
    """Count channels-redis' "N of M channels over capacity in group G" in :data:`UNDELIVERED`.

    channels-redis' core layer (``RedisChannelLayer.group_send``) drops a message for
    each channel of a group whose queue is full and logs only that line, at INFO, on the
    ``channels_redis.core`` logger. This filter, attached to that logger (with its level
    at INFO, or the line is never made: project/settings.py ``LOGGING``), counts the N
    and hides the INFO line, :class:`Undelivered`'s WARNING taking its place. Other
    records pass unchanged.
    """

    LINE = "%s of %s channels over capacity in group %s"

    def __init__(self, name: str = "", undelivered: Undelivered | None = None) -> None:
        super().__init__(name)
        self.undelivered = undelivered or UNDELIVERED

    def filter(self, record: logging.LogRecord) -> bool:
        """Return False for an over-capacity line after counting it, else True."""
        if record.msg != self.LINE or not isinstance(record.args, tuple):
            return True
        try:
            dropped, channels, group = record.args
            self.undelivered.add(f"group {group!r} (of {channels} channels)", int(dropped))
        except (TypeError, ValueError):  # not the line of the version this was written for
            return True
        return False


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    """Channels' in-memory layer, its full expiry walk run at most every ``clean_interval``.

    ``clean_interval`` is in seconds (default 1.0; 0 walks at every call, as Channels
    does). ``full_cleans`` counts the walks (for tests and benchmarks). A message a full
    channel could not take is counted in ``undelivered`` (default: the process's
    :data:`UNDELIVERED`). Other options (``expiry``, ``group_expiry``, ``capacity``,
    ``channel_capacity``) are Channels'. Raises ``ValueError`` for a negative
    ``clean_interval``.
    """

    def __init__(
        self,
        *,
        clean_interval: float = 1.0,
        undelivered: Undelivered | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if clean_interval < 0:
            raise ValueError(f"clean_interval must be >= 0 seconds, not {clean_interval!r}")
        self.clean_interval = clean_interval
        # Channels owed a MISSED message, with when they missed (seconds, time.time()).
        self.missed: dict[str, float] = {}
        self.full_cleans = 0
        self._next_clean = float("-inf")
        self.undelivered = undelivered or UNDELIVERED

    async def receive(self, channel: str) -> dict[str, Any]:
        """Receive the next unexpired message of ``channel`` (Channels' ``receive``).

        A channel that missed a group's message (:meth:`group_send`) is given, once the
        messages it holds are read, ``{"type": "layer.missed"}``: its consumer then sends
        its page what a reload would show (``chat.consumers.ChatConsumer.layer_missed``).
        """
        self.require_valid_channel_name(channel)
        self._clean_channel(channel)
        if channel in self.missed:
            queue = self.channels.get(channel)
            if queue is None or queue.empty():
                del self.missed[channel]
                return {"type": MISSED}
        return await super().receive(channel)

    def _clean_channel(self, channel: str) -> None:
        """Drop the expired messages at the head of ``channel``, which is being read: they
        are counted as undelivered and the channel is owed a MISSED message; it stays in
        its groups (its reader is alive, only slow)."""
        queue = self.channels.get(channel)
        if queue is not None:
            self._drop_expired(channel, queue, time.time())

    def _drop_expired(self, channel: str, queue: asyncio.Queue[Any], now: float) -> int:
        """Drop the messages of ``channel`` older than ``expiry`` (at its head); count
        them and mark the channel as owed a MISSED message; return how many."""
        dropped = expired = 0
        while not queue.empty() and queue._queue[0][0] < now:
            _, message = queue.get_nowait()
            dropped += 1
            if message.get("type") != MISSED:
                expired += 1
        if expired:
            self.undelivered.add(f"channel {channel!r} (expired unread)", expired)
            self.missed[channel] = now
        # Only a queue this emptied goes (as in Channels): an empty one may have a
        # receiver waiting on it, and a new queue in its place would never be read.
        if dropped and queue.empty():
            self.channels.pop(channel, None)
        return expired

    def _clean_expired(self) -> None:
        """Walk every channel and group (Channels' sweep) unless one ran within the last
        ``clean_interval`` seconds."""
        now = time.monotonic()
        if now < self._next_clean:
            return
        self._next_clean = now + self.clean_interval
        self.full_cleans += 1
        # Channels' walk, counting what expires: a channel whose message expired unread
        # leaves its groups (it is taken for dead), and is owed a MISSED message should
        # it read again (its consumer then joins again and catches up).
        stamp = time.time()
        for channel, queue in list(self.channels.items()):
            if self._drop_expired(channel, queue, stamp):
                self._remove_from_groups(channel)
        timeout = int(stamp) - self.group_expiry
        for members in self.groups.values():
            for name, joined in list(members.items()):
                if joined and joined < timeout:
                    members.pop(name, None)
        for channel, when in list(self.missed.items()):
            if when < timeout:  # a channel nobody read for a day: gone
                del self.missed[channel]

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        """Put ``message`` on ``channel`` (Channels' ``send``): a copy the receiver may
        change. Raises ``ChannelFull`` when the channel holds ``capacity`` messages.

        A message whose values are all strings, numbers, booleans or None (a fragment:
        ``{"type": ..., "html": ...}``) is copied shallowly, which is as good as
        Channels' ``deepcopy`` for immutable values and a fifth of its cost.
        """
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        if not self._put(channel, message):
            self.undelivered.add(f"channel {channel!r}")
            raise ChannelFull(channel)

    def _put(self, channel: str, message: dict[str, Any]) -> bool:
        """Put a copy of ``message`` on ``channel``; return False when it is full."""
        assert "__asgi_channel__" not in message
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        flat = all(type(value) in FLAT for value in message.values())
        copied = dict(message) if flat else deepcopy(message)
        try:
            queue.put_nowait((time.time() + self.expiry, copied))
        except asyncio.QueueFull:
            return False
        return True

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every channel of ``group`` (Channels' ``group_send``); a
        full channel misses it, as there, and the miss is counted in ``undelivered``
        (and so logged, naming the group and the channel).

        Channels starts a task per channel and waits for them all; a send here never
        waits (``put_nowait``), so the channels are sent to one after the other.
        """
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, {})):
            self.require_valid_channel_name(channel)
            if not self._put(channel, message):
                self.undelivered.add(f"group {group!r}, channel {channel!r}")
                self.missed[channel] = time.time()

    async def group_discard(self, group: str, channel: str) -> None:
        """Remove ``channel`` from ``group`` (Channels' ``group_discard``); a channel that
        leaves is owed no catch-up."""
        self.missed.pop(channel, None)
        await super().group_discard(group, channel)

    async def flush(self) -> None:
        """Drop every channel and group, and let the next call walk again."""
        await super().flush()
        self.missed.clear()
        self._next_clean = float("-inf")
