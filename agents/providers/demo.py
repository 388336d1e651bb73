"""The offline demo: a scripted model that needs no key and no network."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.providers.base import Capabilities, ModelConfig, ProviderEntry, TokenUsage

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def build(config: ModelConfig) -> BaseChatModel:
    """Return the demo model, streaming with ``config.token_delay_s`` between chunks."""
    from agents.demo import DemoChatModel

    return DemoChatModel(token_delay_s=config.token_delay_s)


ENTRY = ProviderEntry(
    name="demo",
    label="Offline demo model",
    factory=build,
    # It makes native tool calls and counts tokens as characters / 4, on its last chunk.
    capabilities=Capabilities(
        usage=TokenUsage.ESTIMATED, native_tool_calls=True, streaming_usage=True
    ),
    fixed_model_name="demo-scripted",
    fixed_model_label="Offline demo model (scripted, not an LLM)",
    scripted=True,
)
