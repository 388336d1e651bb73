"""The CSV path applies the redaction policy to every text cell and changes no stored row."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from chat.export import COLUMNS, JSON_COLUMNS, UNREDACTED_COLUMNS, csv_lines, trace_rows
from chat.models import AgentRun, AgentStep, Approval, Feedback, Message
from chat.traces.redaction import Redactor
from tests.planted_secrets import SECRETS, TEXT, leaked, planted_json

pytestmark = pytest.mark.django_db


def export_text(**kwargs) -> str:
    return "".join(csv_lines(trace_rows(AgentRun.objects.all(), **kwargs)))


def rows_of(text: str) -> list[dict[str, str]]:
    header, *rows = csv.reader(io.StringIO(text, newline=""))
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_no_planted_secret_leaves_in_any_cell_of_the_csv(planted_run):
    text = export_text()

    assert leaked(text, planted_run) == []
    for detector in SECRETS:
        assert f"[REDACTED:{detector}]" in text


def test_every_text_column_is_redacted_and_machine_columns_are_as_stored(planted_run):
    rows = rows_of(export_text())
    call = rows[1]

    assert call["question"].startswith("Write to [REDACTED:email] or call [REDACTED:phone]")
    assert call["user"] == "[REDACTED:email]"
    assert call["approval_decided_by"] == "[REDACTED:email]"
    for name in ("run_output", "run_error", "result", "model_text", "step_error",
                 "approval_reason", "observation"):  # fmt: skip
        assert "[REDACTED:card]" in call[name], name
    assert rows[0]["step_reasoning"].count("[REDACTED:") >= 10
    assert call["tool_call_id"] == "call_planted"
    assert call["run_id"] == str(planted_run.run.pk)
    assert call["step_started_at"].endswith("Z")


def test_json_cells_stay_json_with_keys_redacted_and_credentials_hidden(planted_run):
    call = rows_of(export_text())[1]

    for name in sorted(JSON_COLUMNS):
        value = json.loads(call[name])
        assert set(value) == {
            "note", "api_key", "card", "more", "[REDACTED:email]", "[REDACTED:api_key]"
        }, name  # fmt: skip
        assert value["api_key"] == "[REDACTED:secret]"
        assert value["card"] == "[REDACTED:card]"
        assert "[REDACTED:bearer]" in value["more"][0]


def test_the_stored_rows_are_not_changed_by_an_export(planted_run):
    export_text()

    run = AgentRun.objects.get(pk=planted_run.run.pk)
    assert run.output == TEXT and run.error == TEXT
    assert run.user_message.content == TEXT
    call = AgentStep.objects.get(run=run, ordinal=2)
    assert call.arguments == planted_json() and call.artifact == planted_json()
    assert call.result == TEXT and call.observation == TEXT
    assert Approval.objects.get(step=call).edited_arguments == planted_json()
    assert Feedback.objects.get(run=run).comment == TEXT
    assert Message.objects.get(run=run).content == TEXT


def test_with_no_policy_the_csv_holds_the_stored_text(planted_run, settings):
    settings.TRACE_REDACT = ["none"]
    settings.TRACE_REDACT_PATTERNS = []

    text = export_text()

    assert "[REDACTED:" not in text
    assert "4111 1111 1111 1111" in text


def test_a_caller_may_pass_its_own_redactor(planted_run):
    assert "planted.person@example.com" in export_text(redactor=Redactor())


def test_the_admin_downloads_and_export_traces_are_redacted(planted_run, client, tmp_path):
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    run = planted_run.run

    for url in (f"/admin/chat/agentrun/{run.pk}/export/", "/admin/chat/agentrun/export/"):
        body = b"".join(client.get(url).streaming_content).decode("utf-8-sig")
        assert leaked(body, planted_run) == [], url
        assert "[REDACTED:api_key]" in body
    out = tmp_path / "traces.csv"
    call_command("export_traces", "--output", str(out), stdout=io.StringIO())
    assert leaked(out.read_text(encoding="utf-8"), planted_run) == []


def test_every_column_is_either_a_machine_value_json_or_redacted_text():
    # A column added later is redacted text unless listed as a machine value.
    assert set(COLUMNS) >= UNREDACTED_COLUMNS
    assert set(COLUMNS) - UNREDACTED_COLUMNS >= JSON_COLUMNS
