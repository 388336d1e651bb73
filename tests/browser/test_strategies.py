"""Each strategy in headless Chromium: pick it, ask, watch a format error then the retry."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.settings_panel import pick_setting

pytestmark = pytest.mark.browser

QUESTION = "What's the weather in Hangzhou, and what is 17*23? #malformed"
LABELS = {
    "tool_calling": "Native tool calling",
    "react": "ReAct (text)",
    "structured_chat": "Structured chat (JSON)",
    "xml": "XML tags",
}


def new_chat(page) -> None:
    page.click("button.new-chat")
    page.wait_for_selector("#connection[data-state=open]")


def test_every_strategy_recovers_from_a_format_error_in_the_page(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")

    for number, (strategy, label) in enumerate(LABELS.items(), start=1):
        if number > 1:
            new_chat(page)
        if strategy != "tool_calling":
            pick_setting(page, "#strategy-select", strategy)
            # The picker answers with itself re-rendered: native options go for text ones.
            page.wait_for_selector("#tool-choice-select", state="detached")
        page.fill("#composer-input", QUESTION)
        page.press("#composer-input", "Enter")
        page.wait_for_selector(".run-status:not([data-status=running])")

        run = page.locator(".run")
        assert run.count() == 1
        assert page.inner_text("#conversation-settings") == f"Strategy: {label}"
        assert page.locator("#strategy-select").count() == 0  # locked after the first message
        cards = run.locator(".tool-card")
        assert cards.nth(0).get_attribute("class").endswith("parse-error")
        assert cards.nth(0).locator(".badge").inner_text() == "format error"
        assert run.locator(".tool-card[data-status=success]").count() == 2
        answer = run.locator(".turn.answer .turn-text").inner_text()
        assert "391" in answer and "Hangzhou" in answer
        for raw in ("Final Answer:", "<final_answer>", '"action"'):
            assert raw not in answer
        assert run.locator(".run-status").get_attribute("data-status") == "succeeded"
        assert label in run.locator(".run-status").inner_text()
        page.screenshot(path=str(ARTIFACTS / f"browser-strategy-{strategy}.png"), full_page=True)

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator(".run .tool-card.parse-error").count() == 1
    with sqlite3.connect(live_app.database) as db:
        rows = db.execute("SELECT strategy, status FROM chat_agentrun ORDER BY id").fetchall()
    assert rows == [(strategy, "succeeded") for strategy in LABELS]
