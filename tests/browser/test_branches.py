"""Branches in headless Chromium: regenerate an answer, switch back to the first take with
the keyboard, and a reload shows the same branch; the controls pass axe; a fork opens a
new chat showing the exchange it continues after."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_accessibility import assert_accessible

pytestmark = pytest.mark.browser

QUESTION = "What is 17*23?"
PHONE = {"width": 390, "height": 844}
# The characters of a list entry's title shown before the list cuts it with an ellipsis.
SHOWN_OF_TITLE = """link => {
  const text = document.createTreeWalker(link, NodeFilter.SHOW_TEXT).nextNode();
  const style = getComputedStyle(link);
  const right = link.getBoundingClientRect().right - parseFloat(style.paddingRight);
  const range = document.createRange();
  let shown = "";
  for (let i = 0; i < text.length; i++) {
    range.setStart(text, i); range.setEnd(text, i + 1);
    if (range.getBoundingClientRect().right > right - 12) break;  // 12 px: the ellipsis
    shown += text.data[i];
  }
  return {shown, cut: link.scrollWidth > link.clientWidth};
}"""


def run_ids(page) -> list[str]:
    return page.eval_on_selector_all("#messages section.run", "els => els.map(e => e.id)")


def ask(app, page) -> str:
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status[data-status=succeeded] .regenerate")
    (first,) = run_ids(page)
    return first


def test_a_regenerated_answer_is_switchable_and_a_reload_shows_the_branch_chosen(
    start_app, browser_page
):
    app = start_app()
    page = browser_page
    first = ask(app, page)

    page.click(f"#{first} .regenerate")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    (second,) = run_ids(page)
    assert second != first  # the first take left the list, not the database
    page.wait_for_selector(f"#{second} .run-status[data-status=succeeded]")
    assert "Regenerated from run" in page.locator(f"#{second} .branch-note").inner_text()
    assert_accessible(page, "a regenerated answer with its switcher")
    page.screenshot(path=str(ARTIFACTS / "branches-regenerated.png"))

    # The keyboard alone: the switcher's previous arrow, then Enter.
    page.focus(".takes-previous")
    page.keyboard.press("Enter")
    page.wait_for_selector(".takes-count:has-text('1 / 2')")
    assert run_ids(page) == [first]
    assert page.locator(".takes-previous").is_disabled()

    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert run_ids(page) == [first]
    assert page.locator(".takes-count").inner_text() == "1 / 2"
    assert page.get_attribute(".takes-next", "aria-label") == "Show the next take"


def test_an_edited_question_runs_as_another_take_and_a_fork_shows_its_source(
    start_app, browser_page
):
    app = start_app()
    page = browser_page
    first = ask(app, page)

    page.click(f"#{first} .edit-question summary")
    page.fill(f"#{first} .edit-form textarea", "What is 17*24?")
    page.click(f"#{first} .edit-form button[type=submit]")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    (edited,) = run_ids(page)
    page.wait_for_selector(f"#{edited} .run-status[data-status=succeeded] .fork")
    assert "17*24" in page.locator(f"#{edited} .msg.user").inner_text()

    source = page.url
    page.click(f"#{edited} .fork")
    page.wait_for_url(lambda url: url != source)
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator(".inherited-note").count() == 1
    assert page.locator(".run.inherited .regenerate").count() == 0
    assert_accessible(page, "a fork's inherited exchange")


def test_a_later_questions_regenerate_shows_live_in_both_tabs(start_app, browser_page):
    """The whole branch is swapped in as the list's content: the page's idempotent appends
    once judged it by its first run (already shown and ended) and cancelled the swap, so a
    take of any question but the first never showed until a reload."""
    app = start_app()
    page = browser_page
    first = ask(app, page)
    page.fill("#composer-input", "And 18*23?")
    page.press("#composer-input", "Enter")
    page.wait_for_function("document.querySelectorAll('.run-status[data-status=succeeded]')"
                           ".length === 2")  # fmt: skip
    _, second = run_ids(page)
    other = page.context.new_page()  # another tab of the same browser session
    other.goto(page.url)
    other.wait_for_selector("#connection[data-state=open]")

    page.click(f"#{second} .regenerate")
    for tab in (page, other):
        tab.wait_for_selector(".takes-count:has-text('2 / 2')")
        kept, third = run_ids(tab)
        assert kept == first and third not in (first, second)
        tab.wait_for_selector(f"#{third} .run-status[data-status=succeeded]")
    assert page.inner_text("#send") == "Send"


def test_the_list_replaced_keeps_the_focus_the_switchers_place_and_a_typed_edit(
    start_app, browser_page
):
    """Found by a new-user walk: Regenerate and the arrows dropped the focus to the page,
    the switcher jumped off screen, and another tab's take closed an Edit box and lost
    its text (every take replaces the list, static/js/takes.js)."""
    app = start_app()
    page = browser_page
    page.set_viewport_size({"width": 1000, "height": 600})
    first = ask(app, page)
    page.fill("#composer-input", "What is 2*3?")
    page.press("#composer-input", "Enter")
    page.wait_for_function("() => document.querySelectorAll('.regenerate').length === 2")
    _, last = run_ids(page)
    in_switcher = "() => !!document.activeElement.closest('.takes')"

    page.focus(f"#{first} .regenerate")
    page.keyboard.press("Enter")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    page.wait_for_function(in_switcher)
    page.wait_for_selector(".run-status[data-status=succeeded] .regenerate")
    page.focus(".takes-previous")
    top = page.locator(".takes").evaluate("nav => nav.getBoundingClientRect().top")
    page.keyboard.press("Enter")
    page.wait_for_selector(".takes-count:has-text('1 / 2')")
    assert run_ids(page) == [first, last]
    page.wait_for_function(in_switcher)
    assert abs(page.locator(".takes").evaluate("n => n.getBoundingClientRect().top") - top) < 2

    # Another tab takes the last question again while this one is editing the first.
    page.click(f"#{first} .edit-question summary")
    page.fill(f"#run-{first.removeprefix('run-')}-edit", "What is 17*25?")
    other = page.context.new_page()
    other.goto(page.url)
    other.wait_for_selector("#connection[data-state=open]")
    other.click(f"#{last} .regenerate")
    page.wait_for_function(
        "n => document.querySelectorAll('.takes').length === n", arg=2
    )  # the list was replaced here too
    assert page.input_value(f"#run-{first.removeprefix('run-')}-edit") == "What is 17*25?"
    assert page.locator(f"#{first} .edit-question").evaluate("d => d.open")
    other.close()


def test_the_admin_page_of_a_run_taken_again_is_accessible(start_app, browser_page):
    """The run page's "Taken again in run N (regenerate)": a link inside a line of text,
    which axe wants told apart by more than its colour (link-in-text-block)."""
    from tests.browser.conftest import create_superuser, sign_in_to_admin

    app = start_app()
    page = browser_page
    first = ask(app, page).removeprefix("run-")
    page.click(f"#run-{first} .regenerate")
    page.wait_for_selector(".takes-count:has-text('2 / 2')")
    page.wait_for_selector(".run-status[data-status=succeeded]")

    create_superuser(app.database, "root", "a-long-password")
    sign_in_to_admin(page, app.url, f"/admin/chat/agentrun/{first}/change/", "a-long-password")
    page.wait_for_selector("text=Taken again in")
    assert_accessible(page, "the admin's page of a run taken again")


def test_a_fork_and_its_source_look_different_in_the_list_on_a_desktop_and_a_phone(
    start_app, browser_page
):
    """A fork's title ended with " (fork)", which the list cuts off: the Chinese starter
    question and its fork read the same there (new-user walk)."""
    app = start_app()
    page = browser_page
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status[data-status=succeeded] .fork")
    source = page.url.rstrip("/").rsplit("/", 1)[-1]
    page.click(".run .fork")
    page.wait_for_url(lambda url: not url.rstrip("/").endswith(f"/{source}"))
    page.wait_for_selector("#connection[data-state=open]")
    fork = page.url.rstrip("/").rsplit("/", 1)[-1]
    phone = page.context.browser.new_context(  # the same guest, on a phone
        viewport=PHONE, has_touch=True, is_mobile=True, storage_state=page.context.storage_state()
    )
    phone_page = phone.new_page()
    phone_page.goto(f"{app.url}/c/{fork}/")
    phone_page.click("#sidebar-toggle")
    phone_page.wait_for_function("getComputedStyle(sidebar).transform === 'none'")

    for shown_on in (page, phone_page):
        seen = [
            shown_on.eval_on_selector(f"#conversation-link-{pk}", SHOWN_OF_TITLE)
            for pk in (source, fork)
        ]
        assert seen[0]["cut"] and seen[1]["cut"], seen  # both titles are longer than the list
        assert seen[0]["shown"] != seen[1]["shown"], seen
        assert seen[1]["shown"].startswith("Fork"), seen
    phone_page.screenshot(path=str(ARTIFACTS / "branches-fork-in-the-phone-list.png"))
    phone.close()
