"""The live publisher's adaptive coalescing, against a channel layer whose sends we hold.

No test sleeps for timing: a send is held open by an event, and the publisher's progress is
awaited through the fake layer's own events.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any

import pytest

from agents.events import ReasoningDelta, TextDelta
from chat import fragments
from chat.live import FRAGMENT_MESSAGE_TYPE, GroupPublisher, StreamLoad, group_name
from chat.recorder import StreamedText, Update
from tests.timing import WAIT_S

STEP = 7


class GatedLayer:
    """A channel layer whose ``group_send`` records the message, then waits for ``gate``.

    ``gate`` starts open; close it (``gate.clear()``) to keep sends in flight. ``started``
    holds one event per send begun, so a test can wait for the n-th send. ``fail_next``
    makes the next send raise ``ConnectionError`` (after recording it as attempted).
    """

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.attempted: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.fail_next = False
        self._begun = asyncio.Condition()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert group == group_name(1)
        async with self._begun:
            self.attempted.append(message)
            self._begun.notify_all()
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("redis went away")
        await self.gate.wait()
        self.sent.append(message)

    async def sends_begun(self, count: int) -> None:
        async with self._begun:
            await asyncio.wait_for(self._begun.wait_for(lambda: len(self.attempted) >= count), 10)

    def html(self) -> list[str]:
        assert all(message["type"] == FRAGMENT_MESSAGE_TYPE for message in self.sent)
        return [message["html"] for message in self.sent]


def delta(text: str, offset: int, *, target: str = "text", step: int = STEP) -> Update:
    event = (ReasoningDelta if target == "reasoning" else TextDelta)(iteration=1, text=text)
    return Update(event=event, run_id=1, conversation_id=1,
                  streamed=StreamedText(step, text, offset, target=target))  # fmt: skip


def snapshot(text: str, *, step: int = STEP) -> Update:
    return Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1,
                  html=fragments.text_replaced(step, text),
                  streamed=StreamedText(step, text, whole=True))  # fmt: skip


def plain(html: str) -> Update:
    return Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1, html=html)


@pytest.fixture
def layer() -> GatedLayer:
    return GatedLayer()


@pytest.fixture
def publisher(layer: GatedLayer) -> GroupPublisher:
    return GroupPublisher(layer, 1, flush_s=0)


async def test_the_first_delta_is_sent_at_once(layer, publisher):
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)
    await publisher.drain()

    assert layer.html() == [fragments.text_delta(STEP, "Sun", 0)]


async def test_deltas_are_held_while_a_send_is_in_flight_and_sent_as_one_when_it_ends(
    layer, publisher
):
    layer.gate.clear()
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)  # "Sun" is in flight: the line is busy
    for offset, text in ((3, "ny "), (6, "and "), (10, "warm")):
        await publisher(delta(text, offset))
    assert len(layer.attempted) == 1  # nothing more went while the first was in flight

    layer.gate.set()
    await publisher.drain()

    assert layer.html() == [
        fragments.text_delta(STEP, "Sun", 0),
        fragments.text_delta(STEP, "ny and warm", 3),
    ]


async def test_a_plain_fragment_waits_for_its_send_and_goes_after_the_held_text(layer, publisher):
    layer.gate.clear()
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)
    await publisher(delta("ny", 3))
    finished = asyncio.ensure_future(publisher(plain("<div id='step-8'></div>")))
    await asyncio.sleep(0)
    assert not finished.done()  # its caller waits until it has been sent

    layer.gate.set()
    await asyncio.wait_for(finished, 10)

    assert layer.html() == [
        fragments.text_delta(STEP, "Sun", 0),
        fragments.text_delta(STEP, "ny", 3),
        "<div id='step-8'></div>",
    ]


async def test_a_snapshot_replaces_the_held_text_of_its_element(layer, publisher):
    layer.gate.clear()
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)
    await publisher(delta("ny", 3))
    await publisher(delta("Think", 0, target="reasoning"))
    finished = asyncio.ensure_future(publisher(snapshot("Sunny")))
    await asyncio.sleep(0)  # let it queue (a run's calls come one after the other)
    await publisher(delta(" day", 5))

    layer.gate.set()
    await asyncio.wait_for(finished, 10)
    await publisher.drain()

    assert layer.html() == [
        fragments.text_delta(STEP, "Sun", 0),
        fragments.text_delta(STEP, "Think", 0, target="reasoning"),  # another element: kept
        fragments.text_replaced(STEP, "Sunny"),  # "ny" dropped: the snapshot holds it
        fragments.text_delta(STEP, " day", 5),
    ]


async def test_two_elements_interleaved_keep_their_offsets(layer, publisher):
    layer.gate.clear()
    await publisher(delta("Hm", 0, target="reasoning"))
    await layer.sends_begun(1)
    await publisher(delta("m.", 2, target="reasoning"))
    await publisher(delta("So", 0))
    await publisher(delta(" it", 2))
    await publisher(delta(" Ok", 4, target="reasoning"))
    await publisher(delta(" is", 5))

    layer.gate.set()
    await publisher.drain()

    # Held as one fragment per element (in no set order: each has its own place).
    assert layer.html()[0] == fragments.text_delta(STEP, "Hm", 0, target="reasoning")
    assert sorted(layer.html()[1:]) == sorted([
        fragments.text_delta(STEP, "m. Ok", 2, target="reasoning"),
        fragments.text_delta(STEP, "So it is", 0),
    ])  # fmt: skip
    # Placed by their offsets, as static/js/chat.js does, each element adds up.
    texts: dict[str, str] = {}
    for html in layer.html():
        match = re.search(r'#step-7-(\w+)" data-offset="(\d+)">(.*)</div>$', html)
        assert match is not None
        target, offset, piece = match.group(1), int(match.group(2)), match.group(3)
        assert offset == len(texts.get(target, ""))
        texts[target] = texts.get(target, "") + piece
    assert texts == {"reasoning": "Hmm. Ok", "text": "So it is"}


async def test_a_failing_send_of_held_text_does_not_wedge_the_publisher(layer, publisher, caplog):
    layer.fail_next = True
    await publisher(delta("Sun", 0))
    await publisher.drain()
    assert "publishing streamed text to conversation-1 failed" in caplog.text

    await publisher(delta("ny", 3))
    await publisher(plain("<div id='end'></div>"))

    assert layer.html() == [fragments.text_delta(STEP, "ny", 3), "<div id='end'></div>"]


async def test_a_failing_send_of_a_plain_fragment_raises_to_its_caller_and_the_next_goes(
    layer, publisher
):
    layer.fail_next = True
    with pytest.raises(ConnectionError):
        await publisher(plain("<div id='lost'></div>"))

    await publisher(plain("<div id='next'></div>"))

    assert layer.html() == ["<div id='next'></div>"]


async def test_a_caller_cancelled_while_waiting_does_not_cancel_its_fragment(layer, publisher):
    layer.gate.clear()
    waiting = asyncio.ensure_future(publisher(plain("<div id='end'></div>")))
    await layer.sends_begun(1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    layer.gate.set()
    await publisher.drain()

    assert layer.html() == ["<div id='end'></div>"]


async def test_the_rate_cap_holds_later_deltas_until_something_queues_behind_them(layer):
    publisher = GroupPublisher(layer, 1, flush_s=3600)
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)  # the first delta of an element is never held
    await publisher(delta("ny", 3))
    await publisher(delta(" day", 5))
    await asyncio.sleep(0)
    assert len(layer.attempted) == 1  # held for the cap: the line is free

    await publisher(plain("<div id='end'></div>"))

    assert layer.html() == [
        fragments.text_delta(STEP, "Sun", 0),
        fragments.text_delta(STEP, "ny day", 3),
        "<div id='end'></div>",
    ]


async def test_the_rate_cap_holds_interleaved_reasoning_and_text_too(layer):
    """A model that switches between reasoning and text at every token: each element's
    deltas are held under the cap, not sent at each switch (which bypassed the cap and
    the frame budget), and a whole fragment still goes after all of them."""
    publisher = GroupPublisher(layer, 1, flush_s=3600)
    await publisher(delta("Hm", 0, target="reasoning"))
    await publisher(delta("So", 0))  # each element's first delta goes at once
    await layer.sends_begun(2)
    for i in range(10):
        await publisher(delta(".", 2 + i, target="reasoning"))
        await publisher(delta("!", 2 + i))
    await asyncio.sleep(0)
    assert len(layer.attempted) == 2  # held for the cap

    await publisher(plain("<div id='end'></div>"))

    assert layer.html() == [
        fragments.text_delta(STEP, "Hm", 0, target="reasoning"),
        fragments.text_delta(STEP, "So", 0),
        fragments.text_delta(STEP, "." * 10, 2, target="reasoning"),
        fragments.text_delta(STEP, "!" * 10, 2),
        "<div id='end'></div>",
    ]


async def test_held_text_never_passes_a_whole_fragment(layer, publisher):
    """Deltas after a whole fragment wait behind it, even when their element has text
    held before it: the page must see a step's end after the text sent before it."""
    layer.gate.clear()
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)
    await publisher(delta("ny", 3))
    ending = asyncio.ensure_future(publisher(plain("<div id='end'></div>")))
    await asyncio.sleep(0)  # queued
    await publisher(delta(" day", 5))

    layer.gate.set()
    await ending
    await publisher.drain()

    assert layer.html() == [
        fragments.text_delta(STEP, "Sun", 0),
        fragments.text_delta(STEP, "ny", 3),
        "<div id='end'></div>",
        fragments.text_delta(STEP, " day", 5),
    ]


