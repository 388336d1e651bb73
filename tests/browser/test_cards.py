"""Tool cards in headless Chromium: folded when their run ends, opened and closed one at a
time or all at once, remembered across a reload; copy, raw/pretty, format errors and an
answer cut by Stop."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.settings_panel import pick_setting

pytestmark = pytest.mark.browser

TRAVEL_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
MALFORMED_QUESTION = "What's the weather in Hangzhou, and what is 17*23? #malformed"
HOUR_MS = 3_600_000  # tools or tokens that wait an hour: the run is going when we look


def open_chat(page, url: str, strategy: str = "tool_calling") -> None:
    page.goto(url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    if strategy != "tool_calling":
        pick_setting(page, "#strategy-select", strategy)
        page.wait_for_selector("#tool-choice-select", state="detached")


def ask(page, question: str) -> None:
    """Send ``question`` and wait for its run (the page's last) to end."""
    count = page.locator(".run").count()
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('.run-status:not([data-status=running])').length > n",
        arg=count,
    )


def reload(page) -> None:
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")


def open_states(run) -> list[bool]:
    return run.locator(".tool-card").evaluate_all("cards => cards.map(c => c.open)")


def test_cards_fold_to_one_line_when_the_run_ends_and_the_answer_stays_in_view(
    live_app, browser_page
):
    page = browser_page
    open_chat(page, live_app.url)
    ask(page, TRAVEL_QUESTION)

    run = page.locator(".run").first
    assert open_states(run) == [False, False, False]
    weather = run.locator(".tool-card[data-tool=weather_forecast]")
    summary = weather.locator("summary")
    assert summary.locator(".chevron").is_visible()
    assert summary.locator(".args-preview").inner_text() == 'town="Suzhou"'
    assert "ok" in summary.inner_text() and " ms" in summary.inner_text()
    line = summary.evaluate("s => parseFloat(getComputedStyle(s).lineHeight) || 20")
    assert summary.bounding_box()["height"] < 2.5 * line  # one line, padding included
    assert not weather.locator("pre.result").is_visible()
    assert run.locator(".turn.answer .turn-text").is_visible()
    assert "苏州" in run.locator(".turn.answer").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-cards-folded.png"), full_page=True)

    reload(page)  # a page load renders an ended run folded
    assert open_states(page.locator(".run").first) == [False, False, False]


def test_a_running_run_shows_its_cards_open_and_folds_them_when_stopped(start_app, browser_page):
    app = start_app(tool_delay_ms=HOUR_MS)
    page = browser_page
    open_chat(page, app.url)
    page.fill("#composer-input", TRAVEL_QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_function(
        "() => document.querySelectorAll('.tool-card[data-status=running]').length === 3"
    )
    run = page.locator(".run").first
    assert open_states(run) == [True, True, True]
    reload(page)  # a page load renders a running run open
    run = page.locator(".run").first
    assert open_states(run) == [True, True, True]

    page.click("#send[data-mode=stop]")
    page.wait_for_selector(".run-status[data-status=cancelled]")
    assert open_states(page.locator(".run").first) == [False, False, False]


def test_expand_one_expand_all_and_collapse_all_survive_a_reload(live_app, browser_page):
    page = browser_page
    open_chat(page, live_app.url)
    ask(page, TRAVEL_QUESTION)
    ask(page, "What's the weather in Hangzhou, and what is 17*23?")
    first, second = page.locator(".run").nth(0), page.locator(".run").nth(1)

    first.locator(".tool-card summary").nth(1).click()
    assert open_states(first) == [False, True, False]
    second.locator("[data-cards=expand]").click()
    assert open_states(second) == [True, True]
    reload(page)
    first, second = page.locator(".run").nth(0), page.locator(".run").nth(1)
    assert open_states(first) == [False, True, False]
    assert open_states(second) == [True, True]

    # Collapse all wins over the card opened one at a time; then one card opened again.
    first.locator("[data-cards=collapse]").click()
    second.locator(".tool-card summary").first.click()
    assert open_states(first) == [False, False, False]
    assert open_states(second) == [False, True]
    page.keyboard.press("Tab")  # the keyboard opens a card too: focus its summary, Enter
    first.locator(".tool-card summary").first.focus()
    page.keyboard.press("Enter")
    assert open_states(first) == [True, False, False]
    reload(page)
    assert open_states(page.locator(".run").nth(0)) == [True, False, False]
    assert open_states(page.locator(".run").nth(1)) == [False, True]


def test_copy_buttons_copy_the_answer_arguments_and_result(live_app, browser_page):
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_app.url)
    open_chat(page, live_app.url)
    ask(page, TRAVEL_QUESTION)
    run = page.locator(".run").first

    def clipboard() -> str:
        return page.evaluate("() => navigator.clipboard.readText()")

    button = run.locator(".turn.answer .copy")
    button.click()
    page.wait_for_function("b => b.textContent === 'Copied'", arg=button.element_handle())
    assert "苏州" in clipboard() and "<" not in clipboard()

    weather = run.locator(".tool-card[data-tool=weather_forecast]")
    weather.locator("summary").click()
    weather.locator(".block-head .copy").first.click()
    assert json.loads(clipboard()) == {"town": "Suzhou"}
    weather.locator(".block-head .copy").last.click()
    assert json.loads(clipboard())["town"] == "Suzhou"

    # Without the Clipboard API (a plain-http page on another host) the fallback copies.
    page.evaluate("() => { navigator.clipboard.writeText = () => Promise.reject(new Error()); }")
    args_copy = weather.locator(".block-head .copy").first
    args_copy.evaluate("b => { b.textContent = 'Copy'; }")
    args_copy.click()
    page.wait_for_function("b => b.textContent === 'Copied'", arg=args_copy.element_handle())
    assert json.loads(clipboard()) == {"town": "Suzhou"}


