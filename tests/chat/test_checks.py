"""The start-up checks of the agent's configuration (chat/checks.py). The entry points
that run them, Daphne included, are tested in tests/test_deployment.py."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from agents.providers import ModelConfig
from chat.checks import TAG, check_agent_model


def configured(settings, **fields) -> None:
    settings.AGENT_MODEL = ModelConfig(**fields)


def test_an_unknown_provider_is_a_check_error_naming_the_choices(settings):
    configured(settings, provider="mistral-by-mistake")
    [error] = check_agent_model()
    assert error.id == "chat.E001"
    assert error.level == checks.ERROR
    assert "'mistral-by-mistake'" in error.msg
    assert "demo (Offline demo model)" in error.msg
    assert "openai (OpenAI-compatible endpoint)" in error.msg


@pytest.mark.parametrize(
    ("fields", "missing"),
    [
        ({"model": "gpt-4o-mini"}, "OPENAI_API_KEY"),
        ({"api_key": "sk-test"}, "OPENAI_MODEL"),
    ],
)
def test_a_provider_without_a_required_setting_is_a_check_error_naming_it(
    settings, fields, missing
):
    configured(settings, provider="openai", **fields)
    [error] = check_agent_model()
    assert error.id == "chat.E002"
    assert f"needs {missing}" in error.msg


def test_a_complete_configuration_passes_the_checks(settings):
    configured(settings, provider="openai", model="gpt-4o-mini", api_key="sk-test")
    assert check_agent_model() == []
    configured(settings, provider="demo")
    assert checks.run_checks(tags=[TAG]) == []


def test_the_check_is_registered_and_ask_runs_it_before_anything(settings):
    configured(settings, provider="mistral-by-mistake")
    assert [e.id for e in checks.run_checks(tags=[TAG])] == ["chat.E001"]
    with pytest.raises(SystemCheckError, match=r"chat\.E001"):
        call_command("ask", "Hello?", skip_checks=False)
