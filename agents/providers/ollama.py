"""Ollama's OpenAI-compatible endpoint (http://127.0.0.1:11434/v1), no key.

The model is whatever ``ollama pull`` fetched, so ``OPENAI_MODEL`` is required. Ollama
streams thinking as ``delta.reasoning``, reads ``max_tokens``, and a model whose template
has no tool parser writes its tool calls into the content as markup. Its default context
(``num_ctx``) is small and it cuts a longer prompt from the front without an error, so
the entry's context window is that default: prompts are trimmed before Ollama does it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.providers.base import ModelConfig, ProviderEntry, Quirks, Required
from agents.providers.openai_compatible import CAPABILITIES, chat_openai

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def build(config: ModelConfig) -> BaseChatModel:
    """Return the chat model for the Ollama server (``config.base_url`` or the default)."""
    return chat_openai(config, ENTRY)


ENTRY = ProviderEntry(
    name="ollama",
    label="Ollama",
    factory=build,
    capabilities=CAPABILITIES,
    requires=(Required("model", "OPENAI_MODEL"),),
    default_base_url="http://127.0.0.1:11434/v1",
    quirks=Quirks(text_tool_calls=True, max_tokens_field="max_tokens"),
    context_window=4_096,
)
