"""Chat model providers: one entry per provider, found by name.

Like healthchecks' integrations -> transports map. Every module of this package that
defines ``ENTRY`` (a :class:`~agents.providers.base.ProviderEntry`) is a provider: adding
one is adding its module. ``build_model(ModelConfig(...))`` returns a LangChain
``BaseChatModel``; the entries themselves import no SDK, their factories do when called.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
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

if TYPE_CHECKING:
    from collections.abc import Mapping

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


# Modules of this package that hold shared code, not an entry: never imported by the
# search (compatible.py imports langchain-openai, which only building a model may do).
HELPER_MODULES = frozenset({"base", "compatible"})


class UnknownProvider(ValueError):
    """No entry has this name."""


class MissingSettings(ValueError):
    """The provider's entry requires settings the config leaves empty."""


@functools.cache
def providers() -> Mapping[str, ProviderEntry]:
    """Return every registered entry by name, sorted (read-only; found once).

    Raises ``RuntimeError`` when two modules register the same name.
    """
    found: dict[str, ProviderEntry] = {}
    for module_info in pkgutil.iter_modules(__path__):
        if module_info.name in HELPER_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        entry = getattr(module, "ENTRY", None)
        if not isinstance(entry, ProviderEntry):
            continue
        if entry.name in found:
            raise RuntimeError(f"Two providers are named {entry.name!r} ({module.__name__})")
        found[entry.name] = entry
    return MappingProxyType(dict(sorted(found.items())))


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
    return check_config(config).factory(config)
