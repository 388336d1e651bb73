"""Usage and cost in the browser: the header's conversation cost follows each run's end."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_chat_page import SECOND_QUESTION, TRAVEL_QUESTION, ask

pytestmark = pytest.mark.browser


def set_demo_price(database) -> None:
    """Price the demo model: $2 per million input tokens, $8 per million output."""
    with sqlite3.connect(database) as db:
        db.execute(
            "INSERT INTO chat_modelprice (provider, model_pattern, input_per_million,"
            " output_per_million, currency, updated_at)"
            " VALUES ('demo', 'demo-*', '2', '8', 'USD', '2026-12-01 00:00:00')"
        )


def stored_costs(database) -> list[str]:
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT cost FROM chat_agentrun ORDER BY id").fetchall()
    return [str(cost) for (cost,) in rows]


def test_the_headers_conversation_cost_updates_when_each_run_ends(live_app, browser_page):
    set_demo_price(live_app.database)
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    usage = page.locator("#conversation-usage")
    assert usage.inner_text() == ""  # nothing has run yet

    ask(page, TRAVEL_QUESTION, 1)
    page.wait_for_function(
        "() => document.querySelector('#conversation-usage').textContent.includes('$')"
    )
    first = usage.inner_text()
    assert first.startswith("≈") and "tokens" in first and "≈$" in first  # demo: estimated
    status = page.locator(".run-status").nth(0)
    assert "≈$" in status.locator(".run-cost").inner_text()
    assert "(estimated)" in status.inner_text()

    ask(page, SECOND_QUESTION, 2)
    page.wait_for_function(
        "before => document.querySelector('#conversation-usage').textContent !== before",
        arg=first,
    )
    second = usage.inner_text()
    assert "≈$" in second and second != first
    assert all(cost not in ("None", "") for cost in stored_costs(live_app.database))

    # Each model turn's tokens are one click away on the run's status line.
    status.locator(".run-usage summary").click()
    turns = status.locator(".turn-usage li")
    assert turns.count() >= 2 and "in ·" in turns.nth(0).inner_text()

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator("#conversation-usage").inner_text() == second


def test_a_stopped_run_shows_the_tokens_and_cost_of_its_finished_model_turn(
    start_app, browser_page
):
    app = start_app(token_delay_ms=3, tool_delay_ms=3_600_000)  # tools hang until Stop
    set_demo_price(app.database)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", TRAVEL_QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".tool-card[data-status=running]")  # its first turn has ended
    page.click("#send[data-mode=stop]")
    page.wait_for_selector(".run-status[data-status=cancelled]")
    status = page.locator(".run-status")
    summary = status.locator(".run-usage summary").inner_text()
    assert "tokens" in summary and "unknown" not in summary and "≈$" in summary
    status.locator(".run-usage summary").click()
    assert "Model turn 1: ≈" in status.locator(".turn-usage").inner_text()
    page.wait_for_function(
        "() => document.querySelector('#conversation-usage').textContent.includes('$')"
    )
    status.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "browser-usage-stopped.png"))
