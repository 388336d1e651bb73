"""The entries for servers that bend OpenAI's protocol: DeepSeek, Qwen, Ollama, llama.cpp
and LM Studio. Each is built from the settings as the app builds it, with its endpoint,
model name, requirements and quirks profile (what each flag does is tested in
test_provider_quirks.py, through HTTP in test_openai_compatible.py)."""

from __future__ import annotations

import pytest

from agents.providers import MissingSettings, ModelConfig, Quirks, build_model, get_provider
from agents.providers.compatible import CompatibleChatOpenAI
from agents.providers.openai_compatible import NO_KEY

EXPECTED = {
    # name: (base URL, default model, settings required with nothing set, quirks)
    "openai": ("", "gpt-4o-mini", ["OPENAI_API_KEY", "OPENAI_MODEL"], Quirks()),
    "deepseek": ("https://api.deepseek.com/v1", "deepseek-chat", ["OPENAI_API_KEY"],
                 Quirks(send_reasoning_content=True, max_tokens_field="max_tokens")),
    "qwen": ("https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus", [],
             Quirks(text_tool_calls=True, max_tokens_field="max_tokens")),
    "ollama": ("http://127.0.0.1:11434/v1", "", ["OPENAI_MODEL"],
               Quirks(text_tool_calls=True, max_tokens_field="max_tokens")),
    "llamacpp": ("http://127.0.0.1:8080/v1", "local", [],
                 Quirks(text_tool_calls=True, empty_content_with_tool_calls=True,
                        max_tokens_field="max_tokens")),
    "lmstudio": ("http://127.0.0.1:1234/v1", "", ["OPENAI_MODEL"],
                 Quirks(text_tool_calls=True, empty_content_with_tool_calls=True,
                        max_tokens_field="max_tokens")),
}  # fmt: skip


@pytest.mark.parametrize("name", EXPECTED)
def test_each_entry_has_its_endpoint_model_requirements_and_profile(name):
    base_url, default_model, required, quirks = EXPECTED[name]
    entry = get_provider(name)
    assert entry.default_base_url == base_url
    assert entry.default_model == default_model
    assert entry.missing_settings(ModelConfig(provider=name)) == required
    assert entry.quirks == quirks
    assert entry.label and entry.context_window >= 4_096
    assert entry.capabilities.native_tool_calls


@pytest.mark.parametrize("name", [n for n in EXPECTED if n != "openai"])
def test_each_entry_builds_a_compatible_client_for_its_default_endpoint(name):
    base_url, default_model, _, quirks = EXPECTED[name]
    config = ModelConfig(provider=name, model="" if default_model else "my-model",
                         api_key="sk-x", max_tokens=128, timeout_s=9, max_retries=3)  # fmt: skip
    client = build_model(config)
    assert isinstance(client, CompatibleChatOpenAI)
    assert client.openai_api_base == base_url
    assert client.model_name == (default_model or "my-model")
    assert client.quirks == quirks
    assert client.streaming and client.max_tokens == 128
    assert client.request_timeout == 9 and client.max_retries == 3
    assert get_provider(name).model_name(config) == client.model_name


@pytest.mark.parametrize("name", ["qwen", "llamacpp"])
def test_a_server_that_needs_no_key_gets_a_placeholder_not_an_empty_header(name):
    client = build_model(ModelConfig(provider=name, base_url="http://127.0.0.1:9/v1"))
    assert client.openai_api_key.get_secret_value() == NO_KEY
    assert client.openai_api_base == "http://127.0.0.1:9/v1"


def test_the_base_url_setting_overrides_the_default_endpoint_and_the_page_shows_its_host():
    entry = get_provider("qwen")
    local = ModelConfig(provider="qwen", model="Qwen/Qwen3-8B", base_url="http://gpu:8000/v1")
    assert entry.base_url(local) == "http://gpu:8000/v1"
    assert entry.model_label(local) == "Qwen/Qwen3-8B via gpu:8000"
    assert entry.model_label(ModelConfig(provider="qwen")) == (
        "qwen-plus via dashscope.aliyuncs.com"
    )
    assert get_provider("llamacpp").model_label(ModelConfig(provider="llamacpp")) == (
        "local via 127.0.0.1:8080"
    )


def test_deepseek_without_a_key_is_a_configuration_error():
    with pytest.raises(MissingSettings, match="needs OPENAI_API_KEY"):
        build_model(ModelConfig(provider="deepseek"))
