"""Limits and sweeps: the per-owner run limit, runs of a dead process, retention."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Q

from agents.approvals import APPROVAL_CANCELLED
from chat.models import AgentRun, Conversation, Message, RunStatus, StepStatus
from chat.store.approvals import NEVER_RAN, approvals_close
from chat.store.conversations import title_from
from chat.store.rows import count_tool_calls, runs_loaded
from chat.store.usage import conversation_usage, usage_settle
from chat.traces import live as telemetry

RATE_WINDOW = timedelta(minutes=1)
INTERRUPTED = (
    "The server stopped while this run was going (last sign of life {since:%Y-%m-%d "
    "%H:%M:%S} UTC). What was done until then is kept above; send your message again to "
    "retry."
)
INTERRUPTED_STEP = "The server stopped before this step finished."


class RateLimited(Exception):
    """The owner started too many runs lately; ``retry_after_s`` says when one is free."""

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(f"{limit} runs per minute; retry after {retry_after_s} s")
        self.limit = limit
        self.retry_after_s = retry_after_s


def check_rate(conversation: Conversation, limit: int, now: datetime) -> None:
    """Raise :class:`RateLimited` if the conversation's owner started ``limit`` runs, in
    any of their conversations, in the minute before ``now``."""
    if conversation.owner_id is not None:
        owned = Q(conversation__owner_id=conversation.owner_id)
    else:
        owned = Q(conversation__owner__isnull=True, conversation__guest_key=conversation.guest_key)
    recent = AgentRun.objects.filter(owned, started_at__gt=now - RATE_WINDOW)
    starts = list(recent.order_by("-started_at").values_list("started_at", flat=True)[:limit])
    if len(starts) >= limit:
        # A slot frees when the oldest of the last ``limit`` runs leaves the window.
        wait = (starts[-1] + RATE_WINDOW - now).total_seconds()
        raise RateLimited(limit, max(1, math.ceil(wait)))


def runs_interrupt_stale(*, now: datetime, conversation_id: int | None = None) -> list[AgentRun]:
    """Mark running runs whose heartbeat is older than ``AGENT_STALE_AFTER_S`` interrupted.

    Their process died (a crash, a kill -9, a restart): the run can never finish, so it
    ends as ``interrupted`` with its steps kept, and steps left running are closed as
    errors. Works across processes, as it needs only the database. With
    ``CHAT_RUN_WORKERS``, a run no run owner has taken is not one of them. Returns those
    runs, loaded for rendering (:func:`chat.store.rows.runs_loaded`).
    """
    cutoff = now - timedelta(seconds=settings.AGENT_STALE_AFTER_S)
    # A live process acts on a stop request at its next heartbeat; a run stopped three
    # heartbeats ago with no beat since has no process, whatever the stale cut-off says.
    stop_cutoff = now - timedelta(seconds=3 * settings.AGENT_HEARTBEAT_S)
    stale = AgentRun.objects.filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff)
        | Q(cancel_requested_at__lt=stop_cutoff, heartbeat_at__lt=F("cancel_requested_at"))
    )
    if settings.CHAT_RUN_WORKERS:
        # A run no run owner has taken never ran anywhere: it waits for one (the owners'
        # sweep starts it, a Stop ends it), rather than being told its server stopped.
        stale = stale.exclude(owner_channel="")
    if conversation_id is not None:
        stale = stale.filter(conversation_id=conversation_id)
    interrupted: list[AgentRun] = []
    if not stale.exists():
        return []  # no write transaction (SQLite's BEGIN IMMEDIATE) when nothing is stale
    with transaction.atomic():
        for run in stale.select_for_update():
            since = run.heartbeat_at or run.started_at
            error = INTERRUPTED.format(since=since)
            run.status = RunStatus.INTERRUPTED
            run.error = error
            run.finished_at = since
            run.duration_ms = max(0, int((since - run.started_at).total_seconds() * 1000))
            run.steps.filter(status=StepStatus.PENDING).update(
                status=StepStatus.ERROR, error=NEVER_RAN, error_type=APPROVAL_CANCELLED,
                finished_at=since,
            )  # fmt: skip
            run.steps.filter(status=StepStatus.RUNNING).update(
                status=StepStatus.ERROR, error=INTERRUPTED_STEP, finished_at=since
            )
            approvals_close(run_id=run.pk, at=since)
            # The loop's count of turns died with the process; the stored turns did not.
            turns = run.steps.aggregate(n=Max("iteration"))
            run.iterations = turns["n"] or 0
            count_tool_calls(run)
            usage_settle(run)  # what its finished model turns used
            run.save()
            telemetry.run_ended(run.pk)  # sent once this commits, when live export is on
            interrupted.append(run)
    # Loaded for rendering (the page is sent the whole run again: its steps were closed).
    ids = [run.pk for run in interrupted]
    loaded = list(runs_loaded(AgentRun.objects.filter(pk__in=ids)).order_by("started_at", "id"))
    for run in loaded:
        run.conversation_usage = conversation_usage(conversation_id=run.conversation_id)
    return loaded


def runs_delete(*, run_ids: list[int]) -> int:
    """Delete runs with their steps and both their messages; tidy their conversations.

    A run's question and answer are part of it: leaving them would keep the text the
    retention policy (or a superuser) meant to remove, and feed it to the model as
    history. A conversation left with no messages is deleted; one that keeps some gets
    its title again from its first remaining question. Returns how many runs went.
    """
    with transaction.atomic():
        runs = AgentRun.objects.filter(pk__in=run_ids)
        conversation_ids = set(runs.values_list("conversation_id", flat=True))
        count = runs.count()
        Message.objects.filter(run_id__in=run_ids).delete()
        # Deleting a user message cascades to its run and the run's steps.
        Message.objects.filter(triggered_run__in=run_ids).delete()
        for conversation in Conversation.objects.filter(pk__in=conversation_ids):
            first = conversation.messages.filter(role=Message.Role.USER).first()
            if first is None:
                conversation.delete()
            else:
                conversation.title = title_from(first.content)
                conversation.save(update_fields=["title"])
    return count
