"""The composer in headless Chromium: a long paste is kept whole and refused with its
count (the textarea's maxlength cut 19,952 characters to 8,000 without a word); the one
button is Stop while a run goes, a whole target on a phone; a user's message keeps its
white space, and a long one folds."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_accessibility import assert_accessible

pytestmark = pytest.mark.browser

PASTE = 19_952
LIMIT = 8_000
REFUSAL = "Your message is 19,952 characters long; the limit is 8,000."
CODE = "def total(rows):\n    for row in rows:\n        yield row  # indented\n\nprint(1)"


def frames_sent(page) -> list[dict]:
    """Collect the JSON frames the page sends on its websocket (from the next load on)."""
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda data: sent.append(json.loads(data))))
    return sent


def open_chat(page, url: str) -> None:
    page.goto(url + "/")
    page.wait_for_selector("#connection[data-state=open]")


def paste(page, text: str) -> None:
    """Put ``text`` in the composer as a paste does (one input event)."""
    page.locator("#composer-input").evaluate(
        """(box, text) => { box.focus(); box.value = text;
                            box.dispatchEvent(new Event('input', {bubbles: true})); }""",
        text,
    )


def test_a_long_paste_is_kept_counted_and_refused_and_a_shorter_one_is_sent(live_app, browser_page):
    page = browser_page
    sent = frames_sent(page)
    open_chat(page, live_app.url)
    count = page.locator("#composer-count")
    assert count.is_hidden()  # nothing to say far from the limit

    paste(page, "x" * PASTE)
    assert len(page.input_value("#composer-input")) == PASTE  # nothing cut
    assert REFUSAL in count.inner_text() and "your text is kept" in count.inner_text()
    assert page.locator("#send").is_disabled()
    assert page.get_attribute("#composer-input", "aria-invalid") == "true"
    assert "composer-count" in page.get_attribute("#composer-input", "aria-describedby")
    page.press("#composer-input", "Enter")  # Enter is refused the same way
    assert len(page.input_value("#composer-input")) == PASTE
    page.screenshot(path=str(ARTIFACTS / "composer-over-the-limit.png"))
    assert_accessible(page, "the composer over the limit")

    # Near the limit (80% on): the count, and Send works.
    near = "y" * 6_500
    paste(page, near)
    assert count.inner_text() == "6,500 of 8,000 characters"
    assert not page.locator("#send").is_disabled()
    page.click("#send")
    page.wait_for_selector(".run-status:not([data-status=running])")
    assert page.input_value("#composer-input") == ""
    assert count.is_hidden()
    messages = [frame for frame in sent if "content" in frame]
    assert [len(frame["content"]) for frame in messages] == [6_500]  # the long one never left


def test_the_server_refuses_a_longer_message_in_the_same_words_and_the_text_stays(
    live_app, browser_page
):
    """A page whose count was not told the limit (an older page, a lower limit since):
    the server refuses the frame, says why in the same words, and the text stays."""
    page = browser_page
    open_chat(page, live_app.url)
    page.locator("#composer-input").evaluate("box => box.setAttribute('data-max-chars', '0')")
    paste(page, "x" * PASTE)
    page.click("#send")
    page.wait_for_selector("#chat-error.visible")
    assert REFUSAL + " Nothing was sent." in page.inner_text("#chat-error")
    assert len(page.input_value("#composer-input")) == PASTE
    assert page.locator(".run").count() == 0


def test_send_becomes_a_whole_stop_target_on_a_phone_and_send_again_after(
    fake_provider, start_app, browser_page
):
    provider = fake_provider("ok+hold,ok")
    app = start_app(env=provider.env)
    page = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    sent = frames_sent(page)
    open_chat(page, app.url)
    page.fill("#composer-input", "Hello")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("#send[data-mode=stop]")
    button = page.locator("#send")
    assert button.inner_text() == "Stop"
    box = button.bounding_box()
    assert box["width"] >= 44 and box["height"] >= 44, box
    assert box["x"] + box["width"] <= 390
    assert page.locator(".run-status .stop").count() == 0  # one Stop, not two
    assert "Esc" in button.get_attribute("title")
    page.screenshot(path=str(ARTIFACTS / "composer-stop-phone.png"))
    assert_accessible(page, "the composer while a run goes")

    # With text typed the button queues it (docs/queue.md); Esc still stops the run, and
    # the typed text is not what Stop sends: it stays.
    page.fill("#composer-input", "A follow-up")
    page.wait_for_selector("#send[data-mode=queue]")
    assert button.inner_text() == "Queue"
    page.press("#composer-input", "Escape")
    page.wait_for_selector(".run-status[data-status=cancelled]")
    page.wait_for_selector("#send[data-mode=send]")
    assert button.inner_text() == "Send" and not button.is_disabled()
    assert page.input_value("#composer-input") == "A follow-up"
    # The Stop names the run the page showed going (docs/queue.md, "Which run a Stop stops").
    stops = [{k: v for k, v in f.items() if k != "HEADERS"} for f in sent if f.get("type")]
    assert stops == [{"type": "cancel", "run": "1"}]
    assert all(frame.get("content") != "A follow-up" for frame in sent)
    provider.release()


def test_a_users_message_keeps_its_white_space_and_a_long_one_folds(live_app, browser_page):
    page = browser_page
    open_chat(page, live_app.url)
    paste(page, CODE)
    page.click("#send")
    page.wait_for_selector(".run-status:not([data-status=running])")
    long_text = "\n".join(f"line {n}:    indented" for n in range(1, 31))
    paste(page, long_text)
    page.click("#send")
    page.wait_for_function(
        "() => document.querySelectorAll('.run-status:not([data-status=running])').length === 2"
    )

    for shown in ("live", "after a reload"):
        first = page.locator(".run").nth(0).locator(".msg.user .message-text")
        assert first.inner_text() == CODE, shown  # indentation and blank line kept
        assert page.locator(".run").nth(0).locator("[data-fold-toggle]").count() == 0
        run = page.locator(".run").nth(1)
        text = run.locator(".msg.user .message-text")
        toggle = run.locator("[data-fold-toggle]")
        assert toggle.inner_text() == "Show more"
        assert toggle.get_attribute("aria-expanded") == "false"
        assert text.evaluate("el => el.scrollHeight > el.clientHeight + 50"), shown
        assert "line 30:    indented" in text.text_content()  # folded, not cut
        page.screenshot(path=str(ARTIFACTS / "message-folded.png"))
        page.reload()
        page.wait_for_selector("#connection[data-state=open]")

    run = page.locator(".run").nth(1)
    toggle = run.locator("[data-fold-toggle]")
    text = run.locator(".msg.user .message-text")
    toggle.focus()
    page.keyboard.press("Enter")
    assert toggle.inner_text() == "Show less" and toggle.get_attribute("aria-expanded") == "true"
    assert text.evaluate("el => el.scrollHeight <= el.clientHeight + 1")
    page.screenshot(path=str(ARTIFACTS / "message-unfolded.png"))
    assert_accessible(page, "a long message unfolded")
    page.keyboard.press("Space")
    assert toggle.inner_text() == "Show more" and toggle.get_attribute("aria-expanded") == "false"
