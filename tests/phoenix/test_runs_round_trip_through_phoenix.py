"""The app's runs in a real Phoenix: sent live, and exported as a file then imported.

Every run is made the way an operator makes one, by ``manage.py ask`` with the offline
demo model (it speaks every strategy's format) in a process of its own, on a scratch
SQLite database; the live ones with the standard OpenTelemetry environment pointing at
Phoenix and content capture on (the process flushes its spans as it exits). What is
read back through Phoenix's API is compared with the stored rows, as the CSV export has
them (:mod:`tests.phoenix.checks`).

Each test runs with a ``DJANGO_SECRET_KEY`` of its own: trace and span ids are derived
from the run's id with it, and every scratch database numbers its runs from 1, while
Phoenix keeps the first span it is sent under an id and ignores the others.

Until live export and the OTLP JSON file export are in this checkout, these tests fail
saying what is missing (``manage.py send_traces`` is optional: without it that import
is skipped and the harness's converter imports files).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.models import Strategy
from tests.phoenix.checks import ExpectedRun, check_run, expected_runs, traces_by_conversation
from tests.phoenix.conftest import Phoenix
from tests.phoenix.otlp_files import requests_from_file

pytestmark = pytest.mark.phoenix

ROOT = Path(__file__).resolve().parents[2]
# The demo model calls the weather and time tools for this (parallel calls in tool_calling,
# one per turn in the text strategies), then answers: several chat and execute_tool spans.
QUESTION = "What's the weather in Hangzhou and the time in Beijing?"
# weather_forecast fails for a town the demo does not know: the run goes on and succeeds.
FAILING_TOOL_QUESTION = "What's the weather in Paris?"
# A safety net that turns a hung command into a failure; a run takes seconds.
COMMAND_TIMEOUT_S = 600
# Names the app's settings or the OpenTelemetry SDK read: none may come from the shell.
SCRUBBED_PREFIXES = (
    "OTEL_", "AGENT_", "OPENAI_", "DATABASE_", "REDIS_", "DJANGO_", "CHAT_", "DEMO_", "TRACE_",
)  # fmt: skip


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a SQLite file migrated once for the module, for tests to copy."""
    path = tmp_path_factory.mktemp("app") / "migrated.sqlite3"
    manage("migrate", "--noinput", env=app_env(path))
    return path


@pytest.fixture
def database(migrated: Path, tmp_path: Path) -> Iterator[Path]:
    """Return a scratch copy of the migrated database for one test."""
    path = tmp_path / "db.sqlite3"
    shutil.copy(migrated, path)
    yield path


def app_env(database: Path, **extra: str) -> dict[str, str]:
    """Return the app's environment: the demo model on ``database``, a secret key of its own.

    ``extra`` adds to it (the OTEL_* names). The secret key is drawn per call: call once
    per test and pass the result to every command of it.
    """
    kept = {k: v for k, v in os.environ.items() if not k.upper().startswith(SCRUBBED_PREFIXES)}
    return {
        **kept,
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(32),
        "AGENT_PROVIDER": "demo",
        "DEMO_TOOL_DELAY_MS": "0",
        **extra,
    }


def manage(*args: str, env: dict[str, str]) -> str:
    """Run ``manage.py`` with ``args``; return its standard output, fail with both outputs."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"manage.py {' '.join(args)} exited {done.returncode}:\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def ask(env: dict[str, str], strategy: str, question: str = QUESTION) -> None:
    manage("ask", "--strategy", strategy, "--no-stream", question, env=env)


def stored_runs(env: dict[str, str]) -> list[ExpectedRun]:
    """Return the database's runs as its CSV export has them."""
    return expected_runs(manage("export_traces", env=env))


def require_live_export() -> None:
    """Fail, saying so, when this checkout has no live export to test."""
    if importlib.util.find_spec("chat.traces.live") is None:
        pytest.fail(
            "No live export in this checkout (chat/traces/live.py): `manage.py ask` with "
            "OTEL_EXPORTER_OTLP_ENDPOINT set sends nothing. Merge the otel branch first."
        )