async def test_an_update_with_no_fragment_sends_nothing(layer, publisher):
    await publisher(plain(""))
    await publisher.drain()

    assert layer.attempted == []


# --- the configured layer over Redis (CI's PostgreSQL + Redis pass sets REDIS_URL) ---------


async def _subscribed(redis_url: str, group: str, *, at_least: int = 1) -> None:
    """Wait until Redis counts ``at_least`` subscribers of ``group``'s pub/sub channel.

    SUBSCRIBE goes over the layer's listening connection and PUBLISH over another, so a
    message published right after ``group_add`` returned could reach Redis first. The core
    layer (``REDIS_CHANNEL_LAYER=core``) keeps groups in sorted sets: nothing to wait for.
    """
    from django.conf import settings
    from redis import asyncio as aioredis

    if settings.REDIS_CHANNEL_LAYER != "pubsub":
        return

    channel = f"{settings.REDIS_PREFIX}__group__{group}"
    client = aioredis.Redis.from_url(redis_url)
    try:
        async with asyncio.timeout(WAIT_S):
            while (await client.pubsub_numsub(channel))[0][1] < at_least:
                await asyncio.sleep(0.01)  # polling Redis' own count, not a timing premise
    finally:
        await client.aclose()


def test_on_redis_the_configured_layer_is_pub_sub_unless_core_is_asked_for(redis_url):
    from channels.layers import get_channel_layer
    from channels_redis.pubsub import RedisPubSubChannelLayer

    pubsub = os.environ.get("REDIS_CHANNEL_LAYER", "pubsub") == "pubsub"
    assert isinstance(get_channel_layer(), RedisPubSubChannelLayer) is pubsub


