"""The ORM boundary: every database read and write the async code needs.

Plain sync functions with keyword-only arguments and ``<noun>_<verb>`` names; async
callers use them only through ``channels.db.database_sync_to_async``.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.backends.base import SessionBase
from django.db import transaction
from django.db.models import Count, F, Max, Prefetch, Q, QuerySet

from chat.models import (
    PARSE_ERROR_PREFIXES,
    AgentRun,
    AgentStep,
    Conversation,
    Message,
    RunStatus,
    StepKind,
    StepStatus,
    Strategy,
)

TITLE_LENGTH = 60
INTERRUPTED = (
    "The server stopped while this run was going (last sign of life {since:%Y-%m-%d "
    "%H:%M:%S} UTC). What was done until then is kept above; send your message again to "
    "retry."
)
INTERRUPTED_STEP = "The server stopped before this step finished."
CANCELLED_STEP = "Cancelled before this step finished."
ENDED_FOR_GOOD = (
    RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.MAX_ITERATIONS,
)  # fmt: skip


def _title(content: str) -> str:
    """Return a conversation title from a question: one line, at most TITLE_LENGTH."""
    title = " ".join(content.split())
    if len(title) > TITLE_LENGTH:
        title = title[: TITLE_LENGTH - 1] + "…"
    return title


class RunAlreadyGoing(Exception):
    """Raised when a conversation already has a running run."""


GUEST_KEY = "chat_guest_key"


@dataclass(frozen=True)
class Owner:
    """Who is asking: a logged-in user, or an anonymous browser's guest key."""

    user_id: int | None
    guest_key: str

    @classmethod
    def of(
        cls,
        user: AbstractBaseUser | AnonymousUser | None,
        session: SessionBase | None,
        *,
        create: bool = False,
    ) -> Owner:
        """Return the owner for a request's or a websocket scope's user and session.

        An anonymous visitor is identified by a random guest key in the session data;
        ``create=True`` gives a visitor without one a new key (the session is then saved
        by the session middleware). Reads the session, so call it from sync code.
        """
        if user is not None and user.is_authenticated:
            return cls(user_id=user.pk, guest_key="")
        if session is None:
            return cls(user_id=None, guest_key="")
        key = session.get(GUEST_KEY, "")
        if not key and create:
            key = session[GUEST_KEY] = secrets.token_urlsafe(24)
        return cls(user_id=None, guest_key=key)


def conversations_for_owner(*, owner: Owner) -> QuerySet[Conversation]:
    """Return the owner's conversations, newest first (none for a session-less visitor)."""
    if owner.user_id is not None:
        return Conversation.objects.filter(owner_id=owner.user_id)
    if not owner.guest_key:
        return Conversation.objects.none()
    return Conversation.objects.filter(owner__isnull=True, guest_key=owner.guest_key)


def conversation_get(*, owner: Owner, conversation_id: int) -> Conversation | None:
    """Return the conversation if ``owner`` owns it, else None."""
    return conversations_for_owner(owner=owner).filter(pk=conversation_id).first()


def conversation_get_or_create_empty(*, owner: Owner) -> Conversation:
    """Return the owner's newest conversation if it has no messages yet, else a new one."""
    latest = conversations_for_owner(owner=owner).first()
    if latest is not None and not latest.messages.exists():
        return latest
    return Conversation.objects.create(
        owner_id=owner.user_id, guest_key=owner.guest_key, strategy=settings.AGENT_STRATEGY
    )


def conversations_adopt(*, guest_key: str, user_id: int) -> int:
    """Give a guest's conversations to the user who just logged in; return how many."""
    if not guest_key:
        return 0
    return Conversation.objects.filter(owner__isnull=True, guest_key=guest_key).update(
        owner_id=user_id, guest_key=""
    )


