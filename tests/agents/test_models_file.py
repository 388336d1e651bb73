"""The configured models: AGENT_MODELS_FILE read into models, its errors, the host a
model is reached at. No Django: ``agents/configured_models.py`` runs while settings load."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from agents.configured_models import (
    DEMO_KEY,
    PRIMARY_KEY,
    ConfiguredModel,
    ModelsFileError,
    configured_models,
    endpoint_of,
    load_models_file,
)
from agents.providers import ModelConfig, find_provider
from tests.test_deployment import ROOT

PRIMARY = ModelConfig(
    provider="openai", model="gpt-4o-mini", api_key="sk-primary", temperature=0.3,
    timeout_s=45.0, max_retries=4, token_delay_s=0.01,
)  # fmt: skip
TWO_MODELS = """
# Comments are allowed: say why a model is here.
[[models]]
key = "deepseek"
label = "DeepSeek (chat)"
provider = "openai"
model = "deepseek-chat"
base_url = "https://api.deepseek.com"
api_key_env = "DEEPSEEK_API_KEY"
timeout_s = 90

[[models]]
key = "local"
provider = "openai"
model = "qwen2.5:7b"
base_url = "http://localhost:11434/v1"
temperature = 0
"""


def models_file(tmp_path, text: str):
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path, text: str, **environ: str) -> list[ConfiguredModel]:
    return load_models_file(models_file(tmp_path, text), base=PRIMARY, environ=environ)


def test_each_table_is_a_model_with_its_key_from_the_environment_and_the_primarys_client_options(
    tmp_path,
):
    deepseek, local = load(tmp_path, TWO_MODELS, DEEPSEEK_API_KEY=" sk-deep \n")

    assert (deepseek.key, deepseek.label) == ("deepseek", "DeepSeek (chat)")
    assert deepseek.config == ModelConfig(
        provider="openai", model="deepseek-chat", base_url="https://api.deepseek.com",
        api_key="sk-deep", temperature=None, timeout_s=90, max_retries=4, token_delay_s=0.01,
    )  # fmt: skip
    assert not deepseek.is_primary
    # Not the primary's key, temperature or endpoint: only its client options.
    assert local.config.api_key == "" and local.config.temperature == 0
    assert (local.config.timeout_s, local.config.max_retries) == (45.0, 4)
    assert local.label == ""
    assert local.display_label(find_provider("openai")) == "qwen2.5:7b via localhost:11434"


def test_settings_a_model_lacks_are_named_as_the_file_and_the_environment_name_them(tmp_path):
    deepseek, local = load(tmp_path, TWO_MODELS)  # DEEPSEEK_API_KEY is not set
    openai = find_provider("openai")
    assert deepseek.missing_settings(openai) == ["DEEPSEEK_API_KEY"]
    [missing] = local.missing_settings(openai)
    assert missing.startswith("api_key_env in AGENT_MODELS_FILE (") and "#2 (local)" in missing


def test_an_empty_file_adds_no_model(tmp_path):
    assert load(tmp_path, "# nothing yet\n") == []


def test_a_key_written_into_the_file_is_refused_with_where_it_belongs(tmp_path):
    text = '[[models]]\nkey = "x"\nprovider = "openai"\napi_key = "sk-leaked"\n'
    with pytest.raises(ModelsFileError, match="keys do not go in this file") as caught:
        load(tmp_path, text)
    assert "api_key_env" in str(caught.value)
    assert "sk-leaked" not in str(caught.value)


ONE = '[[models]]\nkey = "x"\nprovider = "openai"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[models]]\nkey = "x"\nprovider = "openai\n', "is not valid TOML: .*line 3"),
        (ONE + 'modle = "m"\n', "unknown field 'modle'"),
        ('[[models]]\nprovider = "openai"\n', r"#1 has no key \(it is required\)"),
        ('[[models]]\nkey = "x"\n', r"#1 has no provider"),
        (ONE + 'timeout_s = "60"\n', "timeout_s must be a number, not '60'"),
        (ONE + "temperature = true\n", "temperature must be a number, not True"),
        (ONE + "max_retries = 1.5\n", "max_retries must be a whole number"),
        (ONE + "max_retries = -1\n", "max_retries must not be negative"),
        (ONE.replace('"x"', '"Deep Seek"'), "key 'Deep Seek' must be 1 to 32 lower-case"),
        (ONE.replace('"x"', '"default"'), "key 'default' is taken by the primary model"),
        (ONE.replace('"x"', '"demo"'), "key 'demo' is taken by the offline demo"),
        (ONE + ONE, r"#2: key 'x' is taken by \[\[models\]\] #1"),
        (ONE + 'api_key_env = "$KEY"\n', "api_key_env must name an environment variable"),
        ('[model]\nkey = "x"\n', r"'model' at its top level; each model is a \[\[models\]\]"),
        ('models = "x"\n', r"write each model as a \[\[models\]\] table"),
        ('models = ["x"]\n', r"#1 must be a table"),
    ],
)
def test_a_malformed_file_stops_start_up_naming_the_file_the_table_and_the_field(
    tmp_path, text, message
):
    with pytest.raises(ModelsFileError, match=message) as caught:
        load(tmp_path, text)
    assert "AGENT_MODELS_FILE (" in str(caught.value)


def test_a_file_that_cannot_be_read_says_so(tmp_path):
    with pytest.raises(ModelsFileError, match=r"cannot be read: No such file"):
        load_models_file(tmp_path / "nowhere.toml", base=PRIMARY, environ={})
    path = tmp_path / "latin1.toml"
    path.write_bytes('[[models]]\nlabel = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ModelsFileError, match="is not UTF-8"):
        load_models_file(path, base=PRIMARY, environ={})


def test_the_primary_comes_first_then_the_files_models_then_the_demo(tmp_path):
    extras = load(tmp_path, TWO_MODELS)
    models = configured_models(PRIMARY, extras)
    assert [m.key for m in models] == [PRIMARY_KEY, "deepseek", "local", DEMO_KEY]
    assert models[0].config is PRIMARY and models[0].is_primary
    assert models[-1].config == ModelConfig(provider="demo", token_delay_s=0.01)
    assert [m.key for m in configured_models(PRIMARY, extras, offer_demo=False)] == [
        PRIMARY_KEY, "deepseek", "local",
    ]  # fmt: skip


def test_the_demo_is_not_offered_twice():
    demo = ModelConfig(provider="demo")
    assert [m.key for m in configured_models(demo)] == [PRIMARY_KEY]
    offline = ConfiguredModel(key="offline", config=demo)
    assert [m.key for m in configured_models(PRIMARY, [offline])] == [PRIMARY_KEY, "offline"]


@pytest.mark.parametrize(
    ("base_url", "endpoint"),
    [
        ("", "api.openai.com"),
        ("https://api.deepseek.com", "api.deepseek.com"),
        ("http://localhost:11434/v1", "localhost:11434"),
        ("https://user:sk-secret@gateway.example:8443/v1?api-key=sk-2#x", "gateway.example:8443"),
        ("127.0.0.1:8080/v1", "127.0.0.1:8080"),
        ("http://[::1]:1234/v1", "[::1]:1234"),
        ("http://[::1/v1", ""),
    ],
)
def test_the_endpoint_is_the_host_and_port_only(base_url, endpoint):
    config = ModelConfig(provider="openai", base_url=base_url)
    assert endpoint_of(config, find_provider("openai")) == endpoint


def test_the_demo_has_no_endpoint():
    assert endpoint_of(ModelConfig(provider="demo"), find_provider("demo")) == ""


def test_manage_py_check_names_a_files_model_its_key_and_the_variable_it_lacks(tmp_path):
    path = models_file(
        tmp_path,
        TWO_MODELS.replace(
            'provider = "openai"\nmodel = "qwen', 'provider = "olama"\nmodel = "qwen'
        ),
    )
    env = {key: value for key, value in os.environ.items() if key != "DEEPSEEK_API_KEY"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        env={**env, "AGENT_MODELS_FILE": str(path)}, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "(chat.E002) Model 'deepseek' (AGENT_MODELS_FILE" in result.stderr
    assert "needs DEEPSEEK_API_KEY, which is not set" in result.stderr
    assert "(chat.E001) Model 'local' (AGENT_MODELS_FILE" in result.stderr
    assert "unknown provider 'olama'" in result.stderr


def test_a_malformed_file_stops_start_up_with_improperly_configured_naming_the_file(tmp_path):
    # The module raises its own error (agents/ imports no Django); the settings turn it
    # into Django's, as for every other bad setting.
    path = models_file(tmp_path, '[[models]]\nkey = "x"\nprovider = "openai"\napi_key = "sk"\n')
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "AGENT_MODELS_FILE": str(path)}, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "django.core.exceptions.ImproperlyConfigured: AGENT_MODELS_FILE" in result.stderr
    assert "keys do not go in this file" in result.stderr
    assert "ModelsFileError" not in result.stderr


def test_without_a_base_url_the_endpoint_is_the_host_of_the_entrys_default_base_url():
    # The local servers' entries name a default base URL rather than a host.
    local = SimpleNamespace(default_endpoint="", default_base_url="http://127.0.0.1:11434/v1")
    assert endpoint_of(ModelConfig(provider="ollama"), local) == "127.0.0.1:11434"
    bare = SimpleNamespace(default_endpoint="")
    assert endpoint_of(ModelConfig(provider="x"), bare) == ""
    assert endpoint_of(ModelConfig(provider="x"), None) == ""
