"""JSONL export of runs: one run per line, steps, approvals and feedback nested, every line
valid against docs/jsonl-schema.json, every string through the redactor."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import AgentRun, AgentStep, Conversation
from chat.traces.jsonl import SCHEMA, jsonl_lines
from chat.traces.redaction import Redactor
from tests.chat.exported_runs import Marking, owned_by, stored_run

pytestmark = pytest.mark.django_db

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "jsonl-schema.json"


def strict(schema: dict) -> dict:
    """Return ``schema`` with every object closed, so a field the exporter writes without
    documenting it fails validation (the published schema lets readers meet additions)."""
    closed = copy.deepcopy(schema)

    def close(node):
        if isinstance(node, dict):
            if "properties" in node:
                node["additionalProperties"] = False
            for child in node.values():
                close(child)
        elif isinstance(node, list):
            for child in node:
                close(child)

    close(closed)
    return closed


def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        strict(schema), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def exported(runs=None, redactor=None) -> list[dict]:
    runs = AgentRun.objects.all() if runs is None else runs
    lines = list(jsonl_lines(runs, redactor=redactor or Redactor()))
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    return [json.loads(line) for line in lines]


def test_real_exported_lines_validate_against_the_published_schema():
    stored_run(owned_by("alice"))
    stored_run(steps=False, status="failed")  # no steps, no feedback, no approval
    held = stored_run(status="waiting")
    AgentStep.objects.filter(run=held, ordinal=2).update(status="pending", arguments="{not json")
    held.approvals.update(outcome="pending", decided_at=None, decided_by_name="")
    AgentRun.objects.filter(pk=held.pk).update(
        finished_at=None, duration_ms=None, cost=None, snapshot=None, parallel_tool_calls=None
    )
    check = validator()
    records = exported()
    assert len(records) == 3
    for record in records:
        check.validate(record)


def test_a_line_holds_the_run_with_its_steps_approval_and_feedback_nested():
    run = stored_run(owned_by("alice"))

    (record,) = exported()

    assert record["schema"] == SCHEMA == "agent-chat.run/1"
    assert (record["run_id"], record["conversation_id"]) == (run.pk, run.conversation_id)
    assert record["user"] == "alice"
    assert record["question"] == "Weather in 苏州?"
    assert record["agent_snapshot"] == "a" * 64
    assert record["usage"] == {
        "input_tokens": 100, "output_tokens": 20, "total_tokens": 120, "estimated": False
    }  # fmt: skip
    assert record["cost"] == {"amount": "0.0000618", "currency": "USD"}
    assert record["started_at"].endswith("Z")
    assert [step["ordinal"] for step in record["steps"]] == [1, 2, 3]
    turn, call, answer = record["steps"]
    assert turn["first_token_ms"] == 120 and turn["reasoning"] == "I think about 苏州."
    assert turn["approval"] is None and turn["arguments"] is None
    assert call["arguments"] == {"town": "苏州", "days": [1, "苏州"]}  # JSON, not a string
    assert call["tool_call_id"] == "call_w1"
    assert call["observation"] == "sent 苏州"
    assert call["artifact"] == {"source": "苏州"}
    assert call["approval"]["outcome"] == "approved"
    assert call["approval"]["edited_arguments"] == {"town": "苏州!"}
    assert call["approval"]["decided_by"] == "boss-苏州"
    assert call["usage"] == {"input_tokens": None, "output_tokens": None, "total_tokens": None}
    assert answer["result"] == record["output"]
    assert record["feedback"]["rating"] == "up"
    assert record["feedback"]["comment"] == "good for 苏州"


def test_a_run_without_steps_or_feedback_has_an_empty_list_and_null():
    stored_run(steps=False, status="failed")
    (record,) = exported()
    assert record["steps"] == []
    assert record["feedback"] is None


def test_an_empty_selection_is_an_empty_file():
    stored_run()
    assert exported(AgentRun.objects.none()) == []


def test_unicode_and_line_breaks_stay_on_one_line_as_written():
    text = 'a "quoted"\nline\u2028break, 苏州 🌧'
    stored_run(text=text)
    line = next(jsonl_lines(AgentRun.objects.all(), redactor=Redactor()))
    assert "苏州 🌧" in line  # UTF-8 kept, not \\u escapes
    assert json.loads(line)["question"] == f"Weather in {text}?"


def test_arguments_json_cannot_hold_are_written_as_text_and_the_line_stays_valid():
    run = stored_run()
    AgentStep.objects.filter(run=run, ordinal=2).update(arguments={"x": 1})
    step = AgentStep.objects.get(run=run, ordinal=2)
    step.arguments = {"x": float("nan")}  # what SQLite can hand back for a stored NaN
    with pytest.MonkeyPatch.context() as patch:
        original = AgentStep.from_db.__func__

        def from_db(cls, db, names, values):
            loaded = original(cls, db, names, values)
            if loaded.pk == step.pk:
                loaded.arguments = step.arguments
            return loaded

        patch.setattr(AgentStep, "from_db", classmethod(from_db))
        (line,) = list(jsonl_lines(AgentRun.objects.all(), redactor=Redactor()))
    assert json.loads(line)["steps"][1]["arguments"] == {"x": "nan"}


def test_every_string_people_models_and_tools_wrote_passes_the_redactor():
    stored_run(owned_by("SECRET-user"), text="SECRET")
    redactor = Marking()

    (line,) = list(jsonl_lines(AgentRun.objects.all(), redactor=redactor))

    assert "SECRET" not in line
    assert line.count("[REDACTED:test]") >= 20
    record = json.loads(line)
    validator().validate(record)  # timestamps, enums and digests untouched
    # Machine values as stored, as the CSV writes them: a detector must not unpair a
    # call from its result.
    assert (record["model"], record["endpoint"]) == ("gpt-4o-mini", "api.openai.com")
    assert record["steps"][1]["tool_call_id"] == "call_w1"


def test_the_export_reads_the_same_queries_however_many_runs(django_assert_num_queries):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            list(jsonl_lines(AgentRun.objects.all(), redactor=Redactor()))
        return len(captured)

    conversation = Conversation.objects.create(guest_key="g")
    stored_run(conversation)
    one = queries()
    for _ in range(6):
        stored_run(conversation)
    stored_run(steps=False)
    with django_assert_num_queries(one):
        assert len(list(jsonl_lines(AgentRun.objects.all(), redactor=Redactor()))) == 8
