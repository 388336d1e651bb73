"""``python manage.py export_traces``: write agent traces as CSV (docs/csv-format.md)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from chat.export import trace_rows, write_csv
from chat.management.pipes import silence_stdout
from chat.models import AgentRun, RunStatus


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
    help = "Export agent runs as CSV, one row per step (columns: docs/csv-format.md)."

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
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")
        parser.add_argument(
            "--bom", action="store_true", help="start with a UTF-8 byte-order mark (for Excel)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
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
        rows = trace_rows(runs)
        if options["output"]:
            # newline="" so the csv module's CRLF line ends reach the file unchanged.
            try:
                out = open(options["output"], "w", encoding="utf-8", newline="")  # noqa: SIM115
            except OSError as exc:
                raise CommandError(f"Cannot write {options['output']}: {exc.strerror}") from None
            with out:
                count = write_csv(rows, out, bom=options["bom"])
            self.stderr.write(f"Wrote {count:,} rows to {options['output']}.")
        else:
            try:
                count = write_csv(rows, sys.stdout, bom=options["bom"])
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader went away (`export_traces | head`): stop quietly, as `ask`
                # does. Close the cursors now, while the connection is still open.
                rows.close()
                silence_stdout()
                return
            self.stderr.write(f"Wrote {count:,} rows.")
