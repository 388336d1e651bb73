"""Phoenix's own HTTP API, as much as tests/phoenix reads and writes (Phoenix 20.26.1).

- ``POST /v1/traces``: OTLP/HTTP, ``application/x-protobuf`` only (415 for JSON); the
  project is the ``x-project-name`` header, else the resource's
  ``openinference.project.name``, else ``default`` (never ``service.name``). Spans are
  stored after the answer, by a background queue: read them back by waiting.
- ``GET /v1/projects/{name}/spans``: a page of spans (newest first, ``next_cursor``), each
  ``{name, context: {trace_id, span_id}, parent_id, span_kind, status_code, start_time,
  attributes (flat: "gen_ai.usage.input_tokens": 11), events}``; 404 until the project's
  first span is stored.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.timing import WAIT_S, wait_until

Span = dict[str, Any]
PAGE = 1000  # the largest page Phoenix serves


class PhoenixClient:
    """Send OTLP requests to one Phoenix and read its spans back."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def post_otlp(self, request: ExportTraceServiceRequest, *, project: str | None) -> None:
        """POST ``request`` as protobuf to ``/v1/traces``; raise AssertionError unless 200."""
        headers = {"Content-Type": "application/x-protobuf"}
        if project is not None:
            headers["x-project-name"] = project
        self._call("POST", "/v1/traces", request.SerializeToString(), headers)

    def post_raw(self, body: bytes, content_type: str) -> int:
        """POST ``body`` to ``/v1/traces`` as ``content_type``; return the HTTP status."""
        req = urllib.request.Request(
            f"{self.base_url}/v1/traces", data=body, method="POST",
            headers={"Content-Type": content_type},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=30) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def projects(self) -> list[str]:
        """Return the names of every project (one page is plenty for a test's Phoenix)."""
        return [p["name"] for p in self._json(f"/v1/projects?limit={PAGE}")["data"]]

    def spans(self, project: str) -> list[Span]:
        """Return every span of ``project`` (none when it does not exist yet)."""
        found: list[Span] = []
        cursor = None
        while True:
            query = {"limit": PAGE, **({"cursor": cursor} if cursor else {})}
            path = f"/v1/projects/{urllib.parse.quote(project)}/spans?"
            try:
                page = self._json(path + urllib.parse.urlencode(query))
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return []
                raise
            found.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def wait_for_spans(self, project: str, count: int, *, timeout_s: float = WAIT_S) -> list[Span]:
        """Wait until ``project`` holds at least ``count`` spans; return them all.

        Raises AssertionError, with what did arrive, after ``timeout_s`` seconds.
        """
        last: list[Span] = []

        def enough() -> list[Span] | None:
            last[:] = self.spans(project)
            return list(last) if len(last) >= count else None

        try:
            return wait_until(enough, f"{count} spans in the Phoenix project {project!r}",
                              timeout_s=timeout_s)  # fmt: skip
        except AssertionError as exc:
            names = sorted(span["name"] for span in last)
            raise AssertionError(
                f"{exc}; it holds {len(last)}: {names}; projects: {self.projects()}"
            ) from None

    def _json(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base_url}{path}", timeout=30) as answer:
            return json.load(answer)

    def _call(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        req = urllib.request.Request(
            f"{self.base_url}{path}", data=body, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as answer:
                return answer.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise AssertionError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
