"""A loopback OTLP/HTTP collector for tests: it decodes what it is sent with
``opentelemetry-proto`` and keeps it; ``hold`` makes it slow until released."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.timing import WAIT_S

MESSAGES = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
}


class Collector:
    """Receive OTLP protobuf on ``/v1/traces`` and ``/v1/logs`` at ``url``.

    ``traces`` and ``logs`` are the decoded requests, in arrival order. ``hold()``
    makes every request wait for ``release()``; ``entered`` is set when one waits.
    """

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.logs: list[ExportLogsServiceRequest] = []
        self.changed = threading.Condition()
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kinds = MESSAGES.get(self.path)
                if kinds is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                collector.entered.set()
                collector.gate.wait(WAIT_S * 4)
                request = kinds[0]()
                request.ParseFromString(body)
                with collector.changed:
                    (collector.traces if self.path == "/v1/traces" else collector.logs).append(
                        request
                    )
                    collector.changed.notify_all()
                reply = kinds[1]().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def hold(self) -> None:
        """Make requests wait (a slow collector) until :meth:`release`."""
        self.entered.clear()
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Any]:
        """Return every span received, in arrival order."""
        return list(_spans(self.traces))

    def log_records(self) -> list[Any]:
        """Return every log record received, in arrival order."""
        return [record for request in self.logs for resource in request.resource_logs
                for scope in resource.scope_logs for record in scope.log_records]  # fmt: skip


def _spans(requests: list[ExportTraceServiceRequest]) -> Iterator[Any]:
    for request in requests:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                yield from scope.spans


def attributes(item: Any) -> dict[str, Any]:
    """Return a protobuf span's, event's or log record's attributes as a plain dict."""
    values: dict[str, Any] = {}
    for pair in item.attributes:
        value = pair.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            values[pair.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            values[pair.key] = getattr(value, kind) if kind else None
    return values
