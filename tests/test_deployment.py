"""Settings and multi-process behaviour: what a deployment runs into, not one request."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENT_STALE_AFTER_S": "5"}, "at least three times AGENT_HEARTBEAT_S"),
        ({"AGENT_MAX_ITERATIONS": "many"}, "AGENT_MAX_ITERATIONS must be an integer"),
        ({"AGENT_STRATEGY": "langgraph"}, "AGENT_STRATEGY must be one of tool_calling, react"),
        ({"DJANGO_DEBUG": "perhaps"}, "DJANGO_DEBUG must be true or false"),
        ({"AGENT_EARLY_STOPPING_METHOD": "think"}, "AGENT_EARLY_STOPPING_METHOD must be one of"),
        ({"AGENT_MAX_EXECUTION_TIME_S": "-1"}, "AGENT_MAX_EXECUTION_TIME_S must be"),
    ],
)
def test_a_bad_setting_stops_start_up_with_a_clear_message(env, message):
    result = run_python("import django; django.setup()", **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


@pytest.mark.parametrize("name", ["AGENT_HEARTBEAT_S", "AGENT_TOOL_TIMEOUT_S",
                                  "AGENT_MODEL_TIMEOUT_S", "AGENT_SHUTDOWN_GRACE_S"])  # fmt: skip
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_a_number_setting_that_is_not_finite_stops_start_up_with_a_clear_message(name, value):
    """``float()`` takes ``nan``, which compares false with everything, so it passed every
    ``minimum``: a NaN heartbeat's sleep never ended and other processes took its runs for
    dead; ``inf`` is refused with it (project/env.py)."""
    result = run_python("import django; django.setup()", **{name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"{name} must be" in result.stderr


def test_an_unknown_provider_does_not_stop_the_settings_the_system_check_reports_it():
    result = run_python("import django; django.setup()", AGENT_PROVIDER="mistral-by-mistake")
    assert result.returncode == 0, result.stderr
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "AGENT_PROVIDER": "mistral-by-mistake"}, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "(chat.E001) Unknown model provider 'mistral-by-mistake'" in result.stderr


def manage_py_check(**env: str) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py check`` with settings read from this environment (REDIS_URL and
    DATABASE_URL as given, else unset)."""
    base = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        env={**base, **env}, timeout=60,
    )  # fmt: skip


# Several processes sharing a database server; nothing listens there: `check` never connects.
SHARED_DATABASE = "postgres://agentchat@127.0.0.1:9/agentchat"


def test_manage_py_check_warns_of_two_processes_on_the_in_memory_layer_the_settings_name():
    result = manage_py_check(DATABASE_URL=SHARED_DATABASE)
    assert result.returncode == 0, result.stderr
    assert "(chat.W001)" in result.stderr
    assert "chat.layers.InMemoryChannelLayer" in result.stderr
    assert "REDIS_URL" in result.stderr


@pytest.mark.parametrize(
    "env",
    [
        {"DATABASE_URL": SHARED_DATABASE, "REDIS_URL": "redis://127.0.0.1:9/0"},
        {"DATABASE_URL": SHARED_DATABASE, "REDIS_URL": "redis://127.0.0.1:9/0",
         "REDIS_CHANNEL_LAYER": "core"},
        {},  # SQLite and the in-memory layer: one process, make run
    ],
    ids=["redis-pubsub", "redis-core", "sqlite"],
)  # fmt: skip
def test_manage_py_check_is_quiet_with_redis_or_on_sqlite(env):
    result = manage_py_check(**env)
    assert result.returncode == 0, result.stderr
    assert "chat.W001" not in result.stderr


def test_daphne_refuses_to_serve_an_unknown_provider():
    env = {
        **os.environ,
        "AGENT_PROVIDER": "mistral-by-mistake",
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    # Port 0: were the app imported without complaint, Daphne would serve on any free port
    # until the time-out below.
    result = subprocess.run(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", "0", "project.asgi:application"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "The agent is not configured; not serving." in result.stderr
    assert "(chat.E001)" in result.stderr
    assert "choose one of: " in result.stderr
    assert "demo (Offline demo model)" in result.stderr and "openai (" in result.stderr


def test_the_test_suite_stops_before_any_test_on_a_failing_system_check():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/agents/test_tools.py"],
        cwd=ROOT, env={**os.environ, "AGENT_PROVIDER": "mistral-by-mistake"}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 4, result.stdout
    assert "no test ran" in result.stdout
    assert "(chat.E001)" in result.stdout
    assert "passed" not in result.stdout


def test_concurrent_ask_commands_share_one_sqlite_file_without_lock_errors(tmp_path):
    """The server and `manage.py ask` may write to the default SQLite file at once."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'shared.sqlite3'}",
        "DEMO_TOKEN_DELAY_MS": "0",
        "DEMO_TOOL_DELAY_MS": "0",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=120)
    question = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
    processes = [
        subprocess.Popen(
            [*manage, "ask", question, "--no-stream"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [process.communicate(timeout=120) for process in processes]
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, err
        assert "succeeded" in out
        assert "locked" not in err


def make_dry_run(target: str, tmp_path: Path) -> str:
    """Return what ``make -n target`` would run for a venv that does not exist yet."""
    result = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True,
        text=True, timeout=60, check=True,
    )  # fmt: skip
    return result.stdout


def test_make_run_installs_the_runtime_requirements_and_not_the_test_tools(tmp_path):
    run = make_dry_run("run", tmp_path)
    assert "-r requirements.txt -c constraints.txt" in run
    assert "requirements-dev.txt" not in run
    for target in ("test", "test-fast", "lint"):
        assert "-r requirements-dev.txt -c constraints.txt" in make_dry_run(target, tmp_path)


def test_the_runtime_requirements_leave_the_test_tools_to_the_dev_file():
    def names(path: str) -> set[str]:
        lines = (ROOT / path).read_text().splitlines()
        return {line.split("==")[0].lower() for line in lines if "==" in line}

    dev_tools = {"pytest", "pytest-django", "pytest-asyncio", "playwright", "ruff"}
    assert not dev_tools & names("requirements.txt")
    assert dev_tools <= names("requirements-dev.txt")
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text().splitlines()


def test_the_app_imports_none_of_the_test_tools():
    pattern = re.compile(r"^\s*(?:import|from)\s+(pytest|playwright|ruff)\b", re.MULTILINE)
    for package in ("agents", "chat", "project"):
        for source in (ROOT / package).rglob("*.py"):
            assert not pattern.search(source.read_text(encoding="utf-8")), source


def test_waiting_for_a_server_that_exits_fails_at_once_with_its_status():
    import subprocess
    import sys

    from scripts.serving import ServerDidNotStart, free_port, wait_listening

    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    with pytest.raises(ServerDidNotStart, match="exited with status 3"):
        wait_listening(process, free_port(), timeout_s=3600)