def _runs_loaded(runs: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
    """Return ``runs`` with what rendering a run needs: user message and ordered steps."""
    return runs.select_related("user_message").prefetch_related(
        Prefetch("steps", queryset=AgentStep.objects.order_by("ordinal"))
    )


def conversation_runs(*, conversation_id: int) -> list[AgentRun]:
    """Return the conversation's runs, oldest first, with user message and steps loaded."""
    runs = AgentRun.objects.filter(conversation_id=conversation_id)
    return list(_runs_loaded(runs).order_by("started_at", "id"))


def runs_to_catch_up(*, conversation_id: int) -> list[AgentRun]:
    """Return the runs a newly connected page may have missed: running ones and the latest.

    Loaded like :func:`conversation_runs` (user message and ordered steps), oldest first.
    """
    latest = (
        AgentRun.objects.filter(conversation_id=conversation_id)
        .order_by("-started_at", "-id")
        .values_list("id", flat=True)
        .first()
    )
    if latest is None:
        return []
    return [
        run
        for run in conversation_runs(conversation_id=conversation_id)
        if run.pk == latest or run.status == RunStatus.RUNNING
    ]


def conversation_history(*, conversation_id: int, before_message_id: int) -> list[tuple[str, str]]:
    """Return ``(role, content)`` of the conversation's messages before the given one."""
    return list(
        Message.objects.filter(conversation_id=conversation_id, id__lt=before_message_id)
        .order_by("created_at", "id")
        .values_list("role", "content")
    )


def run_start(
    *,
    conversation_id: int,
    content: str,
    provider: str,
    model_name: str,
    started_at: datetime,
    runs_per_minute: int | None = None,
) -> AgentRun:
    """Store the user's message and a new running run for it; return the run.

    Raises :class:`RunAlreadyGoing` if the conversation has a running run already, and
    :class:`RateLimited` if ``runs_per_minute`` is set and the conversation's owner (the
    user, or the guest's browser) has started that many runs, in any of their
    conversations, in the minute before ``started_at``. Nothing is stored then.
    """
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        runs_interrupt_stale(conversation_id=conversation_id, now=started_at)
        if conversation.runs.filter(status=RunStatus.RUNNING).exists():
            raise RunAlreadyGoing(conversation_id)
        if runs_per_minute is not None:
            _check_rate(conversation, runs_per_minute, started_at)
        if not conversation.title:
            conversation.title = _title(content)
        conversation.save(update_fields=["title", "updated_at"])
        message = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=content
        )
        native = conversation.strategy == Strategy.TOOL_CALLING
        return AgentRun.objects.create(
            conversation=conversation,
            user_message=message,
            strategy=conversation.strategy,
            tool_choice=conversation.tool_choice if native else "",
            parallel_tool_calls=conversation.parallel_tool_calls if native else None,
            provider=provider,
            model_name=model_name,
            started_at=started_at,
            heartbeat_at=started_at,
        )


class RateLimited(Exception):
    """The owner started too many runs lately; ``retry_after_s`` says when one is free."""

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(f"{limit} runs per minute; retry after {retry_after_s} s")
        self.limit = limit
        self.retry_after_s = retry_after_s


RATE_WINDOW = timedelta(minutes=1)


def _check_rate(conversation: Conversation, limit: int, now: datetime) -> None:
    """Raise :class:`RateLimited` if the conversation's owner is at ``limit`` runs."""
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


def conversation_started(*, conversation_id: int) -> bool:
    """Return True once the conversation has a message (its strategy is then fixed)."""
    return Message.objects.filter(conversation_id=conversation_id).exists()


class ConversationStarted(Exception):
    """The conversation has messages already; its strategy can no longer change."""


