"""Adversarial checks of issue 25's second round: a socket joins its conversation's group
before the one database call that checks it (chat.consumers._open)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import OperationalError

import chat.consumers
from chat.live import conversation_deleted_sync
from chat.models import Conversation
from tests.chat.test_refused_sockets import communicator, refusals
from tests.chat.test_socket_access import logged_in, members, refused_after
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_socket_whose_check_fails_leaves_the_group_it_joined(client, monkeypatch):
    """The check failing (the database locked, gone) fails the socket: Daphne closes it
    and never sends its disconnect, so the group joined before the check must be left
    there, or every fragment of the conversation is sent to a channel nobody reads
    (over capacity, for a day on Redis)."""
    _, conversation, session_id = await logged_in(client, "alice")

    def locked(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("database is locked")

    monkeypatch.setattr(chat.consumers, "_open", locked)
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    await socket.send_input({"type": "websocket.connect"})
    with pytest.raises(OperationalError):
        await socket.future
    assert members(conversation.pk) == set()


async def test_a_socket_cancelled_during_its_check_leaves_the_group_it_joined(client, monkeypatch):
    """Daphne cancels an application whose client left and that has not ended within
    application_close_timeout: a socket stuck in its check (the ORM thread's queue)
    leaves its group on the way out."""
    _, conversation, session_id = await logged_in(client, "alice")
    checking, release = threading.Event(), threading.Event()
    checked = chat.consumers._open

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        checking.set()
        release.wait(5)
        return checked(*args, **kwargs)

    monkeypatch.setattr(chat.consumers, "_open", slow)
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    await socket.send_input({"type": "websocket.connect"})
    await asyncio.to_thread(checking.wait, 5)
    assert members(conversation.pk)  # joined before the check
    socket.future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await socket.future
    left = members(conversation.pk)
    release.set()
    assert left == set()


async def test_a_socket_refused_while_its_conversation_was_deleted_is_closed_once(
    client, monkeypatch, caplog
):
    """The owner deletes the conversation while a socket's check runs: the socket, in
    the group already, is sent the deletion, then refused (4404). The deletion, read
    after the refusal, must not close it a second time nor log a deleted conversation
    "None"."""
    _, conversation, session_id = await logged_in(client, "alice")

    def deleted() -> None:
        Conversation.objects.filter(pk=conversation.pk).delete()
        conversation_deleted_sync(conversation.pk)

    await refused_after(monkeypatch, conversation.pk, session_id, deleted)
    assert [record.close_code for record in refusals(caplog)] == [4404]


@pytest.mark.parametrize("failing", ["accept", "catch-up"])
async def test_a_socket_that_fails_once_let_in_leaves_the_group_it_joined(
    client, monkeypatch, failing
):
    """The client leaves as its socket is accepted or sent its catch-up: the send fails
    (or Daphne cancels the application), connect raises and no disconnect comes, so the
    group joined before the check must be left there too."""
    _, conversation, session_id = await logged_in(client, "alice")
    opened = chat.consumers._open

    def with_catch_up(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = opened(*args, **kwargs)
        result.caught_up.append("<div>missed</div>")
        return result

    async def gone(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise ConnectionResetError("the client went away")

    if failing == "accept":
        monkeypatch.setattr(chat.consumers.ChatConsumer, "accept", gone)
    else:
        monkeypatch.setattr(chat.consumers, "_open", with_catch_up)
        monkeypatch.setattr(chat.consumers.ChatConsumer, "send", gone)
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    await socket.send_input({"type": "websocket.connect"})
    with pytest.raises(ConnectionResetError):
        await socket.future
    assert members(conversation.pk) == set()


async def test_a_socket_cancelled_again_while_it_leaves_its_group_still_leaves_it(
    client, monkeypatch
):
    """Daphne cancels an application whose client left again every second: a second
    cancel that lands while the failed socket leaves its group (a Redis round trip)
    must not cut the leaving short, or the group keeps a dead channel."""
    from channels.layers import get_channel_layer

    _, conversation, session_id = await logged_in(client, "alice")

    def locked(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("database is locked")

    layer = get_channel_layer()
    discard = layer.group_discard
    leaving, release, left = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow_discard(group: str, channel: str) -> None:
        leaving.set()
        await release.wait()
        await discard(group, channel)
        left.set()

    monkeypatch.setattr(chat.consumers, "_open", locked)
    monkeypatch.setattr(layer, "group_discard", slow_discard)
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    await socket.send_input({"type": "websocket.connect"})
    await asyncio.wait_for(leaving.wait(), WAIT_S)
    socket.future.cancel()  # the second cancel, during the leaving
    with pytest.raises(asyncio.CancelledError):
        await socket.future
    release.set()
    # Cut short, the leaving would never end (the wait would time out).
    await asyncio.wait_for(left.wait(), WAIT_S)
    assert members(conversation.pk) == set()
