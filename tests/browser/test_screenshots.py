"""The screenshot set CI lists: the travel question in each strategy, desktop and phone,
light and dark, in artifacts/screenshots/<strategy>-<desktop|phone>-<light|dark>.png.

One run per strategy in one page; the four views of it are the same page resized and
re-coloured (``emulate_media``), so the set costs four runs, not sixteen. Each run must
have succeeded with its three tool calls, so a picture of a broken page fails the test.
"""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.settings_panel import pick_setting

pytestmark = pytest.mark.browser

# Three calls in one model turn: travel notes, weather and a B&B room (agents/demo/scenarios.py).
TRAVEL_QUESTION = "Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room."
TOOLS = ["check_bnb_availability", "search_travel_info", "weather_forecast"]
STRATEGIES = ("tool_calling", "react", "structured_chat", "xml")
VIEWPORTS = {"desktop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")
SHOTS = ARTIFACTS / "screenshots"


def test_the_travel_question_in_every_strategy_is_pictured_on_desktop_and_phone_light_and_dark(
    live_app, browser_page
):
    page = browser_page
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")

    for number, strategy in enumerate(STRATEGIES, start=1):
        page.set_viewport_size(VIEWPORTS["desktop"])
        page.emulate_media(color_scheme="light")
        if number > 1:
            page.click("button.new-chat")
            page.wait_for_selector("#connection[data-state=open]")
        if strategy != "tool_calling":
            pick_setting(page, "#strategy-select", strategy)
            page.wait_for_selector("#tool-choice-select", state="detached")
        page.fill("#composer-input", TRAVEL_QUESTION)
        page.press("#composer-input", "Enter")
        page.wait_for_selector(".run-status:not([data-status=running])")

        run = page.locator(".run")
        assert run.count() == 1, strategy
        assert run.locator(".run-status").get_attribute("data-status") == "succeeded", strategy
        cards = run.locator(".tool-card[data-status=success]")
        assert sorted(cards.nth(i).get_attribute("data-tool") for i in range(cards.count())) == (
            TOOLS
        ), strategy
        assert "Hangzhou" in run.locator(".turn.answer").inner_text(), strategy

        for device, viewport in VIEWPORTS.items():
            page.set_viewport_size(viewport)
            for scheme in SCHEMES:
                page.emulate_media(color_scheme=scheme)
                assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") == (
                    scheme == "dark"
                )
                # Transitions run to their end first: the drawer slides shut when the
                # viewport becomes a phone, and a picture mid-slide shows half of it.
                page.screenshot(
                    path=str(SHOTS / f"{strategy}-{device}-{scheme}.png"), animations="disabled"
                )

    with sqlite3.connect(live_app.database) as db:
        rows = db.execute("SELECT strategy, status FROM chat_agentrun ORDER BY id").fetchall()
    assert rows == [(strategy, "succeeded") for strategy in STRATEGIES]
    assert len(list(SHOTS.glob("*.png"))) >= len(STRATEGIES) * 4
