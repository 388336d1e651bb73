"""Read runs for an export whole (steps, approvals, feedback), a chunk of runs at a time."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from django.db.models import Prefetch, QuerySet

from chat.models import AgentRun, AgentStep

RUNS_PER_CHUNK = 100


def loaded_runs(runs: QuerySet[AgentRun], *, chunk: int = RUNS_PER_CHUNK) -> Iterator[AgentRun]:
    """Yield ``runs`` in id order, each with what an export reads already loaded.

    Loaded with each run: its conversation and the conversation's owner, the user
    message, the feedback (``run.feedback``, absent when none was given), its snapshot
    (``run.snapshot``, one query per chunk for the distinct snapshots, which runs share),
    and its steps in ordinal order (``run.steps.all()``) each with its approval
    (``step.approval``).
    Ids are read through a server-side cursor and runs ``chunk`` at a time, so memory
    holds one chunk whatever the size of ``runs``.
    """
    steps = AgentStep.objects.select_related("approval").order_by("ordinal")
    ids = runs.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=2000)
    while batch := list(islice(ids, chunk)):
        loaded = (
            AgentRun.objects.filter(pk__in=batch)
            .select_related("conversation__owner", "user_message", "feedback")
            .prefetch_related("snapshot", Prefetch("steps", queryset=steps))
            .order_by("pk")
        )
        for run in loaded:
            for step in run.steps.all():
                step.run = run  # no query when a step reads its run
            yield run
