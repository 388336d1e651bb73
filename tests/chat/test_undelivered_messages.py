"""Messages a channel layer cannot deliver: counted, logged at most once per interval,
shown by /healthz, and what a page shows after a reload is the run whole.

The in-memory layer (chat.layers) drops a message for a full channel; channels-redis'
core layer drops over its capacity with an INFO line, counted through a logging filter.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import AsyncClient, Client

from chat import fragments
from chat import layers as chat_layers
from chat.layers import UNDELIVERED, InMemoryChannelLayer, RedisOverCapacity, Undelivered
from chat.live import group_name
from chat.models import AgentRun, AgentStep, Conversation
from tests.chat.conftest import FakeClock, wait_for_runs
from tests.chat.test_consumer import TRAVEL_QUESTION, connect, receive_until_finished
from tests.chat.test_layers import receive_now
from tests.timing import WAIT_S


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "chat.layers" and record.levelno == logging.WARNING
    ]


async def test_a_group_message_a_full_channel_misses_is_counted_and_logged_naming_it(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    layer = InMemoryChannelLayer(capacity=1, undelivered=Undelivered())
    await layer.group_add("conversation-7", "sock.full")
    await layer.group_add("conversation-7", "sock.free")
    await layer.send("sock.full", {"type": "first"})
    with caplog.at_level(logging.WARNING, logger="chat.layers"):
        await layer.group_send("conversation-7", {"type": "second"})
    assert layer.undelivered.count == 1
    [warning] = warnings_of(caplog)
    assert "1 message(s) not delivered" in warning
    assert "group 'conversation-7', channel 'sock.full': 1" in warning
    assert "sock.free" not in warning  # it got the message
    assert "1 since the process started" in warning


async def test_a_direct_send_to_a_full_channel_raises_and_is_counted(clock: FakeClock) -> None:
    layer = InMemoryChannelLayer(capacity=1, undelivered=Undelivered())
    await layer.send("sock.1", {"type": "first"})
    with pytest.raises(ChannelFull):
        await layer.send("sock.1", {"type": "second"})
    assert layer.undelivered.count == 1


async def test_a_flood_of_drops_logs_one_line_per_interval_with_the_sum(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    layer = InMemoryChannelLayer(capacity=1, undelivered=Undelivered(warn_interval_s=10))
    await layer.group_add("conversation-1", "sock.stuck")
    await layer.group_add("conversation-2", "sock.other")
    await layer.send("sock.stuck", {"type": "filler"})
    await layer.send("sock.other", {"type": "filler"})
    with caplog.at_level(logging.WARNING, logger="chat.layers"):
        for _ in range(1000):
            await layer.group_send("conversation-1", {"type": "m"})
        await layer.group_send("conversation-2", {"type": "m"})
        assert len(warnings_of(caplog)) == 1  # the first drop, at once
        clock.now += 10
        await layer.group_send("conversation-1", {"type": "m"})
    assert layer.undelivered.count == 1002
    first, second = warnings_of(caplog)
    assert "1 message(s) not delivered" in first
    assert "1001 message(s) not delivered (" in second
    assert "channel 'sock.stuck': 1000" in second and "channel 'sock.other': 1" in second
    assert "1002 since the process started" in second


async def test_drops_at_the_end_of_a_burst_are_logged_without_another_drop(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    undelivered = Undelivered(warn_interval_s=0.01)  # the timer runs on the loop's clock
    with caplog.at_level(logging.WARNING, logger="chat.layers"):
        undelivered.add("channel 'sock.1'")
        undelivered.add("channel 'sock.1'", 4)
        assert len(warnings_of(caplog)) == 1
        async with asyncio.timeout(WAIT_S):
            while len(warnings_of(caplog)) < 2:
                await asyncio.sleep(0.01)
    assert "4 message(s) not delivered" in warnings_of(caplog)[1]


def test_drops_held_back_when_their_event_loop_closed_are_logged_from_the_next_one(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A sync caller's ``async_to_sync`` runs a loop of its own and closes it: the timer
    scheduled there never runs, so the next loop must schedule its own."""
    undelivered = Undelivered(warn_interval_s=0.01)

    async def drop_twice() -> None:
        undelivered.add("channel 'sock.1'")
        undelivered.add("channel 'sock.1'")  # held back; its timer dies with this loop

    async def drop_and_wait_for_the_warning() -> None:
        undelivered.add("channel 'sock.1'")
        async with asyncio.timeout(WAIT_S):
            while len(warnings_of(caplog)) < 2:
                await asyncio.sleep(0.01)

    with caplog.at_level(logging.WARNING, logger="chat.layers"):
        asyncio.run(drop_twice())
        asyncio.run(drop_and_wait_for_the_warning())
    assert "2 message(s) not delivered" in warnings_of(caplog)[1]


