"""``python manage.py purge_runs --older-than 90d``: the retention policy for runs."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from chat import store
from chat.models import AgentRun, AgentStep, RunStatus

# No "m": it would read as months to some and minutes to others, and a wrong guess
# deletes the audit trail.
UNITS = {"h": "hours", "d": "days", "w": "weeks"}
BATCH = 1000


def parse_age(value: str) -> timedelta:
    """Return ``90d``, ``12h`` or ``2w`` as a timedelta; raise CommandError else."""
    match = re.fullmatch(r"\s*(\d+)\s*([dhw])\s*", value.lower())
    if match is None or int(match.group(1)) <= 0:
        raise CommandError(
            "--older-than takes a positive number and a unit, h (hours), d (days) or "
            f"w (weeks), like 90d; not {value!r}"
        )
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


class Command(BaseCommand):
    help = (
        "Delete finished runs that started before a cut-off, with their steps and messages; "
        "conversations left empty go too."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            required=True,
            help="age: a number and h (hours), d (days) or w (weeks), e.g. 90d (required)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would go, delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cutoff = timezone.now() - parse_age(options["older_than"])
        except OverflowError:
            raise CommandError("--older-than reaches back before the year 1.") from None
        # Runs of a dead process would otherwise stay "running", and unpurgeable, forever.
        store.runs_interrupt_stale(now=timezone.now())
        # A run still going (or waiting for a decision on a tool call) is never purged,
        # however old: it is not evidence yet.
        runs = AgentRun.objects.filter(started_at__lt=cutoff).exclude(
            status__in=(RunStatus.RUNNING, RunStatus.WAITING)
        )
        run_count = runs.count()
        step_count = AgentStep.objects.filter(run__in=runs.values("pk")).count()
        when = f"{cutoff:%Y-%m-%d %H:%M} UTC"
        if options["dry_run"]:
            self.stdout.write(
                f"Would delete {run_count:,} runs and {step_count:,} steps started before "
                f"{when}, with their messages."
            )
            return
        deleted = 0
        while True:
            # Batches keep each transaction (and its lock) short on a big table.
            ids = list(runs.order_by("pk").values_list("pk", flat=True)[:BATCH])
            if not ids:
                break
            deleted += store.runs_delete(run_ids=ids)
        self.stdout.write(
            f"Deleted {deleted:,} runs and {step_count:,} steps started before {when}, "
            "with their messages; conversations left empty went too."
        )
