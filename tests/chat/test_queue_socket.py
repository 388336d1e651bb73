"""Queued messages through the socket: shown in every tab, removable, sent by the run
owner when the run ends however it ends, "Stop and send now", and a copy stored once."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from django.contrib.auth.models import User
from django.utils import timezone
from langchain_core.messages import AIMessage

from chat import owner, queued, store
from chat.consumers import STOPPED_NOTHING_ENDED
from chat.fragments import MESSAGE_ACCEPTED, MESSAGE_REFUSED
from chat.frames import BAD_QUEUED
from chat.models import AgentRun, Conversation, Message, QueuedMessage, RunStatus
from chat.owner import RunOwner, running_tasks
from chat.routing import websocket_urlpatterns
from chat.store.queue import NOT_QUEUED
from tests.chat.conftest import Communicator, wait_for_runs
from tests.chat.test_consumer import connect, make_conversation, receive_until
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

LONG = AIMessage("a long answer " * 20)
QUEUE = re.compile(r'<section id="queued-messages".*?</section>', re.S)


@pytest.fixture(autouse=True)
def _no_sweep(settings):
    settings.AGENT_HEARTBEAT_S = 3600  # nothing but a run's end moves the queue


async def wait_for_all_runs() -> None:
    """Wait until this process has no run tasks, including those a queue started."""
    while running_tasks():
        await wait_for_runs()


def queue_in(frame: str) -> str | None:
    """Return the queue fragment a frame holds, or None."""
    found = QUEUE.search(frame)
    return found.group(0) if found else None


async def until_queue(tab, test) -> str:
    """Receive until a queue fragment for which ``test`` is true; return it."""
    frames = await receive_until(tab, lambda f: (q := queue_in(f)) is not None and test(q))
    return queue_in(frames[-1])


@database_sync_to_async
def user_messages(conversation_id: int) -> list[str]:
    messages = Message.objects.filter(conversation_id=conversation_id, role="user")
    return list(messages.order_by("id").values_list("content", flat=True))


@database_sync_to_async
def run_statuses(conversation_id: int) -> list[str]:
    runs = AgentRun.objects.filter(conversation_id=conversation_id).order_by("id")
    return list(runs.values_list("status", flat=True))


@database_sync_to_async
def queued_rows(conversation_id: int) -> list[QueuedMessage]:
    return store.queue_list(conversation_id=conversation_id)


def message(content: str, client_id: str = "") -> str:
    frame = {"content": content}
    if client_id:
        frame["client_id"] = client_id
    return json.dumps(frame)


async def held_run(scripted_model, answers: int = 2):
    """Connect two tabs of a new chat and start a run held mid-answer; return the tabs,
    the conversation and the event that lets it go on."""
    go_on = asyncio.Event()
    scripted_model.script = [LONG] * answers
    scripted_model.gates = {3: go_on}
    user, conversation = await make_conversation()
    tabs = [await connect(conversation.pk, user) for _ in range(2)]
    for tab in tabs:
        await tab.connect()
    await tabs[0].send_to(text_data=message("first"))
    await receive_until(tabs[0], lambda f: MESSAGE_ACCEPTED in f)
    return tabs, conversation, go_on


async def let_go(tabs, go_on: asyncio.Event) -> None:
    """Let the held run go on, wait for it and the runs the queue started, close the tabs."""
    go_on.set()
    await wait_for_all_runs()
    for tab in tabs:
        await tab.disconnect()


async def test_a_message_sent_while_a_run_goes_is_queued_in_every_tab_and_sent_at_its_end(
    scripted_model,
):
    tabs, conversation, go_on = await held_run(scripted_model)

    await tabs[0].send_to(text_data=message("second"))
    for tab in tabs:  # every tab shows it waiting, under the exchange
        shown = await until_queue(tab, lambda q: "second" in q)
        assert "Remove" in shown and "Stop and send now" in shown
    assert await user_messages(conversation.pk) == ["first"]  # not a message yet

    go_on.set()
    for tab in tabs:  # its run appears as a sent message's does, and the queue empties
        await until_queue(tab, lambda q: "second" not in q and " hidden" in q)
    await wait_for_all_runs()
    for tab in tabs:
        await tab.disconnect()
    assert await user_messages(conversation.pk) == ["first", "second"]
    assert await run_statuses(conversation.pk) == [RunStatus.SUCCEEDED] * 2
    assert await queued_rows(conversation.pk) == []


async def test_the_page_shows_the_queue_from_the_rows_as_the_socket_did(scripted_model, client):
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second <b>bold</b>"))
    live = await until_queue(tabs[0], lambda q: "second" in q)

    await database_sync_to_async(client.force_login)(conversation.owner)
    page = (await database_sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    reloaded = queue_in(page)
    assert reloaded.replace(' hx-swap-oob="true"', "") == live.replace(' hx-swap-oob="true"', "")
    assert "second &lt;b&gt;bold&lt;/b&gt;" in live  # escaped

    await let_go(tabs, go_on)


async def test_a_page_that_connects_late_is_sent_the_queue_with_the_runs(scripted_model):
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[0], lambda q: "second" in q)

    user = await database_sync_to_async(lambda: conversation.owner)()
    late = await connect(conversation.pk, user)
    await late.connect()
    await until_queue(late, lambda q: "second" in q)  # in its catch-up, as a reload shows

    go_on.set()
    await wait_for_all_runs()
    for tab in (*tabs, late):
        await tab.disconnect()


async def test_a_page_back_after_a_run_ended_and_the_next_began_is_sent_the_ended_run(
    scripted_model,
):
    """The page names the runs it shows going (``?going=``): the first, ended while the
    page was away, is neither going nor the latest, and is sent all the same; a run of
    another chat named there is not."""
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[0], lambda q: "second" in q)
    for tab in tabs:
        await tab.disconnect()
    go_on.set()
    await wait_for_all_runs()
    first, second = await database_sync_to_async(
        lambda: list(AgentRun.objects.filter(conversation=conversation).order_by("id"))
    )()
    _, other = await make_conversation("bob")

    @database_sync_to_async
    def a_run_of_another_chat() -> AgentRun:
        question = Message.objects.create(conversation=other, role="user", content="q")
        return AgentRun.objects.create(
            conversation=other, user_message=question, strategy="tool_calling",
            provider="demo", model_name="demo-scripted", started_at=timezone.now(),
            status=RunStatus.SUCCEEDED,
        )  # fmt: skip

    elsewhere = await a_run_of_another_chat()
    user = await database_sync_to_async(lambda: conversation.owner)()

    back = Communicator(
        URLRouter(websocket_urlpatterns),
        f"/ws/chat/{conversation.pk}/?going={first.pk},{elsewhere.pk},junk",
    )
    back.scope.update(user=user, session=None)
    await back.connect()
    frames = await receive_until(back, lambda f: queue_in(f) is not None)
    sent = "".join(frames)
    ended = re.compile(rf'id="run-{first.pk}-status" data-status="succeeded"')
    assert ended.search(sent) and f'id="run-{second.pk}"' in sent
    assert f'id="run-{elsewhere.pk}"' not in sent
    await back.disconnect()

    # Naming the newest run it shows, the page that missed the second is sent the list
    # whole, as a reload shows it; one that has it is sent the runs alone.
    for last, whole in ((first.pk, True), (second.pk, False)):
        tab = Communicator(
            URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation.pk}/?last={last}"
        )
        tab.scope.update(user=user, session=None)
        await tab.connect()
        sent = "".join(await receive_until(tab, lambda f: queue_in(f) is not None))
        assert ('hx-swap-oob="innerHTML:#messages"' in sent) is whole
        assert f'id="run-{first.pk}"' in sent or not whole
        assert f'id="run-{second.pk}"' in sent
        await tab.disconnect()


async def test_remove_takes_a_message_out_of_the_queue_in_every_tab(scripted_model):
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second"))
    await tabs[0].send_to(text_data=message("third"))
    await until_queue(tabs[1], lambda q: "third" in q)
    second = (await queued_rows(conversation.pk))[0]

    await tabs[1].send_to(text_data=json.dumps({"type": "unqueue", "queued": str(second.pk)}))
    for tab in tabs:
        await until_queue(tab, lambda q: "second" not in q and "third" in q)

    await let_go(tabs, go_on)
    assert await user_messages(conversation.pk) == ["first", "third"]


async def test_remove_is_refused_for_a_message_not_queued_here(scripted_model):
    tabs, conversation, go_on = await held_run(scripted_model)
    _, other = await make_conversation("bob")
    await database_sync_to_async(store.message_send)(
        conversation_id=other.pk, content="bob's", client_id="", at=timezone.now(), cap=5,
        start=lambda text: (_ for _ in ()).throw(store.RunAlreadyGoing(other.pk)),
    )  # fmt: skip
    bobs = (await queued_rows(other.pk))[0]

    for frame in ({"type": "unqueue", "queued": bobs.pk}, {"type": "steer", "queued": bobs.pk}):
        await tabs[0].send_to(text_data=json.dumps(frame))
        refused = await receive_until(tabs[0], lambda f: "chat-error" in f)
        assert NOT_QUEUED in refused[-1] and MESSAGE_REFUSED not in refused[-1]
    await tabs[0].send_to(text_data=json.dumps({"type": "unqueue", "queued": "x"}))
    refused = await receive_until(tabs[0], lambda f: "chat-error" in f)
    assert BAD_QUEUED.replace("'", "&#x27;") in refused[-1]
    assert [q.content for q in await queued_rows(other.pk)] == ["bob's"]  # untouched

    # The next message still works.
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[0], lambda q: "second" in q)
    await let_go(tabs, go_on)
    assert await user_messages(conversation.pk) == ["first", "second"]


async def test_a_full_queue_refuses_the_next_message_and_keeps_the_page_text(
    scripted_model, settings
):
    settings.CHAT_MAX_QUEUED = 1
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[0], lambda q: "second" in q)

    await tabs[0].send_to(text_data=message("third"))
    refused = await receive_until(tabs[0], lambda f: MESSAGE_REFUSED in f)
    assert "1 messages are waiting" in refused[-1]

    await let_go(tabs, go_on)
    assert await user_messages(conversation.pk) == ["first", "second"]


async def test_a_copy_of_a_message_sent_again_is_acknowledged_not_stored_twice(scripted_model):
    tabs, conversation, go_on = await held_run(scripted_model)

    for _ in range(3):  # the ws extension re-sends what it buffered, after a reconnect
        await tabs[0].send_to(text_data=message("second", client_id="c0ffee"))
        await receive_until(tabs[0], lambda f: MESSAGE_ACCEPTED in f)
    assert [q.content for q in await queued_rows(conversation.pk)] == ["second"]

    go_on.set()
    await wait_for_all_runs()
    await tabs[0].send_to(text_data=message("second", client_id="c0ffee"))  # sent by now
    await receive_until(tabs[0], lambda f: MESSAGE_ACCEPTED in f)
    await tabs[0].send_to(text_data=message("x", client_id="not an id!"))
    refused = await receive_until(tabs[0], lambda f: MESSAGE_REFUSED in f)
    assert "client_id" in refused[-1]
    for tab in tabs:
        await tab.disconnect()
    assert await user_messages(conversation.pk) == ["first", "second"]


async def test_stop_and_send_now_stops_the_run_and_sends_that_message_first(scripted_model):
    tabs, conversation, _ = await held_run(scripted_model, answers=3)
    await tabs[0].send_to(text_data=message("second"))
    await tabs[0].send_to(text_data=message("third"))
    await until_queue(tabs[0], lambda q: "third" in q)
    third = (await queued_rows(conversation.pk))[1]
    scripted_model.gates = {}  # the next runs answer at once

    await tabs[1].send_to(text_data=json.dumps({"type": "steer", "queued": third.pk}))
    await wait_for_all_runs()
    for tab in tabs:
        await tab.disconnect()

    assert await user_messages(conversation.pk) == ["first", "third", "second"]
    statuses = await run_statuses(conversation.pk)
    assert statuses == [RunStatus.CANCELLED, RunStatus.SUCCEEDED, RunStatus.SUCCEEDED]


async def test_a_stop_or_send_now_naming_a_run_that_ended_stops_nothing_else(scripted_model):
    """Found by an adversarial pass: a Stop (or "Stop and send now") pressed as the run
    ended stopped the queue's next run, which had just started; the page names the run it
    showed going, and only that one is stopped."""
    go_on, held_next = asyncio.Event(), asyncio.Event()

    class Gates:
        """The first run's turn waits for ``go_on``, the next runs' for ``held_next``."""

        turns = 0

        async def wait(self) -> None:
            self.turns += 1
            await (go_on if self.turns == 1 else held_next).wait()

    scripted_model.script = [LONG] * 3
    scripted_model.gates = {3: Gates()}
    user, conversation = await make_conversation()
    tabs = [await connect(conversation.pk, user) for _ in range(2)]
    for tab in tabs:
        await tab.connect()
    await tabs[0].send_to(text_data=message("first"))
    await receive_until(tabs[0], lambda f: MESSAGE_ACCEPTED in f)
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[0], lambda q: "second" in q)
    go_on.set()
    async with asyncio.timeout(WAIT_S):
        while await run_statuses(conversation.pk) != [RunStatus.SUCCEEDED, RunStatus.RUNNING]:
            await asyncio.sleep(0.05)
    first = (await database_sync_to_async(
        lambda: AgentRun.objects.filter(conversation=conversation).order_by("id").first()
    )()).pk  # fmt: skip

    await tabs[0].send_to(text_data=json.dumps({"type": "cancel", "run": first}))
    await receive_until(tabs[0], lambda f: STOPPED_NOTHING_ENDED in f)
    await tabs[0].send_to(text_data=message("third"))
    await until_queue(tabs[0], lambda q: "third" in q)
    third = (await queued_rows(conversation.pk))[0]
    steer = {"type": "steer", "queued": third.pk, "run": str(first)}
    await tabs[1].send_to(text_data=json.dumps(steer))
    await until_queue(tabs[1], lambda q: "third" in q)
    assert await run_statuses(conversation.pk) == [RunStatus.SUCCEEDED, RunStatus.RUNNING]

    held_next.set()
    await wait_for_all_runs()
    for tab in tabs:
        await tab.disconnect()
    assert await user_messages(conversation.pk) == ["first", "second", "third"]
    assert await run_statuses(conversation.pk) == [RunStatus.SUCCEEDED] * 3


async def test_send_now_with_no_run_going_sends_at_once(scripted_model, settings):
    settings.CHAT_RUNS_PER_MINUTE = 1  # holds the queue: nothing else sends it
    scripted_model.script = [LONG, LONG]
    user, conversation = await make_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=message("first"))
    await tab.send_to(text_data=message("second"))
    await until_queue(tab, lambda q: "second" in q)
    await wait_for_all_runs()
    settings.CHAT_RUNS_PER_MINUTE = 0
    owner.current()._held.clear()  # the limit was lifted by hand, not by time
    second = (await queued_rows(conversation.pk))[0]

    await tab.send_to(text_data=json.dumps({"type": "steer", "queued": second.pk}))
    await until_queue(tab, lambda q: "second" not in q)
    await wait_for_all_runs()
    await tab.disconnect()
    assert await user_messages(conversation.pk) == ["first", "second"]


async def test_stop_sends_the_queue_after_a_cancelled_run(scripted_model):
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[1], lambda q: "second" in q)

    await tabs[0].send_to(text_data=json.dumps({"type": "cancel"}))
    await until_queue(tabs[1], lambda q: "second" not in q)
    await let_go(tabs, go_on)

    assert await run_statuses(conversation.pk) == [RunStatus.CANCELLED, RunStatus.SUCCEEDED]
    assert await user_messages(conversation.pk) == ["first", "second"]


async def test_stop_on_a_run_waiting_for_a_decision_sends_the_queue(scripted_model):
    # Queued while the run waits (the person may still decide); Stop ends the waiting run
    # in this process, whose owner sends the queue.
    scripted_model.script = [LONG]
    conversation, run_id = await a_run_with_a_queue()
    await database_sync_to_async(AgentRun.objects.filter(pk=run_id).update)(
        status=RunStatus.WAITING, paused_at=timezone.now()
    )
    user = await database_sync_to_async(lambda: conversation.owner)()
    tab = await connect(conversation.pk, user)
    await tab.connect()

    await tab.send_to(text_data=json.dumps({"type": "cancel"}))
    await until_queue(tab, lambda q: "second" not in q)
    await wait_for_all_runs()
    await tab.disconnect()

    assert await run_statuses(conversation.pk) == [RunStatus.CANCELLED, RunStatus.SUCCEEDED]
    assert await user_messages(conversation.pk) == ["first", "second"]


@database_sync_to_async
def a_run_with_a_queue(*, dead: bool = False) -> tuple[Conversation, int]:
    """A chat of alice's with a run stored (its process died, with ``dead``: its
    heartbeat an hour old) and one message queued; return it and the run's id."""
    conversation = Conversation.objects.create(owner=User.objects.create_user("alice"))
    run = queued.start_for(conversation.pk)("first")
    if dead:
        hour_ago = timezone.now() - timedelta(hours=1)
        AgentRun.objects.filter(pk=run.pk).update(started_at=hour_ago, heartbeat_at=hour_ago)
    QueuedMessage.objects.create(conversation=conversation, content="second",
                                 created_at=timezone.now())  # fmt: skip
    return conversation, run.pk


