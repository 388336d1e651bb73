"""LM Studio's local server (http://127.0.0.1:1234/v1), no key.

It serves the model named by ``OPENAI_MODEL`` (its identifier in LM Studio, loaded on
demand), so that setting is required. It runs llama.cpp underneath: ``max_tokens`` is
the cap it reads, an assistant message with tool calls is sent with ``content: ""``, and
a model without tool-call support in LM Studio writes its calls into the content. Its
default context length is 4,096 tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.providers.base import ModelConfig, ProviderEntry, Quirks, Required
from agents.providers.openai_compatible import CAPABILITIES, chat_openai

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def build(config: ModelConfig) -> BaseChatModel:
    """Return the chat model for LM Studio (``config.base_url`` or the default)."""
    return chat_openai(config, ENTRY)


ENTRY = ProviderEntry(
    name="lmstudio",
    label="LM Studio",
    factory=build,
    capabilities=CAPABILITIES,
    requires=(Required("model", "OPENAI_MODEL"),),
    default_base_url="http://127.0.0.1:1234/v1",
    quirks=Quirks(
        text_tool_calls=True, empty_content_with_tool_calls=True, max_tokens_field="max_tokens"
    ),
    context_window=4_096,
)
