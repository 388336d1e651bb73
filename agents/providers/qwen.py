"""Qwen: Alibaba Cloud's DashScope in OpenAI-compatible mode, or vLLM serving a Qwen model.

DashScope (https://dashscope.aliyuncs.com/compatible-mode/v1) needs a key; vLLM (set
``OPENAI_BASE_URL``, e.g. ``http://127.0.0.1:8000/v1``) needs none unless started with
``--api-key``. Qwen3's thinking arrives as ``delta.reasoning_content`` (DashScope, vLLM
before 0.9) or ``delta.reasoning`` (newer vLLM) and is not needed back. vLLM started
without ``--enable-auto-tool-choice --tool-call-parser hermes`` returns Qwen's tool calls
as ``<tool_call>{...}</tool_call>`` markup in the content, hence ``text_tool_calls``.
Both servers read ``max_tokens``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.providers.base import ModelConfig, ProviderEntry, Quirks
from agents.providers.openai_compatible import CAPABILITIES, chat_openai

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def build(config: ModelConfig) -> BaseChatModel:
    """Return the chat model for DashScope, or the vLLM server at ``config.base_url``."""
    return chat_openai(config, ENTRY)


ENTRY = ProviderEntry(
    name="qwen",
    label="Qwen (DashScope compatible mode or vLLM)",
    factory=build,
    capabilities=CAPABILITIES,
    # No required key: vLLM serving Qwen needs none. DashScope without one answers 401,
    # which the run reports as a refused key naming OPENAI_API_KEY.
    default_base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
    default_model="qwen-plus",
    quirks=Quirks(text_tool_calls=True, max_tokens_field="max_tokens"),
    context_window=32_768,
)