def test_a_json_result_toggles_between_pretty_and_raw_and_a_long_one_shows_all(
    live_app, browser_page
):
    page = browser_page
    open_chat(page, live_app.url)
    ask(page, TRAVEL_QUESTION)
    weather = page.locator(".tool-card[data-tool=weather_forecast]").first
    weather.locator("summary").click()
    pretty, raw = weather.locator("pre.result"), weather.locator("pre.result-raw")
    assert pretty.is_visible() and not raw.is_visible()
    assert weather.locator("pre.result .j-key").count() > 3  # coloured

    toggle = weather.locator("[data-view-toggle]")
    toggle.click()
    assert raw.is_visible() and not pretty.is_visible()
    assert toggle.inner_text() == "Pretty"
    assert json.loads(raw.inner_text()) == json.loads(pretty.inner_text())
    assert raw.inner_text() != pretty.inner_text()  # as sent, not re-indented
    toggle.click()
    assert pretty.is_visible() and not raw.is_visible()

    # A long result opens clipped in the one scroll area of the page, "Show all" opens it.
    box = weather.locator(".result-box")
    assert "clipped" in box.get_attribute("class")
    assert box.evaluate("b => b.scrollHeight > b.clientHeight")
    assert pretty.evaluate("p => getComputedStyle(p).overflowY") == "visible"
    weather.locator("[data-show-all]").click()
    assert "clipped" not in box.get_attribute("class")
    assert box.evaluate("b => b.scrollHeight <= b.clientHeight")


@pytest.mark.parametrize("strategy", ["react", "xml"])
def test_a_format_error_reads_as_the_replys_and_the_model_text_is_shown_once(
    live_app, browser_page, strategy
):
    page = browser_page
    open_chat(page, live_app.url, strategy)
    ask(page, MALFORMED_QUESTION)
    run = page.locator(".run").first
    run.locator("[data-cards=expand]").click()

    card = run.locator(".tool-card.parse-error").first
    assert (
        "the model's reply did not parse: the tool did not run"
        in card.locator(".args-preview").text_content()
    )
    note = card.locator(".format-note").inner_text()
    assert note.startswith("A format error in the model's reply, not a failure of weather_forecast")
    # The model's text is in its model turn, not repeated in the cards.
    first_turn = run.locator("[data-kind=model_turn]").first.inner_text().strip()
    assert first_turn and first_turn not in run.locator(".steps .tool-card").first.inner_text()
    assert run.locator(".tool-card details.log").count() == 0
    page.screenshot(path=str(ARTIFACTS / f"browser-cards-{strategy}.png"), full_page=True)


def test_an_answer_cut_by_stop_keeps_the_answer_style_with_a_note(start_app, browser_page):
    app = start_app(token_delay_ms=HOUR_MS)  # the first chunk streams, the rest waits
    page = browser_page
    open_chat(page, app.url)
    page.fill("#composer-input", "Hello")
    page.press("#composer-input", "Enter")
    page.wait_for_function(
        "() => { const t = document.querySelector('.turn-text.streaming');"
        " return t && t.textContent.trim().length > 0; }"
    )
    page.click("#send[data-mode=stop]")
    page.wait_for_selector(".run-status[data-status=cancelled]")

    turn = page.locator(".turn").last
    assert "answer" in turn.get_attribute("class") and "partial" in turn.get_attribute("class")
    assert turn.locator(".partial-note").inner_text() == "stopped: the reply so far"
    assert turn.locator(".turn-text").inner_text().strip()
    reload(page)
    assert page.locator(".turn.answer.partial .partial-note").count() == 1


def test_a_text_strategys_model_text_folds_with_the_cards_and_expands_with_them(
    live_app, browser_page
):
    page = browser_page
    open_chat(page, live_app.url, "react")
    ask(page, TRAVEL_QUESTION)
    run = page.locator(".run").last
    logs = run.locator(".turn-log")
    assert logs.count() >= 1  # the Thought/Action text before the calls
    assert logs.evaluate_all("ls => ls.every(l => !l.open)")
    assert run.locator(".turn-log-preview").first.inner_text().startswith("Thought:")
    assert run.locator(".turn.answer").is_visible()  # the answer stays in view

    run.locator("[data-cards=expand]").click()
    assert logs.evaluate_all("ls => ls.every(l => l.open)")
    reload(page)
    run = page.locator(".run").last
    page.wait_for_function(
        "() => [...document.querySelectorAll('.run:last-of-type .turn-log')].every(l => l.open)"
    )
    run.locator("[data-cards=collapse]").click()
    assert run.locator(".turn-log").evaluate_all("ls => ls.every(l => !l.open)")