@pytest.mark.django_db(transaction=True)
async def test_on_redis_a_published_fragment_reaches_a_subscribed_socket(redis_url):
    from channels.layers import get_channel_layer

    from tests.chat.test_consumer import connect, make_conversation

    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    assert (await communicator.connect())[0]
    await _subscribed(redis_url, group_name(conversation.pk))

    await GroupPublisher(get_channel_layer(), conversation.pk)(plain("<div id='hello'></div>"))

    assert await communicator.receive_from() == "<div id='hello'></div>"
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_on_redis_a_late_joiner_gets_what_it_missed_from_the_catch_up(
    scripted_model, redis_url
):
    """Pub/sub is at-most-once: what no socket listened to is gone, the rows are not."""
    from channels.db import database_sync_to_async
    from channels.layers import get_channel_layer
    from langchain_core.messages import AIMessage

    from chat.runs import create_run, execute_run
    from tests.chat.test_consumer import connect, make_conversation

    scripted_model.script = [AIMessage("Published to nobody.")]
    user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="hi")
    publisher = GroupPublisher(get_channel_layer(), conversation.pk)
    await execute_run(run.pk, listeners=[publisher])  # no socket subscribed: all dropped

    communicator = await connect(conversation.pk, user)
    assert (await communicator.connect())[0]
    caught_up = await communicator.receive_from()

    assert f'id="run-{run.pk}"' in caught_up
    assert "Published to nobody." in caught_up
    assert 'data-status="succeeded"' in caught_up
    await communicator.disconnect()


async def test_with_many_elements_streaming_each_gets_a_share_of_the_frame_budget(
    layer, settings, monkeypatch
):
    """200 conversations streaming at once share ``CHAT_STREAM_FRAMES_PER_S``: an element's
    next text fragment waits its share (here 40 elements at 100 a second: 0.4 s, capped
    at 0.25 s), and goes at once when something queues behind it, as under the rate cap."""
    from chat import live

    settings.CHAT_STREAM_FRAMES_PER_S = 100
    load = live.StreamLoad()
    monkeypatch.setattr(live, "STREAM_LOAD", load)
    now = time.monotonic()
    for other in range(39):
        load.sent("conversation-2", (other, "text"), now)
    publisher = GroupPublisher(layer, 1, flush_s=0)
    await publisher(delta("Sun", 0))
    await layer.sends_begun(1)
    await publisher(delta("ny", 3))
    await asyncio.sleep(0.05)
    assert len(layer.attempted) == 1  # held for its share of the budget

    await layer.sends_begun(2)  # then sent, within the longest wait
    assert load.interval(0, time.monotonic()) == StreamLoad.longest_s
    assert layer.html() == [
        fragments.text_delta(STEP, "Sun", 0),
        fragments.text_delta(STEP, "ny", 3),
    ]


def test_a_few_elements_streaming_keep_the_rate_cap_alone(settings):
    """Below the budget (400 fragments a second by default: 4 elements at 10 ms) the
    least time between an element's fragments is ``CHAT_STREAM_FLUSH_MS``; elements
    silent for a second no longer count; ``CHAT_STREAM_FRAMES_PER_S=0`` turns the budget
    off."""
    load = StreamLoad()
    for other in range(4):
        load.sent("conversation-2", (other, "text"), 100.0)
    assert load.interval(0.01, 100.5) == 0.01
    load.sent("conversation-2", (4, "text"), 100.0)
    assert load.interval(0.01, 100.5) == 5 / 400

    settings.CHAT_STREAM_FRAMES_PER_S = 100
    assert load.interval(0.01, 100.5) == 0.05  # five elements at 100 a second
    assert load.interval(0.01, 101.6) == 0.01  # silent for over a second: not streaming
    for other in range(500):
        load.sent("conversation-3", (other, "text"), 102.0)
    settings.CHAT_STREAM_FRAMES_PER_S = 0
    assert load.interval(0.01, 102.0) == 0.01
