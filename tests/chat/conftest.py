"""Shared fixtures: a fast demo model, a scripted model hook, run-task hygiene, and a
websocket communicator and a clock that do not depend on the machine's speed."""

from __future__ import annotations

import asyncio
import dataclasses
import types

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from chat.models import Conversation
from tests.fakes import ScriptedChatModel
from tests.planted_secrets import CUSTOM_PATTERN, Planted, plant_secrets
from tests.timing import WAIT_S


@pytest.fixture
def alice(db) -> tuple[Client, Conversation]:
    """A logged-in client of the user alice, and an empty conversation of hers."""
    user = User.objects.create_user("alice", password="pw")
    client = Client()
    client.force_login(user)
    return client, Conversation.objects.create(owner=user)


@pytest.fixture
def planted_run(db, settings) -> Planted:
    """A stored run with a secret of each kind the redaction policy knows in every text
    field (tests/planted_secrets.py), the operator pattern that catches the custom one
    set, every built-in detector on. ``.secrets``: the strings no export may let out."""
    settings.TRACE_REDACT = ["email", "phone", "card", "api_key", "bearer", "secret"]
    settings.TRACE_REDACT_PATTERNS = [CUSTOM_PATTERN]
    return plant_secrets()


@pytest.fixture(autouse=True)
def _fast_demo_model(settings):
    """Let the demo model stream, and the bundled tools answer, without pauses in tests."""
    settings.DEMO_TOOL_DELAY_MS = 0
    settings.AGENT_MODEL = dataclasses.replace(settings.AGENT_MODEL, provider="demo",
                                               token_delay_s=0.0)  # fmt: skip


@pytest.fixture
def scripted_model(monkeypatch):
    """Make runs use a :class:`ScriptedChatModel`; fill its ``script`` in the test."""
    model = ScriptedChatModel()
    monkeypatch.setattr("chat.catalog.chat_model_for", lambda run=None: model)
    return model


async def wait_for_runs(timeout: float = WAIT_S) -> None:
    """Wait until this process has no run tasks left."""
    from chat.owner import running_tasks

    tasks = running_tasks()
    if tasks:
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)


class Communicator(WebsocketCommunicator):
    """Channels' ``WebsocketCommunicator`` with waits that hold on a busy machine.

    Its own default of 1 s per connect, frame and disconnect is a premise, not a safety
    net: a connect makes four database hops through one ORM thread, and a frame may wait
    behind a run's writes; on a loaded machine a second is not much. ``receive_nothing``
    keeps its short default: "nothing came within" is what it asks.
    """

    async def connect(self, timeout: float = WAIT_S):
        return await super().connect(timeout)

    async def receive_output(self, timeout: float = WAIT_S):
        return await super().receive_output(timeout)

    async def receive_from(self, timeout: float = WAIT_S):
        return await super().receive_from(timeout)

    async def disconnect(self, code: int = 1000, timeout: float = WAIT_S):
        return await super().disconnect(code, timeout)


class FrozenClock:
    """A ``time.monotonic`` that stands still until the test moves it on."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def consumer_clock(monkeypatch) -> FrozenClock:
    """Freeze the chat consumer's clock (its token bucket and notices); return it.

    How many frames a socket may send depends on the time between them: on a loaded
    machine a flood of 200 frames took long enough to earn a token, one frame got through
    and the socket was not closed. With the clock frozen, only ``advance`` earns tokens.
    """
    clock = FrozenClock()
    monkeypatch.setattr("chat.consumers.time", types.SimpleNamespace(monotonic=clock.monotonic))
    return clock


class FakeClock:
    """Both clocks chat.layers reads (``time.time``, ``time.monotonic``), moved by hand
    (seconds): the ``clock`` fixture puts it in place."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """Return a :class:`FakeClock` that chat.layers and Channels' layer read."""
    from chat import layers as chat_layers

    fake = FakeClock()
    # The name ``time`` in the two modules only, not the time module (asyncio reads it):
    # Channels stamps messages with time.time(); chat.layers reads both clocks.
    monkeypatch.setattr("channels.layers.time", fake)
    monkeypatch.setattr(chat_layers, "time", fake)
    return fake
