"""Any OpenAI-compatible chat-completions endpoint, through langchain-openai's ChatOpenAI.

OpenAI itself by default; a local server (vLLM, Ollama, llama.cpp, LM Studio) through
``base_url``. :func:`chat_openai` is shared with entries for servers that speak this
protocol with defaults or quirks of their own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agents.providers.base import Capabilities, ModelConfig, ProviderEntry, Required, TokenUsage

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

CAPABILITIES = Capabilities(usage=TokenUsage.REPORTED, native_tool_calls=True, streaming_usage=True)


def chat_openai(
    config: ModelConfig, *, capabilities: Capabilities = CAPABILITIES, **extra: Any
) -> BaseChatModel:
    """Return a streaming ``ChatOpenAI`` for ``config``; ``extra`` adds or overrides options.

    langchain-openai is imported here, when a model is built, not with the registry.
    """
    langchain_openai = importlib.import_module("langchain_openai")
    kwargs: dict[str, Any] = {
        "model": config.model,
        "api_key": config.api_key,
        "timeout": config.timeout_s,
        "max_retries": config.max_retries,
        "streaming": True,
        # Ask for token counts in the last streamed chunk (OpenAI's stream_options).
        "stream_usage": capabilities.streaming_usage,
    }
    if config.base_url:
        kwargs["base_url"] = config.base_url
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    return langchain_openai.ChatOpenAI(**{**kwargs, **extra})


def build(config: ModelConfig) -> BaseChatModel:
    """Return ``ChatOpenAI`` for OpenAI or the server at ``config.base_url``."""
    return chat_openai(config)


ENTRY = ProviderEntry(
    name="openai",
    label="OpenAI-compatible endpoint",
    factory=build,
    capabilities=CAPABILITIES,
    requires=(Required("api_key", "OPENAI_API_KEY"), Required("model", "OPENAI_MODEL")),
    default_endpoint="api.openai.com",
)
