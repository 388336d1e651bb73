"""What a person sees while the agent works: running cards, a composer that keeps text,
and a page that fits a phone. Each was a fault found by a reviewer in headless Chromium."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

QUESTION = "What's the weather in Hangzhou, and what is 17*23?"
FOLLOW_UP = "And in Chengdu?"


def finished_runs(page, count: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.run-status:not([data-status=running])').length >= n",
        arg=count,
    )


def test_a_message_typed_during_a_run_is_queued_and_sent_after_it(
    fake_provider, start_app, browser_page
):
    # The model holds its first answer halfway until the test lets it go: the follow-up is
    # typed while the run is going, on any machine (a demo run of a few seconds was not).
    provider = fake_provider("ok+hold,ok")
    app = start_app(env=provider.env)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")

    page.wait_for_selector(".run-status[data-status=running]")
    page.fill("#composer-input", FOLLOW_UP)
    page.press("#composer-input", "Enter")
    # Queued under the running exchange (docs/queue.md), not thrown away nor refused.
    page.wait_for_selector(f"#queued-messages .queued-text:text-is('{FOLLOW_UP}')")
    assert page.input_value("#composer-input") == ""
    assert not page.is_visible("#chat-error")
    assert page.inner_text("#send") == "Stop"  # with the composer empty, the button stops

    provider.release()
    finished_runs(page, 2)
    assert page.locator(".run").count() == 2
    assert FOLLOW_UP in page.locator(".run").nth(1).locator(".msg.user").inner_text()


def test_the_page_fits_a_narrow_phone_screen(live_app, browser_page):
    page = browser_page
    page.set_viewport_size({"width": 400, "height": 800})
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    finished_runs(page, 1)
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 400, f"the page is {width} px wide on a 400 px screen"
    assert page.locator("#send").bounding_box()["x"] + 10 < 400


def test_a_message_the_server_refuses_keeps_its_text(start_app, browser_page):
    # Found by a new user: over the run limit, the notice said "not sent" but the
    # composer had been cleared when the message went out.
    app = start_app(env={"CHAT_RUNS_PER_MINUTE": "1"})
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    finished_runs(page, 1)
    assert page.input_value("#composer-input") == ""  # accepted: cleared

    page.fill("#composer-input", FOLLOW_UP)
    page.press("#composer-input", "Enter")
    page.wait_for_selector("#chat-error.visible")
    assert "not sent" in page.inner_text("#chat-error")
    assert page.input_value("#composer-input") == FOLLOW_UP
    assert page.locator(".run").count() == 1


def test_a_setting_the_server_refuses_shows_why_in_the_picker(live_app, browser_page):
    # The picker's 400 and 409 answers are fragments meant to be shown (htmx drops error
    # responses unless base.html's htmx-config says otherwise): a value no option offers,
    # as a stale or tampered page would post, comes back with the reason.
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.evaluate(
        """() => {
          const select = document.querySelector('#conversation-settings select[name=tool_choice]');
          select.add(new Option('no_such_tool', 'no_such_tool'));
          select.value = 'no_such_tool';
          select.dispatchEvent(new Event('change', {bubbles: true}));
        }"""
    )
    error = page.wait_for_selector("#conversation-settings .settings-error")
    assert "no_such_tool" in error.inner_text() or "valid" in error.inner_text()
    assert page.locator("#conversation-settings select[name=strategy]").count() == 1
