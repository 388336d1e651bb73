"""Pages opened mid-run catch up, and hostile text stays inert, in headless Chromium."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.timing import wait_until

pytestmark = pytest.mark.browser

QUESTION = "What's the weather in Suzhou, and what is 17*23?"


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


def wait_until_same(page, expected: list[tuple], what: str) -> None:
    """Wait until ``page`` shows the runs as ``expected``; fail with the difference."""
    try:
        wait_until(lambda: snapshot(page) == expected, f"{what} to match a fresh load")
    except AssertionError:
        assert snapshot(page) == expected, f"{what} differs from a fresh load"
        raise


def wait_finished(page, count: int = 1) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.run-status:not([data-status=running])').length >= n",
        arg=count,
    )


def streaming_text_contains(page, turn: int, words: str) -> None:
    """Wait until the ``turn``-th model turn (from 0) streams text containing ``words``."""
    page.wait_for_function(
        "([turn, words]) => { const el = document.querySelectorAll("
        "'.turn[data-kind=model_turn]')[turn]; const text = el &&"
        " el.querySelector('.turn-text.streaming'); return !!text &&"
        " text.textContent.includes(words); }",
        arg=[turn, words],
    )


# In CI's PostgreSQL + Redis pass too: the page merges its socket's catch-up with live
# frames that pub/sub delivers at most once; the socket tests check one late joiner, not
# what three tabs end up showing.
@pytest.mark.backends
def test_tabs_opened_mid_run_end_up_identical_to_a_fresh_load(
    fake_provider, start_app, browser_page
):
    # The model stops halfway through each of its two turns until the test lets it go, so
    # the late tabs open mid-stream by construction. (Opened after fixed sleeps into a
    # demo run, the last could open after the run had ended on a loaded machine.)
    provider = fake_provider("tools+hold,long+hold", word_delay_ms=30)
    app = start_app(tool_delay_ms=300, env=provider.env)
    first = browser_page
    first.goto(app.url + "/")
    first.wait_for_selector("#connection[data-state=open]")
    first.fill("#composer-input", QUESTION)
    first.press("#composer-input", "Enter")
    conversation_url = first.url

    def open_late_tab(when: str):
        tab = first.context.new_page()
        tab.goto(conversation_url)
        tab.evaluate(RECORD_STREAMING_TEXT)
        late_tabs.append((when, tab))
        return tab

    late_tabs: list[tuple[str, object]] = []
    streaming_text_contains(first, 0, "weather in")  # the first turn, held mid-sentence
    reloaded = open_late_tab("mid-first-turn")
    provider.release()  # the tools run, then the answer streams until its hold
    streaming_text_contains(first, 1, "391.")
    open_late_tab("mid-answer")
    open_late_tab("mid-answer, second")
    # One tab also reloads mid-run.
    reloaded.reload()
    reloaded.evaluate(RECORD_STREAMING_TEXT)
    provider.release()

    wait_finished(first)
    for _, tab in late_tabs:
        wait_finished(tab)
    fresh = first.context.new_page()
    fresh.goto(conversation_url)
    expected = snapshot(fresh)

    assert expected[0][2] == "succeeded"
    assert len(expected[0][0]) == 2
    # Every tab ends up as a fresh load shows the run (waited for, not slept on: the
    # status line can come in before a late tab has applied everything before it).
    wait_until_same(first, expected, "the first tab")
    for when, tab in late_tabs:
        try:
            wait_until_same(tab, expected, f"the tab opened {when}")
        finally:
            if snapshot(tab) != expected:
                tab.screenshot(path=str(ARTIFACTS / f"browser-late-tab-{when}.png"))

    # While it streamed, a late tab only ever showed a prefix of the turn's text: never a
    # piece with a gap in it (deltas are dropped until a snapshot catches the page up).
    with sqlite3.connect(app.database) as db:
        texts = {f"step-{pk}-text": text for pk, text in db.execute(
            "SELECT id, text FROM chat_agentstep WHERE kind = 'model_turn'")}  # fmt: skip
    for when, tab in late_tabs:
        samples = tab.evaluate("() => window.__samples")
        assert samples, f"the tab opened {when} saw no streaming text"
        for element_id, shown in samples:
            assert texts[element_id].startswith(shown), (when, element_id, shown)


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
