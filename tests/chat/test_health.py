"""``GET /healthz`` (chat/health.py): 200 when the database and the channel layer work,
503 naming the part that does not. Failures are made at the edge: the database driver's
connection and the layer object."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import AsyncClient

from chat import health
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_healthy_process_answers_200_ok_without_a_session_or_caching():
    client = AsyncClient(enforce_csrf_checks=True)
    response = await client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert isinstance(body.pop("undelivered"), int)  # the process's count, any test's drops
    assert body == {"status": "ok", "database": "ok", "channel_layer": "ok"}
    assert "no-store" in response["Cache-Control"]
    assert not response.cookies  # no session, no CSRF cookie


async def test_head_is_answered_and_other_methods_are_refused():
    client = AsyncClient()
    assert (await client.head("/healthz")).status_code == 200
    assert (await client.post("/healthz")).status_code == 405


async def test_a_database_that_does_not_answer_is_503_naming_the_database(monkeypatch):
    def refuse(self):
        raise OperationalError("connection refused (host db.internal)")

    monkeypatch.setattr(BaseDatabaseWrapper, "ensure_connection", refuse)
    response = await AsyncClient().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    del body["undelivered"]
    assert body == {"status": "failing", "database": "OperationalError", "channel_layer": "ok"}
    assert "db.internal" not in response.content.decode()  # the reason goes to the log only


class BrokenLayer:
    """A channel layer whose server is gone, as channels-redis is when Redis is down."""

    async def new_channel(self) -> str:
        return "specific.health!probe"

    async def send(self, channel: str, message: dict) -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


class SilentLayer(BrokenLayer):
    """A layer that accepts the probe and never delivers it."""

    async def send(self, channel: str, message: dict) -> None:
        return None

    async def receive(self, channel: str) -> dict:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_channel_layer_that_fails_is_503_naming_the_layer(monkeypatch):
    monkeypatch.setattr(health, "get_channel_layer", lambda: BrokenLayer())
    response = await AsyncClient().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    del body["undelivered"]
    assert body == {"status": "failing", "database": "ok", "channel_layer": "ConnectionError"}


async def test_a_channel_layer_that_hangs_is_503_after_the_time_limit(monkeypatch):
    monkeypatch.setattr(health, "get_channel_layer", lambda: SilentLayer())
    monkeypatch.setattr(health, "CHECK_TIMEOUT_S", 0.05)
    response = await AsyncClient().get("/healthz")
    assert response.status_code == 503
    assert response.json()["channel_layer"] == "TimeoutError"


async def test_no_channel_layer_at_all_is_503(monkeypatch):
    monkeypatch.setattr(health, "get_channel_layer", lambda: None)
    response = await AsyncClient().get("/healthz")
    assert response.status_code == 503
    assert response.json()["channel_layer"] == "RuntimeError"


async def test_a_database_that_hangs_is_503_at_the_time_limit_and_probes_do_not_pile_up(
    monkeypatch,
):
    """An unreachable PostgreSQL makes the pool wait its own 60 s for a connection; the
    query runs in the ORM's thread, which asgiref's SyncToAsync waits for even when
    cancelled, so /healthz answered only when the driver gave up: a load balancer saw a
    time-out, not a 503 (a real Daphne on a wrong database port: no answer in 30 s)."""
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
