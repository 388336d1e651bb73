"""AgentExecutor's endings in headless Chromium, live: a run out of its time budget, and
an answer generated at the model-turn limit (early_stopping_method="generate")."""

from __future__ import annotations

import pytest

from tests.browser.test_chat_page import ask

pytestmark = pytest.mark.browser

WEATHER = "What's the weather in Hangzhou, and what is 17*23?"


def test_a_run_past_its_time_budget_ends_as_time_limit_and_the_chat_goes_on(
    start_app, browser_page
):
    # The tools take 30 s; the run may take 1 s of wall clock (AGENT_MAX_EXECUTION_TIME_S).
    app = start_app(tool_delay_ms=30_000, env={"AGENT_MAX_EXECUTION_TIME_S": "1"})
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")

    ask(page, WEATHER, 1)
    status = page.locator(".run-status").nth(0)
    assert status.get_attribute("data-status") == "time_limit"
    assert "Time limit reached" in status.locator(".badge").inner_text()
    assert "time limit of 1 second" in status.locator(".run-error").inner_text()
    # The calls it cut are cards with their error, not left running.
    cards = page.locator(".run").nth(0).locator(".tool-card")
    assert cards.count() == 2 and page.locator(".tool-card[data-status=running]").count() == 0

    marker = page.locator(".conversation-item.active .marker")
    assert "marker-failed" in marker.get_attribute("class")
    assert marker.get_attribute("title") == "last run reached its time limit"

    ask(page, "What time is it in Chengdu?", 2)  # the next message starts a run as usual
    assert page.locator(".run-status").nth(1).get_attribute("data-status") == "time_limit"


def test_an_answer_generated_at_the_turn_limit_is_shown_with_its_note(start_app, browser_page):
    app = start_app(env={"AGENT_MAX_ITERATIONS": "1", "AGENT_EARLY_STOPPING_METHOD": "generate"})
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")

    ask(page, WEATHER, 1)
    run = page.locator(".run").nth(0)
    status = run.locator(".run-status")
    assert status.get_attribute("data-status") == "max_iterations"
    assert "generated at the limit" in status.locator(".run-error").inner_text()
    assert "Hangzhou" in run.locator(".turn.answer").inner_text()
    assert run.locator(".tool-card").count() == 2  # the calls of turn 1, none at the limit
    # It has its answer: no "failed" marker in the list, live or after a reload.
    marker = page.locator(".conversation-item.active .marker")
    assert marker.get_attribute("class") == "marker"
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator(".conversation-item.active .marker").get_attribute("class") == "marker"
