"""Adversarial review of issue 12: the websocket front door with a lazily loaded user,
the earlier-messages endpoint, and streaming. Each test is one attack that found, or
ruled out, a fault."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import unescape

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.models import Conversation
from tests.chat.test_refused_sockets import closed_with, communicator, refusals

pytestmark = pytest.mark.django_db(transaction=True)


async def _logged_in(client, username: str, **extra) -> tuple[User, Conversation, str]:
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


# --- the front door: who may open which socket, and the code each refusal gets ---------


async def test_an_expired_session_is_closed_with_4401_not_4404(client, caplog):
    """A session past its expiry date (not yet removed by clearsessions) has ended: the
    page must say "sign in again" (4401), not "no such conversation" (4404)."""
    _, conversation, session_id = await _logged_in(client, "alice")
    await database_sync_to_async(_expire)(session_id)

    assert await code_of(conversation.pk, session_id) == 4401
    [record] = refusals(caplog)
    assert record.close_code == 4401


async def test_a_forged_session_cookie_is_refused(client, caplog):
    _, conversation, _ = await _logged_in(client, "alice")
    for forged in ("garbage", "x" * 4000, "../../etc/passwd", "a" * 32):
        caplog.clear()
        code = await closed_with(communicator(f"/ws/chat/{conversation.pk}/", session_id=forged))
        assert code in (4401, 4404)
        [record] = refusals(caplog)
        assert record.close_code == code


async def test_a_staff_user_cannot_open_someone_elses_conversation(client, caplog):
    owner = await database_sync_to_async(User.objects.create_user)("owner", password="pw")
    conversation = await database_sync_to_async(Conversation.objects.create)(owner=owner)
    staff, _, session_id = await _logged_in(client, "staff", is_staff=True, is_superuser=True)

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
    user, conversation, session_id = await _logged_in(client, "alice")
    if how == "deleted":
        await database_sync_to_async(user.delete)()
    else:
        user.is_active = False
        await database_sync_to_async(user.save)()

    assert await code_of(conversation.pk, session_id) == 4401
    [record] = refusals(caplog)
    assert record.close_code == 4401


async def test_two_tabs_and_a_reconnect_after_a_refusal(client, caplog):
    _, conversation, session_id = await _logged_in(client, "alice")
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
    _, conversation, session_id = await _logged_in(client, "alice")
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert (await socket.connect())[0]

    await database_sync_to_async(_expire)(session_id)
    await socket.send_to(text_data=json.dumps({"content": "after expiry"}))
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()


async def test_an_open_socket_is_closed_when_the_password_changes(client, scripted_model, caplog):
    """Changing the password ends every other session (Django's session hash check): an
    open socket of an old session must not keep sending into the conversation."""
    user, conversation, session_id = await _logged_in(client, "alice")
    socket = communicator(f"/ws/chat/{conversation.pk}/", session_id=session_id)
    assert (await socket.connect())[0]

    def change_password() -> None:
        user.set_password("another")
        user.save()

    await database_sync_to_async(change_password)()
    await socket.send_to(text_data=json.dumps({"content": "after the password change"}))
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4401}
    await socket.disconnect()


# --- long conversations: hostile ids on the paging endpoints ---------------------------

HUGE = "9" * 30  # Django's <int:> converter takes any number of digits


@pytest.mark.parametrize(
    "path",
    [
        f"/c/{HUGE}/",
        f"/c/{HUGE}/earlier/?before=1",
        "/c/{pk}/earlier/?before=" + "9" * 18,
        f"/c/{{pk}}/runs/{HUGE}/steps/?before=1",
        "/c/{pk}/runs/{run}/steps/?before=" + "9" * 18,
        f"/c/{{pk}}/runs/{HUGE}/timeline/",
        f"/c/{HUGE}/menu/",
        f"/c/{HUGE}/strategy/",
    ],
)
def test_a_huge_id_in_a_page_url_is_404_or_400_not_a_server_error(alice, path):
    from tests.chat.test_growth import exchanges

    client, conversation = alice
    run = exchanges(conversation, 1)[0]
    client.raise_request_exception = False
    response = client.get(path.format(pk=conversation.pk, run=run))
    assert response.status_code in (200, 400, 404, 405)


async def test_a_huge_conversation_id_on_the_socket_is_closed_with_4404(client, caplog):
    _, _, session_id = await _logged_in(client, "alice")
    assert await closed_with(communicator(f"/ws/chat/{HUGE}/", session_id=session_id)) == 4404


# --- /healthz with the database unreachable --------------------------------------------


async def test_a_database_that_hangs_is_503_at_the_time_limit_and_probes_do_not_pile_up(
    monkeypatch,
):
    """An unreachable PostgreSQL makes the pool wait its own 60 s for a connection; the
    query runs in the ORM's thread, which asgiref's SyncToAsync waits for even when
    cancelled, so /healthz answered only when the driver gave up: a load balancer saw a
    time-out, not a 503 (a real Daphne on a wrong database port: no answer in 30 s)."""
    import asyncio
    import threading

    from django.test import AsyncClient

    from chat import health
    from tests.timing import WAIT_S

    release = threading.Event()
    calls = []

    def hang() -> None:
        calls.append(1)
        release.wait()

    monkeypatch.setattr("chat.store.database_answers", hang)
    monkeypatch.setattr(health, "CHECK_TIMEOUT_S", 0.05)
    try:
        for _ in range(2):
            probe = asyncio.ensure_future(AsyncClient().get("/healthz"))
            done, _ = await asyncio.wait({probe}, timeout=WAIT_S)  # a safety net only
            assert done, "/healthz did not answer while the database hung"
            response = probe.result()
            assert response.status_code == 503
            assert response.json()["database"] == "TimeoutError"
        assert len(calls) == 1  # the second probe waited for the first, not behind it
    finally:
        release.set()


# --- streaming: the publisher against a layer whose sends take a random while ----------


class RandomLayer:
    """A channel layer whose ``group_send`` yields to the loop a random number of times
    (a slow socket, a busy Redis): no clock, a seeded order of events."""

    def __init__(self, rng) -> None:
        self.rng = rng
        self.sent: list[str] = []

    async def group_send(self, group: str, message: dict) -> None:
        import asyncio

        for _ in range(self.rng.randrange(4)):
            await asyncio.sleep(0)
        self.sent.append(message["html"])


class Page:
    """What chat.js does with the fragments: a delta is appended only where its element's
    text ends (``data-offset``), a whole-text fragment replaces the element."""

    DELTA = re.compile(
        r'beforeend:#step-(\d+)-(text|reasoning)" data-offset="(\d+)">(.*)</div>$', re.S
    )
    WHOLE = re.compile(r'id="step-(\d+)-(text|reasoning)" hx-swap-oob="true">(.*)</div>$', re.S)

    def __init__(self, texts: dict[str, str] | None = None) -> None:
        self.texts = dict(texts or {})

    def apply(self, html: str) -> None:
        if match := self.DELTA.search(html):
            _, target, offset, text = match.groups()
            current = self.texts.get(target, "")
            if len(current.encode("utf-16-le")) // 2 == int(offset):  # as JS counts
                self.texts[target] = self.texts.get(target, "") + unescape(text)
        elif match := self.WHOLE.search(html):
            _, target, text = match.groups()
            self.texts[target] = unescape(text)


@pytest.mark.parametrize("flush_ms", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(40))
async def test_streamed_text_is_never_lost_duplicated_or_reordered(seed, flush_ms):
    import asyncio
    import random

    from agents.events import ReasoningDelta, TextDelta
    from chat import fragments
    from chat.live import GroupPublisher
    from chat.recorder import StreamedText, Update

    rng = random.Random(seed)
    layer = RandomLayer(rng)
    publisher = GroupPublisher(layer, 1, flush_s=flush_ms / 1000)
    truth = {"text": "", "reasoning": ""}
    late_tab_at = rng.randrange(60)
    late_tab: Page | None = None
    pages_at_start = Page()
    for n in range(80):
        target = rng.choice(["text", "reasoning"])
        kind = rng.random()
        if kind < 0.75:
            piece = rng.choice(["a", "b<", "&c", "é", "😀", " ", "d\n"])
            event = (ReasoningDelta if target == "reasoning" else TextDelta)(
                iteration=1, text=piece
            )
            offset = len(truth[target].encode("utf-16-le")) // 2
            truth[target] += piece
            update = Update(event=event, run_id=1, conversation_id=1,
                            streamed=StreamedText(7, piece, offset, target=target))  # fmt: skip
        elif kind < 0.9:
            whole = fragments.text_replaced(7, truth["text"])
            if target == "reasoning":
                whole = fragments.reasoning_replaced(7, truth["reasoning"])
            update = Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1,
                            html=whole, streamed=StreamedText(7, truth[target], whole=True,
                                                              target=target))  # fmt: skip
        else:
            update = Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1,
                            html="<div id='other'></div>")  # fmt: skip
        await publisher(update)
        if n == late_tab_at:  # a tab opened now is drawn from the text so far
            late_tab = Page(dict(truth))
            late_from = len(layer.sent)
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
    await publisher.drain()

    def utf16(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    for html in layer.sent:
        pages_at_start.apply(html)
        for target in ("text", "reasoning"):  # never ahead of, or apart from, the truth
            assert truth[target].startswith(pages_at_start.texts.get(target, ""))
    assert pages_at_start.texts.get("text", "") == truth["text"]
    assert pages_at_start.texts.get("reasoning", "") == truth["reasoning"]
    assert late_tab is not None
    for html in layer.sent[late_from:]:
        late_tab.apply(html)
        for target in ("text", "reasoning"):
            assert truth[target].startswith(late_tab.texts.get(target, "")), utf16(truth[target])


# --- benchmarks: one that crashes must fail ---------------------------------------------


def test_the_export_benchmark_exits_non_zero_when_its_exports_crash(tmp_path):
    """bench/export.py ran each export in a child and printed a crashed one as
    "failed (exit 1)" in its table, then exited 0: `make bench-tiny` passed without it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "sitecustomize.py").write_text(
        'import sys\nif "--child" in sys.argv:\n    raise SystemExit(3)\n'
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "bench/export.py", "--sizes", "1000", "--methods", "ours"]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert "failed (exit 1)" in result.stdout + result.stderr
    assert result.returncode != 0


def test_the_page_benchmark_counts_the_statements_of_a_page_load():
    """bench/page.py printed "SQL statements per load 0": it read the captured queries
    after more requests had cleared the connection's log (found by the new-user
    walkthrough)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "bench/page.py", "--tiny"]
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, check=True)
    count = re.search(r"SQL statements per load (\d+)", result.stdout)
    assert count and int(count.group(1)) > 0, result.stdout
    assert "INSERT INTO" in result.stdout  # a new visitor's conversation and session
