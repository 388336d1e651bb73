"""Who may open which conversation's socket, and the close code each refusal gets: an
expired, forged, ended or outdated session is 4401 (sign in again), someone else's
conversation 4404, at connect and on an open socket. The Origin and Host refusals are in
test_refused_sockets.py."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.live import group_name
from chat.models import Conversation
from tests.chat.test_refused_sockets import closed_with, communicator, refusals

pytestmark = pytest.mark.django_db(transaction=True)


async def logged_in(client, username: str, **extra) -> tuple[User, Conversation, str]:
    user = await database_sync_to_async(User.objects.create_user)(username, password="pw", **extra)
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    await sync_to_async(client.force_login)(user)
    return user, conversation, client.cookies["sessionid"].value


async def code_of(conversation_id: int, session_id: str = "") -> int:
    """Open a socket on the conversation with this session cookie; return its close code."""
    return await closed_with(communicator(f"/ws/chat/{conversation_id}/", session_id=session_id))


def _expire(session_id: str) -> None:
    Session.objects.filter(session_key=session_id).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )


async def test_an_expired_session_is_closed_with_4401_not_4404(client, caplog):
    """A session past its expiry date (not yet removed by clearsessions) has ended: the
    page must say "sign in again" (4401), not "no such conversation" (4404)."""
    _, conversation, session_id = await logged_in(client, "alice")
    await database_sync_to_async(_expire)(session_id)

    assert await code_of(conversation.pk, session_id) == 4401
    [record] = refusals(caplog)
    assert record.close_code == 4401


async def test_a_forged_session_cookie_is_refused(client, caplog):
    _, conversation, _ = await logged_in(client, "alice")
    for forged in ("garbage", "x" * 4000, "../../etc/passwd", "a" * 32):
        caplog.clear()
        code = await closed_with(communicator(f"/ws/chat/{conversation.pk}/", session_id=forged))
        assert code in (4401, 4404)
        [record] = refusals(caplog)
        assert record.close_code == code


async def test_a_staff_user_cannot_open_someone_elses_conversation(client, caplog):
    owner = await database_sync_to_async(User.objects.create_user)("owner", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=owner)
    staff, _, session_id = await logged_in(client, "staff", is_staff=True, is_superuser=True)

    assert await code_of(conversation.pk, session_id) == 4404
    [record] = refusals(caplog)
    assert record.reason == f"conversation {conversation.pk} not found for user {staff.pk}"


async def test_a_guest_cannot_open_a_users_or_another_guests_conversation(client, caplog):
    await sync_to_async(client.get)("/", follow=True)  # a guest with a conversation
    own = await database_sync_to_async(Conversation.objects.get)()
    session_id = client.cookies["sessionid"].value
    other_guest = await database_sync_to_async(Conversation.objects.create)(guest_key="other")
    no_key = await database_sync_to_async(Conversation.objects.create)(guest_key="")
    owner = await database_sync_to_async(User.objects.create_user)("owner", password="pw")
    users = await database_sync_to_async(Conversation.objects.create)(owner=owner)

    socket = communicator(f"/ws/chat/{own.pk}/", session_id=session_id)
    connected, _ = await socket.connect()
    assert connected
    await socket.disconnect()
    for conversation in (other_guest, no_key, users):
        caplog.clear()
        assert await code_of(conversation.pk, session_id) == 4404
        assert refusals(caplog)[0].reason.endswith("for a guest")
    # A visitor with no cookie never matches a guest conversation without a key.
    assert await closed_with(communicator(f"/ws/chat/{no_key.pk}/")) == 4404


@pytest.mark.parametrize("how", ["deleted", "deactivated"])
async def test_a_deleted_or_deactivated_users_session_is_closed_with_4401(client, caplog, how):
    """The session still exists but logs in nobody: sign in again (4401), not 4404."""
    user, conversation, session_id = await logged_in(client, "alice")
    if how == "deleted":
        await database_sync_to_async(user.delete)()
    else:
        user.is_active = False
        await database_sync_to_async(user.save)()

    assert await code_of(conversation.pk, session_id) == 4401
    [record] = refusals(caplog)
    assert record.close_code == 4401


async def test_two_tabs_and_a_reconnect_after_a_refusal(client, caplog):
    _, conversation, session_id = await logged_in(client, "alice")
    first = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    second = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert (await first.connect())[0] and (await second.connect())[0]
    await first.disconnect()
    await second.disconnect()

    assert await code_of(conversation.pk + 999, session_id) == 4404
    again = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert (await again.connect())[0]
    assert await again.receive_nothing(timeout=0.2)
    await again.disconnect()


async def test_an_open_socket_is_closed_when_its_session_expires(client, scripted_model, caplog):
    """An open socket whose session passed its expiry date can no longer send."""
    _, conversation, session_id = await logged_in(client, "alice")
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert (await socket.connect())[0]

    await database_sync_to_async(_expire)(session_id)
    await socket.send_to(text_data=json.dumps({"content": "after expiry"}))
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()


async def test_an_open_socket_is_closed_when_the_password_changes(client, scripted_model, caplog):
    """Changing the password ends every other session (Django's session hash check): an
    open socket of an old session must not keep sending into the conversation."""
    user, conversation, session_id = await logged_in(client, "alice")
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert (await socket.connect())[0]

    def change_password() -> None:
        user.set_password("another")
        user.save()

    await database_sync_to_async(change_password)()
    await socket.send_to(text_data=json.dumps({"content": "after the password change"}))
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()


def members(conversation_id: int) -> set[str]:
    """Return the channels in the conversation's group, as this process's layer holds
    them (in memory; on Redis pub/sub, under the prefixed name it subscribes to)."""
    layer = get_channel_layer()
    group = group_name(conversation_id)
    if hasattr(layer, "_get_group_channel_name"):  # channels-redis' pub/sub layer
        group = layer._get_group_channel_name(group)
    return set(layer.groups.get(group, ()))


async def refused_after(monkeypatch, conversation_id: int, session_id: str, meanwhile) -> None:
    """Open a socket on the conversation whose check first runs ``meanwhile()`` (sync, in
    the database thread, after the socket joined the group); assert it is closed with
    4404 and sent nothing else."""
    import chat.consumers

    checked = chat.consumers._open

    def check(*args, **kwargs):  # type: ignore[no-untyped-def]
        meanwhile()
        return checked(*args, **kwargs)

    monkeypatch.setattr(chat.consumers, "_open", check)
    socket = communicator(f"/ws/chat/{conversation_id}/", session_id=session_id)
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4404}
    assert await socket.receive_nothing()
    await socket.disconnect()


async def test_a_refused_socket_hears_nothing_published_while_it_was_checked(client, monkeypatch):
    """A socket joins its conversation's group before the check (so a page misses nothing
    published after its catch-up); one refused is sent nothing from the group, not even
    what was published while the check ran, and leaves it."""
    from chat.live import publish_each_sync

    owner = await database_sync_to_async(User.objects.create_user)("owner", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=owner)
    _, _, session_id = await logged_in(client, "intruder")

    def published() -> None:
        publish_each_sync([(conversation.pk, "<div id='secret'>the owner's run</div>")])

    await refused_after(monkeypatch, conversation.pk, session_id, published)
    assert members(conversation.pk) == set()
