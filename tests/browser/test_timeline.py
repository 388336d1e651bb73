"""The run timeline in headless Chromium: bars in step order, parallel calls overlapping,
a bar that scrolls to its step, and the same timeline on the admin's run page."""

from __future__ import annotations

import sqlite3

import pytest

from tests.browser.conftest import ARTIFACTS, create_superuser, sign_in_to_admin
from tests.browser.test_chat_page import TRAVEL_QUESTION, ask

pytestmark = pytest.mark.browser

BARS = """run => [...document.querySelectorAll(`#run-${run}-timeline .tl-row`)].map(row => {
  const bar = row.querySelector('.tl-bar');
  return {name: row.querySelector('.tl-name').textContent.trim(),
          kind: row.classList.contains('kind-model_turn') ? 'model_turn' : 'tool_call',
          left: parseFloat(bar.style.left), width: parseFloat(bar.style.width),
          step: row.querySelector('a').dataset.step};
})"""

# How far the page itself scrolls beyond the window (the messages scroll inside it).
PAGE_OVERFLOW = "document.scrollingElement.scrollHeight - window.innerHeight"


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["left"] + b["width"] and b["left"] < a["left"] + a["width"]


def test_the_timeline_shows_parallel_calls_overlapping_and_jumps_to_a_step(start_app, browser_page):
    app = start_app(token_delay_ms=3, tool_delay_ms=300)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, TRAVEL_QUESTION, 1)

    run_id = page.locator(".run").nth(0).get_attribute("id").removeprefix("run-")
    timeline = page.locator(f"#run-{run_id}-timeline")
    assert timeline.get_attribute("open") is None  # folded by default
    summary = page.locator(f"#run-{run_id}-timeline-summary")
    summary.wait_for()
    page.wait_for_function(
        "id => !document.querySelector(`#run-${id}-timeline-body`).hasAttribute('data-running')",
        arg=run_id,
    )
    assert summary.inner_text().startswith("2 model turns · 3 tool calls · ")
    timeline.locator("summary").click()
    assert timeline.get_attribute("open") is not None

    bars = page.evaluate(BARS, run_id)
    assert [b["kind"] for b in bars] == ["model_turn", *["tool_call"] * 3, "model_turn"]
    assert bars[0]["name"] == "model turn 1" and bars[-1]["name"] == "model turn 2"
    calls = bars[1:4]
    assert _overlap(calls[0], calls[1]) and _overlap(calls[1], calls[2])
    assert bars[0]["left"] + bars[0]["width"] <= min(c["left"] for c in calls) + 0.001
    assert max(c["left"] + c["width"] for c in calls) <= bars[-1]["left"] + 0.001
    # The bars' hidden labels stay inside the messages' scroller: the page itself never
    # grows past the window (it did, and a bar's jump then scrolled the whole page).
    assert page.evaluate(PAGE_OVERFLOW) == 0
    page.screenshot(path=str(ARTIFACTS / "browser-timeline.png"), full_page=True)

    # A bar takes the reader to its step's card.
    target = calls[2]["step"]
    timeline.locator(f'a[data-step="{target}"]').click()
    page.wait_for_function("id => document.activeElement?.id === `step-${id}`", arg=target)
    assert page.locator(f"#step-{target}").is_visible()
    assert page.evaluate(PAGE_OVERFLOW) == 0 and page.evaluate("window.scrollY") == 0

    with sqlite3.connect(app.database) as db:
        rows = db.execute(
            "SELECT started_at, finished_at, duration_ms, kind, first_token_ms"
            " FROM chat_agentstep WHERE run_id = ?", (run_id,),
        ).fetchall()  # fmt: skip
    assert all(duration is not None for _, _, duration, _, _ in rows)
    assert all(ttft is not None for *_, kind, ttft in rows if kind == "model_turn")

    # The admin's run page shows the same bars, open, above the steps.
    create_superuser(app.database, "root", "timeline-pw")
    sign_in_to_admin(page, app.url, f"/admin/chat/agentrun/{run_id}/change/", "timeline-pw")
    admin_timeline = page.locator(f"#run-{run_id}-timeline")
    admin_timeline.wait_for()
    assert admin_timeline.get_attribute("open") is not None
    assert page.evaluate(BARS, run_id) == bars
    assert page.locator(f"#step-{target}").count() == 1
    page.screenshot(path=str(ARTIFACTS / "browser-timeline-admin.png"), full_page=True)


def test_a_running_runs_timeline_grows_live_and_settles_when_the_run_ends(
    start_app, fake_provider, browser_page
):
    # The second model turn holds its answer until the test releases it.
    provider = fake_provider("tools,long+hold")
    app = start_app(env=provider.env)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", "Weather in Suzhou and 17*23?")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".tl-body[data-running]", state="attached")
    page.locator(".timeline > summary").click()
    # The tool calls have ended and the second turn is held: its bar is the running one.
    page.wait_for_selector(".tl-row.kind-tool_call + .tl-row.running.kind-model_turn")
    assert page.locator(".tl-row.kind-tool_call").count() == 2
    assert "so far" in page.locator(".tl-summary").inner_text()
    # The held turn's bar grows towards "now" between the server's redraws.
    width = page.evaluate(
        "() => parseFloat(document.querySelector('.tl-row.running .tl-bar').style.width)"
    )
    page.wait_for_function(
        "w => parseFloat(document.querySelector('.tl-row.running .tl-bar').style.width) > w",
        arg=width,
    )
    page.screenshot(path=str(ARTIFACTS / "browser-timeline-running.png"), full_page=True)

    provider.release()
    page.wait_for_selector(".run-status:not([data-status=running])")
    page.wait_for_function("() => !document.querySelector('.tl-body[data-running]')")
    assert page.locator(".tl-row").count() == 4
    assert page.locator(".tl-row.running").count() == 0
    assert page.locator(".tl-first-token").count() == 2
    assert page.locator(".timeline").get_attribute("open") is not None  # kept open
