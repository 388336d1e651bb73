"""Chat model providers: a name maps to a factory, imported only when used.

Like healthchecks' integrations -> transports map: ``build_model(ModelConfig(...))``
returns a LangChain ``BaseChatModel`` for the configured provider. ``openai`` covers any
OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server) via ``base_url``;
``demo`` is the offline scripted model.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel


@dataclass(frozen=True)
class ModelConfig:
    """What to build: ``provider`` (a key of :data:`PROVIDERS`), model name and options.

    ``timeout_s`` is the HTTP timeout of one request; ``max_retries`` the client's retry
    count; ``token_delay_s`` only affects the demo model (a pause between streamed chunks).
    """

    provider: str = "demo"
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    temperature: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 2
    token_delay_s: float = 0.0

    @property
    def model_name(self) -> str:
        """Return the model's name as runs record it."""
        return "demo-scripted" if self.provider == "demo" else self.model

    @property
    def label(self) -> str:
        """Return a one-line, human description of the model, as the page shows it."""
        if self.provider == "demo":
            return "Offline demo model (scripted, not an LLM)"
        where = self.base_url or "api.openai.com"
        return f"{self.model} via {where}"


def _build_demo(config: ModelConfig) -> BaseChatModel:
    from agents.demo import DemoChatModel

    return DemoChatModel(token_delay_s=config.token_delay_s)


def _build_openai(config: ModelConfig) -> BaseChatModel:
    langchain_openai = importlib.import_module("langchain_openai")
    kwargs: dict[str, object] = {
        "model": config.model,
        "api_key": config.api_key,
        "timeout": config.timeout_s,
        "max_retries": config.max_retries,
        "streaming": True,
        # Ask for token counts in the last streamed chunk (OpenAI's stream_options).
        "stream_usage": True,
    }
    if config.base_url:
        kwargs["base_url"] = config.base_url
    if config.temperature is not None:
        kwargs["temperature"] = config.temperature
    return langchain_openai.ChatOpenAI(**kwargs)


PROVIDERS: dict[str, Callable[[ModelConfig], BaseChatModel]] = {
    "demo": _build_demo,
    "openai": _build_openai,
}


def build_model(config: ModelConfig) -> BaseChatModel:
    """Return the chat model ``config`` describes.

    Raises ``ValueError`` for an unknown provider or an ``openai`` config without a model
    name.
    """
    factory = PROVIDERS.get(config.provider)
    if factory is None:
        raise ValueError(
            f"Unknown model provider {config.provider!r}; choose one of {sorted(PROVIDERS)}"
        )
    if config.provider == "openai" and not config.model:
        raise ValueError("The openai provider needs a model name (OPENAI_MODEL).")
    return factory(config)
