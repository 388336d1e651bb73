"""Accessibility in headless Chromium: axe-core finds nothing serious, the live region
says when steps start and end, Esc stops a run, and a refused socket says why.

axe-core is vendored in tests/vendor/axe-core (tests/vendor/README.md) and injected into
each page checked; only violations of impact "serious" or "critical" fail a test (the
"moderate" and "minor" ones are printed with the failure of another, for context).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.browser.conftest import ARTIFACTS, ROOT, create_superuser
from tests.browser.settings_panel import pick_setting

pytestmark = pytest.mark.browser

AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("serious", "critical")
TRAVEL_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
# A format error first, then two tool calls and the answer (the demo model's script).
MALFORMED_QUESTION = "What's the weather in Hangzhou, and what is 17*23? #malformed"
HOUR_MS = 3_600_000  # tools that never answer while the test looks at the running run
SCHEMES = ("light", "dark")
# Run before the page's scripts: make its socket's URL absolute, to another host name.
SOCKET_TO = """document.addEventListener('DOMContentLoaded', () => {
    const main = document.querySelector('[ws-connect]');
    main.setAttribute('ws-connect', %s + main.getAttribute('ws-connect'));
});"""


def axe_report(page, skip: tuple[str, ...] = ()) -> list[dict]:
    """Run axe-core on the page as it is; return its violations (all impacts).

    ``skip``: ids of rules not to run.
    """
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async skip => (await axe.run(document, {
            resultTypes: ['violations'],
            rules: Object.fromEntries(skip.map(id => [id, {enabled: false}])),
        })).violations""",
        list(skip),
    )


def describe(violations: list[dict]) -> str:
    lines = []
    for violation in violations:
        lines.append(f"[{violation['impact']}] {violation['id']}: {violation['help']}")
        for node in violation["nodes"][:5]:
            summary = " ".join(node.get("failureSummary", "").split())
            lines.append(f"    {node['target']}: {summary[:300]}")
    return "\n".join(lines)


def assert_accessible(page, where: str, skip: tuple[str, ...] = ()) -> None:
    """Fail with axe's findings if the page has a serious or critical violation, in the
    light and in the dark colour scheme (``skip``: rule ids not to run)."""
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        # Colours that ease to the new scheme (the admin's links) are checked once there.
        page.evaluate(
            """() => Promise.all(document.getAnimations()
                .filter(animation => animation instanceof CSSTransition)
                .map(animation => animation.finished.catch(() => null)))"""
        )
        violations = axe_report(page, skip)
        failing = [v for v in violations if v["impact"] in FAILING_IMPACTS]
        assert not failing, f"axe on {where} ({scheme}):\n{describe(violations)}"
    page.emulate_media(color_scheme="light")


def announcements(page) -> list[str]:
    return page.locator("#announcer p").all_inner_texts()


def wait_for_announcement(page, pattern: str) -> None:
    """Wait until a line of the live region matches the regular expression ``pattern``."""
    page.wait_for_function(
        """pattern => Array.from(document.querySelectorAll('#announcer p'))
            .some(line => new RegExp(pattern).test(line.textContent))""",
        arg=pattern,
    )


def ask(page, question: str) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")


def wait_for_the_run_to_end(page) -> None:
    page.wait_for_selector(".run-status:not([data-status=running])")


