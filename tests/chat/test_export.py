"""CSV export of traces, and the export_traces / purge_runs commands."""

from __future__ import annotations

import csv
import io
import sys
from datetime import datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.export import COLUMNS, csv_lines, neutralise, trace_rows
from chat.models import AgentRun, AgentStep, Approval, Conversation, Message
from chat.traces.formats import CSV
from chat.traces.streaming import encoded_chunks, streaming_download

pytestmark = pytest.mark.django_db

NASTY = '=HYPERLINK("http://x"), "quoted", line\nbreak, 苏州园林'


def make_run(*, question="q", status="succeeded", age=timedelta(0), steps=2, owner=None,
             result="{}", arguments=None) -> AgentRun:  # fmt: skip
    started = timezone.now() - age
    conversation = Conversation.objects.create(owner=owner)
    message = Message.objects.create(conversation=conversation, role="user", content=question)
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider="demo", model_name="demo-scripted", status=status, started_at=started,
        finished_at=started + timedelta(seconds=2), duration_ms=2000, iterations=2,
        output="answer",
    )  # fmt: skip
    for ordinal in range(1, steps + 1):
        AgentStep.objects.create(
            run=run, ordinal=ordinal, iteration=1,
            kind="model_turn" if ordinal == 1 else "tool_call",
            tool_name="" if ordinal == 1 else "weather_forecast",
            tool_call_id="" if ordinal == 1 else f"call_{run.pk}_{ordinal}",
            arguments=None if ordinal == 1 else (arguments or {"town": "苏州"}),
            result="" if ordinal == 1 else result, status="success", started_at=started,
            finished_at=started + timedelta(milliseconds=15), duration_ms=15,
        )  # fmt: skip
    Message.objects.create(conversation=conversation, role="assistant", content="a", run=run)
    return run


def read(text: str) -> list[dict[str, str]]:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert tuple(rows[0]) == COLUMNS
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows[1:]]


def export_text(runs=None, **kwargs) -> str:
    return "".join(csv_lines(trace_rows(runs or AgentRun.objects.all()), **kwargs))


def test_there_is_one_row_per_step_with_the_runs_fields_repeated():
    alice = User.objects.create_user("alice")
    first = make_run(question="first", owner=alice, steps=3)
    second = make_run(question="second", steps=2)

    rows = read(export_text())

    assert [(r["run_id"], r["step_ordinal"]) for r in rows] == [
        (str(first.pk), "1"), (str(first.pk), "2"), (str(first.pk), "3"),
        (str(second.pk), "1"), (str(second.pk), "2"),
    ]  # fmt: skip
    assert {r["question"] for r in rows[:3]} == {"first"}
    assert rows[0]["user"] == "alice"
    assert rows[3]["user"] == "(no owner)"  # started from the terminal
    tool_row = rows[1]
    assert tool_row["step_kind"] == "tool_call"
    assert tool_row["tool_name"] == "weather_forecast"
    assert tool_row["tool_call_id"] == f"call_{first.pk}_2"
    assert tool_row["arguments"] == '{"town": "苏州"}'
    assert tool_row["step_duration_ms"] == "15"
    assert tool_row["run_started_at"].endswith("Z")
    assert "T" in tool_row["run_started_at"]


def test_a_run_without_steps_still_gets_a_row():
    bare = make_run(steps=0, status="failed")
    rows = read(export_text())
    assert [(r["run_id"], r["step_ordinal"], r["run_status"]) for r in rows] == [
        (str(bare.pk), "", "failed")
    ]


def test_commas_quotes_newlines_and_chinese_survive_a_round_trip():
    make_run(question=NASTY, result='{"note": "a, \\"b\\"\\nc 杭州"}')
    row = read(export_text())[1]
    assert row["question"] == "'" + NASTY  # neutralised: it starts with "="
    assert row["result"] == '{"note": "a, \\"b\\"\\nc 杭州"}'


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_cells_a_spreadsheet_would_run_as_formulas_are_neutralised(prefix):
    payload = f"{prefix}cmd|' /C calc'!A0"
    make_run(question=payload, arguments={"x": 1}, result=payload)
    row = read(export_text())[1]
    assert row["question"] == "'" + payload
    assert row["result"] == "'" + payload
    assert neutralise("plain") == "plain"
    assert neutralise("") == ""


def csv_download(runs, *, request, filename):
    """The CSV's streaming download, as every download path sends it."""
    return streaming_download(
        csv_lines(trace_rows(runs)), request=request, content_type=CSV.content_type,
        filename=filename,
    )  # fmt: skip


