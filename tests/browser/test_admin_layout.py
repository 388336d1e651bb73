"""The admin's lists at 1366 px (the approvals list at 1280 px too): every column in
view, no sideways scrolling, with the longest values a real day stores (long usernames
and model names, the longest status, six-digit token counts, tool and format errors,
long tool arguments)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS, on_database, sign_in_to_admin

pytestmark = pytest.mark.browser

SEED = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from chat.models import AgentRun, AgentStep, Conversation, Feedback, Message

User.objects.create_superuser("root", password="pw")
owner = User.objects.create_user("margaret.hamilton.apollo11")
now = timezone.now()
shapes = [
    ("max_iterations", "structured_chat", "SmolLM2-135M-Instruct-Q8_0.gguf", 12, 3),
    ("succeeded", "tool_calling", "gpt-4o-mini-2024-07-18", 0, 0),
    ("interrupted", "react", "qwen2.5-coder-32b-instruct", 1, 0),
    ("cancelled", "xml", "demo-scripted", 0, 1),
]
for i, (status, strategy, model, tool_errors, format_errors) in enumerate(shapes):
    conversation = Conversation.objects.create(
        owner=owner, title="A rather long conversation title about Hangzhou and Suzhou " * 2)
    question = Message.objects.create(conversation=conversation, role="user",
        content="Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room. " * 3)
    run = AgentRun.objects.create(
        conversation=conversation, user_message=question, strategy=strategy, provider="openai",
        model_name=model, status=status, started_at=now - timedelta(minutes=i),
        finished_at=now, duration_ms=1_234_567, iterations=15, tool_call_count=45,
        tool_error_count=tool_errors, format_error_count=format_errors,
        input_tokens=987_654, output_tokens=12_345, total_tokens=999_999)
    AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="tool_call",
        status="error", started_at=now, tool_name="invented_tool_" + "x" * 40)
    if status == "cancelled":  # no tokens: its cost reads "unknown"; its owner deleted it
        AgentRun.objects.filter(pk=run.pk).update(input_tokens=None, output_tokens=None,
                                                  total_tokens=None)
        Conversation.objects.filter(pk=conversation.pk).update(hidden_at=now)
    if status == "max_iterations":  # the widest feedback cell: a rating and a comment
        Feedback.objects.create(run=run, rating="down", comment="Wrong town. " * 20,
                                given_by_name="margaret.hamilton.apollo11", created_at=now,
                                updated_at=now)
"""


def seed(database, code: str = SEED) -> None:
    on_database(database, "manage.py", "shell", "-c", code)


def open_list(page, app, path: str, scheme: str = "light", width: int = 1366) -> dict:
    """Log in as root, open the admin list at ``path`` at ``width`` px in ``scheme``, and
    return its widths: the page's and the results' scroll and box widths."""
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    sign_in_to_admin(page, app.url, path)
    page.wait_for_selector("#result_list tbody tr")
    return page.evaluate("""() => {
        const results = document.querySelector('#changelist .results');
        return {page: document.documentElement.scrollWidth,
                viewport: document.documentElement.clientWidth,
                results: results.scrollWidth, resultsBox: results.clientWidth,
                right: results.getBoundingClientRect().right};
    }""")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_run_list_fits_1366_px_with_every_column_in_view(start_app, browser_page, scheme):
    app = start_app()
    seed(app.database)
    page = browser_page
    widths = open_list(page, app, "/admin/chat/agentrun/", scheme)

    assert page.locator("#result_list tbody tr").count() == 4
    assert widths["page"] <= widths["viewport"], widths
    assert widths["results"] <= widths["resultsBox"], widths
    for column in (
        "cost_shown",
        "tokens",
        "run_duration",
        "errors",
        "model_turns",
        "status_shown",
        "feedback_shown",
    ):
        box = page.locator(f"#result_list th.column-{column}").bounding_box()
        assert box is not None and box["width"] > 0, column
        assert box["x"] + box["width"] <= widths["right"] + 1, column
    # Six-digit counts and "unknown" stay on one line, whole.
    assert page.locator("td.field-tokens").first.inner_text() == "999999"
    assert "unknown" in page.locator("#result_list").inner_text()
    assert page.evaluate("""() => [...document.querySelectorAll(
        '#result_list td.field-cost_shown, #result_list td.field-tokens')].every(
        td => td.scrollWidth <= td.clientWidth && td.getClientRects().length === 1)""")
    assert "Model turn limit reached" in page.locator("#result_list").inner_text()

    filters = page.locator("#changelist-filter").inner_text()
    assert "other (a name no tool has)" in filters and "invented_tool_" not in filters
    page.screenshot(path=str(ARTIFACTS / f"admin-run-list-{scheme}.png"))


def test_the_conversation_list_fits_1366_px_with_its_deleted_column(start_app, browser_page):
    app = start_app()
    seed(app.database)
    page = browser_page
    widths = open_list(page, app, "/admin/chat/conversation/")
    assert widths["page"] <= widths["viewport"], widths
    assert widths["results"] <= widths["resultsBox"], widths
    table = page.locator("#result_list").inner_text()
    assert "deleted by its owner" in table.lower() and "margaret.hamilton.apollo11" in table
    page.screenshot(path=str(ARTIFACTS / "admin-conversation-list.png"))


APPROVALS_SEED = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from chat.models import AgentRun, AgentStep, Approval, Conversation, Message

