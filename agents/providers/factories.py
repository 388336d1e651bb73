"""The two ways a provider's chat model is built: OpenAI's protocol, or the offline demo.

A factory takes the config and the entry it was found by (the entry carries the server's
defaults and :class:`~agents.providers.base.Quirks`) and imports its SDK only when called,
so the table of entries imports none.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from agents.providers.base import ModelConfig, ProviderEntry

# Sent as the key to a local server that needs none: the OpenAI client requires one, and
# an empty string would send a malformed "Authorization: Bearer " header.
NO_KEY = "not-needed"


def chat_openai(config: ModelConfig, entry: ProviderEntry, **extra: Any) -> BaseChatModel:
    """Return a streaming ``CompatibleChatOpenAI`` for ``config`` with ``entry``'s profile.

    The model name and base URL fall back to the entry's defaults; ``max_tokens`` is sent
    when ``config.max_tokens`` is set (in the field the profile names); ``extra`` adds or
    overrides ``ChatOpenAI`` options.
    """
    compatible = importlib.import_module("agents.providers.compatible")
    kwargs: dict[str, Any] = {
        "model": entry.model_name(config),
        "api_key": config.api_key or NO_KEY,
        "timeout": config.timeout_s,
        "max_retries": config.max_retries,
        "streaming": True,
        # Ask for token counts in the last streamed chunk (OpenAI's stream_options).
        "stream_usage": entry.capabilities.streaming_usage,
        "quirks": entry.quirks,
    }
    if base_url := entry.base_url(config):
        kwargs["base_url"] = base_url
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    if config.max_tokens:
        kwargs["max_tokens"] = config.max_tokens
    return compatible.CompatibleChatOpenAI(**{**kwargs, **extra})


def demo_model(config: ModelConfig, entry: ProviderEntry) -> BaseChatModel:
    """Return the scripted demo model, streaming with ``config.token_delay_s`` between chunks."""
    from agents.demo import DemoChatModel

    return DemoChatModel(token_delay_s=config.token_delay_s)