async def test_a_failed_runs_owner_sends_the_queue_with_no_page_open(scripted_model):
    scripted_model.script = [RuntimeError("the model broke"), LONG]
    conversation, run_id = await a_run_with_a_queue()

    owner.current().start(run_id)  # no listener: no page anywhere
    await wait_for_all_runs()

    assert await run_statuses(conversation.pk) == [RunStatus.FAILED, RunStatus.SUCCEEDED]
    assert await user_messages(conversation.pk) == ["first", "second"]
    assert await queued_rows(conversation.pk) == []


async def test_the_sweep_sends_the_queue_of_a_run_whose_process_died(scripted_model, settings):
    scripted_model.script = [LONG]
    settings.AGENT_STALE_AFTER_S = 60
    settings.AGENT_HEARTBEAT_S = 0.05
    conversation, _ = await a_run_with_a_queue(dead=True)
    layer = get_channel_layer()
    sweeper = RunOwner(layer)
    sweeper.open()
    try:
        async with asyncio.timeout(WAIT_S):
            while len(await user_messages(conversation.pk)) < 2:
                await asyncio.sleep(0.05)
        settings.AGENT_HEARTBEAT_S = 3600
        tasks = list(sweeper.running().values())
        await asyncio.wait_for(asyncio.gather(*tasks), WAIT_S)
    finally:
        sweeper.stopping = True
        await sweeper.close()
    assert await run_statuses(conversation.pk) == [RunStatus.INTERRUPTED, RunStatus.SUCCEEDED]


