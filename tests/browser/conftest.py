"""A real server for browser tests: Daphne in a subprocess on a scratch SQLite file.

The server runs exactly as ``make run`` does (same ASGI app, same settings module); only
the database file is a temporary one. REDIS_URL is passed through, so under CI's second
pass the browser talks through the Redis channel layer. ``fake_provider`` serves the
OpenAI protocol from scripts/fake_provider.py, for a model that fails on cue or holds its
answer until the test releases it.

Every wait is for something in the page or the database; ``WAIT_MS`` (Playwright's default
time-out here) only turns a hang into a failure. bench/busy.py runs these tests on a
loaded machine to keep it so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scripts.serving import DAPHNE_OPTIONS, ServerDidNotStart, free_port, wait_listening
from tests.timing import WAIT_MS, WAIT_S

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
    """A Daphne started by ``start_app``: its URL, database file, process, port and log."""

    url: str
    database: Path
    process: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)
    port: int = 0
    log: Path | None = None


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, failure: Callable[[], str]):
    """Return once ``port`` accepts connections; fail with ``failure()`` if ``process``
    ends first or ``WAIT_S`` passes (a loaded machine takes a while to start Python)."""
    try:
        wait_listening(process, port, timeout_s=WAIT_S)
    except ServerDidNotStart:
        pytest.fail(failure())


def server_environment(database: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment of a process of the app on SQLite file ``database``: the
    offline demo model unless ``env`` points it at a provider; ``env`` adds or overrides."""
    server_env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    server_env.pop("OPENAI_API_KEY", None)
    server_env.update(env or {})
    return server_env


def on_database(database: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
    """Run ``python *args`` in the project on SQLite file ``database`` (``manage.py``
    commands, or ``-c`` code that seeds rows); raise ``CalledProcessError`` if it fails
    (its output is the test's, which pytest shows with a failure)."""
    subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=server_environment(database, env), check=True,
        timeout=2 * WAIT_S,
    )  # fmt: skip


def migrate(database: Path) -> None:
    """Run ``manage.py migrate`` on SQLite file ``database`` (a no-op if it is up to date)."""
    on_database(database, "manage.py", "migrate", "--noinput", "-v", "0")


def create_superuser(database: Path, username: str, password: str) -> None:
    """Create superuser ``username`` with ``password`` in SQLite file ``database``."""
    on_database(
        database, "manage.py", "createsuperuser", "--noinput", "--username", username,
        "--email", f"{username}@example.com", env={"DJANGO_SUPERUSER_PASSWORD": password},
    )  # fmt: skip


def sign_in_to_admin(page: Any, url: str, next_path: str, password: str = "pw") -> None:
    """Sign ``page`` in as superuser ``root`` (``password``) on the admin's login page of the
    app at ``url``, which then opens ``next_path``."""
    page.goto(f"{url}/admin/login/?next={next_path}")
    page.fill("#id_username", "root")
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def copy_database(source: Path, target: Path) -> None:
    """Copy SQLite file ``source`` to ``target`` with SQLite's backup API (whole, WAL or not)."""
    origin, copy = sqlite3.connect(source), sqlite3.connect(target)
    try:
        origin.backup(copy)
    finally:
        origin.close()
        copy.close()


@pytest.fixture(scope="session")
def migrated_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a SQLite file migrated once per session (per xdist worker): copy it, never
    serve it. Migrating takes a second of a server's start, which most tests pay."""
    database = tmp_path_factory.mktemp("migrated") / "template.sqlite3"
    migrate(database)
    return database


