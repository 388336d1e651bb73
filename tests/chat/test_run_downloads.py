"""Every way runs download as a file (the admin's run page, its actions, "all matching", a
user's own conversation, ``manage.py export_traces``) in every format (CSV, JSONL, OTLP
JSON), streamed, with the permission checks of each."""

from __future__ import annotations

import csv
import importlib
import io
import json
import re
import sys
import types

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.http import StreamingHttpResponse
from django.test import Client

from chat.export import COLUMNS
from chat.models import AgentRun, Conversation
from chat.traces import redaction
from chat.traces.formats import FORMATS
from tests.chat.exported_runs import Marking, owned_by, stored_run
from tests.planted_secrets import leaked

pytestmark = pytest.mark.django_db

LIST = "/admin/chat/agentrun/"
MATCHING = "/admin/chat/agentrun/export/"
STAMP = r"\d{8}T\d{6}Z"
EXTENSIONS = {"csv": r"\.csv", "jsonl": r"\.jsonl", "otlp-json": r"\.otlp\.jsonl"}
ACTIONS = {
    "csv": "export_selected",
    "jsonl": "export_selected_jsonl",
    "otlp-json": "export_selected_otlp_json",
}


@pytest.fixture(autouse=True)
def otlp_lines(monkeypatch):
    """Use chat.traces.otlp when it is there; else a stand-in with its signature (one JSON
    line per run), so these tests check the download's plumbing either way."""
    try:
        importlib.import_module("chat.traces.otlp")
    except ImportError:
        stub = types.ModuleType("chat.traces.otlp")

        def otlp_json_lines(runs, *, redactor):
            for run in runs.order_by("pk"):
                spans = [{"name": redactor.text(f"invoke_agent {run.agent_key}")}]
                yield json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"

        stub.otlp_json_lines = otlp_json_lines
        monkeypatch.setitem(sys.modules, "chat.traces.otlp", stub)


@pytest.fixture
def auditor(client) -> User:
    user = User.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_agentrun"))
    client.force_login(user)
    return user


def body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode("utf-8-sig")


def parsed(response, name: str) -> list:
    """Return a download's records: CSV rows (header checked), or JSON lines."""
    text = body(response)
    if name == "csv":
        header, *rows = csv.reader(io.StringIO(text, newline=""))
        assert tuple(header) == COLUMNS
        return rows
    return [json.loads(line) for line in text.splitlines()]


def run_ids(response=None, name: str = "", *, records: list | None = None) -> set[int]:
    records = parsed(response, name) if records is None else records
    if name == "csv":
        return {int(row[0]) for row in records}
    if name == "jsonl":
        return {record["run_id"] for record in records}
    return set(range(len(records)))  # OTLP: counted, not read (chat.traces.otlp's own tests)


def assert_download(response, name: str, prefix: str) -> None:
    assert response.status_code == 200
    assert response["Content-Type"] == FORMATS[name].content_type
    pattern = rf'attachment; filename="{prefix}-{STAMP}{EXTENSIONS[name]}"'
    assert re.fullmatch(pattern, response["Content-Disposition"]), response["Content-Disposition"]


# The admin


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_run_page_downloads_that_run_in_each_format(client, auditor, name):
    run = stored_run()
    stored_run()
    response = client.get(f"/admin/chat/agentrun/{run.pk}/export/", {"format": name})
    assert_download(response, name, f"agent-run-{run.pk}")
    assert run_ids(response, name) == ({run.pk} if name != "otlp-json" else {0})


def test_the_run_page_links_every_format_and_keeps_the_csv_urls(client, auditor):
    run = stored_run()
    html = client.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()
    url = f"/admin/chat/agentrun/{run.pk}/export/"
    for href in (url, f"{url}?bom=1", f"{url}?format=jsonl", f"{url}?format=otlp-json"):
        assert f'href="{href}"' in html


@pytest.mark.parametrize("name", list(FORMATS))
def test_an_action_downloads_the_selected_runs_in_each_format(client, auditor, name):
    chosen, other = stored_run(), stored_run()
    response = client.post(LIST, {"action": ACTIONS[name], "_selected_action": [chosen.pk]})
    assert_download(response, name, "agent-runs")
    records = parsed(response, name)
    assert len(records) == (3 if name == "csv" else 1)  # one run: its 3 steps, or one line
    if name != "otlp-json":
        assert run_ids(name=name, records=records) == {chosen.pk} != {other.pk}


@pytest.mark.parametrize("name", list(FORMATS))
def test_all_matching_follows_the_filters_in_each_format(client, auditor, name):
    failed = stored_run(status="failed")
    stored_run(status="succeeded")
    response = client.get(MATCHING, {"status__exact": "failed", "format": name})
    assert_download(response, name, "agent-runs")
    if name != "otlp-json":
        assert run_ids(response, name) == {failed.pk}
    else:
        assert len(parsed(response, name)) == 1


