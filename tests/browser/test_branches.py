"""Branches in headless Chromium: regenerate an answer, switch back to the first take with
the keyboard, and a reload shows the same branch; the controls pass axe; a fork opens a
new chat showing the exchange it continues after."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_accessibility import assert_accessible

pytestmark = pytest.mark.browser

QUESTION = "What is 17*23?"


def run_ids(page) -> list[str]:
    return page.eval_on_selector_all("#messages section.run", "els => els.map(e => e.id)")


def ask(app, page) -> str:
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status[data-status=succeeded] .regenerate")
    (first,) = run_ids(page)
    return first


def test_a_regenerated_answer_is_switchable_and_a_reload_shows_the_branch_chosen(
    start_app, browser_page
):
    app = start_app()
    page = browser_page
    first = ask(app, page)

    page.click(f"#{first} .regenerate")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    (second,) = run_ids(page)
    assert second != first  # the first take left the list, not the database
    page.wait_for_selector(f"#{second} .run-status[data-status=succeeded]")
    assert "Regenerated from run" in page.locator(f"#{second} .branch-note").inner_text()
    assert_accessible(page, "a regenerated answer with its switcher")
    page.screenshot(path=str(ARTIFACTS / "branches-regenerated.png"))

    # The keyboard alone: the switcher's previous arrow, then Enter.
    page.focus(".takes-previous")
    page.keyboard.press("Enter")
    page.wait_for_selector(".takes-count:has-text('1 / 2')")
    assert run_ids(page) == [first]
    assert page.locator(".takes-previous").is_disabled()

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert run_ids(page) == [first]
    assert page.locator(".takes-count").inner_text() == "1 / 2"
    assert page.get_attribute(".takes-next", "aria-label") == "Show the next take"


def test_an_edited_question_runs_as_another_take_and_a_fork_shows_its_source(
    start_app, browser_page
):
    app = start_app()
    page = browser_page
    first = ask(app, page)

    page.click(f"#{first} .edit-question summary")
    page.fill(f"#{first} .edit-form textarea", "What is 17*24?")
    page.click(f"#{first} .edit-form button[type=submit]")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    (edited,) = run_ids(page)
    page.wait_for_selector(f"#{edited} .run-status[data-status=succeeded] .fork")
    assert "17*24" in page.locator(f"#{edited} .msg.user").inner_text()

    source = page.url
    page.click(f"#{edited} .fork")
    page.wait_for_url(lambda url: url != source)
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator(".inherited-note").count() == 1
    assert page.locator(".run.inherited .regenerate").count() == 0
    assert_accessible(page, "a fork's inherited exchange")
