"""``python manage.py export_traces``: write runs as CSV (docs/csv-format.md), JSONL
(docs/jsonl-format.md) or OTLP JSON (docs/downloads.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from chat.management.pipes import silence_stdout
from chat.models import AgentRun, RunStatus
from chat.traces import redaction
from chat.traces.formats import DEFAULT, FORMATS, Format, UnknownFormat, find_format


def parse_moment(value: str, *, end_of_day: bool = False) -> datetime:
    """Return an aware UTC datetime from ``YYYY-MM-DD`` or an ISO 8601 date-time.

    A bare date means its start (or, with ``end_of_day``, the start of the next day, for
    an exclusive upper bound); a date-time without an offset is taken as UTC. Raises
    ``CommandError`` for anything else.
    """
    # A bare date first: parse_datetime also accepts one (as midnight), which would lose
    # the "whole day" meaning of --until 2026-11-29.
    try:
        day = parse_date(value)
        moment = parse_datetime(value) if day is None else None
    except ValueError:
        day = moment = None
    if day is not None:
        moment = datetime.combine(day, time.min)
        if end_of_day:
            moment += timedelta(days=1)
    if moment is None:
        raise CommandError(f"Not a date or ISO 8601 date-time: {value!r}")
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, UTC)
    return moment


class Command(BaseCommand):
    help = (
        "Export agent runs as CSV (one row per step, docs/csv-format.md), JSONL (one run "
        "per line, docs/jsonl-format.md) or OTLP JSON (OpenTelemetry spans, docs/downloads.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", help="runs started at or after (YYYY-MM-DD or ISO 8601)")
        parser.add_argument(
            "--until", help="runs started before (a bare date includes that whole day)"
        )
        parser.add_argument(
            "--status",
            action="append",
            choices=RunStatus.values,
            help="only runs with this status (repeatable)",
        )
        parser.add_argument(
            "--format",
            default=DEFAULT,
            choices=list(FORMATS),
            help=f"file format (default: {DEFAULT})",
        )
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")
        parser.add_argument(
            "--bom",
            action="store_true",
            help="start with a UTF-8 byte-order mark (CSV only, for Excel)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            fmt = find_format(options["format"], bom=options["bom"])
        except UnknownFormat as exc:
            raise CommandError(str(exc)) from None
        runs = AgentRun.objects.all()
        if options["since"]:
            runs = runs.filter(started_at__gte=parse_moment(options["since"]))
        if options["until"]:
            runs = runs.filter(started_at__lt=parse_moment(options["until"], end_of_day=True))
        if options["status"]:
            runs = runs.filter(status__in=options["status"])
        if options["since"] and options["until"]:
            since = parse_moment(options["since"])
            until = parse_moment(options["until"], end_of_day=True)
            if until <= since:
                raise CommandError("--until is not after --since: nothing could match.")
        pieces = fmt.pieces(runs, redaction.active())
        if options["output"]:
            # newline="" so the CSV's CRLF line ends reach the file unchanged.
            try:
                out = open(options["output"], "w", encoding="utf-8", newline="")  # noqa: SIM115
            except OSError as exc:
                raise CommandError(f"Cannot write {options['output']}: {exc.strerror}") from None
            with out:
                count = _write(fmt, pieces, out)
            self.stderr.write(f"Wrote {count:,} {fmt.counted} to {options['output']}.")
        else:
            try:
                count = _write(fmt, pieces, sys.stdout)
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader went away (`export_traces | head`): stop quietly, as `ask`
                # does. Close the cursors now, while the connection is still open.
                if close := getattr(pieces, "close", None):
                    close()
                silence_stdout()
                return
            self.stderr.write(f"Wrote {count:,} {fmt.counted}.")


def _write(fmt: Format, pieces: Iterator[str], out: TextIO) -> int:
    """Write ``pieces`` to ``out``; return how many records (not header pieces) they held."""
    count = -fmt.header_pieces
    for piece in pieces:
        out.write(piece)
        count += 1
    return max(count, 0)