def test_the_chat_page_is_accessible_empty_and_after_a_run_in_each_strategy(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    assert page.get_attribute("#messages", "aria-live") is None  # no token is read out
    assert page.get_attribute("#announcer", "aria-live") == "polite"
    assert_accessible(page, "the empty chat page")

    for number, strategy in enumerate(("tool_calling", "react", "structured_chat", "xml")):
        if number:
            page.click("button.new-chat")
            page.wait_for_selector("#connection[data-state=open]")
        if strategy != "tool_calling":
            pick_setting(page, "#strategy-select", strategy)
            page.wait_for_selector("#tool-choice-select", state="detached")
        ask(page, MALFORMED_QUESTION)
        wait_for_the_run_to_end(page)
        assert page.locator(".tool-card").count() == 3  # a format error and two calls
        wait_for_announcement(page, "^Answer ready")
        assert_accessible(page, f"a finished {strategy} run")

    heard = announcements(page)
    assert any(re.fullmatch(r"Calling (weather_forecast|calculator)", line) for line in heard)
    assert any(re.match(r"calculator finished in \d", line) for line in heard), heard
    assert "Format error in the model's reply" in heard  # not "<tool> failed"
    page.screenshot(path=str(ARTIFACTS / "browser-accessibility-xml.png"), full_page=True)


def test_the_live_region_follows_a_running_run_and_esc_stops_it(start_app, browser_page):
    app = start_app(token_delay_ms=3, tool_delay_ms=HOUR_MS)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, TRAVEL_QUESTION)
    page.wait_for_function(
        "document.querySelectorAll('.tool-card[data-status=running]').length === 3"
    )
    wait_for_announcement(page, "^Calling check_bnb_availability$")
    heard = announcements(page)
    assert heard[0] == "Agent working"
    assert sorted(heard[1:4]) == [
        "Calling check_bnb_availability",
        "Calling search_travel_info",
        "Calling weather_forecast",
    ]
    assert_accessible(page, "the chat page mid-run")

    page.locator("#composer-input").blur()  # Esc works wherever the focus is
    page.keyboard.press("Escape")
    page.wait_for_selector(".run-status[data-status=cancelled]")
    wait_for_announcement(page, "^Run stopped$")
    heard = announcements(page)
    assert "weather_forecast did not finish" in heard  # closed by Stop: it did not fail
    assert not any(line.endswith("failed") for line in heard)
    assert_accessible(page, "a stopped run")


@pytest.mark.parametrize("strategy", ["tool_calling", "react"])
def test_a_model_turn_cut_by_stop_is_announced_as_stopped_not_failed(
    start_app, browser_page, strategy
):
    """Stop mid-turn closes the turn with an error status (a partial answer in a native
    run, the format's text in a text strategy's): the run stopped, the turn did not fail."""
    app = start_app(token_delay_ms=200)  # the reply streams slowly: Stop lands mid-turn
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    if strategy != "tool_calling":
        pick_setting(page, "#strategy-select", strategy)
        page.wait_for_selector("#tool-choice-select", state="detached")
    ask(page, "hello")
    page.wait_for_selector(".turn[data-status=running] .turn-text:not(:empty)")
    page.locator("#composer-input").blur()
    page.keyboard.press("Escape")
    page.wait_for_selector(".run-status[data-status=cancelled]")
    wait_for_announcement(page, "^Run stopped$")
    assert page.locator(".turn[data-status=error]").count() == 1  # the turn Stop closed
    assert announcements(page) == ["Agent working", "Run stopped"]


def test_a_model_turn_that_fails_is_still_announced_as_failed(start_app, browser_page):
    # The reply streams for longer than a turn may last: the turn times out, the run fails.
    app = start_app(token_delay_ms=200, env={"AGENT_MODEL_TIMEOUT_S": "1"})
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, "hello")
    page.wait_for_selector(".run-status[data-status=failed]")
    wait_for_announcement(page, "^Run failed")
    heard = announcements(page)
    assert heard[:2] == ["Agent working", "Model turn failed"], heard


def test_esc_used_by_an_open_dialog_does_not_stop_the_run(start_app, browser_page):
    app = start_app(token_delay_ms=3, tool_delay_ms=HOUR_MS)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, TRAVEL_QUESTION)
    page.wait_for_selector(".tool-card[data-status=running]")
    # Esc in the conversation list's search box is the box's (it clears the search).
    page.fill("#conversation-search-input", "gard")
    page.press("#conversation-search-input", "Escape")
    assert page.get_attribute(".run-status", "data-status") == "running"
    page.focus("#composer-input")
    # A drawer that closes on Esc (what another part of the page may add) uses the key up.
    page.evaluate(
        """() => document.addEventListener('keydown', event => {
            if (event.key === 'Escape') event.preventDefault();
        }, {once: true})"""
    )
    page.keyboard.press("Escape")
    page.evaluate("""() => {
        const dialog = document.createElement('dialog');
        dialog.id = 'test-dialog';
        document.body.append(dialog);
        dialog.show();
    }""")  # fmt: skip
    page.keyboard.press("Escape")  # an open dialog takes it
    assert page.get_attribute(".run-status", "data-status") == "running"
    assert not page.locator("#send[aria-disabled=true]").count()

    page.evaluate("document.getElementById('test-dialog').remove()")
    page.keyboard.press("Escape")
    page.wait_for_selector(".run-status[data-status=cancelled]")