async def test_over_the_rate_limit_the_queue_waits_with_a_notice_in_every_tab(
    scripted_model, settings
):
    settings.CHAT_RUNS_PER_MINUTE = 1
    tabs, conversation, go_on = await held_run(scripted_model)
    await tabs[0].send_to(text_data=message("second"))
    await until_queue(tabs[1], lambda q: "second" in q)

    go_on.set()
    for tab in tabs:
        notice = await receive_until(tab, lambda f: "Your queued message is waiting" in f)
        assert "sent in" in notice[-1]
    await wait_for_all_runs()
    for tab in tabs:
        await tab.disconnect()
    assert [q.content for q in await queued_rows(conversation.pk)] == ["second"]  # kept
    assert await run_statuses(conversation.pk) == [RunStatus.SUCCEEDED]


async def test_two_owners_sending_the_next_at_once_send_it_once(scripted_model):
    scripted_model.script = [LONG]
    conversation, _ = await a_run_with_a_queue()
    await database_sync_to_async(AgentRun.objects.update)(status=RunStatus.SUCCEEDED)
    this, other = owner.current(), RunOwner(get_channel_layer())

    started = await asyncio.gather(this.send_next(conversation.pk),
                                   other.send_next(conversation.pk))  # fmt: skip

    assert len([run_id for run_id in started if run_id]) == 1
    for each in (this, other):
        await asyncio.wait_for(asyncio.gather(*each.running().values()), WAIT_S)
    await other.close()
    assert await user_messages(conversation.pk) == ["first", "second"]