@pytest.mark.parametrize("name", list(FORMATS))
def test_all_matching_with_nothing_matching_is_an_empty_file(client, auditor, name):
    stored_run(status="succeeded")
    response = client.get(MATCHING, {"status__exact": "failed", "format": name})
    assert_download(response, name, "agent-runs")
    assert parsed(response, name) == []  # the CSV's header alone; no line at all for JSON


def test_the_list_links_all_matching_in_every_format_with_its_filters(client, auditor):
    stored_run()
    html = client.get(LIST, {"status__exact": "failed", "p": "1"}).content.decode()
    for query in ("", "&amp;bom=1", "&amp;format=jsonl", "&amp;format=otlp-json"):
        assert f'href="{MATCHING}?status__exact=failed{query}"' in html


def test_an_unknown_format_or_a_bom_on_jsonl_is_a_clear_400(client, auditor):
    run = stored_run()
    for url in (MATCHING, f"/admin/chat/agentrun/{run.pk}/export/"):
        unknown = client.get(url, {"format": "xml"})
        assert unknown.status_code == 400
        assert b"Unknown format 'xml': use one of csv, jsonl, otlp-json." in unknown.content
        assert client.get(url, {"format": "jsonl", "bom": "1"}).status_code == 400


@pytest.mark.parametrize("name", list(FORMATS))
def test_staff_without_the_view_permission_cannot_download_any_format(client, name):
    run = stored_run()
    editor = User.objects.create_user("editor", is_staff=True)
    editor.user_permissions.add(*Permission.objects.filter(codename="change_agentrun"))
    client.force_login(editor)
    assert client.get(MATCHING, {"format": name}).status_code == 403
    assert client.get(f"/admin/chat/agentrun/{run.pk}/export/", {"format": name}).status_code == 403
    posted = client.post(LIST, {"action": ACTIONS[name], "_selected_action": [run.pk]})
    assert not isinstance(posted, StreamingHttpResponse)
    assert ACTIONS[name] not in client.get(LIST).content.decode()


# A user's own conversation


def download_url(conversation: Conversation, name: str) -> str:
    return f"/c/{conversation.pk}/download/{name}/"


@pytest.mark.parametrize("name", list(FORMATS))
def test_an_owner_downloads_their_conversations_runs_in_each_format(client, name):
    conversation = owned_by("alice")
    first, second = stored_run(conversation), stored_run(conversation)
    stored_run(owned_by("bob"))
    client.force_login(conversation.owner)
    response = client.get(download_url(conversation, name))
    assert_download(response, name, f"conversation-{conversation.pk}")
    if name != "otlp-json":
        assert run_ids(response, name) == {first.pk, second.pk}
    else:  # one request per run, or several runs in one: OTLP's lines need not be runs
        lines = parsed(response, name)
        assert lines and all("resourceSpans" in line for line in lines)


def test_a_guest_downloads_their_own_conversation(client):
    client.get("/")  # a guest key in the session (the cookie check)
    client.get("/?welcome=1")
    conversation = Conversation.objects.get()
    run = stored_run(conversation)
    (record,) = parsed(client.get(download_url(conversation, "jsonl")), "jsonl")
    assert (record["run_id"], record["user"]) == (run.pk, "(guest)")


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_strangers_or_a_deleted_conversation_is_404(client, name):
    theirs = owned_by("bob")
    stored_run(theirs)
    client.force_login(User.objects.create_user("alice"))
    assert client.get(download_url(theirs, name)).status_code == 404
    assert Client().get(download_url(theirs, name)).status_code == 404  # no session at all
    client.force_login(theirs.owner)
    Conversation.objects.filter(pk=theirs.pk).update(hidden_at=theirs.created_at)
    assert client.get(download_url(theirs, name)).status_code == 404


def test_another_guests_conversation_is_404():
    conversation = Conversation.objects.create(guest_key="someone-else")
    stored_run(conversation)
    visitor = Client()
    visitor.get("/")
    visitor.get("/?welcome=1")
    assert visitor.get(download_url(conversation, "csv")).status_code == 404


def test_an_unknown_format_is_404_and_a_bom_on_jsonl_400(client):
    conversation = owned_by("alice")
    client.force_login(conversation.owner)
    assert client.get(download_url(conversation, "xml")).status_code == 404
    assert client.get(download_url(conversation, "jsonl"), {"bom": "1"}).status_code == 400
    excel = client.get(download_url(conversation, "csv"), {"bom": "1"})
    assert b"".join(excel.streaming_content).startswith(b"\xef\xbb\xbf")
    assert excel["Content-Disposition"].endswith('-excel.csv"')


def test_a_conversation_without_runs_downloads_an_empty_file(client):
    conversation = owned_by("alice")
    client.force_login(conversation.owner)
    assert parsed(client.get(download_url(conversation, "csv")), "csv") == []
    assert body(client.get(download_url(conversation, "jsonl"))) == ""


