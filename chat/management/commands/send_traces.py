"""``python manage.py send_traces FILE``: post an OTLP/JSON file's runs to a collector.

Each line (one run, as ``export_traces --format otlp-json`` writes it) is read back into
its ``ExportTraceServiceRequest`` (:func:`chat.traces.otlp.otlp_json_to_request`) and
posted as protobuf to the OTLP/HTTP traces endpoint, which every backend takes (some,
Arize Phoenix among them, take no JSON on ``/v1/traces``). The endpoint and headers are
the standard OpenTelemetry environment's, or ``--endpoint``.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from opentelemetry.util.re import parse_env_headers

from chat.traces.otlp import OtlpJsonError, otlp_json_to_request

TIMEOUT_S = 30.0
NO_ENDPOINT = (
    "No endpoint: set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL, .../v1/traces) or "
    "OTEL_EXPORTER_OTLP_ENDPOINT (the base URL), or pass --endpoint."
)


def traces_endpoint() -> str:
    """Return the OTLP/HTTP traces URL the environment names, as the SDK resolves it
    (the signal's variable as it is, else the base URL with ``/v1/traces``), or ""."""
    url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if url:
        return url
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else ""


def traces_headers() -> dict[str, str]:
    """Return the headers the environment gives trace exports (the signal's own, else
    ``OTEL_EXPORTER_OTLP_HEADERS``), as the SDK parses them."""
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    return parse_env_headers(raw, liberal=True)


class Command(BaseCommand):
    help = "Post an OTLP/JSON file's runs (one per line) to an OTLP/HTTP collector as protobuf."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="an OTLP/JSON lines file")
        parser.add_argument(
            "--endpoint",
            help="the traces URL (default: the OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT environment)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        url = options["endpoint"] or traces_endpoint()
        if not url:
            raise CommandError(NO_ENDPOINT)
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise CommandError(f"{url} is not an http:// or https:// URL. Nothing was sent.")
        # Every line is checked before the first is sent: a bad file sends nothing.
        count = sum(1 for _ in self._requests(path))
        headers = {**traces_headers(), "Content-Type": "application/x-protobuf"}
        for number, body in enumerate(self._requests(path), start=1):
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                    response.read()
            except (urllib.error.URLError, OSError) as exc:
                raise CommandError(
                    f"line {number}: {url} refused it ({exc}); lines 1-{number - 1} were sent"
                ) from None
        self.stdout.write(f"Sent {count} run(s) to {url}.")

    def _requests(self, path: Path) -> Iterator[bytes]:
        try:
            lines = path.open(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}") from None
        number = 0
        with lines:
            try:
                for number, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    try:
                        yield otlp_json_to_request(line).SerializeToString()
                    except OtlpJsonError as exc:
                        raise CommandError(f"{path}, line {number}: {exc}") from None
            except UnicodeDecodeError:
                raise CommandError(
                    f"{path}, line {number + 1}: not UTF-8 text (an OTLP/JSON file is). "
                    "Nothing was sent."
                ) from None
