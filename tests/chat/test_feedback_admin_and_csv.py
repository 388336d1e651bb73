"""Feedback where staff read it: the run list's column and filter, the run's page, the
feedback rows' own list (read-only), the staff's copy of the chat, and the CSV's columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.export import COLUMNS
from chat.models import AgentRun, Conversation, Feedback
from tests.chat.test_admin import (
    LIST,
    csv_rows,
    listed,
    make_run,
    run_conversation,
    run_export,
    run_page,
    staff_user,
    weather_call,
)
from tests.chat.test_export import export_text, read

pytestmark = pytest.mark.django_db

FIRST = datetime(2026, 12, 3, 9, 30, tzinfo=UTC)
LAST = FIRST + timedelta(minutes=7)
FEEDBACK_COLUMNS = ("feedback_rating", "feedback_comment", "feedback_by", "feedback_at")


def rated(run: AgentRun, rating: str, comment: str = "", by: User | None = None) -> Feedback:
    return Feedback.objects.create(
        run=run, rating=rating, comment=comment, given_by=by,
        given_by_name=by.get_username() if by else "(guest)", created_at=FIRST, updated_at=LAST,
    )  # fmt: skip


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def auditor(client) -> User:
    user = staff_user("auditor", "view_agentrun", "view_conversation", "view_feedback")
    client.force_login(user)
    return user


@pytest.fixture
def three_runs(alice) -> dict[str, AgentRun]:
    conversation = Conversation.objects.create(owner=alice)
    runs = {
        "up": make_run(conversation, question="Rated up?"),
        "down": make_run(conversation, question="Rated down?", calls=[weather_call()]),
        "none": make_run(conversation, question="Not rated?"),
    }
    rated(runs["up"], "up", by=alice)
    rated(runs["down"], "down", "Wrong <b>town</b>: I asked for Suzhou.", by=alice)
    return runs


def test_the_run_list_has_a_feedback_column_and_an_up_down_none_filter(client, auditor, three_runs):
    html = client.get(LIST).content.decode()
    assert all(f"?feedback={value}" in html for value in ("up", "down", "none"))
    assert 'class="trace-feedback rating-up"' in html
    assert 'class="trace-feedback rating-down"' in html and "+ comment" in html
    assert "Wrong &lt;b&gt;town&lt;/b&gt;" in html  # the comment on hover, escaped
    for value, expected in (("up", "up"), ("down", "down"), ("none", "none")):
        shown = listed(client.get(LIST, {"feedback": value}))
        assert [run.pk for run in shown] == [three_runs[expected].pk], value


def test_the_feedback_column_costs_no_query_per_run(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)

    def list_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(LIST).status_code == 200
        return len(queries)

    for i in range(3):
        rated(make_run(conversation, question=f"q{i}"), "up", by=alice)
    client.get(LIST)
    with_3 = list_queries()
    for i in range(3, 20):
        rated(make_run(conversation, question=f"q{i}"), "down", "why", by=alice)
    assert list_queries() == with_3


def test_the_run_page_shows_the_feedback_read_only_with_who_and_when(client, auditor, three_runs):
    html = client.get(run_page(three_runs["down"])).content.decode()
    assert "Feedback from the chat" in html
    assert "Thumbs down by alice at 2026-12-03 09:37:00 UTC" in html
    assert "(first given at 2026-12-03 09:30:00 UTC)" in html
    assert "Wrong &lt;b&gt;town&lt;/b&gt;: I asked for Suzhou." in html
    assert "No feedback given." in client.get(run_page(three_runs["none"])).content.decode()


def test_feedback_rows_are_listed_read_only(client, auditor, three_runs):
    html = client.get("/admin/chat/feedback/").content.decode()
    assert "Wrong &lt;b&gt;town&lt;/b&gt;" in html and "alice" in html
    assert "/admin/chat/feedback/add/" not in html
    row = Feedback.objects.get(rating="down")
    page = client.get(f"/admin/chat/feedback/{row.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="_save"' not in body and "<textarea" not in body
    assert f'href="/admin/chat/agentrun/{row.run_id}/change/"' in body
    assert client.post(f"/admin/chat/feedback/{row.pk}/delete/").status_code == 403
    assert client.get("/admin/chat/feedback/add/").status_code == 403


def test_the_staff_copy_of_the_chat_shows_the_feedback_without_controls(
    client, auditor, three_runs
):
    html = client.get(run_conversation(three_runs["up"])).content.decode()
    assert "ws-send" not in html and 'class="thumb' not in html
    assert html.count('class="feedback-shown"') == 3
    assert "Thumbs down" in html and "Wrong &lt;b&gt;town&lt;/b&gt;: I asked for Suzhou." in html
    assert "No feedback on this answer." in html


FEEDBACK_AT = slice(51, 55)  # columns 52-55, where they were added (columns never move)


def test_the_csv_has_the_runs_feedback_on_each_of_its_rows(three_runs):
    assert COLUMNS[FEEDBACK_AT] == FEEDBACK_COLUMNS
    rows = read(export_text())
    by_run = {}
    for row in rows:
        by_run.setdefault(int(row["run_id"]), []).append(tuple(row[c] for c in FEEDBACK_COLUMNS))
    down = ("down", "Wrong <b>town</b>: I asked for Suzhou.", "alice", "2026-12-03T09:37:00.000Z")
    assert by_run[three_runs["down"].pk] == [down] * 3  # a model turn, a call, the answer
    assert set(by_run[three_runs["up"].pk]) == {("up", "", "alice", "2026-12-03T09:37:00.000Z")}
    assert set(by_run[three_runs["none"].pk]) == {("", "", "", "")}


def test_a_run_without_steps_still_carries_its_feedback(alice):
    conversation = Conversation.objects.create(guest_key="k")
    run = make_run(conversation)
    run.steps.all().delete()
    rated(run, "up", "=cmd|' /C calc'!A0")
    (row,) = read(export_text(AgentRun.objects.filter(pk=run.pk)))
    assert row["feedback_rating"] == "up" and row["feedback_by"] == "(guest)"
    # The comment is a person's text: a spreadsheet must not run it (neutralised).
    assert row["feedback_comment"] == "'=cmd|' /C calc'!A0"


def test_the_run_pages_download_has_the_feedback_columns(client, auditor, three_runs):
    rows = csv_rows(client.get(run_export(three_runs["down"])))
    assert {tuple(row[FEEDBACK_AT]) for row in rows} == {
        ("down", "Wrong <b>town</b>: I asked for Suzhou.", "alice", "2026-12-03T09:37:00.000Z")
    }
