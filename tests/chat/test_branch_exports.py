"""Which run branched from which, wherever runs leave: the admin's run list and page, the
CSV's last columns, the JSONL record (valid against the published schema) and the run's
OTLP span (an attribute, and a link to the root span of the run it retakes)."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User

from chat import store
from chat.export import COLUMNS, csv_lines, trace_rows
from chat.models import AgentRun, BranchKind, Conversation
from chat.traces.ids import run_context
from chat.traces.redaction import Redactor, active
from chat.traces.spans import default_resource, run_spans
from tests.chat.test_branches import asked, ended, regenerate
from tests.chat.test_jsonl_export import exported, validator

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def takes() -> tuple[AgentRun, AgentRun]:
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    old = asked(conversation, "Weather in Suzhou?", "Sunny.")
    return old, ended(regenerate(conversation, old), "Rain later.")


def test_the_csv_ends_with_the_run_each_run_branched_from(takes):
    old, new = takes

    rows = list(csv.reader(io.StringIO("".join(csv_lines(trace_rows(AgentRun.objects.all()))))))

    header, *body = rows
    assert header[-3:] == ["branched_from_run_id", "branch_kind", "run_model_key"]
    assert COLUMNS[-3:] == tuple(header[-3:])
    by_run = {row[0]: row[-3:] for row in body}
    assert by_run[str(old.pk)] == ["", "", ""]
    assert by_run[str(new.pk)] == [str(old.pk), "regenerate", ""]


def test_the_jsonl_record_names_the_run_it_retakes_and_validates(takes):
    old, new = takes

    records = {record["run_id"]: record for record in exported(redactor=Redactor())}

    assert (records[new.pk]["branched_from"], records[new.pk]["branch_kind"]) == (
        old.pk, "regenerate"
    )  # fmt: skip
    assert records[old.pk]["branched_from"] is None and records[old.pk]["branch_kind"] is None
    for record in records.values():
        validator().validate(record)


def test_the_run_span_says_which_run_it_retakes_and_links_to_its_root_span(takes):
    old, new = takes
    (loaded,) = store.runs_in_chunks(AgentRun.objects.filter(pk=new.pk))

    root = run_spans(loaded, redactor=active(), capture_content=False,
                     resource=default_resource())[0]  # fmt: skip

    assert root.attributes["agent_chat.run.branched_from"] == old.pk
    assert root.attributes["agent_chat.run.branch_kind"] == BranchKind.REGENERATE
    (link,) = root.links
    assert link.context == run_context(old.pk)
    assert link.attributes["agent_chat.link"] == "branched_from"


def test_the_admin_shows_which_run_branched_from_which(takes, admin_client):
    old, new = takes

    listed = admin_client.get("/admin/chat/agentrun/").content.decode()
    retake = admin_client.get(f"/admin/chat/agentrun/{new.pk}/change/").content.decode()
    original = admin_client.get(f"/admin/chat/agentrun/{old.pk}/change/").content.decode()
    filtered = admin_client.get("/admin/chat/agentrun/?branch_kind=regenerate").content.decode()

    assert f"Regenerated from run {old.pk}" in listed
    assert f'href="/admin/chat/agentrun/{old.pk}/change/">Regenerated from run {old.pk}' in retake
    assert f'Taken again in <a href="/admin/chat/agentrun/{new.pk}/change/">run {new.pk}' in (
        original
    )
    assert f"/admin/chat/agentrun/{new.pk}/change/" in filtered
    assert f"/admin/chat/agentrun/{old.pk}/change/" not in filtered
