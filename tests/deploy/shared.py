"""What the deployment tests need: the shared database and Redis, or a skip that says why.

Set ``REDIS_URL`` and a PostgreSQL ``DATABASE_URL`` to run them (CI's "Suite on
PostgreSQL + Redis" pass does). ``REQUIRE_SHARED_DEPLOYMENT=1`` turns every skip of this
package into a failure, so that pass cannot go green having proven nothing.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

REQUIRE = "REQUIRE_SHARED_DEPLOYMENT"


def required() -> bool:
    """Return whether a skip of the deployment tests must fail instead."""
    return os.environ.get(REQUIRE, "") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail with it when ``REQUIRE_SHARED_DEPLOYMENT=1``."""
    if required():
        pytest.fail(f"{reason} ({REQUIRE}=1: this test must run here)", pytrace=False)
    pytest.skip(reason)


def shared_urls() -> tuple[str, str]:
    """Return ``(DATABASE_URL, REDIS_URL)`` of a shared deployment, or skip (or fail)."""
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url or not database_url.startswith(("postgres://", "postgresql://")):
        skip_or_fail(
            "needs REDIS_URL and a PostgreSQL DATABASE_URL (several processes share them); "
            "see tests/deploy/shared.py"
        )
    return database_url, redis_url


def with_database_name(database_url: str, name: str) -> str:
    """Return ``database_url`` naming database ``name`` (pytest-django's ``test_...``)."""
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def server_env(**extra: str) -> dict[str, str]:
    """Return the environment of a server process of the deployment tests: this one's,
    on the test database (pytest-django's) and Redis of :func:`shared_urls`, with the
    offline demo model quick, no rate limit and no API key; ``extra`` on top."""
    from django.db import connection

    database_url, redis_url = shared_urls()
    env = {
        **os.environ,
        "DATABASE_URL": with_database_name(database_url, connection.settings_dict["NAME"]),
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DEMO_TOKEN_DELAY_MS": "5",
        "DEMO_TOOL_DELAY_MS": "50",
        "CHAT_RUNS_PER_MINUTE": "0",
        **extra,
    }
    env.pop("OPENAI_API_KEY", None)
    return env
