"""The whole app in headless Chromium: ask, watch tool cards live, reload, check the rows."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser

TRAVEL_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
SECOND_QUESTION = "What's the weather in Hangzhou, and what is 17*23?"


def ask(page, question: str, run_number: int) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")
    status = page.locator(".run-status").nth(run_number - 1)
    status.wait_for()
    page.wait_for_function(
        "n => document.querySelectorAll('.run-status:not([data-status=running])').length >= n",
        arg=run_number,
    )


def test_a_visitor_asks_watches_tool_cards_and_finds_them_after_a_reload(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    assert "Offline demo model" in page.inner_text("#model-badge")

    ask(page, TRAVEL_QUESTION, 1)
    first_run = page.locator(".run").nth(0)
    cards = first_run.locator(".tool-card")
    assert cards.count() == 3
    names = sorted(cards.nth(i).get_attribute("data-tool") for i in range(3))
    assert names == ["check_bnb_availability", "search_travel_info", "weather_forecast"]
    assert first_run.locator(".tool-card[data-status=success] pre.result").count() == 3
    answer = first_run.locator(".turn.answer").inner_text()
    assert "苏州" in answer
    assert first_run.locator(".run-status").get_attribute("data-status") == "succeeded"
    assert page.input_value("#composer-input") == ""
    page.screenshot(path=str(ARTIFACTS / "browser-travel-question.png"), full_page=True)

    ask(page, SECOND_QUESTION, 2)
    second_run = page.locator(".run").nth(1)
    assert second_run.locator(".tool-card[data-status=success]").count() == 2
    assert "391" in second_run.locator(".turn.answer").inner_text()

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator(".run").count() == 2
    assert page.locator(".run").nth(0).locator(".tool-card[data-status=success]").count() == 3
    assert page.locator(".run").nth(1).locator(".tool-card[data-status=success]").count() == 2
    assert "苏州" in page.locator(".run").nth(0).locator(".turn.answer").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-after-reload.png"), full_page=True)

    with sqlite3.connect(live_app.database) as db:
        runs = db.execute("SELECT id, status FROM chat_agentrun ORDER BY id").fetchall()
        assert [status for _, status in runs] == ["succeeded", "succeeded"]
        steps = db.execute(
            "SELECT tool_name, status FROM chat_agentstep WHERE run_id = ? AND kind = 'tool_call'",
            (runs[0][0],),
        ).fetchall()
    assert sorted(steps) == [
        ("check_bnb_availability", "success"),
        ("search_travel_info", "success"),
        ("weather_forecast", "success"),
    ]