def test_the_conversation_menu_offers_the_downloads_once_it_has_runs(client):
    conversation = owned_by("alice")
    client.force_login(conversation.owner)
    assert "download/" not in client.get(f"/c/{conversation.pk}/menu/").content.decode()
    stored_run(conversation)
    menu = client.get(f"/c/{conversation.pk}/menu/").content.decode()
    for name in FORMATS:
        assert f'href="{download_url(conversation, name)}"' in menu


# Streaming, size, the redactor


def test_a_huge_result_streams_in_chunks_in_every_format(client, auditor):
    run = stored_run(result="雨" * 300_000)
    for name in FORMATS:
        response = client.get(f"/admin/chat/agentrun/{run.pk}/export/", {"format": name})
        chunks = list(response.streaming_content)
        if name != "otlp-json":  # the stand-in writes no content
            assert len(chunks) > 1, name
            assert "雨" * 300_000 in b"".join(chunks).decode("utf-8-sig"), name


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", list(FORMATS))
async def test_over_asgi_every_format_is_an_async_stream(name):
    from asgiref.sync import sync_to_async
    from django.test import AsyncRequestFactory

    from chat.traces.formats import download_response

    for _ in range(3):
        await sync_to_async(stored_run)(result="x" * 40_000)
    request = AsyncRequestFactory().get("/admin/chat/agentrun/export/")
    response = download_response(
        AgentRun.objects.all(), FORMATS[name], request=request, prefix="agent-runs"
    )
    assert response.is_async  # Django would read a sync iterator whole before sending
    chunks = [chunk async for chunk in response.streaming_content]
    assert len(b"".join(chunks).decode().splitlines()) >= 3


@pytest.mark.parametrize("name", ["csv", "jsonl"])
def test_every_download_passes_its_strings_through_the_active_redactor(
    client, auditor, monkeypatch, name
):
    made = []

    def active():
        made.append(Marking())
        return made[-1]

    monkeypatch.setattr(redaction, "active", active)
    run = stored_run(owned_by("SECRET-user"), text="SECRET")
    response = client.get(f"/admin/chat/agentrun/{run.pk}/export/", {"format": name})
    text = body(response)
    assert "SECRET" not in text and "[REDACTED:test]" in text
    assert len(made) == 1  # one redactor for the whole export


# The command


def test_export_traces_writes_jsonl_to_a_file(tmp_path):
    runs = [stored_run(), stored_run(steps=False)]
    target = tmp_path / "runs.jsonl"
    err = io.StringIO()
    call_command("export_traces", "--format", "jsonl", "--output", str(target), stderr=err)
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == [run.pk for run in runs]
    assert "Wrote 2 runs to" in err.getvalue()


@pytest.mark.parametrize("name", list(FORMATS))
def test_export_traces_writes_each_format_to_standard_output(monkeypatch, name):
    stored_run(status="failed")
    stored_run(status="succeeded")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    call_command("export_traces", "--format", name, "--status", "failed", stderr=err)
    text = out.getvalue()
    if name == "csv":
        assert len(list(csv.reader(io.StringIO(text, newline="")))) == 1 + 3
        assert "Wrote 3 rows." in err.getvalue()
    else:
        assert len([json.loads(line) for line in text.splitlines()]) == 1
        assert f"Wrote 1 {FORMATS[name].counted}." in err.getvalue()


def test_export_traces_defaults_to_csv(monkeypatch):
    stored_run()
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    call_command("export_traces", stderr=io.StringIO())
    assert out.getvalue().startswith('"run_id",')


def test_export_traces_refuses_an_unknown_format_and_a_bom_off_csv():
    with pytest.raises(CommandError, match=r"--format: invalid choice: 'xml' \(choose from"):
        call_command("export_traces", "--format", "xml", stderr=io.StringIO())
    with pytest.raises(CommandError, match="byte-order mark is for CSV only"):
        call_command("export_traces", "--format", "jsonl", "--bom", stderr=io.StringIO())


# The real policy: a secret planted in every text field never leaves by any path


@pytest.mark.parametrize("name", list(FORMATS))
def test_no_planted_secret_leaves_by_any_download_path(client, planted_run, monkeypatch, name):
    run = planted_run.run
    texts = {}
    staff = User.objects.create_user("auditor", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename="view_agentrun"))
    client.force_login(staff)
    admin_run = client.get(f"/admin/chat/agentrun/{run.pk}/export/", {"format": name})
    texts["admin run"] = body(admin_run)
    texts["admin matching"] = body(client.get(MATCHING, {"format": name}))
    selected = {"action": ACTIONS[name], "_selected_action": [run.pk]}
    texts["admin action"] = body(client.post(LIST, selected))
    owner = Client()
    owner.force_login(run.conversation.owner)
    texts["conversation"] = body(owner.get(download_url(run.conversation, name)))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    call_command("export_traces", "--format", name, stderr=io.StringIO())
    texts["command"] = out.getvalue()
    for path, text in texts.items():
        assert "[REDACTED:" in text, path
        assert leaked(text, planted_run) == [], path
