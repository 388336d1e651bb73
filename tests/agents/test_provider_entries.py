"""Each row of the provider table (agents/providers/entries.py), built from the settings
as the app builds it: its endpoint, model name, requirements and quirks profile (what
each flag does is tested in test_provider_quirks.py, through HTTP in
test_openai_compatible.py); then what the two factories build."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from agents.demo import DemoChatModel
from agents.providers import (
    MissingSettings,
    ModelConfig,
    Quirks,
    TokenUsage,
    build_model,
    get_provider,
    providers,
)
from agents.providers.compatible import CompatibleChatOpenAI
from agents.providers.factories import NO_KEY

EXPECTED = {
    # name: (base URL, default model, settings required with nothing set, quirks)
    "demo": ("", "", [], Quirks()),
    "openai": ("", "gpt-4o-mini", ["OPENAI_API_KEY", "OPENAI_MODEL"], Quirks()),
    "deepseek": ("https://api.deepseek.com/v1", "deepseek-chat", ["OPENAI_API_KEY"],
                 Quirks(send_reasoning_content=True, max_tokens_field="max_tokens")),
    "mistral": ("https://api.mistral.ai/v1", "mistral-small-latest", ["OPENAI_API_KEY"],
                Quirks(tool_call_ids="alnum9", max_tokens_field="max_tokens")),
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
# Rows built by chat_openai whose settings can be filled without naming a model.
COMPATIBLE = [name for name in EXPECTED if name not in ("demo", "openai")]


def test_every_row_of_the_table_has_a_case_here():
    assert set(EXPECTED) == set(providers())


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


@pytest.mark.parametrize("name", COMPATIBLE)
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


# openai: ChatOpenAI built from the settings, token counts reported in the stream --------

OPENAI = get_provider("openai")


def openai_config(**overrides) -> ModelConfig:
    return ModelConfig(**{"provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-test",
                          **overrides})  # fmt: skip


def test_openai_needs_a_key_and_a_model_name():
    assert OPENAI.missing_settings(ModelConfig(provider="openai")) == [
        "OPENAI_API_KEY", "OPENAI_MODEL",
    ]  # fmt: skip
    assert OPENAI.missing_settings(openai_config()) == []


def test_openai_reports_usage_in_the_stream_and_makes_native_tool_calls():
    assert OPENAI.capabilities.usage is TokenUsage.REPORTED
    assert not OPENAI.usage_estimated
    assert OPENAI.capabilities.native_tool_calls
    assert OPENAI.capabilities.streaming_usage
    assert not OPENAI.scripted


def test_the_page_names_the_model_and_where_it_is_served():
    assert OPENAI.model_label(openai_config()) == "gpt-4o-mini via api.openai.com"
    local = openai_config(model="qwen2.5", base_url="http://127.0.0.1:11434/v1")
    assert OPENAI.model_label(local) == "qwen2.5 via 127.0.0.1:11434"
    assert OPENAI.model_name(local) == "qwen2.5"


def test_the_page_never_shows_credentials_a_base_url_carries():
    secret = openai_config(
        model="m", base_url="https://user:sk-secret@llm.example:8443/v1?key=sk-2"
    )
    assert OPENAI.model_label(secret) == "m via llm.example:8443"


def test_the_factory_builds_a_streaming_chat_openai_that_asks_for_usage():
    model = build_model(
        openai_config(base_url="http://127.0.0.1:9/v1", temperature=0.2, timeout_s=7, max_retries=1)
    )
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.openai_api_key.get_secret_value() == "sk-test"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert model.streaming
    assert model.stream_usage
    assert model.temperature == 0.2
    assert model.request_timeout == 7
    assert model.max_retries == 1


def test_without_a_temperature_or_base_url_the_servers_defaults_apply(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    model = build_model(openai_config())
    assert model.temperature is None
    assert model.openai_api_base in (None, "")


# demo: a scripted stand-in whose token counts are estimates ----------------------------

DEMO = get_provider("demo")


def test_the_demo_needs_no_settings_and_says_it_is_not_an_llm():
    config = ModelConfig(provider="demo", model="gpt-4o-mini")
    assert DEMO.missing_settings(config) == []
    assert DEMO.scripted
    assert DEMO.model_label(config) == "Offline demo model (scripted, not an LLM)"
    # Whatever OPENAI_MODEL says, its runs record the script.
    assert DEMO.model_name(config) == "demo-scripted"


def test_the_demo_estimates_usage_and_makes_native_tool_calls():
    assert DEMO.capabilities.usage is TokenUsage.ESTIMATED
    assert DEMO.usage_estimated
    assert DEMO.capabilities.native_tool_calls
    assert DEMO.capabilities.streaming_usage


def test_the_demo_factory_builds_the_scripted_model_with_its_token_delay():
    model = build_model(ModelConfig(provider="demo", token_delay_s=0.25))
    assert isinstance(model, DemoChatModel)
    assert model.token_delay_s == 0.25
