"""Sockets the server closes: each with its own close code, each logged with its reason.

A handshake refused outright reaches the browser as close code 1006, which it cannot
tell from a network failure; so every refusal is an accepted socket closed with a 44xx
code (the page says what it means), and a WARNING on ``chat.sockets`` says why, with
the Origin and Host seen.
"""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from django.contrib.auth.models import User

from chat.consumers import FRAME_BURST
from chat.models import AgentRun, Conversation
from chat.routing import websocket_urlpatterns
from chat.security import (
    CLOSE_ORIGIN_REFUSED,
    HOST_NOT_ALLOWED,
    LOGGED_HEADER_CHARS,
    NO_ORIGIN,
    NOT_HTTP,
    NULL_ORIGIN,
    ORIGIN_NOT_HOST,
    SameOriginValidator,
)
from tests.chat.conftest import Communicator

pytestmark = pytest.mark.django_db(transaction=True)

HOST = b"127.0.0.1:8000"
SAME_ORIGIN = b"http://127.0.0.1:8000"


def communicator(
    path: str,
    origin: bytes | None = SAME_ORIGIN,
    host: bytes = HOST,
    *,
    session_id: str = "",
    **more: bytes,
) -> Communicator:
    """Return a communicator on the whole ASGI app, with these headers (None: left out)."""
    from project.asgi import application

    headers = [(b"host", host)]
    if origin is not None:
        headers.append((b"origin", origin))
    if session_id:
        headers.append((b"cookie", f"sessionid={session_id}".encode()))
    headers += [(name.replace("_", "-").encode(), value) for name, value in more.items()]
    return Communicator(application, path, headers=headers)


async def closed_with(socket: Communicator) -> int:
    """Connect, return the close code the server sent at once, disconnect."""
    connected, _ = await socket.connect()
    assert connected  # accepted, then closed: the browser sees our code, not 1006
    message = await socket.receive_output()
    await socket.disconnect()  # the browser would; ends the app
    assert message["type"] == "websocket.close"
    return message["code"]


def refusals(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "chat.sockets"]


@database_sync_to_async
def conversation_of(username: str) -> Conversation:
    return Conversation.objects.create(owner=User.objects.create_user(username, password="pw"))


@pytest.mark.parametrize(
    ("origin", "reason"),
    [
        (b"http://127.0.0.1:9999", ORIGIN_NOT_HOST),  # another port of the same host
        (b"http://evil.example", ORIGIN_NOT_HOST),
        (b"null", NULL_ORIGIN),
        (b"", NO_ORIGIN),
        (b"file://", NOT_HTTP),
    ],
)
async def test_a_foreign_origin_is_closed_with_4403_and_logged_with_origin_and_host(
    origin, reason, caplog
):
    conversation = await conversation_of("alice")
    socket = communicator(f"/ws/chat/{conversation.pk}/", origin)

    assert await closed_with(socket) == CLOSE_ORIGIN_REFUSED

    [record] = refusals(caplog)
    assert record.levelno == logging.WARNING
    assert record.close_code == 4403
    assert record.reason == f"origin not allowed: {reason}"
    assert record.origin == origin.decode()
    assert record.host == HOST.decode()
    assert record.path == f"/ws/chat/{conversation.pk}/"
    message = record.getMessage()
    assert "4403" in message and repr(origin.decode()) in message and "'127.0.0.1:8000'" in message


async def test_a_missing_origin_header_is_refused_too(caplog):
    assert await closed_with(communicator("/ws/chat/1/", origin=None)) == 4403
    assert refusals(caplog)[0].reason == f"origin not allowed: {NO_ORIGIN}"


async def test_a_proxy_that_rewrites_host_is_named_with_the_forwarded_host(caplog):
    socket = communicator(
        "/ws/chat/1/", b"https://chat.example.com", x_forwarded_host=b"chat.example.com"
    )
    assert await closed_with(socket) == 4403

    [record] = refusals(caplog)
    assert record.reason == f"origin not allowed: {ORIGIN_NOT_HOST}"
    assert "CSRF_TRUSTED_ORIGINS" in record.reason and "docs/configuration.md" in record.reason
    assert record.forwarded_host == "chat.example.com"
    assert "X-Forwarded-Host 'chat.example.com'" in record.getMessage()


async def test_a_host_outside_allowed_hosts_is_refused_even_from_its_own_origin(caplog):
    socket = communicator("/ws/chat/1/", b"http://other.example", host=b"other.example")
    assert await closed_with(socket) == 4403
    assert refusals(caplog)[0].reason == f"origin not allowed: {HOST_NOT_ALLOWED}"


async def test_the_refused_socket_never_reaches_the_application():
    calls = []

    async def inner(scope, receive, send):
        calls.append(scope)

    socket = Communicator(
        SameOriginValidator(inner), "/ws/chat/1/", headers=[(b"origin", b"http://evil.example")]
    )
    assert await closed_with(socket) == 4403
    assert calls == []


async def test_logged_header_values_are_quoted_and_cut(caplog):
    long_origin = b"http://" + b"a" * 1000 + b".example"
    assert await closed_with(communicator("/ws/chat/1/", long_origin, host=b"x\tb")) == 4403

    [record] = refusals(caplog)
    assert len(record.origin) == LOGGED_HEADER_CHARS
    assert "Host 'x\\tb'" in record.getMessage()  # a control character shown, not written


