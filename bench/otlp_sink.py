"""An OTLP/HTTP sink for benchmarks: it takes protobuf on ``/v1/traces`` and ``/v1/logs``,
counts the spans, and answers ``GET /count`` with ``{"requests": N, "spans": N}``.

A process of its own, so decoding what it is sent costs the benchmarked server nothing::

    .venv/bin/python bench/otlp_sink.py [--port 0]

Prints the port it listens on (on 127.0.0.1) as its first line of output.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def serve(port: int) -> None:
    """Listen on 127.0.0.1:``port`` (0: any free port) until killed."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    counts = {"requests": 0, "spans": 0}
    lock = threading.Lock()
    reply = ExportTraceServiceResponse().SerializeToString()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            spans = 0
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                spans = sum(len(scope.spans) for resource in request.resource_spans
                            for scope in resource.scope_spans)  # fmt: skip
            with lock:
                counts["requests"] += 1
                counts["spans"] += spans
            self._answer(reply, "application/x-protobuf")

        def do_GET(self) -> None:
            with lock:
                body = json.dumps(counts).encode()
            self._answer(body, "application/json")

        def _answer(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    serve(parser.parse_args().port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
