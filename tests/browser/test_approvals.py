"""People in the loop in headless Chromium, as the issue checks it: two tabs, an ``ask``
policy on the booking tool, the travel question, the arguments edited in one tab and the
decision seen in the other, a server restart while the run waits, then the approval; and
a denial the model answers around."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import ARTIFACTS, ROOT
from tests.browser.test_chat_page import TRAVEL_QUESTION

pytestmark = pytest.mark.browser

POLICY = {"AGENT_TOOL_POLICIES": "check_bnb_availability=ask"}
HELD = ".tool-card[data-tool=check_bnb_availability]"


def send(page, question: str) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")


def wait_status(page, run_index: int, status: str) -> None:
    page.wait_for_function(
        "([i, s]) => { const r = document.querySelectorAll('.run-status')[i];"
        " return r && r.dataset.status === s; }",
        arg=[run_index, status],
    )


def ask_and_wait(app, page) -> None:
    """Open the app, ask the travel question and wait for its run to wait for approval."""
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    send(page, TRAVEL_QUESTION)
    wait_status(page, 0, "waiting")


# In CI's PostgreSQL + Redis pass too: the decision reaches the other tab's page over the
# layer, and after the restart both pages subscribe again and see the run go on.
@pytest.mark.backends
def test_two_tabs_see_the_card_and_the_decision_and_the_wait_survives_a_restart(
    start_app, browser_page
):
    app = start_app(env=POLICY)
    first = browser_page
    ask_and_wait(app, first)
    card = first.locator(HELD)
    assert card.get_attribute("data-status") == "pending"
    assert "waiting for approval" in card.locator(".badge").inner_text()
    # The card is brought into view, though the turn's results below it are long.
    assert first.locator(f"{HELD} button.approve").evaluate(IN_VIEW)
    first.screenshot(path=str(ARTIFACTS / "approval-pending.png"))
    # The turn's other calls ran meanwhile.
    assert first.locator(".tool-card[data-status=success]").count() == 2

    second = first.context.new_page()
    second.goto(first.url)
    second.wait_for_selector(f"{HELD} [data-approval-form]")

    # The server restarts while the run waits: nothing of the run was in memory.
    app.process.terminate()
    app.process.wait(timeout=30)
    app = start_app(env=POLICY, database=app.database, port=app.port)
    for page in (first, second):
        page.wait_for_selector("#connection[data-state=open]", timeout=60_000)
    box = first.locator(f"{HELD} textarea[name=arguments]")
    edited = {**json.loads(box.input_value()), "rooms": 2}
    box.fill(json.dumps(edited))
    first.locator(f"{HELD} button.approve").click()

    for page in (first, second):
        wait_status(page, 0, "succeeded")
        evidence = page.locator(f"{HELD} .approval-evidence")
        assert evidence.get_attribute("data-approval") == "approved"
        # (the card folded when the run ended: its text is read, not its rendering)
        assert "Arguments edited before it ran" in evidence.text_content()
        assert '"rooms": 2' in page.locator(f"{HELD} pre.args").first.text_content()
        assert page.locator(f"{HELD}").get_attribute("data-status") == "success"
    assert first.locator("[data-approval-form]").count() == 0
    second.locator(HELD).evaluate("card => { card.open = true; card.scrollIntoView(); }")
    second.screenshot(path=str(ARTIFACTS / "approval-decided.png"))

    # A denial with a reason, from the other tab: the model answers without the booking.
    send(first, TRAVEL_QUESTION)
    wait_status(first, 1, "waiting")
    run = second.locator(".run").nth(1)
    run.locator(f"{HELD} [data-approval-form]").wait_for()
    run.locator(f"{HELD} input[name=reason]").fill("we already booked a room")
    run.locator(f"{HELD} button.deny").click()
    for page in (first, second):
        wait_status(page, 1, "succeeded")
        denied = page.locator(".run").nth(1).locator(HELD)
        assert "denied" in denied.locator(".badge").inner_text()
        assert "we already booked a room" in denied.locator(".approval-evidence").text_content()
        assert page.locator(".run").nth(1).locator(".turn.answer").count() == 1


def test_enter_in_the_denials_reason_denies_the_call(start_app, browser_page):
    """The reason field is a denial's: Enter there denies. The browser's implicit
    submission pressed the form's first button, Approve, so a typed "do not book" ran
    the booking."""
    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    reason = page.locator(f"{HELD} input[name=reason]")
    reason.fill("do not book anything")
    reason.press("Enter")
    wait_status(page, 0, "succeeded")
    evidence = page.locator(f"{HELD} .approval-evidence")
    assert evidence.get_attribute("data-approval") == "denied"
    assert "do not book anything" in evidence.text_content()


IN_VIEW = """b => { const r = b.getBoundingClientRect();
                    return r.top >= 0 && r.bottom <= window.innerHeight; }"""
# Results opening above the held card (its turn's earlier calls), then the page's handler
# of a fragment, as when one arrives.
OPEN_ABOVE = """() => {
  const above = document.querySelector('.tool-card');
  const result = document.createElement('div');
  result.style.height = '1500px';
  above.after(result);
  document.body.dispatchEvent(new CustomEvent('htmx:wsAfterMessage',
    {bubbles: true, detail: {message: ''}}));
}"""


def test_the_held_card_stays_in_view_as_results_open_above_it_until_the_person_scrolls(
    start_app, browser_page
):
    """In the model's order the turn's other calls come before the held one, and their
    results opened above its card after it was brought into view: it left the screen
    now and then (seen in make test)."""
    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    approve = page.locator(f"{HELD} button.approve")
    page.evaluate(OPEN_ABOVE)
    assert approve.evaluate(IN_VIEW)
    # The person scrolls (a wheel): the page no longer moves the card back for them.
    moved = page.evaluate(
        """async () => {
             const box = document.getElementById('messages');
             box.dispatchEvent(new WheelEvent('wheel', {deltaY: -300, bubbles: true}));
             box.scrollTop -= 300;
             // Its scroll event is handled before the next frame (no longer at the bottom).
             await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
             const theirs = box.scrollTop;
             document.body.dispatchEvent(new CustomEvent('htmx:wsAfterMessage',
               {bubbles: true, detail: {message: ''}}));
             return box.scrollTop - theirs;
           }"""
    )
    assert moved == 0


def test_a_refused_edit_says_why_and_the_form_can_be_used_again(start_app, browser_page):
    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    page.locator(f"{HELD} textarea[name=arguments]").fill('{"rooms": "lots"}')
    page.locator(f"{HELD} button.approve").click()
    page.wait_for_selector("#chat-error.visible")
    assert "do not match the tool" in page.inner_text("#chat-error")
    assert "do not match the tool" in page.locator(f"{HELD} .approval-error").inner_text()
    approve = page.locator(f"{HELD} button.approve")
    page.wait_for_function("b => !b.disabled", arg=approve.element_handle())
    # Stop ends the waiting run; the call never ran, and the chat takes a new message.
    page.locator(".run-status .stop").click()
    wait_status(page, 0, "cancelled")
    assert (
        page.locator(HELD).locator(".approval-evidence").get_attribute("data-approval")
        == "cancelled"
    )
    send(page, "What is 17*23?")
    wait_status(page, 1, "succeeded")


def test_a_reason_over_the_limit_is_refused_whole_not_cut(start_app, browser_page):
    """The field took 1,000 characters and cut the rest of a paste without a word, so the
    denial went with a reason nobody wrote; the card refuses it as the admin does."""
    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    reason = page.locator(f"{HELD} input[name=reason]")
    reason.fill("no " * 500)
    page.locator(f"{HELD} button.deny").click()
    page.wait_for_selector(f"{HELD} .approval-error:not(:empty)")
    assert "at most 1,000 characters" in page.locator(f"{HELD} .approval-error").inner_text()
    assert reason.input_value() == "no " * 500  # nothing lost
    assert page.locator(".run-status").first.get_attribute("data-status") == "waiting"
    reason.fill("no booking")
    page.locator(f"{HELD} button.deny").click()
    wait_status(page, 0, "succeeded")
    assert page.locator(f"{HELD} .approval-evidence").get_attribute("data-approval") == "denied"


def test_esc_stops_a_waiting_run_but_not_from_the_card_being_decided(start_app, browser_page):
    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    stop = page.locator(".run-status .stop")
    # Esc while editing the call's arguments is about the card: the run keeps waiting
    # (Stop, pressed, is disabled in the same handler: nothing to wait for here).
    page.locator(f"{HELD} textarea[name=arguments]").focus()
    page.keyboard.press("Escape")
    assert stop.is_enabled() and stop.inner_text() == "Stop"
    # Anywhere else, Esc stops it, as it stops a running one.
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Escape")
    wait_status(page, 0, "cancelled")
    assert page.locator("[data-approval-form]").count() == 0


def test_esc_on_any_part_of_the_held_card_leaves_the_run_waiting(start_app, browser_page):
    """The card's summary (where Tab lands first) and its Copy button are the card too:
    Esc there is not a stop of the whole run (README: "but a held call's card")."""
    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    stop = page.locator(".run-status .stop")
    for part in (f"{HELD} > summary", f"{HELD} button:has-text('Copy')"):
        page.locator(part).first.focus()
        page.keyboard.press("Escape")
        assert stop.is_enabled() and stop.inner_text() == "Stop", part
    assert page.locator(".run-status").first.get_attribute("data-status") == "waiting"


def test_a_notice_about_something_else_leaves_a_sent_decision_alone(start_app, browser_page):
    """A sent decision's buttons stay disabled until its card comes back; only a refusal
    of that decision (said beside its buttons) makes them usable again, not any notice."""
    from chat import fragments

    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    step = int(page.locator(f"{HELD} input[name=step]").input_value())
    others = fragments.error("Nothing to stop.") + fragments.message_refused("Not sent.")
    refusal = fragments.decision_refused(step, "No.")
    usable = page.evaluate(
        """([others, refusal]) => {
             const form = document.querySelector('[data-approval-form]');
             form.setAttribute('data-sent', '');
             form.querySelectorAll('button').forEach(b => { b.disabled = true; });
             // Swapped in out-of-band, as the websocket extension swaps a server frame.
             const heard = html => htmx.swap(document.body, html,
                                             {swapStyle: 'none', settleDelay: 0});
             const enabled = () => [...form.querySelectorAll('button')].every(b => !b.disabled);
             heard(others);
             const afterOther = enabled();
             heard(refusal);
             return [afterOther, enabled()];
           }""",
        [others, refusal],
    )
    assert usable == [False, True]


def test_the_pending_card_is_accessible_and_announced(start_app, browser_page):
    from tests.browser.test_accessibility import announcements, assert_accessible

    page = browser_page
    ask_and_wait(start_app(env=POLICY), page)
    assert_accessible(page, "a run waiting for approval")
    said = announcements(page)
    assert "check_bnb_availability waits for your approval" in said
    assert "A tool call waits for your approval" in said
    # The decision's controls are reached from the keyboard.
    page.locator(f"{HELD} textarea[name=arguments]").focus()
    reached = []
    for _ in range(4):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("document.activeElement.name"))
    assert reached == ["always", "decision", "reason", "decision"]
    assert page.evaluate("document.activeElement.value") == "deny"  # Approve came first
    expiry = page.locator(f"{HELD} .approval-ask time[data-until]")
    assert expiry.inner_text().startswith("in ") and "UTC" not in expiry.inner_text()
    assert expiry.get_attribute("title").startswith("at ")  # the local time, by the script


def test_the_admins_approval_list_and_page_are_accessible(start_app, browser_page):
    """The approval list's run column ("#3 Waiting") and the approval's page (its run's
    link, the breadcrumbs): links told apart from the text around them by more than colour."""
    from tests.browser.conftest import create_superuser, sign_in_to_admin
    from tests.browser.test_accessibility import assert_accessible

    app = start_app(env=POLICY)
    page = browser_page
    ask_and_wait(app, page)
    create_superuser(app.database, "root", "a-long-password")
    sign_in_to_admin(page, app.url, "/admin/chat/approval/", "a-long-password")
    # Django's own search box is labelled by its magnifier icon (as on the run list).
    assert_accessible(page, "the admin's approval list", skip=("label-title-only",))
    page.click("#result_list tbody tr a[href$='/change/']")
    page.wait_for_selector("text=What the model said before the call")
    assert_accessible(page, "the admin's approval page")


def documented_button(state: str) -> tuple[str, str]:
    """Return the composer's button docs/queue.md names for a run in ``state``: (with
    the composer empty, with text)."""
    table = (ROOT / "docs" / "queue.md").read_text().splitlines()
    (row,) = [line for line in table if line.startswith(f"| {state} |")]
    empty, typed = row.strip("|").split("|")[1:3]
    return empty.split("**")[1], typed.split("**")[1]


def test_the_composers_button_while_a_run_waits_is_the_one_the_docs_name(start_app, browser_page):
    """docs/queue.md said Stop while a run waits for a decision; the page shows Send
    (its Stop is in the run's status line) (new-user walk)."""
    app = start_app(env=POLICY)
    page = browser_page
    ask_and_wait(app, page)
    empty, typed = documented_button("waiting for a decision")

    assert page.locator("#send").inner_text() == empty
    page.fill("#composer-input", "And in Chengdu?")
    assert page.locator("#send").inner_text() == typed
    assert page.locator(".run-status[data-status=waiting] .stop-form button").is_visible()
