"""The file formats runs download as: one table, used by the admin, a user's own
conversation and ``manage.py export_traces`` alike.

Each row names a format's content type, file extension and the function from a runs
queryset (and the export's redactor) to an iterator of text pieces, written or streamed
as they come (:mod:`chat.traces.streaming`). A closed set, so an explicit table (as
healthchecks' ``TRANSPORTS``) rather than discovery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse

from chat import export
from chat.models import AgentRun
from chat.traces import redaction
from chat.traces.jsonl import CONTENT_TYPE as JSONL_TYPE
from chat.traces.jsonl import jsonl_lines
from chat.traces.redaction import Redactor
from chat.traces.streaming import streaming_download

Pieces = Callable[[QuerySet[AgentRun], Redactor], Iterator[str]]


@dataclass(frozen=True)
class Format:
    """A file format of runs.

    ``pieces(runs, redactor)`` yields the file's text in order; ``header_pieces`` of
    them are not records (the CSV's header line), and each other piece is one
    ``counted`` (a CSV row, a JSONL run, an OTLP line), which the command reports.
    """

    name: str
    label: str
    content_type: str
    extension: str
    pieces: Pieces
    counted: str
    header_pieces: int = 0
    bom: bool = False


def _csv(runs: QuerySet[AgentRun], redactor: Redactor, *, bom: bool) -> Iterator[str]:
    return export.csv_lines(export.trace_rows(runs, redactor=redactor), bom=bom)


def _otlp(runs: QuerySet[AgentRun], redactor: Redactor) -> Iterator[str]:
    # Imported when used: chat.traces.otlp brings in the OpenTelemetry SDK.
    from chat.traces.otlp import otlp_json_lines

    return otlp_json_lines(runs, redactor=redactor)


CSV = Format(
    "csv", "CSV", export.CONTENT_TYPE, "csv",
    lambda runs, redactor: _csv(runs, redactor, bom=False), "rows", header_pieces=1,
)  # fmt: skip
# The same CSV with a UTF-8 byte-order mark, so Excel reads it as UTF-8 (docs/csv-format.md).
CSV_EXCEL = Format(
    "csv", "CSV for Excel", export.CONTENT_TYPE, "csv",
    lambda runs, redactor: _csv(runs, redactor, bom=True), "rows", header_pieces=1, bom=True,
)  # fmt: skip
JSONL = Format(
    "jsonl", "JSONL", JSONL_TYPE, "jsonl",
    lambda runs, redactor: jsonl_lines(runs, redactor=redactor), "runs",
)  # fmt: skip
# OTLP JSON as the OpenTelemetry file exporter writes it: one ExportTraceServiceRequest
# per line, JSON Lines, which Phoenix, Langfuse, Jaeger and MLflow import.
OTLP_JSON = Format("otlp-json", "OTLP JSON", JSONL_TYPE, "otlp.jsonl", _otlp, "lines")

FORMATS: dict[str, Format] = {f.name: f for f in (CSV, JSONL, OTLP_JSON)}
DEFAULT = CSV.name


class UnknownFormat(ValueError):
    """A format name not in :data:`FORMATS`."""


def find_format(name: str, *, bom: bool = False) -> Format:
    """Return the format called ``name``; with ``bom``, the CSV's Excel variant.

    Raises :class:`UnknownFormat` for a name not in :data:`FORMATS`, or ``bom`` with a
    format other than CSV (only a CSV opened in Excel needs the mark).
    """
    found = FORMATS.get(name)
    if found is None:
        known = ", ".join(FORMATS)
        raise UnknownFormat(f"Unknown format {name[:40]!r}: use one of {known}.")
    if bom:
        if found is not CSV:
            raise UnknownFormat(f"A byte-order mark is for CSV only, not {name}.")
        return CSV_EXCEL
    return found


def download_response(
    runs: QuerySet[AgentRun], fmt: Format, *, request: HttpRequest | None, prefix: str
) -> StreamingHttpResponse:
    """Return a streaming download of ``runs`` in ``fmt``, every string redacted.

    The file is named ``<prefix>-<UTC stamp>[-excel].<extension>``. The redactor is the
    one the settings configure (:func:`chat.traces.redaction.active`), read once. The
    caller checks who may download ``runs``.
    """
    redactor = redaction.active()
    return streaming_download(
        fmt.pieces(runs, redactor),
        request=request,
        content_type=fmt.content_type,
        filename=export.export_filename(prefix, bom=fmt.bom, extension=fmt.extension),
    )
