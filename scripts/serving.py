"""Start local servers for scripts, benchmarks and browser tests: a free port, a wait.

``scripts/screenshot.py``, ``bench/load.py`` and ``bench/admin_export.py`` start Daphne
with :func:`daphne` (``bench/load.py`` and tests/deploy/test_run_workers.py the run owners'
processes with :func:`run_owner`); ``tests/browser/conftest.py`` (which restarts a server
on its port) uses :func:`free_port` and :func:`wait_listening`; the servers in venvs of their own
(``scripts/local_model.py``, ``scripts/phoenix_server.py``) wait with
:func:`wait_answering` and end with :func:`stop_session`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")

DAPHNE_OPTIONS = ("--websocket_connect_timeout", "30")
"""Daphne's options wherever the app is served (also in the Makefile's ``run`` and
deploy/systemd/agentchat@.service, checked by tests/deploy/test_config_files.py).

Daphne drops a websocket handshake its application has not accepted within 5 s (its
default): while 200 conversations start at once the consumer may begin 3-4 s after
the handshake arrived (docs/benchmarks.md, issue 25), and the browser's page would
reconnect after its back-off instead of waiting a second more."""


class ServerDidNotStart(RuntimeError):
    """The server could not be started, its process ended, or it did not answer in time;
    the message says why."""


def nginx_binary() -> str | None:
    """Return nginx's path, or None when it is not installed (Debian puts it in /usr/sbin,
    often not on a user's PATH; ``make deploy-deps`` installs it)."""
    return shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if Path(path).exists()), None
    )


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(process: subprocess.Popen[bytes], port: int, *, timeout_s: float) -> None:
    """Return once 127.0.0.1:``port`` accepts connections (polled every 0.05 s).

    Raises ``ServerDidNotStart`` if ``process`` ends first or ``timeout_s`` seconds pass (a
    loaded machine takes a while to start Python: give it tens of seconds).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if process.poll() is not None:
                raise ServerDidNotStart(f"exited with status {process.returncode}") from None
            if time.monotonic() > deadline:
                raise ServerDidNotStart(f"not listening on {port} after {timeout_s:g} s") from None
            time.sleep(0.05)


def wait_answering(
    process: subprocess.Popen[bytes],
    probe: Callable[[], T],
    *,
    what: str,
    log_path: Path,
    timeout_s: float,
) -> T:
    """Call ``probe`` every 0.1 s until it returns, and return what it returned.

    ``probe`` raising ``OSError`` (not answering yet), ``ValueError`` or ``KeyError`` (an
    answer not ready yet) means "try again". Raises ``ServerDidNotStart`` naming ``what``,
    with the end of the server's log, if ``process`` ends first or ``timeout_s`` pass.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return probe()
        except (OSError, ValueError, KeyError):
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
            why = (
                f"exited with status {process.returncode}"
                if process.poll() is not None
                else f"did not answer within {timeout_s:g} s"
            )
            raise ServerDidNotStart(f"{what} {why}. Its log ends:\n{tail}")
        time.sleep(0.1)


def stop_session(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """End ``process``, started with ``start_new_session=True``, and its whole session:
    SIGTERM, then SIGKILL after ``timeout_s`` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def daphne(
    env: dict[str, str],
    *,
    timeout_s: float,
    log: Path | None = None,
    application: str = "project.asgi:application",
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Serve the app as ``make run`` does, on a free port; yield ``(process, port)``.

    ``env`` is the server's whole environment (its ``DATABASE_URL``, migrated by the
    caller); ``application`` the ASGI application (``bench/stream.py`` serves the app
    wrapped with a bench-only route). Its output goes to ``log`` (else nowhere). Raises
    ``ServerDidNotStart``, with the log's end when there is one, if it does not listen
    within ``timeout_s`` seconds.
    The server is always stopped on the way out (killed if it ignores SIGTERM for 10 s).
    """
    port = free_port()
    command = [sys.executable, "-m", "daphne", *DAPHNE_OPTIONS, "-b", "127.0.0.1",
               "-p", str(port), application]  # fmt: skip
    out = log.open("wb") if log is not None else subprocess.DEVNULL
    try:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log is not None:
            out.close()
    try:
        try:
            wait_listening(process, port, timeout_s=timeout_s)
        except ServerDidNotStart as failure:
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            raise ServerDidNotStart(f"Daphne {failure}\n{tail}".rstrip()) from None
        yield process, port
    finally:
        terminate(process)


RUN_OWNER_READY = "Run owner listening on "
"""What ``manage.py runowner`` prints once it listens (chat/management/commands/runowner.py)."""


@contextmanager
def run_owner(
    env: dict[str, str], *, timeout_s: float, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``manage.py runowner`` (runs in a process of their own, ``CHAT_RUN_WORKERS``)
    with ``env`` and its output in ``log``; yield its process once it listens.

    Raises ``ServerDidNotStart`` with the log's end if it has not said it listens within
    ``timeout_s`` seconds. Stopped on the way out (SIGTERM: its runs end as ``cancelled``
    after ``AGENT_SHUTDOWN_GRACE_S``), killed if it has not ended 10 s later.
    """
    command = [sys.executable, "manage.py", "runowner"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    def listening() -> None:
        if RUN_OWNER_READY not in log.read_text(errors="replace"):
            raise ValueError("not listening yet")

    try:
        wait_answering(process, listening, what="manage.py runowner", log_path=log,
                       timeout_s=timeout_s)  # fmt: skip
        yield process
    finally:
        terminate(process)


def terminate(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """End ``process``: SIGTERM, then SIGKILL if it has not ended ``timeout_s`` later."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
