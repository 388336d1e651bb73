"""A new chat opens on the question: its settings wait behind a Settings disclosure by
the composer, each with a word on what it does, usable from the keyboard and whole on
a phone."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_accessibility import assert_accessible
from tests.browser.test_sidebar import new_page

pytestmark = pytest.mark.browser

CLIPPED = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  for (const el of document.querySelectorAll(
      '#conversation-settings summary, #conversation-settings label, '
      + '#conversation-settings select, #conversation-settings .setting-help')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0) continue;
    if (box.left < 0 || box.right > width + 0.5 || el.scrollWidth > el.clientWidth + 1
        && el.tagName !== 'SELECT') out.push(el.textContent.trim().slice(0, 30));
  }
  if (document.documentElement.scrollWidth > width) out.push('the page scrolls sideways');
  return out;
}"""


def test_a_new_chat_opens_on_the_question_with_the_settings_folded(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")

    assert page.locator("#composer-input").is_visible()
    assert not page.locator("#strategy-select").is_visible()
    assert page.locator(".chat-header #conversation-settings").count() == 0
    assert page.inner_text("#settings-toggle").startswith("Settings")

    # From the keyboard: the disclosure opens, its pickers follow it in the tab order.
    page.focus("#settings-toggle")
    page.keyboard.press("Enter")
    page.wait_for_selector("#conversation-settings[open]")
    for help_text in ("How the model asks for tools", "auto: the model decides",
                      "Several tool calls in one model turn"):  # fmt: skip
        assert page.get_by_text(help_text).is_visible()
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "strategy-select":
            break
    assert page.evaluate("document.activeElement.id") == "strategy-select"
    assert_accessible(page, "the chat's settings, open")

    # A change is saved at once and the panel stays open with what it changed.
    page.select_option("#strategy-select", "react")
    page.wait_for_selector("#tool-choice-select", state="detached")
    assert page.evaluate("document.querySelector('#conversation-settings').open")
    assert "ReAct" in page.inner_text("#settings-toggle")

    page.fill("#composer-input", "What is 17*23?")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status:not([data-status=running])")
    assert page.inner_text("#conversation-settings").startswith("Strategy: ReAct")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_on_a_phone_the_settings_are_whole_and_reachable(live_app, browser_page, scheme):
    page = new_page(browser_page, viewport={"width": 390, "height": 844}, color_scheme=scheme,
                    is_mobile=True, has_touch=True)  # fmt: skip
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    toggle = page.locator("#settings-toggle").bounding_box()
    assert toggle["height"] >= 24 and toggle["width"] >= 44

    page.click("#settings-toggle")
    page.wait_for_selector("#conversation-settings[open]")

    assert page.evaluate(CLIPPED) == []
    assert page.locator("#strategy-select").is_visible()
    assert "Strategy" in page.inner_text("#conversation-settings")
    assert page.locator("#composer-input").is_visible()
    page.screenshot(path=str(ARTIFACTS / f"browser-settings-phone-{scheme}.png"))
    assert_accessible(page, f"a phone's open settings ({scheme})")
