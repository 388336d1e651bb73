"""Arize Phoenix for tests/phoenix: one server per session on a free loopback port.

The server is started with ``scripts/phoenix_server.py`` (``.venv-phoenix``, ``make
install-phoenix``) in a scratch working directory (its SQLite database); the session
waits for its version endpoint and stops it at the end, whatever happened. Only tests
marked ``phoenix`` ask for it (``make test-phoenix``); the rest of this directory (the
file converter's own tests) needs no server. The start-up time and the server's memory
are printed at the end of the session, for docs/telemetry-phoenix.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts import phoenix_server
from scripts.serving import ServerDidNotStart, free_port, stop_session
from tests.phoenix.client import PhoenixClient

MEASURED: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Phoenix:
    """A running Phoenix: its base URL (UI, REST API, OTLP/HTTP), its client and its log."""

    base_url: str
    client: PhoenixClient
    log: Path
    pid: int

    @property
    def otlp_endpoint(self) -> str:
        """The value of ``OTEL_EXPORTER_OTLP_ENDPOINT`` for it (the SDK adds ``/v1/traces``)."""
        return self.base_url


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """Start Phoenix once for the session; fail with its log if it cannot."""
    workdir = tmp_path_factory.mktemp("phoenix")
    log = workdir / "phoenix.log"
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    try:
        process = phoenix_server.start_server(port, workdir, log)
    except ServerDidNotStart as exc:
        pytest.fail(str(exc))
    try:
        try:
            version = phoenix_server.wait_ready(process, base_url, log)
        except ServerDidNotStart as exc:
            pytest.fail(str(exc))
        rss, _ = phoenix_server.memory_kib(process.pid)
        MEASURED["version"] = version
        MEASURED["ready"] = f"{time.monotonic() - started:.1f} s"
        MEASURED["rss after start"] = f"{rss / 1024:.0f} MiB"
        yield Phoenix(base_url, PhoenixClient(base_url), log, process.pid)
        rss, peak = phoenix_server.memory_kib(process.pid)
        MEASURED["rss at the end"] = f"{rss / 1024:.0f} MiB"
        MEASURED["peak rss"] = f"{peak / 1024:.0f} MiB"
    finally:
        stop_session(process)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what the session measured of Phoenix, when it started one."""
    if MEASURED:
        figures = ", ".join(f"{name} {value}" for name, value in MEASURED.items())
        terminalreporter.write_line(f"Phoenix: {figures}")