def test_every_control_of_the_chat_is_reached_and_used_from_the_keyboard(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    reached = []
    for _ in range(40):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("""() => {
            const el = document.activeElement;
            const style = getComputedStyle(el);
            return {id: el.id, tag: el.tagName, cls: el.className,
                    ring: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2};
        }"""))  # fmt: skip
    tags = {(item["tag"], item["id"] or item["cls"]) for item in reached}
    assert ("TEXTAREA", "composer-input") in tags
    assert ("BUTTON", "send") in tags
    assert ("SUMMARY", "settings-toggle") in tags  # the settings wait behind it
    assert any(tag == "BUTTON" and "example" in name for tag, name in tags)
    unringed = [item for item in reached if item["tag"] != "BODY" and not item["ring"]]
    assert not unringed, f"focused without a visible ring: {unringed}"

    # An example question, chosen and sent with the keyboard only.
    page.focus("button.example")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "composer-input"
    page.keyboard.press("Enter")
    wait_for_the_run_to_end(page)
    # A card's fold opens and closes from the keyboard.
    summary = page.locator(".tool-card summary").first
    summary.focus()
    was_open = page.evaluate("document.querySelector('.tool-card').open")
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelector('.tool-card').open") is not was_open


def test_the_login_page_and_the_admin_run_page_are_accessible(live_app, browser_page):
    create_superuser(live_app.database, "root", "a-long-password")
    page = browser_page
    page.goto(live_app.url + "/accounts/login/")
    assert_accessible(page, "the login page")
    page.fill("#id_username", "root")
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    page.wait_for_selector(".chat-error")
    assert_accessible(page, "the login page with an error")
    page.fill("#id_username", "root")
    page.fill("#id_password", "a-long-password")
    page.click("button[type=submit]")
    page.wait_for_selector("#connection[data-state=open]")
    ask(page, MALFORMED_QUESTION)
    wait_for_the_run_to_end(page)
    run_id = page.get_attribute(".run", "id").removeprefix("run-")

    page.goto(f"{live_app.url}/admin/chat/agentrun/")
    # Django's own search box is labelled by a magnifier icon whose alt text is "Search":
    # it has a name, but not the visible text this best-practice rule asks for.
    assert_accessible(page, "the admin's run list", skip=("label-title-only",))
    page.goto(f"{live_app.url}/admin/chat/agentrun/{run_id}/change/")
    page.wait_for_selector("text=calculator")
    assert_accessible(page, "the admin's run page")


def test_a_socket_refused_for_its_origin_says_why_on_the_page(live_app, browser_page):
    """The page at one origin, its socket reaching the server with another Host, as when a
    proxy rewrites Host: the page is opened as localhost, its socket goes to 127.0.0.1."""
    page = browser_page
    public = live_app.url.replace("127.0.0.1", "localhost")
    socket_url = live_app.url.replace("http://", "ws://")
    # Before htmx reads it: the socket's URL made absolute, to the other name.
    page.add_init_script(SOCKET_TO % json.dumps(socket_url))
    page.goto(public + "/")
    page.wait_for_selector("#connection[data-state=ended]")

    assert page.inner_text("#connection") == "refused: origin not allowed"
    error = page.inner_text("#chat-error")
    assert public in error and "DJANGO_CSRF_TRUSTED_ORIGINS" in error
    assert page.is_visible("#chat-error")
    wait_for_announcement(page, "^Connection closed: refused: origin not allowed$")
    page.screenshot(path=str(ARTIFACTS / "browser-origin-refused.png"))
    log = live_app.log.read_text()
    assert "websocket closed with 4403: origin not allowed" in log
    assert f"Origin '{public}'" in log
