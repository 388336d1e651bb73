"""Runs as OTLP/JSON lines: the SDK's encoding of the same spans live export sends, with
hex ids, that reads back into the protobuf request it came from; the same ids every
time; every string through the redactor; a bad line gets a clear error."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from chat import store
from chat.models import AgentRun, Feedback
from chat.traces.ids import span_id_of, trace_id_of
from chat.traces.otlp import OtlpJsonError, otlp_json_lines, otlp_json_to_request
from chat.traces.redaction import Redactor, active
from chat.traces.spans import default_resource, run_spans

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What's the weather in Hangzhou, and what is 17*23?"


def ask(question: str = QUESTION) -> AgentRun:
    call_command("ask", question, stdout=StringIO())
    return AgentRun.objects.latest("id")


def test_each_run_is_one_line_of_otlp_json_with_hex_ids_and_integer_enums():
    first, second = ask(), ask()
    lines = list(otlp_json_lines(AgentRun.objects.all(), redactor=active()))

    assert len(lines) == 2 and all(line.endswith("\n") and "\n" not in line[:-1]
                                   for line in lines)  # fmt: skip
    data = json.loads(lines[0])
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    root = spans[0]
    assert root["traceId"] == format(trace_id_of(first.pk), "032x")
    assert root["spanId"] == format(span_id_of(first.pk), "016x")
    assert root["kind"] == 1  # SPAN_KIND_INTERNAL, as an integer
    assert all(span["parentSpanId"] == root["spanId"] for span in spans[1:])
    assert json.loads(lines[1])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] \
        == format(trace_id_of(second.pk), "032x")  # fmt: skip
    service = {a["key"]: a["value"] for a in data["resourceSpans"][0]["resource"]["attributes"]}
    assert service["service.name"] == {"stringValue": "agent-chat"}


def test_a_line_reads_back_into_the_request_the_sdk_encoded():
    run = ask()
    (line,) = otlp_json_lines(AgentRun.objects.all(), redactor=active())
    (loaded,) = store.runs_in_chunks(AgentRun.objects.filter(pk=run.pk))
    spans = run_spans(loaded, redactor=active(), capture_content=True,
                      resource=default_resource())  # fmt: skip
    expected = encode_spans(spans)

    request = otlp_json_to_request(line)

    got = request.resource_spans[0].scope_spans[0].spans
    want = expected.resource_spans[0].scope_spans[0].spans
    assert got == want
    assert request.SerializeToString() != b""


def test_files_carry_content_and_ids_that_do_not_change_between_exports():
    run = ask()
    now = timezone.now()
    Feedback.objects.create(run=run, rating="up", comment="spot on", given_by_name="(guest)",
                            created_at=now, updated_at=now)  # fmt: skip
    once = json.loads(next(otlp_json_lines(AgentRun.objects.all(), redactor=active())))
    again = json.loads(next(otlp_json_lines(AgentRun.objects.all(), redactor=active())))

    def ids(data):
        spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
        return [(s["traceId"], s["spanId"], s.get("parentSpanId")) for s in spans]

    assert ids(once) == ids(again)
    text = json.dumps(once, ensure_ascii=False)
    assert "gen_ai.input.messages" in text and "gen_ai.tool.call.arguments" in text
    root = once["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    (event,) = root["events"]
    assert event["name"] == "gen_ai.evaluation.result"
    assert {"key": "gen_ai.evaluation.explanation", "value": {"stringValue": "spot on"}} \
        in event["attributes"]  # fmt: skip


class Shouting(Redactor):
    """A policy that replaces one word wherever it is."""

    def text(self, value: str) -> str:
        return value.replace("Hangzhou", "[REDACTED]")

    def value(self, value):
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value


def test_every_string_that_leaves_passes_the_redactor():
    ask()
    (line,) = otlp_json_lines(AgentRun.objects.all(), redactor=Shouting())
    assert "Hangzhou" not in line
    assert "[REDACTED]" in line


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "not hex"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "abcd"}]}]}]}',
            "not 8 or 16 bytes",
        ),
        ('{"resourceSpans": [{"colour": "red"}]}', "not an ExportTraceServiceRequest"),
    ],
)
def test_a_line_that_is_not_otlp_json_gets_a_clear_error(line, error):
    with pytest.raises(OtlpJsonError, match=error):
        otlp_json_to_request(line)


@pytest.fixture
def collector():
    from tests.otlp_collector import Collector

    server = Collector()
    yield server
    server.close()


def test_send_traces_posts_a_files_runs_to_a_collector_as_protobuf(tmp_path, collector):
    first, second = ask(), ask()
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(otlp_json_lines(AgentRun.objects.all(), redactor=active())))
    out = StringIO()

    call_command("send_traces", str(path), "--endpoint", f"{collector.url}/v1/traces",
                 stdout=out)  # fmt: skip

    assert "Sent 2 run(s)" in out.getvalue()
    roots = [s for s in collector.spans() if not s.parent_span_id]
    assert [s.trace_id for s in roots] == [trace_id_of(r.pk).to_bytes(16, "big")
                                           for r in (first, second)]  # fmt: skip


def test_send_traces_sends_nothing_from_a_file_with_a_bad_line(tmp_path, collector):
    ask()
    good = next(otlp_json_lines(AgentRun.objects.all(), redactor=active()))
    path = tmp_path / "runs.jsonl"
    path.write_text(good + "{broken\n")
    with pytest.raises(CommandError, match="line 2: not JSON"):
        call_command("send_traces", str(path), "--endpoint", f"{collector.url}/v1/traces")
    assert collector.traces == []


def test_send_traces_without_an_endpoint_says_how_to_name_one(tmp_path, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    with pytest.raises(CommandError, match="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        call_command("send_traces", str(tmp_path / "none.jsonl"))


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"resourceSpans": "abc"}\n', "resourceSpans is not a list of objects"),
        ('{"resourceSpans": [1]}\n', "resourceSpans is not a list of objects"),
        (
            '{"resourceSpans": [{"scopeSpans": [{"spans": ["x"]}]}]}\n',
            "spans is not a list of objects",
        ),
        ("[" * 100_000 + "]" * 100_000 + "\n", "nested too deep"),
        ('{"resourceSpans": [{"resource": 5}]}\n', "not an ExportTraceServiceRequest"),
    ],
    ids=["a-string", "numbers", "span-not-an-object", "deep-nesting", "resource-a-number"],
)
def test_send_traces_says_which_line_has_the_wrong_shape_and_sends_nothing(
    tmp_path, collector, content, error
):
    path = tmp_path / "bad.otlp.jsonl"
    path.write_text(content)
    with pytest.raises(CommandError, match=error):
        call_command("send_traces", str(path), endpoint=f"{collector.url}/v1/traces")
    assert collector.traces == []


def test_send_traces_refuses_a_file_that_is_not_text(tmp_path, collector):
    path = tmp_path / "bad.otlp.jsonl"
    path.write_bytes(b"\xff\xfe\x00\x81garbage\n")
    with pytest.raises(CommandError, match="line 1: not UTF-8 text"):
        call_command("send_traces", str(path), endpoint=f"{collector.url}/v1/traces")
    assert collector.traces == []


def test_send_traces_refuses_an_endpoint_that_is_not_an_http_url(tmp_path):
    path = tmp_path / "ok.otlp.jsonl"
    path.write_text('{"resourceSpans": []}\n')
    with pytest.raises(CommandError, match="not an http:// or https:// URL"):
        call_command("send_traces", str(path), endpoint="localhost:4318/v1/traces")
