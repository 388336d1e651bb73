"""A real server for browser tests: Daphne in a subprocess on a scratch SQLite file.

The server runs exactly as ``make run`` does (same ASGI app, same settings module); only
the database file is a temporary one. REDIS_URL is passed through, so under CI's second
pass the browser talks through the Redis channel layer.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass(frozen=True)
class LiveServer:
    url: str
    database: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_app(tmp_path: Path) -> Iterator[LiveServer]:
    """Start Daphne serving the app on a free port; yield its URL and database path."""
    database = tmp_path / "browser.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "DEMO_TOKEN_DELAY_MS": "3",
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    env.pop("OPENAI_API_KEY", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, check=True,
    )  # fmt: skip
    port = _free_port()
    log = (tmp_path / "daphne.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "project.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"Daphne did not start: {(tmp_path / 'daphne.log').read_text()}")
            time.sleep(0.1)
    try:
        yield LiveServer(url=f"http://127.0.0.1:{port}", database=database)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture
def browser_page():
    """Yield a Playwright page in Debian's headless Chromium; fail if Chromium is missing."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Chromium is not installed: run scripts/ensure-chromium.sh (make test does)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        try:
            yield page
        finally:
            browser.close()