def require_otlp_json_export(env: dict[str, str]) -> None:
    """Fail, saying so, when ``export_traces`` cannot write OTLP JSON."""
    usage = manage("export_traces", "--help", env=env)
    if "otlp-json" not in usage:
        pytest.fail(
            "manage.py export_traces has no `--format otlp-json` in this checkout (its "
            "--help does not name it). Merge the files and otel branches first."
        )


def has_command(name: str, env: dict[str, str]) -> bool:
    done = subprocess.run([sys.executable, "manage.py", "help", name], cwd=ROOT, env=env,
                          capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)  # fmt: skip
    return done.returncode == 0


def new_project(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


def live_env(database: Path, phoenix: Phoenix, project: str) -> dict[str, str]:
    """Return the app's environment with live export to ``project`` in ``phoenix``, content on."""
    return app_env(
        database,
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.otlp_endpoint,
        OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
    )


def read_back(phoenix: Phoenix, project: str, runs: list[ExpectedRun]) -> None:
    """Wait for ``runs``' spans in ``project``, then check each run's trace against its rows."""
    expected = sum(run.span_count for run in runs)
    spans = phoenix.client.wait_for_spans(project, expected)
    traces = traces_by_conversation(spans)
    assert sorted(traces) == sorted(run.conversation_id for run in runs), (
        f"traces for conversations {sorted(traces)}, runs of {[r.conversation_id for r in runs]}"
    )
    for run in runs:
        check_run(traces[run.conversation_id], run, content=True)
    assert len(spans) == expected, f"{len(spans)} spans in {project!r}, {expected} expected"


@pytest.mark.parametrize("strategy", Strategy.values)
def test_a_run_sent_live_reads_back_from_phoenix_whole(
    phoenix: Phoenix, database: Path, strategy: str
) -> None:
    require_live_export()
    project = new_project(f"live-{strategy}")
    env = live_env(database, phoenix, project)

    ask(env, strategy)

    (run,) = stored_runs(env)
    assert run.status == "succeeded" and run.tool_calls, run
    read_back(phoenix, project, [run])


def test_a_failed_tool_call_sent_live_is_an_error_span_in_phoenix(
    phoenix: Phoenix, database: Path
) -> None:
    require_live_export()
    project = new_project("live-tool-error")
    env = live_env(database, phoenix, project)

    ask(env, Strategy.TOOL_CALLING, FAILING_TOOL_QUESTION)

    (run,) = stored_runs(env)
    read_back(phoenix, project, [run])
    (tool,) = [s for s in phoenix.client.spans(project) if s["name"].startswith("execute_tool")]
    assert tool["status_code"] == "ERROR", tool
    assert tool["attributes"].get("error.type"), tool["attributes"]
    (root,) = [s for s in phoenix.client.spans(project) if s["parent_id"] is None]
    assert root["status_code"] != "ERROR", "a run that succeeded is not an error in Phoenix"


@pytest.mark.parametrize("importer", ["converter", "send_traces"])
def test_an_exported_file_imported_into_phoenix_reads_back_whole(
    phoenix: Phoenix, database: Path, tmp_path: Path, importer: str
) -> None:
    env = app_env(database)  # no OTEL_*: nothing leaves live
    require_otlp_json_export(env)
    if importer == "send_traces" and not has_command("send_traces", env):
        pytest.skip("no manage.py send_traces in this checkout: files go through the converter")
    for strategy in Strategy.values:
        ask(env, strategy)
    runs = stored_runs(env)
    path = tmp_path / "runs.otlp.jsonl"

    manage("export_traces", "--format", "otlp-json", "--output", str(path), env=env)

    text = path.read_text(encoding="utf-8")
    assert len([line for line in text.splitlines() if line.strip()]) == len(runs), text[:2000]
    project = new_project(f"file-{importer}")
    if importer == "converter":
        for request in requests_from_file(text):
            phoenix.client.post_otlp(request, project=project)
    else:
        manage("send_traces", str(path), env={
            **env, "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.otlp_endpoint,
            "OTEL_EXPORTER_OTLP_HEADERS": f"x-project-name={project}",
        })  # fmt: skip
    read_back(phoenix, project, runs)