def test_the_bom_option_starts_the_file_with_a_utf8_byte_order_mark():
    make_run()
    with_bom = b"".join(encoded_chunks(csv_lines(trace_rows(AgentRun.objects.all()), bom=True)))
    without = b"".join(encoded_chunks(csv_lines(trace_rows(AgentRun.objects.all()))))
    assert with_bom.startswith(b'\xef\xbb\xbf"run_id",')
    assert without.startswith(b'"run_id",')
    assert with_bom.decode("utf-8-sig") == without.decode("utf-8")


def test_lines_end_with_crlf_as_rfc_4180_says():
    make_run(steps=1)
    assert export_text().count("\r\n") == 2


def test_the_http_export_streams():
    for _ in range(3):
        make_run(steps=40, result="x" * 1000)
    response = csv_download(AgentRun.objects.all(), request=None, filename="t.csv")
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="t.csv"'
    chunks = list(response.streaming_content)
    assert len(chunks) > 1  # about 64 KiB each, not one big string
    assert len(read(b"".join(chunks).decode())) == 120


def test_the_export_only_covers_the_runs_it_is_given():
    keep = make_run(status="failed")
    make_run(status="succeeded")
    rows = read(export_text(AgentRun.objects.filter(status="failed")))
    assert {r["run_id"] for r in rows} == {str(keep.pk)}


def test_export_traces_filters_by_date_and_status_and_writes_a_file(tmp_path):
    old = make_run(age=timedelta(days=10), status="failed")
    make_run(age=timedelta(days=10), status="succeeded")
    make_run(age=timedelta(days=1), status="failed")
    since = (timezone.now() - timedelta(days=11)).date().isoformat()
    until = (timezone.now() - timedelta(days=9)).date().isoformat()
    target = tmp_path / "traces.csv"
    err = io.StringIO()

    call_command(
        "export_traces", "--since", since, "--until", until, "--status", "failed",
        "--output", str(target), "--bom", stderr=err,
    )  # fmt: skip

    data = target.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    rows = read(data.decode("utf-8-sig"))
    assert {r["run_id"] for r in rows} == {str(old.pk)}
    assert "Wrote 2 rows" in err.getvalue()


class ClosedPipe(io.StringIO):
    """Standard output whose reader went away (``export_traces | head``)."""

    def write(self, text):
        raise BrokenPipeError


def test_export_traces_stops_quietly_when_its_reader_goes_away(monkeypatch):
    make_run(status="failed")
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    err = io.StringIO()

    call_command("export_traces", stderr=err)  # no BrokenPipeError traceback

    assert "Wrote" not in err.getvalue()


def test_export_traces_refuses_a_bad_date():
    with pytest.raises(CommandError, match="Not a date"):
        call_command("export_traces", "--since", "last tuesday", stderr=io.StringIO())


def test_purge_runs_deletes_old_finished_runs_with_their_steps_and_messages():
    old = make_run(age=timedelta(days=100))
    stuck = make_run(age=timedelta(days=100), status="running")
    waiting = make_run(age=timedelta(days=100), status="waiting")
    recent = make_run(age=timedelta(days=5))
    dry = io.StringIO()
    call_command("purge_runs", "--older-than", "90d", "--dry-run", stdout=dry)
    assert "Would delete 1 runs and 2 steps" in dry.getvalue()
    assert AgentRun.objects.count() == 4

    out = io.StringIO()
    call_command("purge_runs", "--older-than", "90d", stdout=out)

    assert "Deleted 1 runs and 2 steps" in out.getvalue()
    assert set(AgentRun.objects.values_list("pk", flat=True)) == {stuck.pk, waiting.pk, recent.pk}
    assert not AgentStep.objects.filter(run_id=old.pk).exists()
    assert not Message.objects.filter(conversation_id=old.conversation_id).exists()
    assert not Conversation.objects.filter(pk=old.conversation_id).exists()


@pytest.mark.parametrize("age", ["90", "d", "-5d", "0d", "3y", "6m"])
def test_purge_runs_refuses_an_unclear_age(age):
    with pytest.raises(CommandError, match="older-than"):
        call_command("purge_runs", "--older-than", age, stdout=io.StringIO())


def test_export_traces_until_a_bare_date_includes_that_whole_day():
    today = timezone.now()
    run = make_run()
    err = io.StringIO()
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", out)
        call_command(
            "export_traces", "--since", today.date().isoformat(),
            "--until", today.date().isoformat(), stderr=err,
        )  # fmt: skip
    assert {r["run_id"] for r in read(out.getvalue())} == {str(run.pk)}


