"""Every state a run goes through shows live as a reload shows it, in the tab that decides
a held tool call and in another: the status line and the composer's button (Stop while
the run goes, Send while it waits and once it ended). After Approve or Deny both tabs kept
"Waiting for your decision" and an enabled Send while the tool ran and the answer
streamed."""

from __future__ import annotations

import pytest

from tests.browser.test_approvals import HELD, POLICY, send, wait_status
from tests.browser.test_chat_page import TRAVEL_QUESTION

pytestmark = pytest.mark.browser

# Each change of the page after a websocket message (htmx swaps and chat.js updates the
# composer in the same task, so an observer sees both): the runs' statuses and the
# composer's button, kept when they differ from the last state seen.
RECORD_STATES = """() => {
    window.seenStates = [];
    const take = () => {
        const button = document.getElementById('send');
        const state = {
            statuses: [...document.querySelectorAll('#messages .run-status')]
                .map(line => line.dataset.status).join(','),
            button: button.textContent.trim(),
            mode: button.dataset.mode,
            disabled: button.disabled,
        };
        const last = window.seenStates[window.seenStates.length - 1];
        if (!last || JSON.stringify(last) !== JSON.stringify(state)) window.seenStates.push(state);
    };
    take();
    new MutationObserver(take).observe(document.body,
        {subtree: true, childList: true, attributes: true, characterData: true});
}"""


def states_of(page, run_index: int) -> list[tuple[str, str]]:
    """Return run ``run_index``'s statuses as the page showed them, each with the button."""
    seen = []
    for state in page.evaluate("window.seenStates"):
        statuses = state["statuses"].split(",")
        if run_index < len(statuses):
            pair = (statuses[run_index], state["button"])
            if not seen or seen[-1] != pair:
                seen.append(pair)
    return seen


def status_text(page, run_index: int) -> str:
    return " ".join(page.locator(".run-status").nth(run_index).inner_text().split())


@pytest.mark.parametrize("tool_delay_ms", [300])
def test_approve_then_deny_show_running_then_ended_in_the_deciding_tab_and_another(
    start_app, browser_page, tool_delay_ms
):
    app = start_app(env=POLICY, tool_delay_ms=tool_delay_ms)
    first = browser_page
    first.goto(app.url + "/")
    first.wait_for_selector("#connection[data-state=open]")
    send(first, TRAVEL_QUESTION)
    wait_status(first, 0, "waiting")
    second = first.context.new_page()
    second.set_viewport_size({"width": 390, "height": 844})  # a phone
    second.goto(first.url)
    second.wait_for_selector(f"{HELD} [data-approval-form]")
    second.wait_for_selector("#connection[data-state=open]")

    for run_index, choice in ((0, "approve"), (1, "deny")):
        if run_index:
            send(first, TRAVEL_QUESTION)
            for page in (first, second):
                wait_status(page, run_index, "waiting")
        for page in (first, second):
            # Waiting: the line says so, has its own Stop, and the composer offers Send.
            assert "Waiting for your decision" in status_text(page, run_index)
            assert page.inner_text("#send") == "Send"
            page.evaluate(RECORD_STATES)
        stop = second.locator(".run-status").nth(run_index).locator(".stop")
        assert stop.bounding_box()["height"] >= 44  # the waiting run's Stop, on the phone
        card = first.locator(".run").nth(run_index).locator(HELD)
        card.locator(f"button.{choice}").click()
        for page in (first, second):
            wait_status(page, run_index, "succeeded")
            page.wait_for_function("() => document.getElementById('send').dataset.mode === 'send'")
        for page in (first, second):
            assert states_of(page, run_index) == [
                ("waiting", "Send"),
                ("running", "Stop"),
                ("succeeded", "Send"),
            ], (choice, page.evaluate("window.seenStates"))
            assert "Waiting" not in status_text(page, run_index)
            assert not page.locator("#send").is_disabled()

    # What the live pages show is what a reload shows.
    live = [status_text(first, i) for i in (0, 1)]
    first.reload()
    first.wait_for_selector("#connection[data-state=open]")
    assert [status_text(first, i) for i in (0, 1)] == live
    assert first.inner_text("#send") == "Send"