async def test_a_logged_out_session_is_closed_with_4401_and_logged(client, caplog):
    user = await database_sync_to_async(User.objects.create_user)("alice", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    await sync_to_async(client.force_login)(user)
    session_id = client.cookies["sessionid"].value
    await sync_to_async(client.logout)()  # e.g. in another tab; this page's cookie is old

    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert await closed_with(socket) == 4401

    [record] = refusals(caplog)
    assert record.close_code == 4401
    assert "session" in record.reason and "no longer exists" in record.reason
    assert record.origin == SAME_ORIGIN.decode() and record.host == HOST.decode()


async def test_a_conversation_that_is_not_yours_is_closed_with_4404_and_logged(client, caplog):
    conversation = await conversation_of("owner")
    intruder = await database_sync_to_async(User.objects.create_user)("intruder", password="pw")
    await sync_to_async(client.force_login)(intruder)
    socket = communicator(
        f"/ws/chat/{conversation.pk}/", session_id=client.cookies["sessionid"].value
    )

    assert await closed_with(socket) == 4404

    [record] = refusals(caplog)
    assert record.reason == f"conversation {conversation.pk} not found for user {intruder.pk}"


async def test_the_owner_is_loaded_in_the_consumers_one_orm_call_before_accept(client, monkeypatch):
    """Channels' AuthMiddleware loads the user in an ORM call of its own, a second wait in
    the ORM thread's queue before the accept (bench/load.py: handshakes past Daphne's 5 s
    limit under load); the user is now read inside the consumer's one call."""
    import channels.auth

    async def no_own_call(scope):
        raise AssertionError("the user was loaded in an ORM call of its own")

    monkeypatch.setattr(channels.auth, "get_user", no_own_call)  # the awaited wrapper
    user = await database_sync_to_async(User.objects.create_user)("alice", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    await sync_to_async(client.force_login)(user)
    socket = communicator(
        f"/ws/chat/{conversation.pk}/", session_id=client.cookies["sessionid"].value
    )
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_nothing(timeout=0.2)  # open, not closed with a code
    await socket.disconnect()


async def test_a_session_from_before_a_password_change_is_closed_with_4401(client, caplog):
    """The session's auth hash is still checked (channels.auth.get_user's check, now run
    lazily): a password changed elsewhere ends every old session's sockets."""
    user = await database_sync_to_async(User.objects.create_user)("alice", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=user)
    await sync_to_async(client.force_login)(user)
    session_id = client.cookies["sessionid"].value

    def change_password() -> None:
        user.set_password("another")
        user.save()

    await database_sync_to_async(change_password)()
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert await closed_with(socket) == 4401  # the check flushed the session: sign in again
    [record] = refusals(caplog)
    assert "no longer exists" in record.reason


async def test_a_visitor_without_a_session_gets_4404_not_4401(caplog):
    conversation = await conversation_of("owner")
    assert await closed_with(communicator(f"/ws/chat/{conversation.pk}/")) == 4404
    assert refusals(caplog)[0].reason.endswith("for a visitor without a session")


async def test_an_unknown_websocket_path_is_logged_with_4404(caplog):
    assert await closed_with(communicator("/ws/other/")) == 4404
    [record] = refusals(caplog)
    assert record.reason == "no websocket route for this path" and record.path == "/ws/other/"


async def test_a_session_that_ends_while_the_socket_is_open_is_logged(
    client, scripted_model, caplog
):
    await sync_to_async(client.get)("/", follow=True)
    conversation = await database_sync_to_async(Conversation.objects.get)()
    socket = communicator(
        f"/ws/chat/{conversation.pk}/", session_id=client.cookies["sessionid"].value
    )
    connected, _ = await socket.connect()
    assert connected
    assert refusals(caplog) == []

    await sync_to_async(client.session.flush)()
    await socket.send_to(text_data=json.dumps({"content": "after logout"}))
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()

    [record] = refusals(caplog)
    assert record.close_code == 4401 and "while the socket was open" in record.reason
    assert not await database_sync_to_async(AgentRun.objects.exists)()


async def test_a_flood_is_logged_once_when_the_socket_is_closed(
    monkeypatch, consumer_clock, caplog
):
    monkeypatch.setattr("chat.consumers.FLOOD_CLOSE_AFTER", 3)
    conversation = await conversation_of("alice")
    user = await database_sync_to_async(User.objects.get)()
    socket = Communicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation.pk}/")
    socket.scope["user"] = user
    socket.scope["session"] = None
    await socket.connect()
    for _ in range(FRAME_BURST + 5):
        await socket.send_to(text_data="not json")
    while (await socket.receive_output())["type"] != "websocket.close":
        pass
    await socket.disconnect()

    [record] = refusals(caplog)
    assert record.close_code == 4429 and record.reason == "3 frames dropped for sending too fast"


async def test_a_listening_socket_whose_session_ended_is_closed_at_its_next_recheck(
    client, consumer_clock, caplog
):
    from channels.layers import get_channel_layer

    from chat.consumers import SESSION_RECHECK_S
    from chat.live import FRAGMENT_MESSAGE_TYPE, group_name

    await sync_to_async(client.get)("/", follow=True)
    conversation = await database_sync_to_async(Conversation.objects.get)()
    socket = communicator(
        f"/ws/chat/{conversation.pk}/", session_id=client.cookies["sessionid"].value
    )
    connected, _ = await socket.connect()
    assert connected
    await sync_to_async(client.session.flush)()  # logged out elsewhere; the socket listens

    consumer_clock.advance(SESSION_RECHECK_S + 1)
    layer = get_channel_layer()
    fragment = {"type": FRAGMENT_MESSAGE_TYPE, "html": '<div id="x">late</div>'}
    await layer.group_send(group_name(conversation.pk), fragment)

    # The relay does not wait for the check; the check then closes the socket.
    assert await socket.receive_from() == '<div id="x">late</div>'
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()
    [record] = refusals(caplog)
    assert record.close_code == 4401 and "while the socket was open" in record.reason
