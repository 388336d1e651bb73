"""Start local servers for scripts, benchmarks and browser tests: a free port, a wait.

``scripts/screenshot.py``, ``bench/load.py``, ``bench/admin_export.py`` and
``tests/browser/conftest.py`` each start Daphne as ``make run`` does, on a port of their
own, and wait until it listens.
"""

from __future__ import annotations

import socket
import subprocess
import time


class ServerDidNotStart(RuntimeError):
    """The server's process ended, or it did not listen in time."""


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
