"""Runs as OTLP/JSON lines: one ``ExportTraceServiceRequest`` per run per line.

The shape is the OpenTelemetry Collector's file exporter's (JSON Lines) and the OTLP
specification's JSON encoding: lowerCamelCase field names, enums as integers, 64-bit
integers as strings, and trace and span ids as hex strings (not protobuf JSON's
base64). The spans are :func:`chat.traces.spans.run_spans`'s, encoded by the SDK's own
encoder (``encode_spans``) and protobuf's ``json_format``; a file always carries content
(it is an explicit download), through the redactor like every other way out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

from django.db.models import QuerySet
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from chat import store
from chat.models import AgentRun
from chat.traces.redaction import Redactor
from chat.traces.spans import default_resource, run_spans

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpJsonError(ValueError):
    """A line that is not an OTLP/JSON ``ExportTraceServiceRequest``; says which part."""


def otlp_json_lines(runs: QuerySet[AgentRun], *, redactor: Redactor) -> Iterator[str]:
    """Yield each run of ``runs`` (in id order) as one line of OTLP/JSON, ending in
    ``"\\n"``.

    Runs are read a chunk at a time (:func:`chat.store.runs_in_chunks`), so memory
    holds one chunk and one run's spans whatever the size of ``runs``. The resource is
    the SDK's from the environment (``OTEL_SERVICE_NAME``, default ``agent-chat``).
    """
    resource = default_resource()
    for run in store.runs_in_chunks(runs):
        spans = run_spans(run, redactor=redactor, capture_content=True, resource=resource)
        yield request_json(encode_spans(spans)) + "\n"


def request_json(request: ExportTraceServiceRequest) -> str:
    """Return ``request`` as one line of OTLP/JSON (ids as hex, enums as integers)."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    _convert_ids(data, _base64_to_hex)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def otlp_json_to_request(line: str) -> ExportTraceServiceRequest:
    """Return the ``ExportTraceServiceRequest`` a line of OTLP/JSON holds (the inverse
    of :func:`request_json`; hex ids, as the OTLP specification's JSON encoding has them).

    Raises :class:`OtlpJsonError` for a line that is not JSON (or nested too deep to
    read), an id that is not hex, or fields the protobuf message does not have or of
    the wrong shape, saying which.
    """
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise OtlpJsonError(f"not JSON: {exc}") from None
    except RecursionError:
        raise OtlpJsonError("not an ExportTraceServiceRequest: nested too deep") from None
    if not isinstance(data, dict):
        raise OtlpJsonError("not a JSON object (an ExportTraceServiceRequest is one)")
    _convert_ids(data, _hex_to_base64)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, request)
    except json_format.ParseError as exc:
        raise OtlpJsonError(f"not an ExportTraceServiceRequest: {exc}") from None
    except RecursionError:
        raise OtlpJsonError("not an ExportTraceServiceRequest: nested too deep") from None
    return request


def _convert_ids(data: dict[str, Any], convert: Callable[[str], str]) -> None:
    """Rewrite every span's and link's id fields in place with ``convert``; raise
    :class:`OtlpJsonError` where the nesting is not lists of objects."""
    for resource_spans in _objects(data, "resourceSpans"):
        for scope_spans in _objects(resource_spans, "scopeSpans"):
            for span in _objects(scope_spans, "spans"):
                _convert_fields(span, convert)
                for link in _objects(span, "links"):
                    _convert_fields(link, convert)


def _objects(item: dict[str, Any], field: str) -> list[dict[str, Any]]:
    """The list of objects ``item[field]`` holds ([] when absent)."""
    value = item.get(field) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise OtlpJsonError(f"not an ExportTraceServiceRequest: {field} is not a list of objects")
    return value


def _convert_fields(item: dict[str, Any], convert: Callable[[str], str]) -> None:
    for field in ID_FIELDS:
        if item.get(field):
            item[field] = convert(item[field])


def _base64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _hex_to_base64(value: str) -> str:
    try:
        raw = bytes.fromhex(value)
    except (ValueError, TypeError):
        raise OtlpJsonError(f"an id is not hex: {value!r}") from None
    if len(raw) not in (8, 16):
        raise OtlpJsonError(f"an id is not 8 or 16 bytes: {value!r}")
    return base64.b64encode(raw).decode("ascii")
