"""``python manage.py purge_runs --older-than 90d``: the retention policy for runs."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from chat.models import AgentRun, AgentStep, Conversation, Message, RunStatus

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
        cutoff = timezone.now() - parse_age(options["older_than"])
        # A run still going is never purged, however old: it is not evidence yet.
        runs = AgentRun.objects.filter(started_at__lt=cutoff).exclude(status=RunStatus.RUNNING)
        run_count = runs.count()
        step_count = AgentStep.objects.filter(run__in=runs.values("pk")).count()
        when = f"{cutoff:%Y-%m-%d %H:%M} UTC"
        if options["dry_run"]:
            self.stdout.write(
                f"Would delete {run_count:,} runs and {step_count:,} steps started before {when}."
            )
            return
        deleted = 0
        touched: set[int] = set()
        while True:
            # Batches keep each transaction (and its lock) short on a big table.
            ids = list(runs.order_by("pk").values_list("pk", flat=True)[:BATCH])
            if not ids:
                break
            touched.update(
                AgentRun.objects.filter(pk__in=ids).values_list("conversation_id", flat=True)
            )
            with transaction.atomic():
                # The messages go too (the question is the run's evidence): deleting a user
                # message cascades to its run and the run's steps.
                Message.objects.filter(run_id__in=ids).delete()
                Message.objects.filter(triggered_run__in=ids).delete()
            deleted += len(ids)
        # A conversation whose every run was purged has nothing left to show.
        emptied = Conversation.objects.filter(pk__in=touched, messages__isnull=True)
        conversations, _ = emptied.delete()
        self.stdout.write(
            f"Deleted {deleted:,} runs and {step_count:,} steps started before {when}, "
            f"and {conversations:,} conversations left empty."
        )
