"""With a real model, the model's title for a new chat reaches the open page's sidebar,
header and tab title without a reload."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

QUESTION = "Plan 3 days in Suzhou: sights to visit, the weather, and a B&B room."
RECORD_TITLES = """
window.titlesShown = [];
new MutationObserver((records) => {
  for (const record of records) {
    for (const node of record.addedNodes) {
      if (node.nodeType !== Node.ELEMENT_NODE) continue;
      const title = node.id === "conversation-title"
        ? node : node.querySelector("#conversation-title");
      if (title) window.titlesShown.push(title.textContent.trim());
    }
  }
}).observe(document.body, {childList: true, subtree: true});
"""


def test_the_models_title_replaces_the_offline_one_live(fake_provider, start_app, browser_page):
    app = start_app(env=fake_provider("ok").env)  # the run's answer; the title is answered aside
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    # Every title the header is given, in order (each comes as a new element,
    # hx-swap-oob): the offline one may be replaced before a poll for it would see it (it
    # was, on a busy machine), so the swaps are recorded.
    page.evaluate(RECORD_TITLES)
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status[data-status=succeeded]")

    # The fake provider's title (scripts/fake_provider.py FAKE_TITLE).
    page.wait_for_selector("#conversation-title:has-text('Fake provider chat')")
    titles = page.evaluate("window.titlesShown")
    offline = next(i for i, t in enumerate(titles) if "Suzhou, 3 days" in t)  # offline first
    assert any("Fake provider chat" in t for t in titles[offline + 1 :]), titles
    link = page.locator(".conversation-link.active")
    assert link.inner_text().startswith("Fake provider chat")
    page.wait_for_function("document.title.startsWith('Fake provider chat')")
    page.reload()
    assert page.inner_text("#conversation-title").startswith("Fake provider chat")