def test_channels_redis_over_capacity_lines_are_counted_and_become_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted = Undelivered()
    counting = RedisOverCapacity(undelivered=counted)
    redis_logger = logging.getLogger("channels_redis.core.test")
    redis_logger.addFilter(counting)
    try:
        with caplog.at_level(logging.INFO):
            redis_logger.setLevel(logging.INFO)
            redis_logger.info(RedisOverCapacity.LINE, 3, 5, "conversation-4")
            redis_logger.info("something else")
    finally:
        redis_logger.removeFilter(counting)
    assert counted.count == 3
    assert "group 'conversation-4' (of 5 channels): 3" in warnings_of(caplog)[0]
    assert [r.getMessage() for r in caplog.records if r.name.startswith("channels_redis")] == [
        "something else"
    ]


async def test_the_redis_core_layers_drops_over_capacity_are_counted(
    redis_url, caplog, monkeypatch
):
    """channels-redis' own group_send, its capacity reached, through the filter the
    settings attach to its logger."""
    from channels_redis.core import RedisChannelLayer

    # The process's counter warns at most once an interval: a test before this one in the
    # same process may have warned just now (the file run alone on Redis failed so).
    UNDELIVERED.warn()
    monkeypatch.setattr(UNDELIVERED, "_next_warning", float("-inf"))

    layer = RedisChannelLayer(hosts=[redis_url], capacity=1, prefix="undelivered-test")
    before = UNDELIVERED.count
    try:
        channel = await layer.new_channel()
        await layer.group_add("conversation-9", channel)
        with caplog.at_level(logging.WARNING, logger="chat.layers"):
            for _ in range(3):
                await layer.group_send("conversation-9", {"type": "m"})
        assert UNDELIVERED.count - before == 2
        assert any("group 'conversation-9'" in line for line in warnings_of(caplog))
    finally:
        await layer.flush()
        await layer.close_pools()


