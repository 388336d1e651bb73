"""The harness's converter from OTLP/JSON file lines to protobuf requests (no server needed)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link

from tests.phoenix.otlp_files import (
    BadLine,
    otlp_json_line,
    request_from_json_line,
    requests_from_file,
)


def sdk_spans() -> list[ReadableSpan]:
    """Return a root span with a child that links to another span, made by the SDK."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("other") as other:
        pass
    link = Link(other.get_span_context())
    with (
        tracer.start_as_current_span("invoke_agent Travel", attributes={"n": 1}),
        tracer.start_as_current_span("chat demo", links=[link]),
    ):
        pass
    return list(exporter.get_finished_spans())


def test_a_hex_id_line_becomes_the_request_the_sdk_would_send() -> None:
    spans = sdk_spans()
    line = otlp_json_line(spans)
    assert spans[-1].context.span_id.to_bytes(8, "big").hex() in line  # hex, as files hold ids

    assert request_from_json_line(line) == encode_spans(spans)


def test_every_non_blank_line_of_a_file_is_one_request() -> None:
    first, second = otlp_json_line(sdk_spans()), otlp_json_line(sdk_spans())

    requests = list(requests_from_file(f"{first}\n\n{second}\n"))

    assert [r.resource_spans[0].scope_spans[0].spans[0].name for r in requests] == ["other"] * 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda span: span.update(spanId="not hex"), "spans[0].spanId: 'not hex' is not a hex id"),
        (lambda span: span.update(traceId="abcd"), "spans[0].traceId: 'abcd' is 2 bytes, not 16"),
        (lambda span: span.update(kind="SIDEWAYS"), "not an OTLP ExportTraceServiceRequest"),
        (lambda span: span.update(colour="red"), "not an OTLP ExportTraceServiceRequest"),
    ],
)
def test_a_bad_span_is_refused_naming_the_line_and_the_field(change, message) -> None:
    data = json.loads(otlp_json_line(sdk_spans()))
    change(data["resourceSpans"][0]["scopeSpans"][0]["spans"][0])

    with pytest.raises(BadLine) as refused:
        list(requests_from_file("\n" + json.dumps(data)))

    assert str(refused.value).startswith("line 2: ")
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [("{not json", "line 1: not JSON"), ("[1, 2]", "line 1: not a JSON object but list")],
)
def test_a_line_that_is_not_a_json_object_is_refused(line: str, message: str) -> None:
    with pytest.raises(BadLine, match=message):
        list(requests_from_file(line))
