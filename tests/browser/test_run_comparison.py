"""Two runs of one question compared in Chromium: the chat's Compare menu and page (keyboard,
light and dark, a phone's width) and the admin's run page, differences marked in words.

The first run is asked in the page; the second is the same question run again by
``manage.py ask`` after the conversation's strategy was switched to ReAct (what the
regenerate-with-another-strategy control does, built elsewhere): the demo model then
plays another script, one tool call per model turn instead of both at once.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import create_superuser, on_database, sign_in_to_admin
from tests.browser.test_accessibility import assert_accessible

pytestmark = pytest.mark.browser

QUESTION = "What's the weather in Hangzhou, and what is 17*23?"
TO_REACT = """
import sys
from chat.models import Conversation
Conversation.objects.filter(pk=int(sys.argv[1])).update(strategy="react")
"""
FAST = {"DEMO_TOKEN_DELAY_MS": "0", "DEMO_TOOL_DELAY_MS": "0"}


def ask(page, question: str) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")


def run_ids(page) -> list[int]:
    return [int(re.sub(r"\D", "", run_id)) for run_id in page.eval_on_selector_all(
        "section.run", "runs => runs.map(run => run.id)")]  # fmt: skip


def test_two_runs_of_a_question_are_compared_step_by_step_in_the_chat(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, QUESTION)
    page.wait_for_selector(".run-status[data-status=succeeded]")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    (first,) = run_ids(page)

    # The run's status line came live: its menu loads when opened, and has nothing yet.
    page.click(f"#run-{first}-compare summary")
    page.wait_for_selector(f"#run-{first}-compare .compare-choices-none")

    on_database(live_app.database, "manage.py", "shell", "-c", TO_REACT.replace(
        "int(sys.argv[1])", str(conversation_id)))  # fmt: skip
    on_database(live_app.database, "manage.py", "ask", "--conversation", str(conversation_id),
                "--no-stream", QUESTION, env=FAST)  # fmt: skip
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    first, second = run_ids(page)

    # Keyboard only: to the Compare menu, open it, follow the link to the other run.
    menu = page.locator(f"#run-{first}-compare summary")
    menu.focus()
    page.keyboard.press("Enter")
    link = page.locator(f"#run-{first}-compare a", has_text=f"Run {second}")
    link.wait_for()
    assert "ReAct (text)" in page.inner_text(f"#run-{first}-compare")
    page.locator(f"#run-{first}").screenshot(path="artifacts/run-comparison-menu.png")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/c/{conversation_id}/compare/{first}/{second}/")

    heading = page.inner_text("h1")
    assert heading == f"Run {first} and run {second}, step by step"
    strategy = page.locator("tr[data-total=strategy]")
    assert "Native tool calling" in strategy.inner_text()
    assert "ReAct (text)" in strategy.inner_text()
    assert "differs" in strategy.inner_text()  # in words, not only in colour
    # Native: both calls in one model turn; ReAct: one call per turn, so a model turn of
    # the second run stands alone between the two calls.
    changes = page.eval_on_selector_all(".cmp-row", "rows => rows.map(r => r.dataset.change)")
    assert "only in B" in changes
    lone = page.locator(".cmp-row[data-change='only in B'] .cmp-row-head").first.inner_text()
    assert f"only in run {second}" in lone
    tools = page.eval_on_selector_all(
        ".cmp-row .cmp-row-name", "names => names.map(n => n.textContent)"
    )
    assert tools.count("weather_forecast") == 1 and tools.count("calculator") == 1
    marks = page.locator(".cmp-field.differs .cmp-mark")
    assert marks.count() > 0 and marks.first.is_visible()
    assert page.locator(".cmp-row.cmp-same").count() >= 1

    # Only what differs: the same steps are hidden, the others stay.
    page.click("label[for=cmp-only-changes]")
    assert not page.locator(".cmp-row.cmp-same").first.is_visible()
    assert page.locator(".cmp-row[data-change='only in B']").first.is_visible()
    page.click("label[for=cmp-only-changes]")

    assert_accessible(page, "the comparison of two runs")
    page.screenshot(path="artifacts/run-comparison-desktop.png", full_page=True)

    # A phone: one run under the other, nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    sides = page.locator(".cmp-row").first.locator(".cmp-side")
    top, bottom = sides.nth(0).bounding_box(), sides.nth(1).bounding_box()
    assert bottom["y"] >= top["y"] + top["height"] - 1
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert_accessible(page, "the comparison on a phone")
    page.screenshot(path="artifacts/run-comparison-phone.png", full_page=True)

    # Back to the chat, at the first run.
    page.click("text=← Back to the chat")
    page.wait_for_selector(f"#run-{first}")
    assert page.dialogs == []


def test_the_admin_run_page_compares_a_run_with_another_of_its_question(start_app, browser_page):
    app = start_app()
    create_superuser(app.database, "root", "pw")
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, QUESTION)
    page.wait_for_selector(".run-status[data-status=succeeded]")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    (first,) = run_ids(page)
    on_database(app.database, "manage.py", "shell", "-c", TO_REACT.replace(
        "int(sys.argv[1])", str(conversation_id)))  # fmt: skip
    on_database(app.database, "manage.py", "ask", "--conversation", str(conversation_id),
                "--no-stream", QUESTION, env=FAST)  # fmt: skip

    sign_in_to_admin(page, app.url, f"/admin/chat/agentrun/{first}/change/")
    link = page.locator(".run-compare-with a", has_text="Compare with run ")
    link.wait_for()
    assert_accessible(page, "the admin's run page with its Compare with links")
    link.click()
    page.wait_for_selector("#comparison")
    assert "≠ differs" in page.inner_text("tr[data-total=strategy]")
    assert_accessible(page, "the admin's comparison")
    page.emulate_media(color_scheme="dark")
    page.screenshot(path="artifacts/run-comparison-admin-dark.png", full_page=True)
    page.emulate_media(color_scheme="light")

    # Any run by its id, from the keyboard; a bad one is refused with a message.
    page.fill("#compare-with-id", str(first))
    page.press("#compare-with-id", "Enter")
    page.wait_for_selector("#compare-error")
    assert "That is this run" in page.inner_text("#compare-error")

    # The same box on the run's own page, which sits inside the admin's change form: it
    # went to the change form (a 403) until its fields named a form of their own (a walk).
    page.goto(f"{app.url}/admin/chat/agentrun/{first}/change/")
    href = page.locator(".run-compare-with a", has_text="Compare with run ").first.get_attribute(
        "href"
    )
    other = int(re.search(r"with=(\d+)", href).group(1))
    page.fill("#compare-with-id", str(other))
    page.press("#compare-with-id", "Enter")
    page.wait_for_selector("#comparison")
    assert page.url.endswith(f"/admin/chat/agentrun/{first}/compare/?with={other}")
    page.goto(f"{app.url}/admin/chat/agentrun/{first}/change/")
    page.fill("#compare-with-id", str(other))
    page.click(".compare-with-form button")
    page.wait_for_selector("#comparison")