def test_export_traces_says_so_when_until_is_not_after_since():
    with pytest.raises(CommandError, match="not after --since"):
        call_command(
            "export_traces", "--since", "2026-11-29", "--until", "2026-11-28",
            stderr=io.StringIO(),
        )  # fmt: skip


def test_export_traces_reports_an_unwritable_output_file(tmp_path):
    with pytest.raises(CommandError, match="Cannot write"):
        call_command(
            "export_traces", "--output", str(tmp_path / "missing" / "x.csv"),
            stderr=io.StringIO(),
        )  # fmt: skip


def test_a_conversation_started_from_the_terminal_has_no_owner_not_a_guest():
    run = make_run()  # Conversation(owner=None, guest_key="")
    assert read(export_text())[0]["user"] == "(no owner)"
    Conversation.objects.filter(pk=run.conversation_id).update(guest_key="a-browser")
    assert read(export_text())[0]["user"] == "(guest)"


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        (" =1+1", "' =1+1"),  # some importers trim leading spaces
        ("'=1+1", "''=1+1"),  # so stripping one "'" always restores the value
        ("'plain", "''plain"),
        ("a;=1+1", "a;=1+1"),  # inside a quoted cell, not at its start
        ("1-2", "1-2"),
    ],
)
def test_neutralising_is_reversible_and_covers_trimmed_spaces(cell, written):
    assert neutralise(cell) == written
    restored = written[1:] if written.startswith("'") else written
    assert restored == cell


def test_every_cell_is_quoted_so_a_semicolon_locale_keeps_cells_whole():
    make_run(question="a;=1+1;b", steps=1)
    data_line = export_text().split("\r\n")[1]
    assert data_line.startswith('"')
    assert '"a;=1+1;b"' in data_line


@pytest.mark.django_db(transaction=True)
async def test_over_asgi_the_export_is_an_async_stream_read_chunk_by_chunk():
    from asgiref.sync import sync_to_async
    from django.test import AsyncRequestFactory

    for _ in range(3):
        await sync_to_async(make_run)(steps=40, result="x" * 1000)
    request = AsyncRequestFactory().get("/admin/chat/agentrun/export/")
    response = csv_download(AgentRun.objects.all(), request=request, filename="t.csv")

    assert response.is_async  # Django would read a sync iterator whole before sending
    chunks = [chunk async for chunk in response.streaming_content]
    assert len(chunks) > 1
    assert len(read(b"".join(chunks).decode())) == 120


def test_purging_part_of_a_conversation_retitles_it_from_what_is_left():
    old = make_run(question="SECRET old question", age=timedelta(days=100))
    newer_message = Message.objects.create(
        conversation_id=old.conversation_id, role="user", content="a newer question"
    )
    AgentRun.objects.create(
        conversation_id=old.conversation_id, user_message=newer_message,
        strategy="tool_calling", provider="demo", model_name="demo-scripted",
        status="succeeded", started_at=timezone.now(),
    )  # fmt: skip
    Conversation.objects.filter(pk=old.conversation_id).update(title="SECRET old question")

    call_command("purge_runs", "--older-than", "90d", stdout=io.StringIO())

    conversation = Conversation.objects.get(pk=old.conversation_id)
    assert conversation.title == "a newer question"
    assert not Message.objects.filter(content__contains="SECRET").exists()


def test_purge_first_closes_runs_whose_process_died_so_they_can_go(settings):
    settings.AGENT_STALE_AFTER_S = 60
    dead = make_run(age=timedelta(days=200), status="running")
    AgentRun.objects.filter(pk=dead.pk).update(heartbeat_at=dead.started_at)
    call_command("purge_runs", "--older-than", "90d", stdout=io.StringIO())
    assert not AgentRun.objects.filter(pk=dead.pk).exists()


def test_an_age_beyond_the_calendar_is_a_clear_error():
    with pytest.raises(CommandError, match="before the year 1"):
        call_command("purge_runs", "--older-than", "999999999d", stdout=io.StringIO())


@pytest.mark.parametrize("value", ["2026-02-30", "2026-13-01", "2026-11-29T25:00"])
def test_export_traces_refuses_impossible_dates(value):
    with pytest.raises(CommandError, match="Not a date"):
        call_command("export_traces", "--since", value, stderr=io.StringIO())