@pytest.fixture
def start_app(tmp_path: Path, migrated_database: Path) -> Iterator[Callable[..., LiveServer]]:
    """Return a function that starts Daphne serving the app on a free port.

    ``start_app(token_delay_ms=3)`` copies a freshly migrated SQLite file, starts the
    server and returns its URL, database path and process; every server started is
    stopped after the test. ``env`` adds or overrides environment variables of the server
    (e.g. ``AGENT_STALE_AFTER_S``); ``database`` serves an existing file instead of a new
    one (migrate runs again, a no-op, as on a deploy); ``port`` binds a given port, so a
    restarted server answers where the page's websocket reconnects.
    """
    processes: list[subprocess.Popen[bytes]] = []

    def start(
        token_delay_ms: int = 3,
        tool_delay_ms: int = 0,
        *,
        env: Mapping[str, str] | None = None,
        database: Path | None = None,
        port: int | None = None,
    ) -> LiveServer:
        name = f"browser-{len(processes)}"
        if database is None:
            database = tmp_path / f"{name}.sqlite3"
            copy_database(migrated_database, database)
        else:
            migrate(database)
        server_env = server_environment(
            database,
            {"DEMO_TOKEN_DELAY_MS": str(token_delay_ms), "DEMO_TOOL_DELAY_MS": str(tool_delay_ms),
             **(env or {})},
        )  # fmt: skip
        port = port or free_port()
        log_path = tmp_path / f"{name}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", *DAPHNE_OPTIONS, "-b", "127.0.0.1", "-p",
             str(port), "project.asgi:application"],
            cwd=ROOT, env=server_env, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(process)
        _wait_until_listening(
            process, port, lambda: "Daphne did not start: " + log_path.read_text()
        )
        return LiveServer(
            url=f"http://127.0.0.1:{port}", database=database, process=process, port=port,
            log=log_path,
        )  # fmt: skip

    yield start
    for process in processes:
        if process.poll() is not None:
            continue  # already ended (a test killed it)
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def live_app(start_app: Callable[..., LiveServer]) -> LiveServer:
    """The app served by Daphne with a fast demo model."""
    return start_app(token_delay_ms=3)


class Chromium:
    """Debian's headless Chromium for one test module: launched on first use, and again
    when it has died (a crash or the OOM killer fails one test, not the module's rest)."""

    def __init__(self, playwright, executable: str) -> None:
        self._playwright = playwright
        self._executable = executable
        self._browser = None

    def browser(self):
        """Return the running browser, launching it first if there is none."""
        if self._browser is None or not self._browser.is_connected():
            self._browser = self._playwright.chromium.launch(
                executable_path=self._executable, args=CHROMIUM_FLAGS
            )
        return self._browser

    def close(self) -> None:
        """Close the browser if it still runs."""
        if self._browser is not None and self._browser.is_connected():
            self._browser.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    """Yield the module's :class:`Chromium`; fail if Chromium is not installed.

    Module scope, not session: Playwright's sync API runs an event loop of its own, which
    must not be alive while pytest-asyncio runs another module's tests in this process.
    """
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Chromium is not installed: run scripts/ensure-chromium.sh (make test does)")
    with sync_playwright() as playwright:
        browser = Chromium(playwright, executable)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page(chromium: Chromium):
    """Yield a page in a new context of the module's Chromium (1280x1000); every context
    the test opens is closed after it."""
    from playwright.sync_api import Error

    ARTIFACTS.mkdir(exist_ok=True)
    browser = chromium.browser()
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(WAIT_MS)  # for every wait, page and tab of the test
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs  # tests assert no script ever opened one
    try:
        yield page
    finally:
        for opened in browser.contexts:  # the test's own, and any it made beside it
            with contextlib.suppress(Error):  # the browser died: the next test relaunches
                opened.close()


@dataclass(frozen=True)
class FakeProvider:
    """A scripts/fake_provider.py process: its base URL and a way to let a held answer go."""

    base_url: str

    @property
    def env(self) -> dict[str, str]:
        """Return the server environment that points the app at this provider."""
        return {"OPENAI_API_KEY": "unused", "OPENAI_BASE_URL": self.base_url,
                "OPENAI_MODEL": "fake-model"}  # fmt: skip

    def release(self) -> None:
        """Let the first answer held by a ``+hold`` step go on (or the next one at once)."""
        request = urllib.request.Request(self.base_url + "/release", data=b"", method="POST")
        urllib.request.urlopen(request, timeout=WAIT_S).close()


@pytest.fixture
def fake_provider() -> Iterator[Callable[..., FakeProvider]]:
    """Return ``start(script, word_delay_ms=0)``; every fake provider is stopped after the test.

    ``script`` is scripts/fake_provider.py's ``--script``: e.g. ``429,ok`` or
    ``tools+hold,long``.
    """
    processes: list[subprocess.Popen[bytes]] = []

    def start(script: str, word_delay_ms: float = 0) -> FakeProvider:
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "scripts/fake_provider.py", "--port", str(port), "--script", script,
             "--word-delay-ms", str(word_delay_ms)],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        processes.append(process)
        _wait_until_listening(process, port, lambda: "the fake provider did not start")
        return FakeProvider(base_url=f"http://127.0.0.1:{port}/v1")

    yield start
    for process in processes:
        process.kill()
        process.wait()
