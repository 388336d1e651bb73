"""Issue 23's live Markdown attacked in headless Chromium: link targets the final render
(nh3) removes must not be live while the answer streams (markdown-live.js, DOMPurify)."""

from __future__ import annotations

import pytest

from tests.browser.test_streaming import assert_live_renders_as_the_server, start_streaming

pytestmark = pytest.mark.browser

# Schemes with a digit are schemes (RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / ".")):
# nh3 removes their href; DOMPurify's regular expression took "ed2k:" for a relative URL.
HOSTILE = [
    "[e](ed2k://|file|x.exe|1|) [s](s3://bucket/key) [z](z39.50r://host/db) [w](web+a:x)",
    "[j](JaVaScRiPt:alert(1)) [t](tel:123) [f](ftp://x.example/) [v](vbscript:x)",
    "[r](//evil.example/x) [q](?q=1) [h](#frag) [n](1abc:rel) [p](foo/bar:baz)",
    '[x](https://ok.example "a\\" onmouseover=\\"alert(1)") <mailto:a@b.c>',
]


def test_the_live_render_keeps_no_link_the_final_render_removes(
    fake_provider, start_app, browser_page
):
    provider = start_streaming(fake_provider, start_app, browser_page)
    assert_live_renders_as_the_server(browser_page, HOSTILE)
    provider.release()


def test_stop_pressed_while_the_connection_is_down_says_so_and_is_not_kept_for_later(
    fake_provider, start_app, browser_page
):
    """Found: the composer guarded Send while offline, but not Stop (nor a queued
    message's "Stop and send now"): htmx kept the cancel frame and sent it on reconnect,
    where it stops whatever run goes then (the queue's next, say), while the button said
    "Stopping…" for a run the server never heard about."""
    from tests.browser.test_queue import QUESTION, RECONNECT_AT_ONCE, send
    from tests.timing import WAIT_S

    provider = fake_provider("markdown+hold", word_delay_ms=5)
    app = start_app(env=provider.env)
    page = browser_page
    page.add_init_script(RECONNECT_AT_ONCE)
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    send(page, QUESTION)
    page.wait_for_selector("#send[data-mode=stop]")

    # The connection goes down mid-run: SIGKILL, as a network gone would leave it (a
    # SIGTERM's graceful stop ends the run, and sometimes told the page before closing).
    app.process.kill()
    app.process.wait(timeout=WAIT_S)
    page.wait_for_selector("#connection[data-state=closed]")
    page.click("#send")

    page.wait_for_selector("#chat-error:has-text('Not sent: the live connection is down')")
    assert page.inner_text("#send") == "Stop"  # not "Stopping…": nothing was sent
    assert page.get_attribute("#send", "aria-disabled") is None
    provider.release()


def test_a_message_queued_behind_a_run_cut_off_by_a_crash_is_sent_after_the_restart(
    start_app, browser_page
):
    """kill -9 mid-run with a message queued: the new process marks the run interrupted
    and sends the queued message (docs/queue.md, "its process died"), with no reload."""
    from tests.browser.test_crash import (
        ENV,
        FOLLOW_UP,
        KILLED_MID_RUN,
        RECONNECT_AT_ONCE,
        STALE_AFTER_S,
        TRAVEL_QUESTION,
        age_run,
        ask_and_wait_for_a_running_tool,
        db_rows,
        kill_mid_run,
        wait_for_status,
    )
    from tests.browser.test_queue import send, stored_questions

    first = start_app(**KILLED_MID_RUN, env=ENV)
    page = browser_page
    page.goto(first.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.evaluate(RECONNECT_AT_ONCE)
    ask_and_wait_for_a_running_tool(page, TRAVEL_QUESTION)
    send(page, FOLLOW_UP)
    page.wait_for_selector("#queued-messages:not([hidden]) .queued-message")
    [(run_id, _, _)] = db_rows(first.database)[0]

    kill_mid_run(first)
    page.wait_for_selector("#connection[data-state=closed]")
    age_run(first.database, run_id, STALE_AFTER_S + 60)
    second = start_app(env=ENV, database=first.database, port=first.port)
    page.wait_for_selector("#connection[data-state=open]")

    wait_for_status(page, run_id, "interrupted")
    page.wait_for_function(
        "() => document.querySelectorAll('.run-status[data-status=succeeded]').length === 1"
    )
    page.wait_for_selector("#queued-messages[hidden]", state="attached")
    runs, _ = db_rows(second.database)
    assert [status for _, status, _ in runs] == ["interrupted", "succeeded"]
    assert stored_questions(second.database) == [TRAVEL_QUESTION, FOLLOW_UP]


def test_a_reload_mid_regenerate_shows_what_the_live_page_showed(start_app, browser_page):
    """A regenerate's run going: the live page and a reload mid-run show the same takes,
    the same run running; the switcher, pressed meanwhile, says why it cannot switch."""
    from tests.browser.test_branches import ask, run_ids

    app = start_app(token_delay_ms=150)
    page = browser_page
    first = ask(app, page)
    page.click(f"#{first} .regenerate")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    (second,) = run_ids(page)
    page.wait_for_selector(f"#{second} .run-status[data-status=running]")
    live = page.inner_text(".takes-count"), run_ids(page)

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    reloaded = page.inner_text(".takes-count"), run_ids(page)
    still_running = page.get_attribute(f"#{second}-status", "data-status") == "running"
    if still_running and page.locator(".takes-previous:not([disabled])").count():
        page.click(".takes-previous")
        page.wait_for_selector("#chat-error:has-text('still working')")
        assert run_ids(page) == [second]
    page.wait_for_selector(f"#{second} .run-status[data-status=succeeded]")

    assert reloaded == live
    assert page.locator(".takes-count").inner_text() == "2 / 2"
