"""Agents in headless Chromium: a new chat picks the almanac, whose starter question runs
its MCP server for real with the offline demo model, and the chart the server drew shows
in the tool's card; the header names the agent."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.settings_panel import pick_setting

pytestmark = pytest.mark.browser

CHART = "Draw a bar chart of rainfall: Jan 12, Feb 30, Mar 45."


def test_the_almanac_agent_draws_a_chart_with_its_mcp_server(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    assert "Agent: Travel assistant" in page.locator("#agent-badge").inner_text()

    with page.expect_navigation():  # the picker reloads the page as the new agent's
        pick_setting(page, "#agent-select", "almanac")
    page.wait_for_selector("#connection[data-state=open]")
    assert "Agent: Almanac (MCP tools)" in page.locator("#agent-badge").inner_text()
    composer = page.locator("#composer-input")
    assert composer.get_attribute("placeholder").startswith("Ask the almanac")

    page.locator(f'[data-example="{CHART}"]').click()
    page.click("#send")
    card = page.locator(".tool-card[data-tool=almanac_bar_chart]")
    card.wait_for()
    page.wait_for_selector(".run-status.status-succeeded")
    card.locator("> summary").click()
    image = card.locator("img[data-tool-image]")
    image.wait_for()
    page.wait_for_function(
        "() => { const img = document.querySelector('img[data-tool-image]');"
        " return img && img.complete && img.naturalWidth > 0; }"
    )
    assert image.evaluate("img => img.naturalWidth") > 0
    assert "[image: image/png, " in card.locator("pre.result").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-almanac-agent.png"), full_page=True)
