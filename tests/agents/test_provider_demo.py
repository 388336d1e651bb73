"""The demo provider's entry: a scripted stand-in whose token counts are estimates."""

from __future__ import annotations

from agents.demo import DemoChatModel
from agents.providers import ModelConfig, TokenUsage, build_model, get_provider

ENTRY = get_provider("demo")


def test_the_demo_needs_no_settings_and_says_it_is_not_an_llm():
    config = ModelConfig(provider="demo", model="gpt-4o-mini")
    assert ENTRY.missing_settings(config) == []
    assert ENTRY.scripted
    assert ENTRY.model_label(config) == "Offline demo model (scripted, not an LLM)"
    # Whatever OPENAI_MODEL says, its runs record the script.
    assert ENTRY.model_name(config) == "demo-scripted"


def test_the_demo_estimates_usage_and_makes_native_tool_calls():
    assert ENTRY.capabilities.usage is TokenUsage.ESTIMATED
    assert ENTRY.usage_estimated
    assert ENTRY.capabilities.native_tool_calls
    assert ENTRY.capabilities.streaming_usage


def test_the_demo_factory_builds_the_scripted_model_with_its_token_delay():
    model = build_model(ModelConfig(provider="demo", token_delay_s=0.25))
    assert isinstance(model, DemoChatModel)
    assert model.token_delay_s == 0.25
