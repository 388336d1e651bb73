"""How project/settings.py fills the model config from the environment for each provider:
the entry's default model when OPENAI_MODEL is blank, and AGENT_MAX_TOKENS. Read in a
subprocess with a clean environment (these tests import no Django themselves)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READ = (
    "import dataclasses, json, project.settings as s;"
    "print(json.dumps(dataclasses.asdict(s.AGENT_MODEL)))"
)
KEYS = ("AGENT_PROVIDER", "OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "AGENT_MAX_TOKENS")


def model_config(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in KEYS}
    result = subprocess.run([sys.executable, "-c", READ], cwd=ROOT, env={**clean, **env},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("env", "model"),
    [
        ({"OPENAI_API_KEY": "sk"}, "gpt-4o-mini"),
        ({"AGENT_PROVIDER": "deepseek", "OPENAI_API_KEY": "sk"}, "deepseek-chat"),
        ({"AGENT_PROVIDER": "llamacpp"}, "local"),
        ({"AGENT_PROVIDER": "ollama"}, ""),
        ({"AGENT_PROVIDER": "qwen", "OPENAI_MODEL": "Qwen/Qwen3-8B"}, "Qwen/Qwen3-8B"),
    ],
)
def test_a_blank_model_setting_takes_the_providers_default(env, model):
    config = model_config(**env)
    assert config["model"] == model
    assert config["max_tokens"] == 0  # unset: the server's own default


def test_agent_max_tokens_caps_replies_and_blank_means_the_servers_default():
    assert model_config(AGENT_PROVIDER="llamacpp", AGENT_MAX_TOKENS="512")["max_tokens"] == 512
    assert model_config(AGENT_PROVIDER="llamacpp", AGENT_MAX_TOKENS="")["max_tokens"] == 0
    clean = {k: v for k, v in os.environ.items() if k not in KEYS}
    bad = subprocess.run([sys.executable, "-c", READ], cwd=ROOT, capture_output=True, text=True,
                         env={**clean, "AGENT_MAX_TOKENS": "-1"}, timeout=60)  # fmt: skip
    assert bad.returncode != 0 and "AGENT_MAX_TOKENS must be at least 0" in bad.stderr
