"""A real model provider failing, in headless Chromium: scripts/fake_provider.py serves the
OpenAI protocol on 127.0.0.1 and fails on cue; the app talks to it through ChatOpenAI."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.browser.conftest import ARTIFACTS, ROOT

pytestmark = pytest.mark.browser


@pytest.fixture
def provider() -> Iterator:
    """Return ``start(script) -> base_url``; every fake provider is stopped afterwards."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(script: str) -> str:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, "scripts/fake_provider.py", "--port", str(port), "--script", script],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        processes.append(process)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return f"http://127.0.0.1:{port}/v1"
            except OSError:
                time.sleep(0.05)
        pytest.fail("the fake provider did not start")

    yield start
    for process in processes:
        process.kill()
        process.wait()


def ask(page, question: str) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status:not([data-status=running])", timeout=20_000)


@pytest.mark.parametrize(
    ("script", "status", "says"),
    [
        ("429,ok", "succeeded", "This answer comes from the fake provider"),
        ("401", "failed", "The model provider refused the credentials (HTTP 401)"),
        ("503", "failed", "server error (HTTP 503) and still did after retries"),
    ],
)
def test_provider_faults_are_retried_or_explained(provider, start_app, browser_page, script,
                                                  status, says):  # fmt: skip
    base_url = provider(script)
    app = start_app(env={"OPENAI_API_KEY": "unused", "OPENAI_BASE_URL": base_url,
                         "OPENAI_MODEL": "fake-model", "OPENAI_MAX_RETRIES": "1"})  # fmt: skip
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    assert "fake-model" in page.inner_text("#model-badge")
    ask(page, "Hello?")

    run = page.locator(".run").first
    assert run.locator(".run-status").get_attribute("data-status") == status
    text = run.inner_text()
    assert says in text
    for raw in ("fake_error", "Error code", "Traceback", "{"):
        assert raw not in text  # no payload, no stack in the page
    page.screenshot(path=str(ARTIFACTS / f"browser-provider-{script.replace(',', '-')}.png"),
                    full_page=True)  # fmt: skip
