"""With a real model, the model's title for a new chat reaches the open page's sidebar,
header and tab title without a reload."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

QUESTION = "Plan 3 days in Suzhou: sights to visit, the weather, and a B&B room."


def test_the_models_title_replaces_the_offline_one_live(fake_provider, start_app, browser_page):
    app = start_app(env=fake_provider("ok").env)  # the run's answer, then the title's
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector("#conversation-title:has-text('Suzhou, 3 days')")  # offline first
    page.wait_for_selector(".run-status[data-status=succeeded]")

    # The fake provider's one answer, made a title: "This answer comes from fake provider…"
    page.wait_for_selector("#conversation-title:has-text('This answer comes from')")
    link = page.locator(".conversation-link.active")
    assert link.inner_text().startswith("This answer comes from")
    page.wait_for_function("document.title.startsWith('This answer comes from')")
    page.reload()
    assert page.inner_text("#conversation-title").startswith("This answer comes from")
