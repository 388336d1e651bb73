"""Picking a model in headless Chromium: the offline demo is the primary model, a second
one (scripts/fake_provider.py over HTTP) comes from AGENT_MODELS_FILE."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.settings_panel import pick_setting

pytestmark = pytest.mark.browser


def test_a_chat_picks_a_model_from_the_file_and_its_run_names_it(
    fake_provider, start_app, browser_page, tmp_path
):
    provider = fake_provider("ok")
    models = tmp_path / "models.toml"
    models.write_text(
        "[[models]]\n"
        'key = "fake"\n'
        'provider = "openai"\n'
        'model = "fake-model"\n'
        f'base_url = "{provider.base_url}"\n'
        'api_key_env = "FAKE_PROVIDER_KEY"\n',
        encoding="utf-8",
    )
    app = start_app(env={"AGENT_MODELS_FILE": str(models), "FAKE_PROVIDER_KEY": "unused"})
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    assert page.inner_text("#model-badge") == "Model: Offline demo model (scripted, not an LLM)"
    host = provider.base_url.split("//")[1].split("/")[0]

    pick_setting(page, "#model-select", "fake")
    # The picker's answer brings the header's badge with it.
    page.wait_for_selector(f"#model-badge:has-text('fake-model via {host}')")
    page.fill("#composer-input", "Hello?")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status:not([data-status=running])")

    run = page.locator(".run").first
    assert run.locator(".run-status").get_attribute("data-status") == "succeeded"
    assert "This answer comes from the fake provider" in run.inner_text()
    assert page.locator("#model-select").count() == 0  # fixed after the first message
    title = run.locator(".run-status .model-name").get_attribute("title")
    assert title == f"OpenAI-compatible endpoint at {host}"
    page.screenshot(path=str(ARTIFACTS / "browser-models.png"), full_page=True)

    page.click("button.new-chat")
    page.wait_for_selector("#connection[data-state=open]")
    assert page.input_value("#model-select") == "default"
    with sqlite3.connect(app.database) as db:
        rows = db.execute("SELECT provider, model_name, endpoint FROM chat_agentrun").fetchall()
    assert rows == [("openai", "fake-model", host)]
