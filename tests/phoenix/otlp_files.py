"""OTLP/JSON file lines to protobuf requests, for backends that take only protobuf (Phoenix).

A line of ``manage.py export_traces --format otlp-json`` is one OTLP/JSON
``ExportTraceServiceRequest`` (the OTLP specification's JSON encoding: lowerCamelCase
keys, enums as integers, trace and span ids as hex strings). protobuf's ``json_format``
reads all of it but the ids, which it expects as base64 (the proto3 JSON mapping of
``bytes``), so they are re-encoded first. Phoenix 20.26.1's ``/v1/traces`` answers 415 to
``application/json``: a file reaches it only this way (or through ``manage.py send_traces``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

# Id fields and their length in bytes (OTLP: trace ids 16 bytes, span ids 8).
ID_BYTES = {"traceId": 16, "spanId": 8, "parentSpanId": 8}


class BadLine(ValueError):
    """A line that is not an OTLP/JSON ExportTraceServiceRequest; the message says where."""


def request_from_json_line(line: str, *, where: str = "line") -> ExportTraceServiceRequest:
    """Return the ``ExportTraceServiceRequest`` that one OTLP/JSON line encodes.

    Ids (span, parent, and those of links) must be hex of their OTLP length, or empty
    for a root's parent. Raises ``BadLine`` naming ``where`` and the field for anything
    else: not JSON, not an object, a bad id, or a field OTLP does not define.
    """
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadLine(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise BadLine(f"{where}: not a JSON object but {type(data).__name__}")
    for path, holder in _id_holders(data):
        for key, size in ID_BYTES.items():
            if key in holder:
                holder[key] = _hex_to_base64(holder[key], size, f"{where}: {path}.{key}")
    try:
        return json_format.ParseDict(data, ExportTraceServiceRequest())
    except json_format.ParseError as exc:
        raise BadLine(f"{where}: not an OTLP ExportTraceServiceRequest: {exc}") from None


def requests_from_file(text: str) -> Iterator[ExportTraceServiceRequest]:
    """Yield the request of every non-blank line of an OTLP/JSON Lines file, in order."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield request_from_json_line(line, where=f"line {number}")


def otlp_json_line(spans: list[ReadableSpan]) -> str:
    """Return ``spans`` as one OTLP/JSON line: ids in hex, enums as integers (OTLP spec).

    The shape of a line of ``export_traces --format otlp-json``, made by the SDK's
    encoder, for tests that need a file line without the app.
    """
    data = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for _, holder in _id_holders(data):
        for key in ID_BYTES:
            if holder.get(key):
                holder[key] = base64.b64decode(holder[key]).hex()
    return json.dumps(data)


def _id_holders(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield every span and span link of a request with a path naming it."""
    for r, resource_spans in enumerate(_objects(data.get("resourceSpans"))):
        for s, scope_spans in enumerate(_objects(resource_spans.get("scopeSpans"))):
            for n, span in enumerate(_objects(scope_spans.get("spans"))):
                path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                yield path, span
                for k, link in enumerate(_objects(span.get("links"))):
                    yield f"{path}.links[{k}]", link


def _objects(value: Any) -> list[dict[str, Any]]:
    """Return the objects of a JSON array (json_format reports anything else itself)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _hex_to_base64(value: Any, size: int, where: str) -> str:
    if value == "":
        return ""
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError, binascii.Error):
        raise BadLine(f"{where}: {value!r} is not a hex id") from None
    if len(raw) != size:
        raise BadLine(f"{where}: {value!r} is {len(raw)} bytes, not {size}")
    return base64.b64encode(raw).decode("ascii")
