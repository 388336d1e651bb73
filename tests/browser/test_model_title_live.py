"""With a real model, the model's title for a new chat reaches the open page's sidebar,
header and tab title without a reload."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

QUESTION = "Plan 3 days in Suzhou: sights to visit, the weather, and a B&B room."


def test_the_models_title_replaces_the_offline_one_live(fake_provider, start_app, browser_page):
    app = start_app(env=fake_provider("ok").env)  # the run's answer; the title is answered aside
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector("#conversation-title:has-text('Suzhou, 3 days')")  # offline first
    page.wait_for_selector(".run-status[data-status=succeeded]")

    # The fake provider's title (scripts/fake_provider.py FAKE_TITLE).
    page.wait_for_selector("#conversation-title:has-text('Fake provider chat')")
    link = page.locator(".conversation-link.active")
    assert link.inner_text().startswith("Fake provider chat")
    page.wait_for_function("document.title.startsWith('Fake provider chat')")
    page.reload()
    assert page.inner_text("#conversation-title").startswith("Fake provider chat")
