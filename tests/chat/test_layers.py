"""chat.layers.InMemoryChannelLayer: Channels' expiry rules, without a walk per message.

The clock is a fake (``time.time`` for expiry stamps, ``time.monotonic`` for the sweep's
interval), so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.layers import get_channel_layer

from chat.layers import MISSED, InMemoryChannelLayer, Undelivered
from tests.chat.conftest import FakeClock


async def receive_now(layer: InMemoryChannelLayer, channel: str) -> dict | None:
    """Return the message waiting on ``channel``, or None when none is (no waiting)."""
    task = asyncio.ensure_future(layer.receive(channel))
    for _ in range(3):
        await asyncio.sleep(0)
    if task.done():
        return task.result()
    task.cancel()
    return None


@pytest.mark.backends  # reads the layer the settings configure: Redis in that pass
def test_the_settings_use_this_layer_for_the_in_memory_case() -> None:
    layer = get_channel_layer()
    if os.environ.get("REDIS_URL"):  # CI's PostgreSQL + Redis pass: Redis pub/sub instead
        from channels_redis.pubsub import RedisPubSubChannelLayer

        assert isinstance(layer, RedisPubSubChannelLayer)
        return
    assert isinstance(layer, InMemoryChannelLayer)
    assert layer.clean_interval == 1.0


async def test_a_message_is_delivered_before_its_expiry(clock: FakeClock) -> None:
    layer = InMemoryChannelLayer(expiry=60)
    await layer.send("sock.1", {"type": "m", "n": 1})
    clock.now += 59
    assert await receive_now(layer, "sock.1") == {"type": "m", "n": 1}


async def test_an_expired_message_is_dropped_counted_and_its_reader_told(
    clock: FakeClock,
) -> None:
    layer = InMemoryChannelLayer(expiry=60, clean_interval=10, undelivered=Undelivered())
    await layer.group_add("conversation-1", "sock.1")
    await layer.group_add("conversation-2", "sock.1")
    await layer.send("sock.1", {"type": "old"})
    clock.now += 61
    # The sweep ran moments ago, so only the receive's own check can drop it.
    layer._next_clean = clock.now + 5
    assert await receive_now(layer, "sock.1") == {"type": MISSED}
    assert await receive_now(layer, "sock.1") is None
    assert layer.undelivered.count == 1
    # Its reader is alive (it reads): it stays in its groups.
    assert "sock.1" in layer.groups["conversation-1"]
    assert "sock.1" in layer.groups["conversation-2"]


async def test_a_channel_nobody_reads_leaves_its_groups_at_the_next_sweep(
    clock: FakeClock,
) -> None:
    layer = InMemoryChannelLayer(expiry=60, clean_interval=1)
    await layer.group_add("conversation-1", "sock.stuck")
    await layer.group_add("conversation-1", "sock.live")
    await layer.send("sock.stuck", {"type": "old"})
    clock.now += 61
    await layer.group_send("conversation-1", {"type": "new"})
    assert "sock.stuck" not in layer.groups["conversation-1"]
    assert await receive_now(layer, "sock.live") == {"type": "new"}


async def test_a_reader_waiting_on_an_empty_channel_gets_what_comes_after_a_sweep(
    clock: FakeClock,
) -> None:
    # A page left open with nothing to read: its socket waits on an empty queue while
    # the sweep walks every channel. The sweep once dropped that queue, and the next
    # message went to a new one nobody read (the live page stopped updating).
    layer = InMemoryChannelLayer(clean_interval=1)
    await layer.group_add("conversation-1", "sock.idle")
    waiting = asyncio.ensure_future(layer.receive("sock.idle"))
    for _ in range(3):
        await asyncio.sleep(0)
    sweeps = layer.full_cleans
    clock.now += 5
    await layer.group_send("conversation-2", {"type": "elsewhere"})
    assert layer.full_cleans == sweeps + 1
    await layer.group_send("conversation-1", {"type": "m"})
    assert await asyncio.wait_for(waiting, timeout=30) == {"type": "m"}


async def test_a_group_membership_ends_after_group_expiry(clock: FakeClock) -> None:
    layer = InMemoryChannelLayer(group_expiry=100, clean_interval=1)
    await layer.group_add("conversation-1", "sock.1")
    clock.now += 101
    await layer.group_send("conversation-1", {"type": "m"})
    assert await receive_now(layer, "sock.1") is None


async def test_group_send_reaches_every_member_and_only_them(clock: FakeClock) -> None:
    layer = InMemoryChannelLayer()
    await layer.group_add("conversation-1", "sock.a")
    await layer.group_add("conversation-1", "sock.b")
    await layer.group_add("conversation-2", "sock.c")
    await layer.group_send("conversation-1", {"type": "m"})
    assert await receive_now(layer, "sock.a") == {"type": "m"}
    assert await receive_now(layer, "sock.b") == {"type": "m"}
    assert await receive_now(layer, "sock.c") is None
    await layer.group_discard("conversation-1", "sock.a")
    await layer.group_send("conversation-1", {"type": "again"})
    assert await receive_now(layer, "sock.a") is None
    assert await receive_now(layer, "sock.b") == {"type": "again"}


async def test_many_messages_within_an_interval_walk_the_channels_once(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = InMemoryChannelLayer(clean_interval=1)
    sockets = [f"sock.{n}" for n in range(200)]
    for n, socket in enumerate(sockets):
        await layer.group_add(f"conversation-{n}", socket)
    for n, socket in enumerate(sockets):  # one message to each of 200 sockets, read back
        await layer.group_send(f"conversation-{n}", {"type": "m"})
        assert await receive_now(layer, socket) == {"type": "m"}
    assert layer.full_cleans == 1  # Channels' own layer: 400, each over every channel
    clock.now += 1
    await layer.group_send("conversation-0", {"type": "m"})
    assert layer.full_cleans == 2


async def test_a_full_channel_misses_a_group_message_and_the_others_get_it(
    clock: FakeClock,
) -> None:
    layer = InMemoryChannelLayer(capacity=1)
    await layer.group_add("conversation-1", "sock.full")
    await layer.group_add("conversation-1", "sock.free")
    await layer.send("sock.full", {"type": "first"})
    await layer.group_send("conversation-1", {"type": "second"})
    assert await receive_now(layer, "sock.full") == {"type": "first"}
    # Told it missed one (its consumer then sends the page what a reload shows), once.
    assert await receive_now(layer, "sock.full") == {"type": MISSED}
    assert await receive_now(layer, "sock.full") is None
    assert await receive_now(layer, "sock.free") == {"type": "second"}


async def test_a_receiver_that_changes_its_message_changes_no_one_elses(clock: FakeClock) -> None:
    layer = InMemoryChannelLayer()
    await layer.group_add("conversation-1", "sock.a")
    await layer.group_add("conversation-1", "sock.b")
    flat = {"type": "run.fragment", "html": "<div>"}
    nested = {"type": "m", "data": {"ids": [1, 2]}}
    await layer.group_send("conversation-1", flat)
    await layer.group_send("conversation-1", nested)
    first = await receive_now(layer, "sock.a")
    first["html"] = "changed"
    second = await receive_now(layer, "sock.a")
    second["data"]["ids"].append(3)
    assert flat == {"type": "run.fragment", "html": "<div>"}
    assert nested == {"type": "m", "data": {"ids": [1, 2]}}
    assert await receive_now(layer, "sock.b") == {"type": "run.fragment", "html": "<div>"}
    assert await receive_now(layer, "sock.b") == {"type": "m", "data": {"ids": [1, 2]}}


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="clean_interval"):
        InMemoryChannelLayer(clean_interval=-1)
