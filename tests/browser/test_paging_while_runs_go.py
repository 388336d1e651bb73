"""The page's windows with runs going: "Show earlier messages" paged to the start in one
tab while another tab's run goes, and a reload in the middle of a run longer than
CHAT_RUN_STEPS_SHOWN. Nothing may be lost, repeated or out of order."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_growth import RUNS, _fill

pytestmark = pytest.mark.browser

QUESTION = "Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room."
STEP_IDS = "run => [...document.querySelectorAll('#' + run + '-steps [data-kind]')].map(s => s.id)"


def _all_earlier(page) -> None:
    while page.locator("#earlier [data-show-earlier]").count():
        count = page.locator("#messages .run").count()
        page.locator("#earlier [data-show-earlier]").click()
        page.wait_for_function(
            f"() => document.querySelectorAll('#messages .run').length > {count}"
        )


def test_paging_back_while_another_tab_runs_loses_and_repeats_nothing(start_app, browser_page):
    app = start_app(
        tool_delay_ms=1500,
        env={"CHAT_PAGE_EXCHANGES": "2", "CHAT_RUN_STEPS_SHOWN": "2"},
    )
    page = browser_page
    page.goto(app.url + "/")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    _fill(app, conversation_id, exchanges=5)
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_selector("#connection[data-state=open]")

    other.fill("#composer-input", QUESTION)
    other.press("#composer-input", "Enter")
    page.wait_for_selector("#messages .run [data-status=running][data-tool]")
    going = page.evaluate(RUNS)[-1]
    _all_earlier(page)  # while the tool calls run
    page.wait_for_selector(f"#{going}-status[data-status=succeeded]")
    live = page.evaluate(RUNS)
    assert len(live) == 6 and len(set(live)) == 6
    assert [int(r.split("-")[1]) for r in live] == sorted(int(r.split("-")[1]) for r in live)
    newest = live[-1]
    live_steps = page.evaluate(STEP_IDS, newest)
    assert len(live_steps) == 5 and len(set(live_steps)) == 5

    # A second long run: reload in the middle of it, then page back again.
    other.fill("#composer-input", QUESTION)
    other.press("#composer-input", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#messages .run').length == 7")
    last = page.evaluate(RUNS)[-1]
    page.wait_for_selector(f"#{last} [data-status=running][data-tool]")
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    page.wait_for_selector(f"#{last}-status[data-status=succeeded]")
    steps = page.evaluate(STEP_IDS, last)
    assert len(steps) == len(set(steps)) == 5, steps
    _all_earlier(page)
    runs = page.evaluate(RUNS)
    assert runs == [*live, last]
    # The first long run is folded now (ended): its earlier steps load without repeats.
    control = page.locator(f"#{newest}-earlier-steps [data-show-earlier]")
    assert control.inner_text() == "Show the 3 earlier steps"
    control.click()
    page.wait_for_function(
        f"() => document.querySelectorAll('#{newest}-steps [data-kind]').length == 5"
    )
    assert page.evaluate(STEP_IDS, newest) == live_steps
    assert page.dialogs == []


STEPS_OF = "run => document.querySelectorAll('#' + run + '-steps [id^=step-][data-kind]').length"


def test_a_socket_that_connects_after_the_earlier_steps_were_loaded_keeps_them(
    start_app, browser_page
):
    app = start_app(env={"CHAT_RUN_STEPS_SHOWN": "2"})
    page = browser_page
    page.goto(app.url + "/")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    _fill(app, conversation_id, exchanges=1)  # a model turn, six calls, the answer: 8 steps
    held = []
    page.route_web_socket(
        re.compile(r"/ws/chat/"), lambda ws: held.append(ws)
    )  # connects only when told
    page.add_init_script(
        "document.addEventListener('htmx:wsAfterMessage', () => { window.frames_in = "
        "(window.frames_in || 0) + 1; });"
    )
    page.reload()
    run = page.locator("#messages .run").first.get_attribute("id")
    page.locator(f"#{run}-earlier-steps [data-show-earlier]").click()
    page.wait_for_function(f"() => ({STEPS_OF})('{run}') == 8")
    page.wait_for_function("() => document.activeElement.closest('[data-kind]')")

    # The socket reaches the server now (a slow connect, or a reconnect): its catch-up
    # sends this run, the latest, whole.
    assert held, "the page opened no socket"
    held[-1].connect_to_server()
    page.wait_for_function("() => window.frames_in >= 1")
    assert page.evaluate(STEPS_OF, run) == 8
    assert page.evaluate("!!document.activeElement.closest('[data-kind]')")
