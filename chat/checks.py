"""System checks of the agent's configuration, run at start-up.

``manage.py`` runs them before ``migrate``, ``ask`` and the other commands; Daphne runs
no checks, so ``project/asgi.py`` calls :func:`require_agent_checks` before serving; the
test suite runs every check when its session starts (``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from agents.providers import MissingSettings, UnknownProvider, check_config

TAG = "agents"
UNKNOWN_PROVIDER_ID = "chat.E001"
MISSING_SETTINGS_ID = "chat.E002"


# Per failure: its id and what to do about it.
_HELP: dict[type[ValueError], tuple[str, str]] = {
    UnknownProvider: (
        UNKNOWN_PROVIDER_ID,
        "Unset, AGENT_PROVIDER is openai when OPENAI_API_KEY is set, else demo "
        "(docs/configuration.md).",
    ),
    MissingSettings: (
        MISSING_SETTINGS_ID,
        "Set what it names in the environment, or choose another AGENT_PROVIDER "
        "(docs/configuration.md).",
    ),
}


def check_agent_model(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Return an error when ``AGENT_PROVIDER`` names no provider, or one that lacks settings."""
    try:
        check_config(settings.AGENT_MODEL)
    except (UnknownProvider, MissingSettings) as exc:
        check_id, hint = _HELP[type(exc)]
        return [checks.Error(str(exc), hint=hint, id=check_id)]
    return []


def require_agent_checks() -> None:
    """Raise ``ImproperlyConfigured`` listing the agent check errors, if there are any.

    For entry points that run no checks of their own (Daphne serving project/asgi.py).
    """
    errors = [
        message
        for message in checks.run_checks(tags=[TAG])
        if message.is_serious() and not message.is_silenced()
    ]
    if errors:
        listed = "\n".join(str(message) for message in errors)
        raise ImproperlyConfigured(f"The agent is not configured; not serving.\n{listed}")
