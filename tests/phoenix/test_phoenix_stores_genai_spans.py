"""The harness itself against a real Phoenix: GenAI spans made by the OpenTelemetry SDK.

No app code here: a run-shaped trace (``invoke_agent`` root, ``chat`` and ``execute_tool``
children, the attributes the app's spans carry) is sent the two ways the round-trip tests
send runs, through the SDK's OTLP/HTTP exporter and as an OTLP/JSON file line through the
converter, and read back with the checks those tests use. So a failure there is the app's,
not the harness's.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer

from tests.phoenix.checks import ExpectedRun, ToolCall, check_run, traces_by_conversation
from tests.phoenix.conftest import Phoenix
from tests.phoenix.otlp_files import otlp_json_line, request_from_json_line

pytestmark = pytest.mark.phoenix

ARGUMENTS = {"town": "Hangzhou", "days": 2}
RUN = ExpectedRun(
    run_id=1, conversation_id="41", status="succeeded", strategy="tool_calling",
    turn_tokens=Counter({(120, 18): 1, (160, 40): 1}),
    tool_calls={"call_1": ToolCall("weather_forecast", ARGUMENTS)},
)  # fmt: skip


def run_spans(resource: Resource) -> list[ReadableSpan]:
    """Return one run's spans as the SDK finishes them: model turn, tool call, model turn."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent-chat")
    root_attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel",
                       "gen_ai.conversation.id": RUN.conversation_id}  # fmt: skip
    with tracer.start_as_current_span("invoke_agent travel", attributes=root_attributes):
        for tokens in [(120, 18), None, (160, 40)]:
            if tokens is None:
                _tool_span(tracer)
                continue
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "demo-scripted",
                    "gen_ai.usage.input_tokens": tokens[0],
                    "gen_ai.usage.output_tokens": tokens[1]}  # fmt: skip
            with tracer.start_as_current_span(
                "chat demo-scripted", kind=SpanKind.CLIENT, attributes=chat
            ):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _tool_span(tracer: Tracer) -> None:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather_forecast",
                  "gen_ai.tool.call.id": "call_1",
                  "gen_ai.tool.call.arguments": json.dumps(ARGUMENTS)}  # fmt: skip
    with tracer.start_as_current_span("execute_tool weather_forecast", attributes=attributes):
        pass


def project_name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


def test_sdk_spans_sent_over_otlp_http_read_back_whole(phoenix: Phoenix) -> None:
    project = project_name("sdk")
    # The project from the resource, as an app sets it with OTEL_RESOURCE_ATTRIBUTES.
    spans = run_spans(Resource.create({"openinference.project.name": project}))
    exporter = OTLPSpanExporter(endpoint=f"{phoenix.otlp_endpoint}/v1/traces")

    assert exporter.export(spans) is SpanExportResult.SUCCESS

    stored = phoenix.client.wait_for_spans(project, RUN.span_count)
    assert len(stored) == RUN.span_count
    traces = traces_by_conversation(stored)
    assert list(traces) == [RUN.conversation_id]
    check_run(traces[RUN.conversation_id], RUN, content=True)


def test_an_otlp_json_line_converted_to_protobuf_reads_back_whole(phoenix: Phoenix) -> None:
    project = project_name("file")
    # A file's resource names no project (service.name only): the header chooses it.
    line = otlp_json_line(run_spans(Resource.create({"service.name": "agent-chat"})))

    phoenix.client.post_otlp(request_from_json_line(line), project=project)

    stored = phoenix.client.wait_for_spans(project, RUN.span_count)
    check_run(traces_by_conversation(stored)[RUN.conversation_id], RUN, content=True)


def test_phoenix_refuses_otlp_json_on_its_traces_endpoint(phoenix: Phoenix) -> None:
    line = otlp_json_line(run_spans(Resource.create({})))

    assert phoenix.client.post_raw(line.encode(), "application/json") == 415
