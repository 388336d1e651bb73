"""llama.cpp's server (``llama-server``) or llama-cpp-python's (http://127.0.0.1:8080/v1).

No key, and the model is the one the server loaded (the request's model name is only a
label), so neither setting is required. Its quirks, measured against
llama-cpp-python[server]: an assistant message with tool calls and
``content: null`` gets HTTP 500 (sent as ""), ``max_completion_tokens`` is ignored (the
cap goes as ``max_tokens``, or a small model can stream until the turn's time limit),
tool names are repeated on every streamed chunk and some builds send ``arguments`` as an
object (both repaired for every entry), a prompt over its context gets HTTP 200 and an
empty stream (reported as such), and with a chat format that has no tool parser tool
calls come as markup in the content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.providers.base import Capabilities, ModelConfig, ProviderEntry, Quirks, TokenUsage
from agents.providers.openai_compatible import chat_openai

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def build(config: ModelConfig) -> BaseChatModel:
    """Return the chat model for the llama.cpp server (``config.base_url`` or the default)."""
    return chat_openai(config, ENTRY)


ENTRY = ProviderEntry(
    name="llamacpp",
    label="llama.cpp server",
    factory=build,
    # llama-server reports usage in its last chunk; llama-cpp-python's server sends none
    # when streaming (the turn then has no counts).
    capabilities=Capabilities(
        usage=TokenUsage.REPORTED, native_tool_calls=True, streaming_usage=True
    ),
    default_base_url="http://127.0.0.1:8080/v1",
    default_model="local",
    quirks=Quirks(
        text_tool_calls=True, empty_content_with_tool_calls=True, max_tokens_field="max_tokens"
    ),
    context_window=8_192,
)
