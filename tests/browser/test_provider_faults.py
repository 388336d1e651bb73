"""A real model provider failing, in headless Chromium: scripts/fake_provider.py serves the
OpenAI protocol on 127.0.0.1 and fails on cue; the app talks to it through ChatOpenAI."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def ask(page, question: str) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status:not([data-status=running])")


@pytest.mark.parametrize(
    ("script", "status", "says"),
    [
        ("429,ok", "succeeded", "This answer comes from the fake provider"),
        ("401", "failed", "The model provider refused the credentials (HTTP 401)"),
        ("503", "failed", "server error (HTTP 503) and still did after retries"),
    ],
)
def test_provider_faults_are_retried_or_explained(fake_provider, start_app, browser_page,
                                                  script, status, says):  # fmt: skip
    provider = fake_provider(script)
    app = start_app(env={**provider.env, "OPENAI_MAX_RETRIES": "1"})
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
