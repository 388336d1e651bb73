"""Shared fixtures: a fast demo model, a scripted model hook, and run-task hygiene."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.fakes import ScriptedChatModel


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
    monkeypatch.setattr("chat.runs.get_model", lambda: model)
    return model


async def wait_for_runs(timeout: float = 10.0) -> None:
    """Wait until this process has no run tasks left."""
    from chat.runs import running_tasks

    tasks = running_tasks()
    if tasks:
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)