def conversation_configure(
    *,
    owner: Owner,
    conversation_id: int,
    strategy: str,
    tool_choice: str,
    parallel_tool_calls: bool,
) -> Conversation | None:
    """Set how a conversation's runs ask for tools; return it, or None if not the owner's.

    Only a conversation with no messages yet can change, so every run of a conversation
    uses one strategy (compare strategies with a new chat each). Values are stored as
    given: the caller validates them (:class:`chat.forms.StrategyForm`).
    Raises :class:`ConversationStarted` once it has messages.
    """
    with transaction.atomic():
        conversation = conversation_get(owner=owner, conversation_id=conversation_id)
        if conversation is None:
            return None
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if conversation_started(conversation_id=conversation.pk):
            raise ConversationStarted(conversation_id)
        conversation.strategy = strategy
        conversation.tool_choice = tool_choice
        conversation.parallel_tool_calls = parallel_tool_calls
        conversation.save(update_fields=["strategy", "tool_choice", "parallel_tool_calls"])
        return conversation


def parse_error_q() -> Q:
    """Return a filter for tool-call steps that never ran (their output did not parse)."""
    query = Q()
    for prefix in PARSE_ERROR_PREFIXES:
        query |= Q(error__startswith=prefix)
    return query


def _count_tool_calls(run: AgentRun) -> None:
    """Set the run's tool call, tool error and format error counts (not saved)."""
    unparsed = parse_error_q()
    counts = run.steps.filter(kind=StepKind.TOOL_CALL).aggregate(
        calls=Count("pk", filter=~unparsed),
        # A call the run's end closed (no result) did not fail: it never answered.
        errors=Count("pk", filter=Q(status=StepStatus.ERROR) & ~unparsed & ~Q(result="")),
        format_errors=Count("pk", filter=unparsed),
    )
    run.tool_call_count = counts["calls"]
    run.tool_error_count = counts["errors"]
    run.format_error_count = counts["format_errors"]


def run_heartbeat(*, run_id: int, at: datetime) -> None:
    """Record that the process running ``run_id`` is alive at ``at``."""
    AgentRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(heartbeat_at=at)


def runs_interrupt_stale(*, now: datetime, conversation_id: int | None = None) -> list[AgentRun]:
    """Mark running runs whose heartbeat is older than ``AGENT_STALE_AFTER_S`` interrupted.

    Their process died (a crash, a kill -9, a restart): the run can never finish, so it
    ends as ``interrupted`` with its steps kept, and steps left running are closed as
    errors. Works across processes, as it needs only the database. Returns those runs,
    loaded like :func:`conversation_runs`.
    """
    cutoff = now - timedelta(seconds=settings.AGENT_STALE_AFTER_S)
    # A live process acts on a stop request at its next heartbeat; a run stopped three
    # heartbeats ago with no beat since has no process, whatever the stale cut-off says.
    stop_cutoff = now - timedelta(seconds=3 * settings.AGENT_HEARTBEAT_S)
    stale = AgentRun.objects.filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff)
        | Q(cancel_requested_at__lt=stop_cutoff, heartbeat_at__lt=F("cancel_requested_at"))
    )
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
            run.steps.filter(status=StepStatus.RUNNING).update(
                status=StepStatus.ERROR, error=INTERRUPTED_STEP, finished_at=since
            )
            # The loop's count of turns died with the process; the stored turns did not.
            turns = run.steps.aggregate(n=Max("iteration"))
            run.iterations = turns["n"] or 0
            _count_tool_calls(run)
            run.save()
            interrupted.append(run)
    # Loaded for rendering (the page is sent the whole run again: its steps were closed).
    ids = [run.pk for run in interrupted]
    return list(_runs_loaded(AgentRun.objects.filter(pk__in=ids)).order_by("started_at", "id"))


def run_request_cancel(*, conversation_id: int, at: datetime) -> AgentRun | None:
    """Ask for the conversation's running run to stop; return it, or None if none runs.

    Only records the request (``cancel_requested_at``); the process running the run
    cancels its task (:func:`chat.runs.cancel_local`, or its heartbeat notices).
    """
    with transaction.atomic():
        run = (
            AgentRun.objects.select_for_update()
            .filter(conversation_id=conversation_id, status=RunStatus.RUNNING)
            .first()
        )
        if run is None:
            return None
        if run.cancel_requested_at is None:
            run.cancel_requested_at = at
            run.save(update_fields=["cancel_requested_at"])
        return run