def test_a_superuser_deleting_a_run_in_the_admin_deletes_its_messages_too(client):
    admin = User.objects.create_superuser("root", password="pw")
    run = make_run(question="delete me")
    client.force_login(admin)
    response = client.post(f"/admin/chat/agentrun/{run.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Message.objects.filter(content="delete me").exists()
    assert not Conversation.objects.filter(pk=run.conversation_id).exists()


@pytest.mark.parametrize(
    "stored",
    [
        '{"amount": 12345678.123456789012}',
        '{"big": 1e400}',
        '{"id": "A", "id": "B"}',
        "[NaN]",
        "not json",
    ],
)
def test_results_are_shown_as_stored_when_pretty_printing_would_change_them(stored):
    from chat.display import pretty_json

    assert pretty_json(stored) == stored


def test_results_are_pretty_printed_when_nothing_is_lost():
    from chat.display import pretty_json

    assert pretty_json('{"a": 1.5, "b": "苏州"}') == '{\n  "a": 1.5,\n  "b": "苏州"\n}'


# Approvals (columns 40-47)

APPROVAL_COLUMNS = (
    "approval_outcome", "approval_requested_at", "approval_decided_at", "approval_decided_by",
    "approval_original_arguments", "approval_edited_arguments", "approval_reason",
    "approval_always_allowed",
)  # fmt: skip


def held(run: AgentRun, **decision) -> Approval:
    """Store an approval for the run's first tool call (its step 2), decided or not."""
    step = run.steps.get(ordinal=2)
    return Approval.objects.create(
        run=run, step=step, tool_name=step.tool_name, tool_call_id=step.tool_call_id,
        arguments=step.arguments, requested_at=run.started_at, **decision,
    )  # fmt: skip


def test_the_approval_columns_come_after_the_first_39_in_the_documented_order():
    assert COLUMNS[:39][-1] == "step_first_token_ms"  # column 39, never moved
    assert COLUMNS[39:47] == APPROVAL_COLUMNS


def test_a_held_calls_row_has_its_decision_and_other_rows_leave_the_columns_empty():
    alice = User.objects.create_user("alice")
    run = make_run(owner=alice, steps=3, arguments={"town": "苏州", "nights": 2})
    decided_at = datetime(2026, 12, 1, 11, 15, 40, 120000, tzinfo=timezone.get_fixed_timezone(480))
    held(run, outcome="approved", decided_by=alice, decided_by_name="alice",
         decided_at=decided_at, edited_arguments={"town": "杭州", "nights": 2},
         reason="=cheaper there", always_allowed=True)  # fmt: skip

    rows = read(export_text())

    by_ordinal = {row["step_ordinal"]: row for row in rows}
    cells = {name: by_ordinal["2"][name] for name in APPROVAL_COLUMNS}
    assert cells == {
        "approval_outcome": "approved",
        "approval_requested_at": by_ordinal["2"]["run_started_at"],
        "approval_decided_at": "2026-12-01T03:15:40.120Z",
        "approval_decided_by": "alice",
        "approval_original_arguments": '{"nights": 2, "town": "苏州"}',
        "approval_edited_arguments": '{"nights": 2, "town": "杭州"}',
        "approval_reason": "'=cheaper there",  # neutralised like any cell
        "approval_always_allowed": "true",
    }
    for ordinal in ("1", "3"):  # a model turn, a call that was never held
        assert all(by_ordinal[ordinal][name] == "" for name in APPROVAL_COLUMNS)


def test_a_waiting_call_has_its_request_but_no_decision_yet():
    run = make_run(status="waiting", steps=2)
    AgentStep.objects.filter(run=run, ordinal=2).update(status="pending", result="")
    held(run)

    row = read(export_text())[1]

    assert (row["run_status"], row["step_status"], row["approval_outcome"]) == (
        "waiting", "pending", "pending"
    )  # fmt: skip
    assert row["approval_requested_at"].endswith("Z")
    assert row["approval_decided_at"] == row["approval_decided_by"] == ""
    assert row["approval_edited_arguments"] == ""
    assert row["approval_always_allowed"] == "false"


def test_the_export_makes_the_same_queries_however_many_held_calls(django_assert_num_queries):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            list(trace_rows(AgentRun.objects.all()))
        return len(captured)

    held(make_run(steps=3), outcome="denied", reason="no")
    one = queries()
    for _ in range(5):
        held(make_run(steps=3), outcome="approved")
    make_run(steps=0)  # a run without steps still comes from its own query

    with django_assert_num_queries(one):
        rows = list(trace_rows(AgentRun.objects.all()))
    assert len(rows) == 6 * 3 + 1
