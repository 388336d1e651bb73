"""Feedback on answers in headless Chromium, as the issue checks it: thumbs given with the
keyboard and the mouse, changed, a comment saved (and one too long refused with its text
kept), all there after a reload, and two tabs that agree whichever changes it."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.timing import wait_until

pytestmark = pytest.mark.browser

QUESTION = "What is 17*23?"
UP, DOWN = ".feedback .thumb-up", ".feedback .thumb-down"
COMMENT = ".feedback textarea[name=comment]"


def ask_and_wait_for_the_answer(app, page) -> None:
    """Open the app, ask, and wait for the run to end with its thumbs shown."""
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status[data-status=succeeded]")
    page.wait_for_selector(UP)


def pressed(page, selector: str) -> str | None:
    return page.locator(selector).get_attribute("aria-pressed")


def wait_rating(page, rating: str) -> None:
    """Wait until the page's answer shows ``rating`` ("up", "down", "none")."""
    page.wait_for_selector(f".feedback[data-feedback={rating}]")


def stored(app) -> tuple[str, str, str] | None:
    with sqlite3.connect(app.database) as db:
        return db.execute("SELECT rating, comment, given_by_name FROM chat_feedback").fetchone()


def test_thumbs_and_a_comment_are_given_changed_and_shown_after_a_reload(start_app, browser_page):
    app = start_app()
    page = browser_page
    ask_and_wait_for_the_answer(app, page)
    assert pressed(page, UP) == "false" and pressed(page, DOWN) == "false"
    assert page.locator(UP).get_attribute("aria-label") == "Good answer"
    assert page.locator(COMMENT).count() == 0  # a comment goes with a rating

    # The keyboard alone: the focus stays on the thumb its swap replaced.
    page.focus(UP)
    page.keyboard.press("Enter")
    wait_rating(page, "up")
    assert pressed(page, UP) == "true" and pressed(page, DOWN) == "false"
    assert page.evaluate("() => document.activeElement.matches('.thumb-up')")
    assert stored(app) == ("up", "", "(guest)")

    page.fill(COMMENT, "Right answer, and quick.")
    assert "24 / 2000" in page.locator(".feedback-count").inner_text()
    assert page.locator(".feedback-draft").inner_text() == "Not saved yet"  # words, not colour
    page.press(COMMENT, "Control+Enter")
    page.wait_for_selector(".feedback-note:has-text('with your comment')")
    assert page.locator(".feedback-draft").inner_text() == ""
    page.click(DOWN)  # switched: the comment stays
    wait_rating(page, "down")
    assert page.locator(COMMENT).input_value() == "Right answer, and quick."
    assert stored(app) == ("down", "Right answer, and quick.", "(guest)")
    page.screenshot(path=str(ARTIFACTS / "feedback-given.png"))

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    wait_rating(page, "down")
    assert pressed(page, DOWN) == "true" and pressed(page, UP) == "false"
    assert page.locator(COMMENT).input_value() == "Right answer, and quick."

    # Edited, then cleared; the pressed thumb again takes the feedback back.
    page.fill(COMMENT, "")
    page.click(".feedback-save")
    wait_until(lambda: stored(app) == ("down", "", "(guest)"), "the comment cleared")
    page.click(DOWN)
    wait_rating(page, "none")
    assert stored(app) is None and page.locator(COMMENT).count() == 0
    assert page.dialogs == []


def test_a_comment_over_the_limit_is_refused_and_its_text_kept(start_app, browser_page):
    app = start_app()
    page = browser_page
    ask_and_wait_for_the_answer(app, page)
    page.click(UP)
    wait_rating(page, "up")
    page.fill(COMMENT, "saved")
    page.click(".feedback-save")
    wait_until(lambda: stored(app) == ("up", "saved", "(guest)"), "the comment saved")

    too_long = "a long story. " * 150  # 2,100 characters
    page.fill(COMMENT, too_long)
    assert "too long" in page.locator(".feedback-count").inner_text()
    page.click(".feedback-save")
    error = page.locator(".feedback-error")
    error.wait_for()
    assert "2099 characters long; the limit is 2000" in error.inner_text()
    assert "It was not saved" in page.locator("#chat-error").inner_text()
    assert page.locator(COMMENT).input_value() == too_long  # nothing lost
    assert stored(app) == ("up", "saved", "(guest)")


def test_two_tabs_agree_whichever_changes_the_feedback(start_app, browser_page):
    app = start_app()
    first = browser_page
    ask_and_wait_for_the_answer(app, first)
    second = first.context.new_page()
    second.goto(first.url)
    second.wait_for_selector("#connection[data-state=open]")
    second.wait_for_selector(UP)

    first.click(UP)
    for page in (first, second):
        wait_rating(page, "up")
    second.click(DOWN)
    for page in (first, second):
        wait_rating(page, "down")
        assert pressed(page, DOWN) == "true" and pressed(page, UP) == "false"

    # A comment being typed in one tab is not lost when the other changes the rating.
    first.fill(COMMENT, "still typing")
    second.click(UP)
    wait_rating(first, "up")
    assert first.locator(COMMENT).input_value() == "still typing"
    assert first.locator(".feedback-draft").inner_text() == "Not saved yet"
    first.click(".feedback-save")
    second.wait_for_selector(".feedback-note:has-text('with your comment')")
    assert second.locator(COMMENT).input_value() == "still typing"

    # The last change wins in both: the pressed thumb again, from the second tab.
    second.click(UP)
    for page in (first, second):
        wait_rating(page, "none")
    assert stored(app) is None
