"""The whole suite: Django's system checks first, as ``manage.py`` runs them before work."""

from __future__ import annotations

import io

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop before any test when a system check fails (pytest-django runs none itself).

    An unknown ``AGENT_PROVIDER`` in the environment, say, would otherwise show up as
    unrelated failures of the browser tests, whose servers refuse to start.
    """
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    try:
        call_command("check", stdout=io.StringIO())
    except SystemCheckError as exc:
        pytest.exit(f"Django's system checks failed, so no test ran:\n{exc}", returncode=4)


@pytest.fixture(autouse=True)
def _fresh_channel_layers():
    """Give each test new channel layers.

    A layer is cached per process, and channels-redis' layer keeps locks bound to the
    event loop that first used them: a test whose disconnect timed out on a loaded
    machine left one held, and every later test on Redis failed with "bound to a
    different event loop" (seen in a review run of the PostgreSQL + Redis pass).
    """
    yield
    from channels.layers import channel_layers

    channel_layers.backends.clear()
