"""A long conversation in headless Chromium: the page opens on its newest exchanges, and
"Show earlier messages" loads the earlier ones above without moving what is on screen,
from the mouse and from the keyboard, back to the conversation's start."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import on_database

pytestmark = pytest.mark.browser

WINDOW = 3
EXCHANGES = 8  # three windows: 3 on the page, then 3, then the first 2

# Stores EXCHANGES runs of six tool calls each in the guest's conversation (argv[1]).
FILL = """
import sys
import django
django.setup()
from datetime import timedelta
from django.utils import timezone
from chat.models import Conversation
from tests.chat.test_admin import make_run, weather_call
conversation = Conversation.objects.get(pk=int(sys.argv[1]))
start = timezone.now() - timedelta(hours=1)
for n in range(int(sys.argv[2])):
    calls = [weather_call(f"call_{n}_{k}", town=f"Town {n}") for k in range(6)]
    make_run(conversation, question=f"Question number {n}?", calls=calls,
             started_at=start + timedelta(minutes=n), output=f"Answer number {n}.")
"""

RUNS = "() => [...document.querySelectorAll('#messages .run')].map(run => run.id)"
TOP = "id => document.getElementById(id).getBoundingClientRect().top"


def _fill(app, conversation_id: int, exchanges: int = EXCHANGES) -> None:
    on_database(app.database, "-c", FILL, str(conversation_id), str(exchanges))


def test_show_earlier_loads_the_earlier_messages_above_without_the_page_jumping(
    start_app, browser_page
):
    app = start_app(env={"CHAT_PAGE_EXCHANGES": str(WINDOW)})
    page = browser_page
    page.goto(app.url + "/")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    _fill(app, conversation_id)
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")

    newest = page.evaluate(RUNS)
    assert len(newest) == WINDOW
    assert "Question number 7?" in page.inner_text(f"#{newest[-1]}")
    control = page.locator("#earlier [data-show-earlier]")
    assert control.inner_text() == "Show earlier messages"

    # Read from the top of the list: the oldest run shown must stay where it is.
    page.evaluate("document.getElementById('messages').scrollTop = 0")
    before = page.evaluate(TOP, newest[0])
    control.click()
    page.wait_for_function(
        f"() => document.querySelectorAll('#messages .run').length == {2 * WINDOW}"
    )
    assert abs(page.evaluate(TOP, newest[0]) - before) <= 2
    assert page.evaluate(RUNS)[WINDOW:] == newest

    # The focus is on the next "Show earlier messages": Enter loads the rest.
    assert page.evaluate("document.activeElement.hasAttribute('data-show-earlier')")
    before = page.evaluate(TOP, newest[0])
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => document.querySelectorAll('#messages .run').length == {EXCHANGES}"
    )
    assert abs(page.evaluate(TOP, newest[0]) - before) <= 2
    assert page.locator("[data-show-earlier]").count() == 0
    runs = page.evaluate(RUNS)
    assert len(set(runs)) == EXCHANGES
    assert "Question number 0?" in page.inner_text(f"#{runs[0]}")
    # The start is reached: the focus is on the first exchange, and the announcer says so.
    assert page.evaluate("document.activeElement.id") == runs[0]
    lines = page.locator("#announcer p").all_inner_texts()
    # Nothing per loaded step or run ("Answer ready", "... finished"): only the loads.
    assert lines == [
        "Earlier messages loaded above.",
        "Earlier messages loaded above. This is the start.",
    ]
    assert page.dialogs == []


STEPS = (
    "run => [...document.querySelectorAll(`#${run}-steps [id^=step-][data-kind]`)].map(s => s.id)"
)


def test_an_ended_runs_earlier_steps_load_above_its_last_ones_without_a_jump(
    start_app, browser_page
):
    app = start_app(env={"CHAT_RUN_STEPS_SHOWN": "4"})
    page = browser_page
    page.goto(app.url + "/")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    # Two runs of a model turn, six tool calls and the answer: taller than the list's box,
    # so it can scroll to keep what is on screen in place.
    _fill(app, conversation_id, exchanges=2)
    page.set_viewport_size({"width": 1280, "height": 600})
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    run = page.locator("#messages .run").first.get_attribute("id")
    assert page.evaluate(
        "(b => b.scrollHeight > b.clientHeight)(document.getElementById('messages'))"
    )
    last = page.evaluate(STEPS, run)
    assert len(last) == 4
    control = page.locator(f"#{run}-earlier-steps [data-show-earlier]")
    assert control.inner_text() == "Show the 4 earlier steps"

    page.evaluate("document.getElementById('messages').scrollTop = 0")
    control.focus()
    before = page.evaluate(TOP, last[0])
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => document.querySelectorAll('#{run}-steps [data-kind]').length == 8"
    )
    assert abs(page.evaluate(TOP, last[0]) - before) <= 2
    steps = page.evaluate(STEPS, run)
    assert steps[4:] == last
    assert len(set(steps)) == 8
    assert page.locator(f"#{run}-steps [data-show-earlier]").count() == 0
    # The focus is on the first step loaded (a card's summary), and nothing per step was said.
    assert page.evaluate("document.activeElement.closest('[data-kind]').id") == steps[0]
    lines = page.locator("#announcer p").all_inner_texts()
    assert lines == ["Earlier steps loaded above. This is the start."]
    assert page.dialogs == []


def test_a_timeline_bar_of_a_step_not_shown_loads_the_earlier_steps_and_goes_to_it(
    start_app, browser_page
):
    app = start_app(env={"CHAT_RUN_STEPS_SHOWN": "4"})
    page = browser_page
    page.goto(app.url + "/")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    _fill(app, conversation_id, exchanges=1)
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    run = page.locator("#messages .run").first.get_attribute("id")
    page.locator(f"#{run}-timeline summary").click()
    bar = page.locator(f"#{run}-timeline .tl-link").nth(1)  # the first tool call: not shown
    step = "step-" + bar.get_attribute("data-step")
    assert page.locator(f"#{step}").count() == 0
    bar.click()
    page.wait_for_function(f"() => document.activeElement && document.activeElement.id == '{step}'")
    assert page.evaluate(f"document.getElementById('{step}').open")
    assert page.locator(f"#{run}-steps [data-kind]").count() == 8
