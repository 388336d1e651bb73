"""The OpenAI-compatible provider's entry: ChatOpenAI built from the settings, with
token counts reported in the stream. (tests/agents/test_openai_compatible.py drives it
against a fake server.)"""

from __future__ import annotations

from langchain_openai import ChatOpenAI

from agents.providers import ModelConfig, TokenUsage, build_model, get_provider

ENTRY = get_provider("openai")


def config(**overrides) -> ModelConfig:
    return ModelConfig(**{"provider": "openai", "model": "gpt-4o-mini", "api_key": "sk-test",
                          **overrides})  # fmt: skip


def test_openai_needs_a_key_and_a_model_name():
    assert ENTRY.missing_settings(ModelConfig(provider="openai")) == [
        "OPENAI_API_KEY", "OPENAI_MODEL",
    ]  # fmt: skip
    assert ENTRY.missing_settings(config()) == []


def test_openai_reports_usage_in_the_stream_and_makes_native_tool_calls():
    assert ENTRY.capabilities.usage is TokenUsage.REPORTED
    assert not ENTRY.usage_estimated
    assert ENTRY.capabilities.native_tool_calls
    assert ENTRY.capabilities.streaming_usage
    assert not ENTRY.scripted


def test_the_page_names_the_model_and_where_it_is_served():
    assert ENTRY.model_label(config()) == "gpt-4o-mini via api.openai.com"
    local = config(model="qwen2.5", base_url="http://127.0.0.1:11434/v1")
    assert ENTRY.model_label(local) == "qwen2.5 via 127.0.0.1:11434"
    assert ENTRY.model_name(local) == "qwen2.5"


def test_the_page_never_shows_credentials_a_base_url_carries():
    secret = config(model="m", base_url="https://user:sk-secret@llm.example:8443/v1?key=sk-2")
    assert ENTRY.model_label(secret) == "m via llm.example:8443"


def test_the_factory_builds_a_streaming_chat_openai_that_asks_for_usage():
    model = build_model(
        config(base_url="http://127.0.0.1:9/v1", temperature=0.2, timeout_s=7, max_retries=1)
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
    model = build_model(config())
    assert model.temperature is None
    assert model.openai_api_base in (None, "")
