"""The start-up checks of the agent's configuration (chat/checks.py). The entry points
that run them, Daphne included, are tested in tests/test_deployment.py."""

from __future__ import annotations

import io

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from agents.providers import ModelConfig
from chat.checks import DEPLOYMENT_TAG, TAG, check_agent_model, check_shared_channel_layer


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


# The in-memory layer project/settings.py names without REDIS_URL (a subclass of Channels';
# tests/test_deployment.py checks through the settings themselves).
IN_MEMORY = {"default": {"BACKEND": "chat.layers.InMemoryChannelLayer"}}
CHANNELS_IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
REDIS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {}}}
PUBSUB = {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {}}}


def database(monkeypatch, settings, engine: str) -> None:
    """Make the default database's ENGINE ``engine`` for this test (restored after it)."""
    monkeypatch.setitem(settings.DATABASES["default"], "ENGINE", engine)


@pytest.mark.parametrize("layers", [IN_MEMORY, CHANNELS_IN_MEMORY], ids=["ours", "channels"])
def test_a_shared_database_with_the_in_memory_layer_is_a_warning_naming_redis_url(
    monkeypatch, settings, layers
):
    database(monkeypatch, settings, "django.db.backends.postgresql")
    settings.CHANNEL_LAYERS = layers
    [warning] = check_shared_channel_layer()
    assert warning.id == "chat.W001"
    assert warning.level == checks.WARNING
    assert "django.db.backends.postgresql" in warning.msg
    assert "InMemoryChannelLayer" in warning.msg
    assert "REDIS_URL" in warning.hint


@pytest.mark.parametrize(
    ("engine", "layers"),
    [
        ("django.db.backends.sqlite3", IN_MEMORY),  # one laptop: make run
        ("django.db.backends.postgresql", REDIS),  # several processes, shared layer
        ("django.db.backends.sqlite3", REDIS),
        ("django.db.backends.postgresql", PUBSUB),  # the settings' layer with REDIS_URL
        ("django.db.backends.sqlite3", CHANNELS_IN_MEMORY),
    ],
)
def test_no_warning_when_the_layer_is_shared_or_the_database_is_local(
    monkeypatch, settings, engine, layers
):
    database(monkeypatch, settings, engine)
    settings.CHANNEL_LAYERS = layers
    assert check_shared_channel_layer() == []


def test_the_deployment_check_is_registered_and_manage_py_check_shows_it(monkeypatch, settings):
    database(monkeypatch, settings, "django.db.backends.mysql")
    settings.CHANNEL_LAYERS = IN_MEMORY
    assert [w.id for w in checks.run_checks(tags=[DEPLOYMENT_TAG])] == ["chat.W001"]
    err = io.StringIO()
    call_command("check", stdout=io.StringIO(), stderr=err)
    assert "(chat.W001)" in err.getvalue()
