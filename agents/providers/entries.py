"""Every model provider, one row each: the closed set ``AGENT_PROVIDER`` chooses from.

Like healthchecks' ``TRANSPORTS``: a provider is its row. A row says how its model is
built (a factory of :mod:`agents.providers.factories`), what the provider needs, its
defaults and its server's :class:`~agents.providers.base.Quirks`; each server's quirks
and how to connect it are in docs/models.md.
"""

from __future__ import annotations

from agents.providers.base import Capabilities, ProviderEntry, Quirks, Required, TokenUsage
from agents.providers.factories import chat_openai, demo_model

# Token counts in the stream's last chunk, and native tool calls (llama-cpp-python's
# server sends no counts when streaming: its turns then have none).
REPORTED = Capabilities(usage=TokenUsage.REPORTED, native_tool_calls=True, streaming_usage=True)

ENTRIES: tuple[ProviderEntry, ...] = (
    ProviderEntry(
        name="demo",
        label="Offline demo model",
        factory=demo_model,
        # Native tool calls, and counts of characters / 4 on its last chunk.
        capabilities=Capabilities(
            usage=TokenUsage.ESTIMATED, native_tool_calls=True, streaming_usage=True
        ),
        fixed_model_name="demo-scripted",
        fixed_model_label="Offline demo model (scripted, not an LLM)",
        scripted=True,
    ),
    # OpenAI by default; any other OpenAI-compatible server through OPENAI_BASE_URL.
    ProviderEntry(
        name="openai",
        label="OpenAI-compatible endpoint",
        factory=chat_openai,
        capabilities=REPORTED,
        requires=(Required("api_key", "OPENAI_API_KEY"), Required("model", "OPENAI_MODEL")),
        default_endpoint="api.openai.com",
        default_model="gpt-4o-mini",
    ),
    # Thinking mode needs each assistant message's reasoning_content sent back (HTTP 400
    # "Missing reasoning_content" otherwise), which langchain-deepseek's ChatDeepSeek
    # does not do (langchain-ai/langchain#39370).
    ProviderEntry(
        name="deepseek",
        label="DeepSeek",
        factory=chat_openai,
        capabilities=REPORTED,
        requires=(Required("api_key", "OPENAI_API_KEY"),),
        default_base_url="https://api.deepseek.com/v1",
        default_model="deepseek-chat",
        quirks=Quirks(send_reasoning_content=True, max_tokens_field="max_tokens"),
        context_window=65_536,
    ),
    # Mistral's API speaks OpenAI's protocol, but takes only tool-call ids of nine letters
    # and digits (HTTP 400 "Tool call id was ... but must be a-z, A-Z, 0-9, with a length
    # of 9.") and reads the output cap as max_tokens.
    ProviderEntry(
        name="mistral",
        label="Mistral AI",
        factory=chat_openai,
        capabilities=REPORTED,
        requires=(Required("api_key", "OPENAI_API_KEY"),),
        default_base_url="https://api.mistral.ai/v1",
        default_model="mistral-small-latest",
        quirks=Quirks(tool_call_ids="alnum9", max_tokens_field="max_tokens"),
        context_window=32_768,
    ),
    # DashScope needs a key, vLLM serving Qwen none: no key is required (DashScope
    # without one answers 401, reported as a refused key naming OPENAI_API_KEY).
    ProviderEntry(
        name="qwen",
        label="Qwen (DashScope compatible mode or vLLM)",
        factory=chat_openai,
        capabilities=REPORTED,
        default_base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
        default_model="qwen-plus",
        quirks=Quirks(text_tool_calls=True, max_tokens_field="max_tokens"),
        context_window=32_768,
    ),
    # The model is whatever `ollama pull` fetched. Its default num_ctx is small and it cuts
    # a longer prompt from the front silently: prompts are trimmed to it first.
    ProviderEntry(
        name="ollama",
        label="Ollama",
        factory=chat_openai,
        capabilities=REPORTED,
        requires=(Required("model", "OPENAI_MODEL"),),
        default_base_url="http://127.0.0.1:11434/v1",
        quirks=Quirks(text_tool_calls=True, max_tokens_field="max_tokens"),
        context_window=4_096,
    ),
    # The model is the one the server loaded (the request's name is only a label). It
    # answers HTTP 500 to `content: null` beside tool calls and ignores
    # max_completion_tokens.
    ProviderEntry(
        name="llamacpp",
        label="llama.cpp server",
        factory=chat_openai,
        capabilities=REPORTED,
        default_base_url="http://127.0.0.1:8080/v1",
        default_model="local",
        quirks=Quirks(
            text_tool_calls=True, empty_content_with_tool_calls=True, max_tokens_field="max_tokens"
        ),
        context_window=8_192,
    ),
    # llama.cpp underneath, serving the model OPENAI_MODEL names (loaded on demand).
    ProviderEntry(
        name="lmstudio",
        label="LM Studio",
        factory=chat_openai,
        capabilities=REPORTED,
        requires=(Required("model", "OPENAI_MODEL"),),
        default_base_url="http://127.0.0.1:1234/v1",
        quirks=Quirks(
            text_tool_calls=True, empty_content_with_tool_calls=True, max_tokens_field="max_tokens"
        ),
        context_window=4_096,
    ),
)
