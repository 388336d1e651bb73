"""The whole suite: Django's system checks first, as ``manage.py`` runs them before work;
each xdist worker's own Redis prefix; and which tests CI's PostgreSQL + Redis pass runs
(the ``backends`` marker, docs/testing.md)."""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# pytest-django's fixtures that give a test the database: the ``django_db`` marker or any
# of these among the fixtures it uses, directly or through its own fixtures.
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
     "live_server", "admin_user", "admin_client", "django_user_model"}
)  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    """Give this test process a Redis prefix of its own (``REDIS_PREFIX``), here and in
    every server a test starts: pub/sub channels are global to a Redis server, and two
    xdist workers' conversation 1 would otherwise hear each other's runs (so would two
    test runs at once: the prefix names the run too, one process or several)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker and getattr(config.option, "numprocesses", None):
        return  # xdist's controller: its workers set their own
    from django.conf import settings

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    prefix = f"{settings.REDIS_PREFIX}-{run[:8]}-{worker or 'main'}"
    os.environ["REDIS_PREFIX"] = prefix
    settings.REDIS_PREFIX = prefix
    for layer in settings.CHANNEL_LAYERS.values():
        if "prefix" in layer.get("CONFIG", {}):
            layer["CONFIG"]["prefix"] = prefix


def touches_backends(item: pytest.Item) -> bool:
    """Return whether ``item``'s outcome can depend on the database or the channel layer
    configured: it uses the database, Redis (the ``redis_url`` fixture) or a deployment of
    several processes (``tests/deploy``). A browser test counts only when marked
    ``backends`` itself: its server keeps a SQLite file of its own in every pass."""
    if item.get_closest_marker("browser"):
        return False
    return (
        item.get_closest_marker("django_db") is not None
        or bool(DATABASE_FIXTURES.intersection(item.fixturenames))
        or "redis_url" in item.fixturenames
        or (TESTS / "deploy") in Path(item.path).parents
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests CI's PostgreSQL + Redis pass runs (``backends``), and keep each
    module's browser tests on one xdist worker (``--dist loadgroup``), so that they share
    its Chromium instead of each worker launching one."""
    for item in items:
        if touches_backends(item):
            item.add_marker(pytest.mark.backends)
        if item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


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


@pytest.fixture(autouse=True)
def _run_owner_closed(request: pytest.FixtureRequest) -> None:
    """Close the run owner an async test opened in its event loop (``chat.owner.current``)
    before pytest-asyncio closes that loop (:func:`_close_run_owner`).

    Only for async tests: an async fixture on a sync test runs in a loop of its own, which
    fails under Playwright's sync API (its loop runs in the test's thread).
    """
    if request.node.get_closest_marker("asyncio") is not None:
        request.getfixturevalue("_close_run_owner")


@pytest.fixture
async def _close_run_owner():
    """Close this test loop's run owner, if it has one, as the loop's last work.

    Closing the loop cancels every task at once, the Redis layer's receiver with the
    owner's ``receive``, which then unsubscribes its channel and waits for a reply no
    receiver reads: the loop's close hung for ever (seen once in CI's PostgreSQL + Redis
    pass, until pytest-timeout failed the test after 300 s). Closed here, the owner's
    receive ends while the receiver lives, as ``RunOwner.close`` does in a server.
    """
    yield
    from chat.owner import close_current

    await close_current()


@pytest.fixture(autouse=True)
def _nothing_learned():
    """Forget what model servers taught (agents.providers.learned) after each test: the
    lessons are kept by base URL, and a fake server's port is used again by later tests."""
    yield
    from agents.providers.learned import forget

    forget()


@pytest.fixture
def redis_url() -> str:
    """Return ``REDIS_URL``, or skip: the test is about the Redis channel layer, which CI's
    PostgreSQL + Redis pass configures."""
    url = os.environ.get("REDIS_URL", "")
    if not url:
        pytest.skip("the Redis channel layer is tested in CI's PostgreSQL + Redis pass")
    return url
