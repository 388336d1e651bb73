"""Any OpenAI-compatible chat-completions endpoint, through langchain-openai's ChatOpenAI.

OpenAI itself by default; any other server through ``base_url``, though a server with
an entry of its own (``deepseek``, ``qwen``, ``ollama``, ``llamacpp``, ``lmstudio``) is
better served by it: its entry carries that server's quirks profile. :func:`chat_openai`
builds the model for every such entry, with the entry's profile applied
(:mod:`agents.providers.compatible`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agents.providers.base import Capabilities, ModelConfig, ProviderEntry, Required, TokenUsage

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

CAPABILITIES = Capabilities(usage=TokenUsage.REPORTED, native_tool_calls=True, streaming_usage=True)
# Sent as the key to a local server that needs none: the OpenAI client requires one, and
# an empty string would send a malformed "Authorization: Bearer " header.
NO_KEY = "not-needed"


def chat_openai(config: ModelConfig, entry: ProviderEntry, **extra: Any) -> BaseChatModel:
    """Return a streaming ``CompatibleChatOpenAI`` for ``config`` with ``entry``'s profile.

    The model name and base URL fall back to the entry's defaults; ``max_tokens`` is sent
    when ``config.max_tokens`` is set (in the field the profile names); ``extra`` adds or
    overrides ``ChatOpenAI`` options. langchain-openai is imported here, when a model is
    built, not with the registry.
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


def build(config: ModelConfig) -> BaseChatModel:
    """Return the chat model for OpenAI or the server at ``config.base_url``."""
    return chat_openai(config, ENTRY)


ENTRY = ProviderEntry(
    name="openai",
    label="OpenAI-compatible endpoint",
    factory=build,
    capabilities=CAPABILITIES,
    requires=(Required("api_key", "OPENAI_API_KEY"), Required("model", "OPENAI_MODEL")),
    default_endpoint="api.openai.com",
    default_model="gpt-4o-mini",
)
