"""DeepSeek's API (https://api.deepseek.com), OpenAI's protocol with a thinking mode.

In thinking mode (``deepseek-reasoner``, and the V3.2+ models with thinking on) the
reply streams ``delta.reasoning_content`` before its answer or tool calls, and the next
request must carry that reasoning back on the assistant message, or the API answers
HTTP 400 "Missing reasoning_content field in the assistant message" (its guide,
thinking_mode#tool-calls): every tool-using run would fail on its second turn.
langchain-deepseek's ``ChatDeepSeek`` (1.1.1) reads the reasoning but does not send it
back (langchain-ai/langchain#39370), so this entry uses
:class:`~agents.providers.compatible.CompatibleChatOpenAI` with ``send_reasoning_content``.
DeepSeek documents ``max_tokens``, not ``max_completion_tokens``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.providers.base import ModelConfig, ProviderEntry, Quirks, Required
from agents.providers.openai_compatible import CAPABILITIES, chat_openai

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def build(config: ModelConfig) -> BaseChatModel:
    """Return the chat model for DeepSeek (or ``config.base_url``, e.g. a proxy)."""
    return chat_openai(config, ENTRY)


ENTRY = ProviderEntry(
    name="deepseek",
    label="DeepSeek",
    factory=build,
    capabilities=CAPABILITIES,
    requires=(Required("api_key", "OPENAI_API_KEY"),),
    default_base_url="https://api.deepseek.com/v1",
    default_model="deepseek-chat",
    quirks=Quirks(send_reasoning_content=True, max_tokens_field="max_tokens"),
    context_window=65_536,
)
