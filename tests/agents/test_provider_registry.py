"""The provider registry: entries found by name, config errors that say what to do,
and a contract every entry keeps (no Django, no network)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import tool

from agents.providers import (
    Capabilities,
    MissingSettings,
    ModelConfig,
    ProviderEntry,
    Required,
    TokenUsage,
    UnknownProvider,
    build_model,
    check_config,
    entries,
    find_provider,
    get_provider,
    index,
    providers,
)

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = list(providers().values())


@tool
def weather_forecast(town: str) -> str:
    """Return the weather in ``town``."""
    return "sunny"


def filled(entry: ProviderEntry) -> ModelConfig:
    """Return a config for ``entry`` with every setting it requires filled in."""
    return ModelConfig(provider=entry.name, **{req.field: "x" for req in entry.requires})


def test_every_row_of_the_table_is_registered_under_its_name():
    assert {"demo", "openai"} <= set(providers())
    assert all(providers()[name].name == name for name in providers())
    assert get_provider("openai") is find_provider("openai")
    assert sorted(entry.name for entry in entries.ENTRIES) == list(providers())


def test_two_rows_of_one_name_are_an_error():
    twice = [providers()["demo"], dataclasses.replace(providers()["openai"], name="demo")]
    with pytest.raises(RuntimeError, match="Two providers are named 'demo'"):
        index(twice)


def test_an_unknown_provider_is_an_error_that_names_every_choice():
    with pytest.raises(UnknownProvider) as caught:
        get_provider("deepseek-by-mistake")
    message = str(caught.value)
    assert "'deepseek-by-mistake'" in message
    assert "AGENT_PROVIDER" in message
    for entry in ENTRIES:
        assert f"{entry.name} ({entry.label})" in message
    assert find_provider("deepseek-by-mistake") is None
    with pytest.raises(ValueError, match="choose one of"):
        build_model(ModelConfig(provider="deepseek-by-mistake"))


def test_a_config_without_a_required_setting_names_the_settings_it_lacks():
    with pytest.raises(MissingSettings, match=r"needs OPENAI_API_KEY, which is not set"):
        check_config(ModelConfig(provider="openai", model="gpt-4o-mini"))
    with pytest.raises(MissingSettings, match=r"needs OPENAI_API_KEY and OPENAI_MODEL, which are"):
        build_model(ModelConfig(provider="openai"))
    assert check_config(ModelConfig(provider="openai", model="m", api_key="k")).name == "openai"


def test_an_entry_cannot_require_a_setting_the_config_does_not_have():
    with pytest.raises(ValueError, match="unknown config fields"):
        ProviderEntry(
            name="broken",
            label="Broken",
            factory=build_model,
            capabilities=Capabilities(TokenUsage.NONE, False, False),
            requires=(Required("apikey", "BROKEN_KEY"),),
        )


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_every_entry_builds_a_streaming_chat_model_from_the_settings_it_requires(entry):
    config = filled(entry)
    assert entry.missing_settings(config) == []
    for req in entry.requires:
        assert entry.missing_settings(dataclasses.replace(config, **{req.field: ""})) == [
            req.setting
        ]
    model = build_model(config)
    assert isinstance(model, BaseChatModel)
    if entry.capabilities.native_tool_calls:
        model.bind_tools([weather_forecast])
    assert entry.label
    assert entry.model_name(config)
    assert entry.model_label(config)


def test_the_registry_imports_no_provider_sdk_and_no_django():
    code = (
        "import sys\n"
        "from agents.providers import providers\n"
        "providers()\n"
        "loaded = {'django', 'langchain_openai', 'openai'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
