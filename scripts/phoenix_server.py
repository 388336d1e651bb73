#!/usr/bin/env python3
"""Arize Phoenix on loopback: the OpenTelemetry backend that tests/phoenix reads spans back from.

Two commands, each run by the interpreter that has what it needs:

    .venv-phoenix/bin/python scripts/phoenix_server.py serve --port N [--workdir DIR]
    .venv/bin/python scripts/phoenix_server.py run --port 6006     # make run-phoenix

``.venv-phoenix`` holds Phoenix (``requirements-phoenix.txt``, ``make install-phoenix``);
the app's ``.venv`` never imports it and reaches it over HTTP only (OTLP/HTTP protobuf on
``/v1/traces``, its REST API on ``/v1/projects/...``). The helpers (:func:`start_server`,
:func:`wait_ready`, :func:`stop`, :func:`memory_kib`) use the standard library only, so the
app's interpreter and ``tests/phoenix`` can start and stop the server too.

Why these settings (Phoenix 20.26.1; docs/telemetry-phoenix.md has the measurements):

- Its HTTP server binds ``PHOENIX_HOST`` (127.0.0.1 here). Its OTLP/gRPC receiver binds
  every interface (``[::]``) whatever ``PHOENIX_HOST`` says, and nothing here speaks gRPC,
  so ``serve`` switches that receiver off (its ``GrpcServer``'s own ``disabled`` flag).
- ``PHOENIX_ALLOW_EXTERNAL_RESOURCES=false`` and ``PHOENIX_TELEMETRY_ENABLED=false``: no
  request of its own to the internet (web fonts, the FullStory and Scarf pixels, the WASM
  sandbox download); the agent assistant and the MCP server, which nothing here uses, are off.
- The environment is scrubbed of ``PHOENIX_*`` and ``OTEL_*`` names first: a shell that points
  the app at a collector (``OTEL_EXPORTER_OTLP_ENDPOINT``) must not make Phoenix export its
  own spans there, nor a stray ``PHOENIX_SQL_DATABASE_URL`` move its database.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script by another venv's interpreter

from scripts.serving import (  # noqa: E402
    ServerDidNotStart,
    stop_session,
    wait_answering,
)

PHOENIX_PYTHON = ROOT / ".venv-phoenix" / "bin" / "python"
READY_TIMEOUT_S = 180.0  # a safety net only: start-up is about 9 s on 2 cores
SETTINGS = {
    "PHOENIX_HOST": "127.0.0.1",
    "PHOENIX_TELEMETRY_ENABLED": "false",
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    "PHOENIX_ENABLE_MCP_SERVER": "false",
    "PHOENIX_LOG_MIGRATIONS": "false",
}


def server_env(environ: Mapping[str, str], *, port: int, workdir: Path) -> dict[str, str]:
    """Return ``environ`` without ``PHOENIX_*`` and ``OTEL_*`` names, plus Phoenix's settings.

    ``workdir`` holds its SQLite database (``PHOENIX_WORKING_DIR``); ``port`` is its HTTP
    port (UI, REST API, OTLP/HTTP).
    """
    kept = {
        key: value
        for key, value in environ.items()
        if not key.upper().startswith(("PHOENIX_", "OTEL_"))
    }
    return {
        **kept,
        **SETTINGS,
        "PHOENIX_PORT": str(port),
        "PHOENIX_WORKING_DIR": str(workdir),
    }


def serve(port: int, workdir: Path) -> None:
    """Run Phoenix's server in this process, in the foreground, without its gRPC receiver.

    Raises ``ServerDidNotStart`` when this Phoenix has no ``GrpcServer`` to switch off (another
    version: read its ``phoenix/server/app.py`` and adapt, rather than listen on ``[::]``).
    """
    env = server_env(os.environ, port=port, workdir=workdir)
    os.environ.clear()
    os.environ.update(env)
    from phoenix.server import app
    from phoenix.server.main import main

    grpc_server = getattr(app, "GrpcServer", None)
    if grpc_server is None:
        raise ServerDidNotStart("phoenix.server.app has no GrpcServer: this Phoenix is not 20.26.x")

    class NoGrpcServer(grpc_server):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **{**kwargs, "disabled": True})

    app.GrpcServer = NoGrpcServer
    sys.argv = ["phoenix", "serve"]
    main()


def start_server(port: int, workdir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``serve`` with ``.venv-phoenix``'s interpreter, its output to ``log_path``.

    Raises ``ServerDidNotStart`` when ``.venv-phoenix`` is missing (``make install-phoenix``).
    The process leads a session of its own, so :func:`scripts.serving.stop_session` ends it whole.
    """
    if not PHOENIX_PYTHON.exists():
        raise ServerDidNotStart(f"{PHOENIX_PYTHON} is missing: run `make install-phoenix` first")
    argv = [str(PHOENIX_PYTHON), str(Path(__file__).resolve()), "serve",
            "--port", str(port), "--workdir", str(workdir)]  # fmt: skip
    with log_path.open("wb") as log:
        return subprocess.Popen(
            argv, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_ready(
    process: subprocess.Popen[bytes],
    base_url: str,
    log_path: Path,
    timeout_s: float = READY_TIMEOUT_S,
) -> str:
    """Wait until ``GET {base_url}/arize_phoenix_version`` answers; return the version.

    Raises ``ServerDidNotStart`` with the end of the server's log if the process ends
    first or ``timeout_s`` seconds pass.
    """

    def version() -> str:
        with urllib.request.urlopen(f"{base_url}/arize_phoenix_version", timeout=5) as answer:
            return answer.read().decode().strip()

    return wait_answering(process, version, what="Phoenix", log_path=log_path,
                          timeout_s=timeout_s)  # fmt: skip


def memory_kib(pid: int) -> tuple[int, int]:
    """Return a process's resident set now and its peak, in KiB (Linux ``/proc``)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.split()[0] if value.split() else "0"
    return int(fields.get("VmRSS", 0)), int(fields.get("VmHWM", 0))


def run(port: int, workdir: Path | None) -> int:
    """Start Phoenix, wait for it, say how to point the app at it, and wait for Ctrl-C.

    Without ``workdir`` its database lives in a temporary directory removed at the end.
    Returns the server's exit status (130 after Ctrl-C).
    """
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on_signal)
    scratch = None if workdir else Path(tempfile.mkdtemp(prefix="phoenix-"))
    workdir = workdir or scratch
    assert workdir is not None
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "phoenix.log"
    base_url = f"http://127.0.0.1:{port}"
    process = start_server(port, workdir, log)
    try:
        version = wait_ready(process, base_url, log)
        # The traces endpoint alone: Phoenix has no OTLP logs receiver (405 on /v1/logs).
        print(f"Phoenix {version}: {base_url} (log: {log}). Point the app at it with:\n"
              f"  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={base_url}/v1/traces "
              f"OTEL_RESOURCE_ATTRIBUTES=openinference.project.name=agent-chat\n"
              "Ctrl-C stops it.", flush=True)  # fmt: skip
        return process.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        stop_session(process)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="Phoenix in the foreground (.venv-phoenix)")
    serve_cmd.add_argument("--port", type=int, required=True)
    serve_cmd.add_argument("--workdir", type=Path, required=True)
    run_cmd = commands.add_parser("run", help="start Phoenix, say how to point the app at it")
    run_cmd.add_argument("--port", type=int, default=6006)
    run_cmd.add_argument("--workdir", type=Path, default=None, help="default: a scratch dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            serve(args.port, args.workdir.resolve())
        else:
            return run(args.port, args.workdir)
    except ServerDidNotStart as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