@pytest.fixture
def small_layer(settings):
    """The in-memory layer with room for 3 messages per channel (Channels rebuilds the
    layer when CHANNEL_LAYERS changes)."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "chat.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 3, "expiry": 300, "clean_interval": 1.0},
        }
    }
    return get_channel_layer()


@pytest.mark.django_db(transaction=True)
async def test_a_tab_that_missed_fragments_sees_the_whole_run_after_a_reload(small_layer, caplog):
    """A socket that stops reading (a tab whose process stalls) fills its channel, so most
    of a run's fragments are dropped for it; they are counted and logged, /healthz says
    how many, the tab that reads sees the end, and a reload shows every step and the
    answer, since the page is rendered from the rows."""
    user = await database_sync_to_async(User.objects.create_user)("alice", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    stalled = "specific.stalled!tab"
    await small_layer.group_add(group_name(conversation.pk), stalled)
    before = UNDELIVERED.count

    reading = await connect(conversation.pk, user)
    await reading.connect()
    with caplog.at_level(logging.WARNING, logger="chat.layers"):
        await reading.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION}))
        frames = await receive_until_finished(reading)
        await wait_for_runs()
    await reading.disconnect()

    assert "status-succeeded" in frames[-1]
    dropped = UNDELIVERED.count - before
    assert dropped > 10  # a run is dozens of fragments; the stalled channel took 3
    assert small_layer.channels[stalled].qsize() == 3
    named = [line for line in warnings_of(caplog) if group_name(conversation.pk) in line]
    assert named and stalled in named[0]
    health = (await AsyncClient().get("/healthz")).json()
    assert health["undelivered"] >= before + dropped

    run = await database_sync_to_async(AgentRun.objects.get)(conversation=conversation)
    steps = await database_sync_to_async(list)(
        AgentStep.objects.filter(run=run).values_list("tool_call_id", flat=True)
    )
    client = Client()
    await sync_to_async(client.force_login)(user)
    page = await asyncio.to_thread(client.get, f"/c/{conversation.pk}/")
    html = page.content.decode()
    assert page.status_code == 200
    assert re.search(rf'id="run-{run.pk}-status" data-status="succeeded"', html)
    for tool_call_id in filter(None, steps):
        assert tool_call_id in html
    for name in ("search_travel_info", "weather_forecast", "check_bnb_availability"):
        assert f'data-tool="{name}"' in html
    assert "苏州古典园林是世界文化遗产" in run.output and "苏州古典园林是世界文化遗产" in html
    # The stalled channel, read again, gets what it holds and then word that it missed some.
    held = [(await small_layer.receive(stalled))["type"] for _ in range(4)]
    assert held[-1] == chat_layers.MISSED


async def test_a_channel_that_missed_a_group_message_is_told_once_its_backlog_is_read(
    clock: FakeClock,
) -> None:
    layer = InMemoryChannelLayer(capacity=2, undelivered=Undelivered())
    for channel in ("sock.full", "sock.left", "sock.free"):
        await layer.group_add("conversation-7", channel)
    for channel in ("sock.full", "sock.left"):
        await layer.send(channel, {"type": "first"})
        await layer.send(channel, {"type": "second"})
    await layer.group_send("conversation-7", {"type": "third"})
    await layer.group_discard("conversation-7", "sock.left")

    received = [(await layer.receive("sock.full"))["type"] for _ in range(3)]
    assert received == ["first", "second", chat_layers.MISSED]
    await layer.send("sock.full", {"type": "fourth"})
    assert (await layer.receive("sock.full"))["type"] == "fourth"  # told once
    assert (await layer.receive("sock.free"))["type"] == "third"
    # A channel that left the group is owed nothing.
    assert [(await layer.receive("sock.left"))["type"] for _ in range(2)] == ["first", "second"]
    assert "sock.left" not in layer.missed


@pytest.mark.django_db(transaction=True)
async def test_a_socket_told_it_missed_fragments_is_sent_the_list_a_reload_shows(small_layer):
    user = await database_sync_to_async(User.objects.create_user)("alice", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION}))
    await receive_until_finished(tab)
    await wait_for_runs()
    [channel] = small_layer.groups[group_name(conversation.pk)]

    await small_layer.send(channel, {"type": chat_layers.MISSED})
    frame = await tab.receive_from(timeout=WAIT_S)
    await tab.disconnect()

    run = await database_sync_to_async(AgentRun.objects.get)(conversation=conversation)
    expected = await database_sync_to_async(fragments.branch_shown)(conversation)
    assert frame.startswith(expected)
    assert re.search(rf'id="run-{run.pk}-status" data-status="succeeded"', frame)


async def test_a_socket_whose_fragments_expired_unread_is_told_and_still_hears(clock) -> None:
    """A socket that stopped reading for longer than ``expiry``, with fewer than
    ``capacity`` messages waiting: they expire. Counted, and the socket, reading again, is
    told it missed them and stays in its group (found by an adversarial pass: it was
    silently dropped from its group, deaf until a reload)."""
    undelivered = Undelivered()
    layer = InMemoryChannelLayer(expiry=300, capacity=1500, undelivered=undelivered)
    channel = await layer.new_channel()
    await layer.group_add("conversation-7", channel)
    await layer.group_send("conversation-7", {"type": "run.fragment", "html": "<p>1</p>"})

    clock.now += 301  # the tab's consumer was stalled (a slow, loaded process)
    first = await receive_now(layer, channel)
    await layer.group_send("conversation-7", {"type": "run.fragment", "html": "<p>2</p>"})
    second = await receive_now(layer, channel)

    assert first == {"type": chat_layers.MISSED}
    assert second == {"type": "run.fragment", "html": "<p>2</p>"}
    assert undelivered.count == 1


async def test_a_channel_the_sweep_took_for_dead_is_told_if_it_reads_again(clock) -> None:
    layer = InMemoryChannelLayer(expiry=300, capacity=1500, undelivered=Undelivered())
    await layer.group_add("conversation-7", "sock.slow")
    await layer.group_add("conversation-7", "sock.live")
    await layer.group_send("conversation-7", {"type": "old"})
    assert await receive_now(layer, "sock.live") == {"type": "old"}
    clock.now += 301
    await layer.group_send("conversation-7", {"type": "new"})  # its sweep drops "old"

    assert "sock.slow" not in layer.groups["conversation-7"]
    assert await receive_now(layer, "sock.slow") == {"type": chat_layers.MISSED}
    assert layer.undelivered.count == 1


@pytest.mark.django_db(transaction=True)
async def test_a_tab_open_past_the_layers_group_expiry_joins_its_group_again(
    small_layer, monkeypatch
):
    """Channels ends a membership ``group_expiry`` (a day) after it began, also for a
    socket that reads everything: the socket joins again every GROUP_REJOIN_S (here at
    once), so a tab left open still hears its conversation."""
    monkeypatch.setattr("chat.consumers.GROUP_REJOIN_S", 0.01)
    user = await database_sync_to_async(User.objects.create_user)("alice", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    tab = await connect(conversation.pk, user)
    await tab.connect()
    group = group_name(conversation.pk)
    [channel] = small_layer.groups[group]
    del small_layer.groups[group][channel]  # what the sweep does at group_expiry

    async def joined_again() -> None:
        while channel not in small_layer.groups.get(group, {}):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(joined_again(), WAIT_S)
    await tab.disconnect()
