"""Pages opened mid-run catch up, and hostile text stays inert, in headless Chromium."""

from __future__ import annotations

import sqlite3
import time

import pytest

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser

TRAVEL_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"


def snapshot(page) -> list[tuple]:
    """Return what a person sees of each run: tool cards with state, answer, status."""
    duplicated = page.evaluate(
        "() => { const ids = [...document.querySelectorAll('[id]')].map(e => e.id);"
        " return ids.filter((id, i) => ids.indexOf(id) !== i); }"
    )
    assert duplicated == [], f"duplicated element ids: {duplicated}"
    runs = []
    for i in range(page.locator(".run").count()):
        run = page.locator(".run").nth(i)
        cards = run.locator(".tool-card")
        runs.append(
            (
                tuple(
                    (
                        cards.nth(j).get_attribute("data-tool"),
                        cards.nth(j).get_attribute("data-status"),
                    )
                    for j in range(cards.count())
                ),
                " ".join(run.locator(".turn").all_inner_texts()).split(),
                run.locator(".run-status").get_attribute("data-status"),
            )
        )
    return runs


RECORD_STREAMING_TEXT = """() => {
  window.__samples = [];
  const sample = () => document.querySelectorAll('.turn-text.streaming').forEach(
    el => window.__samples.push([el.id, el.textContent]));
  sample();
  new MutationObserver(sample).observe(document.body,
    {subtree: true, childList: true, characterData: true});
}"""


def wait_finished(page, count: int = 1) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.run-status:not([data-status=running])').length >= n",
        arg=count,
        timeout=30_000,
    )


def test_tabs_opened_mid_run_end_up_identical_to_a_fresh_load(start_app, browser_page):
    app = start_app(token_delay_ms=25, tool_delay_ms=300)
    first = browser_page
    first.goto(app.url + "/")
    first.wait_for_selector("#connection[data-state=open]")
    first.fill("#composer-input", TRAVEL_QUESTION)
    first.press("#composer-input", "Enter")
    first.wait_for_selector(".run-status[data-status=running]")
    conversation_url = first.url

    late_tabs = []
    for delay in (0.3, 0.9, 1.6, 2.4):
        time.sleep(delay - (late_tabs[-1][0] if late_tabs else 0))
        tab = first.context.new_page()
        tab.goto(conversation_url)
        tab.evaluate(RECORD_STREAMING_TEXT)
        late_tabs.append((delay, tab))
    # One tab also reloads mid-run.
    late_tabs[0][1].reload()
    late_tabs[0][1].evaluate(RECORD_STREAMING_TEXT)

    wait_finished(first)
    for _, tab in late_tabs:
        wait_finished(tab)
    time.sleep(0.3)  # let the last swaps settle
    fresh = first.context.new_page()
    fresh.goto(conversation_url)
    expected = snapshot(fresh)

    assert expected[0][2] == "succeeded"
    assert len(expected[0][0]) == 3
    assert snapshot(first) == expected
    for delay, tab in late_tabs:
        if snapshot(tab) != expected:
            tab.screenshot(path=str(ARTIFACTS / f"browser-late-tab-{delay}.png"))
        assert snapshot(tab) == expected, f"tab opened {delay}s into the run differs"

    # While it streamed, a late tab only ever showed a prefix of the turn's text: never a
    # piece with a gap in it (deltas are dropped until a snapshot catches the page up).
    with sqlite3.connect(app.database) as db:
        texts = {f"step-{pk}-text": text for pk, text in db.execute(
            "SELECT id, text FROM chat_agentstep WHERE kind = 'model_turn'")}  # fmt: skip
    for delay, tab in late_tabs:
        samples = tab.evaluate("() => window.__samples")
        assert samples, f"tab opened {delay}s in saw no streaming text"
        for element_id, shown in samples:
            assert texts[element_id].startswith(shown), (delay, element_id, shown)


def test_hostile_text_in_questions_and_tool_arguments_stays_inert(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    hostile = (
        "<img src=x onerror=alert(1)> </script><script>alert(2)</script> "
        "[x](javascript:alert(3)) what is 2+3?"
    )
    page.fill("#composer-input", hostile)
    page.press("#composer-input", "Enter")
    wait_finished(page)
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")

    assert page.dialogs == []
    assert page.locator(".run img, .run script").count() == 0
    assert page.locator('.run a[href^="javascript:"]').count() == 0
    assert "<img src=x onerror=alert(1)>" in page.locator(".msg.user").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-hostile-text.png"), full_page=True)
