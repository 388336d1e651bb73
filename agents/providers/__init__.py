"""Chat model providers: one entry per provider, found by name.

The entries are one table (:data:`agents.providers.entries.ENTRIES`), as healthchecks
lists its integrations: adding a provider is adding its row. ``build_model(ModelConfig(...))``
returns a LangChain ``BaseChatModel``; the entries import no SDK, their factories do when
called.
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import TYPE_CHECKING

from agents.providers.base import (
    Capabilities,
    ModelConfig,
    ProviderEntry,
    Quirks,
    Required,
    TokenUsage,
)
from agents.providers.entries import ENTRIES

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from langchain_core.language_models import BaseChatModel

__all__ = [
    "Capabilities",
    "MissingSettings",
    "ModelConfig",
    "ProviderEntry",
    "Quirks",
    "Required",
    "TokenUsage",
    "UnknownProvider",
    "build_model",
    "check_config",
    "find_provider",
    "get_provider",
    "providers",
]

UNKNOWN_PROVIDER = "Unknown model provider {name!r} (AGENT_PROVIDER); choose one of: {choices}."
MISSING_SETTINGS = "The {name} provider ({label}) needs {settings}, which {verb} not set."


class UnknownProvider(ValueError):
    """No entry has this name."""


class MissingSettings(ValueError):
    """The provider's entry requires settings the config leaves empty."""


def index(entries: Iterable[ProviderEntry]) -> Mapping[str, ProviderEntry]:
    """Return ``entries`` by name, sorted (read-only).

    Raises ``RuntimeError`` when two entries have the same name.
    """
    found: dict[str, ProviderEntry] = {}
    for entry in entries:
        if entry.name in found:
            raise RuntimeError(f"Two providers are named {entry.name!r}")
        found[entry.name] = entry
    return MappingProxyType(dict(sorted(found.items())))


@functools.cache
def providers() -> Mapping[str, ProviderEntry]:
    """Return every entry of the table by name, sorted (read-only)."""
    return index(ENTRIES)


def find_provider(name: str) -> ProviderEntry | None:
    """Return the entry named ``name``, or None when there is none (a stored run's old one)."""
    return providers().get(name)


def get_provider(name: str) -> ProviderEntry:
    """Return the entry named ``name``; raise :class:`UnknownProvider` naming the choices."""
    entry = find_provider(name)
    if entry is None:
        choices = ", ".join(f"{e.name} ({e.label})" for e in providers().values())
        raise UnknownProvider(UNKNOWN_PROVIDER.format(name=name, choices=choices))
    return entry


def check_config(config: ModelConfig) -> ProviderEntry:
    """Return the entry of ``config``'s provider once ``config`` has what it requires.

    Raises :class:`UnknownProvider` or :class:`MissingSettings` (both ``ValueError``s).
    """
    entry = get_provider(config.provider)
    missing = entry.missing_settings(config)
    if missing:
        raise MissingSettings(
            MISSING_SETTINGS.format(
                name=entry.name,
                label=entry.label,
                settings=" and ".join(missing),
                verb="is" if len(missing) == 1 else "are",
            )
        )
    return entry


def build_model(config: ModelConfig) -> BaseChatModel:
    """Return the chat model ``config`` describes; raise as :func:`check_config` does."""
    entry = check_config(config)
    return entry.factory(config, entry)