def run_cancel_requested(*, run_id: int) -> bool:
    """Return True if someone asked for the run to stop."""
    return AgentRun.objects.filter(pk=run_id, cancel_requested_at__isnull=False).exists()


def run_get(*, run_id: int) -> AgentRun:
    """Return the run with its conversation and user message loaded."""
    return AgentRun.objects.select_related("conversation", "user_message").get(pk=run_id)


def run_finish(
    *,
    run_id: int,
    status: str,
    output: str,
    error: str,
    iterations: int,
    usage: dict[str, int],
    finished_at: datetime,
) -> AgentRun:
    """Store how the run ended, close any step still running, add the assistant message.

    A run that did not succeed comes back loaded like :func:`conversation_runs`.
    """
    with transaction.atomic():
        run = AgentRun.objects.select_for_update().get(pk=run_id)
        if run.status in ENDED_FOR_GOOD:
            # Recorded already (a stop that came as the run finished): the first end
            # stands. An interrupted run may still be finished by a slow, live process.
            return _runs_loaded(AgentRun.objects.filter(pk=run_id)).get()
        run.status = status
        run.output = output
        run.error = error
        run.iterations = iterations
        run.finished_at = finished_at
        run.duration_ms = max(0, int((finished_at - run.started_at).total_seconds() * 1000))
        run.input_tokens = usage.get("input_tokens")
        run.output_tokens = usage.get("output_tokens")
        run.total_tokens = usage.get("total_tokens")
        # Steps still going are closed with a short reason; the run's line says the rest.
        closed = CANCELLED_STEP if status == RunStatus.CANCELLED else error
        run.steps.filter(status=StepStatus.RUNNING).update(
            status=StepStatus.ERROR, error=closed or f"run ended: {status}", finished_at=finished_at
        )
        _count_tool_calls(run)
        run.save()
        if output:
            Message.objects.create(
                conversation_id=run.conversation_id,
                role=Message.Role.ASSISTANT,
                content=output,
                run=run,
            )
        Conversation.objects.filter(pk=run.conversation_id).update(updated_at=finished_at)
    if status != RunStatus.SUCCEEDED:
        # The page is sent the whole run again (steps it closed): load what that needs.
        return _runs_loaded(AgentRun.objects.filter(pk=run_id)).get()
    return run


def step_start(
    *,
    run_id: int,
    kind: StepKind,
    iteration: int,
    started_at: datetime,
    tool_name: str = "",
    tool_call_id: str = "",
    arguments: Any = None,
    text: str = "",
) -> AgentStep:
    """Insert a running step with the next ordinal of its run; return it."""
    with transaction.atomic():
        # Lock the run row so concurrent writers cannot take the same ordinal.
        run = AgentRun.objects.select_for_update().get(pk=run_id)
        last = AgentStep.objects.filter(run_id=run_id).aggregate(n=Max("ordinal"))["n"] or 0
        return AgentStep.objects.create(
            run=run,  # kept on the step, so rendering it reads the run's strategy freely
            ordinal=last + 1,
            iteration=iteration,
            kind=kind,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            arguments=arguments,
            text=text,
            started_at=started_at,
        )


def step_finish(*, step_id: int, finished_at: datetime, **fields: Any) -> AgentStep:
    """Update a step with its outcome (``status``, ``result``, ``text``, ...); return it."""
    step = AgentStep.objects.select_related("run").get(pk=step_id)
    for name, value in fields.items():
        setattr(step, name, value)
    step.finished_at = finished_at
    if "duration_ms" not in fields:
        step.duration_ms = max(0, int((finished_at - step.started_at).total_seconds() * 1000))
    step.save()
    return step


def step_save_text(*, step_id: int, text: str) -> None:
    """Save a streaming model turn's text so far."""
    AgentStep.objects.filter(pk=step_id).update(text=text)


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
                conversation.title = _title(first.content)
                conversation.save(update_fields=["title"])
    return count