User.objects.create_superuser("root", password="pw")
owner = User.objects.create_user("margaret.hamilton.apollo11")
now = timezone.now()
for i, outcome in enumerate(["pending", "approved", "denied", "expired"]):
    conversation = Conversation.objects.create(owner=owner, title="Gardens of Suzhou " * 8)
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    run = AgentRun.objects.create(
        conversation=conversation, user_message=question, strategy="tool_calling",
        provider="openai", model_name="gpt-4o-mini-2024-07-18",
        status="waiting" if outcome == "pending" else "succeeded", started_at=now)
    args = {"town": "Suzhou", "check_in": "2026-12-24", "nights": 3, "rooms": 2,
            "guests": 4, "note": "near the Humble Administrator's Garden, quiet room" * 2}
    step = AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="tool_call",
        status="pending" if outcome == "pending" else "success", started_at=now,
        tool_name="check_bnb_availability", tool_call_id="call_" + "x" * 24, arguments=args)
    Approval.objects.create(
        run=run, step=step, tool_name=step.tool_name, tool_call_id=step.tool_call_id,
        arguments=args, requested_at=now - timedelta(minutes=i),
        expires_at=now + timedelta(hours=1), outcome=outcome,
        decided_by_name="" if outcome in ("pending", "expired") else owner.username,
        decided_at=None if outcome == "pending" else now,
        reason="We booked a room there last week already, thank you very much" * 2
        if outcome == "denied" else "")
"""


# Where the arguments' preview wraps: the text just before each new line's first character.
ARGUMENT_BREAKS = """() => {
    const code = document.querySelector('#result_list td.field-arguments_preview code');
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const range = document.createRange(), breaks = [];
    let top = null, before = '';
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        for (let i = 0; i < text.length; i++) {
            range.setStart(text, i); range.setEnd(text, i + 1);
            const rect = range.getClientRects()[0];
            if (rect && rect.width > 0) {
                if (top !== null && rect.top > top + 2) breaks.push(before);
                top = rect.top;
            }
            before += text.data[i];
        }
    }
    return breaks;
}"""


@pytest.mark.parametrize(("scheme", "width"), [("light", 1366), ("dark", 1366), ("light", 1280)])
def test_the_approvals_list_fits_with_readable_arguments_and_the_waiting_call_first(
    start_app, browser_page, scheme, width
):
    app = start_app()
    seed(app.database, APPROVALS_SEED)
    page = browser_page
    widths = open_list(page, app, "/admin/chat/approval/", scheme, width)
    assert widths["page"] <= widths["viewport"], widths
    assert widths["results"] <= widths["resultsBox"], widths
    first = page.locator("#result_list tbody tr").first
    assert first.locator("strong").inner_text() == "Waiting"
    assert "until " in first.locator("td.field-outcome_shown").inner_text()  # its expiry
    # No cell or header spills into the next (the tool names are the longest words).
    spilling = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#result_list td, #result_list th')).filter(cell => cell.scrollWidth > cell.clientWidth)
        .map(cell => cell.className + ': ' + cell.innerText)""")
    assert spilling == [], spilling
    headers = page.locator("#result_list thead").inner_text().lower()
    assert "decided by" in headers and "decided by name" not in headers
    # The arguments have room for a few words a line, and break only after a space
    # (a JSON comma or colon), never inside a word such as "2026-12-24" or "Suzhou".
    box = page.locator("#result_list th.column-arguments_preview").bounding_box()
    assert box is not None and box["width"] >= 180, box
    breaks = page.evaluate(ARGUMENT_BREAKS)
    assert breaks, "the seeded arguments are longer than one line"
    assert all(before.endswith(" ") for before in breaks), breaks
    page.screenshot(path=str(ARTIFACTS / f"admin-approvals-{scheme}-{width}.png"))


def test_a_waiting_calls_page_fits_1280_px_and_its_approve_button_decides_it(
    start_app, browser_page
):
    app = start_app()
    seed(app.database, APPROVALS_SEED)
    page = browser_page
    open_list(page, app, "/admin/chat/approval/", width=1280)
    page.click("#result_list tbody tr >> nth=0 >> a")  # the waiting call, first

    # Its long arguments wrap in their box instead of running off the page.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    box = page.locator(".field-arguments_full pre").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1280, box
    page.screenshot(path=str(ARTIFACTS / "admin-approval-waiting.png"))

    page.click(".approval-decide input[value=Approve]")
    page.wait_for_selector(".messagelist .success")
    assert page.url.endswith("/admin/chat/approval/")
    assert "Approved 1 call" in page.locator(".messagelist").inner_text()
    assert page.locator("#result_list strong", has_text="Waiting").count() == 0


@pytest.mark.parametrize("width", [1024, 1366])
def test_the_run_page_tools_and_downloads_leave_its_heading_readable(
    start_app, browser_page, width
):
    app = start_app()
    seed(app.database)
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    sign_in_to_admin(page, app.url, "/admin/chat/agentrun/1/change/")
    page.wait_for_selector(".run-downloads")
    # Four download links beside the object tools overran the heading below 1400 px.
    overlaps = page.evaluate("""() => {
        const boxes = sel => [...document.querySelectorAll(sel)].map(
            e => e.getBoundingClientRect());
        const hit = (a, b) => a.left < b.right && b.left < a.right
            && a.top < b.bottom && b.top < a.bottom;
        const tools = boxes('.object-tools li');
        const fixed = [...boxes('#content h2'), ...boxes('.run-downloads a')];
        return tools.flatMap(
            (t, i) => [...fixed, ...tools.slice(i + 1)].filter(o => hit(t, o))).length;
    }""")
    assert overlaps == 0
    assert page.locator(".run-downloads a").all_inner_texts() == [
        "CSV",
        "CSV for Excel",
        "JSONL",
        "OTLP JSON",
    ]
