"""What the store's modules share: runs loaded for rendering and for exports, a run's
counted steps, and values every database can store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from django.db import connection
from django.db.models import Count, F, Model, Prefetch, Q, QuerySet

from agents.approvals import REFUSAL_TYPES
from agents.events import FORMAT_ERROR_TYPES
from chat.models import AgentRun, AgentStep, ApprovalOutcome, StepKind, StepStatus


def runs_loaded(runs: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
    """Return ``runs`` with all that rendering a run reads (``chat/_run.html``).

    The conversation (its title and strategy), the user message, the owner's feedback
    and the steps in order are fetched with the runs, so a template reads no row lazily:
    a test renders every fragment with database access forbidden
    (tests/chat/test_fragments.py).
    """
    return runs.select_related("conversation", "user_message", "feedback").prefetch_related(
        # The prefetch sets each step's ``run`` to its run: no join needed for it.
        # and each tool call's approval, if it was held (a join, not a query per step).
        Prefetch("steps", queryset=AgentStep.objects.select_related("approval").order_by("ordinal"))
    )


RUNS_PER_CHUNK = 100


def runs_in_chunks(runs: QuerySet[AgentRun], *, chunk: int = RUNS_PER_CHUNK) -> Iterator[AgentRun]:
    """Yield ``runs`` in id order, each loaded whole for an export.

    What :func:`runs_loaded` loads (conversation, user message, feedback, the steps in
    order with their approvals), plus the conversation's owner and the run's snapshot
    (one query per chunk for the distinct snapshots, which runs share). Ids are read
    through a server-side cursor and runs ``chunk`` at a time, so memory holds one chunk
    whatever the size of ``runs``.
    """
    ids = runs.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=2000)
    while batch := list(islice(ids, chunk)):
        loaded = runs_loaded(AgentRun.objects.filter(pk__in=batch))
        yield from (
            loaded.select_related("conversation__owner").prefetch_related("snapshot").order_by("pk")
        )


def runs_with_ids(*, run_ids: Iterable[int]) -> QuerySet[AgentRun]:
    """Return the runs whose ids are ``run_ids`` (unevaluated, for :func:`runs_in_chunks`)."""
    return AgentRun.objects.filter(pk__in=list(run_ids))


def format_error_q() -> Q:
    """Return a filter for tool-call steps that never ran (their output did not parse)."""
    return Q(error_type__in=FORMAT_ERROR_TYPES)


def _failed(step: AgentStep) -> bool:
    """Return True for a tool call that ran and failed (see :func:`count_tool_calls`)."""
    return (
        step.status == StepStatus.ERROR and step.result != ""
        and step.error_type not in REFUSAL_TYPES
    )  # fmt: skip


def count_tool_calls_so_far(run: AgentRun) -> int:
    """Set the counts of a run not ended from its steps so far (one query), as
    :func:`count_tool_calls` sets them at its end; return how many of its calls wait for a
    person's decision (a decided call's step stays pending until the run resumes: its
    approval says)."""
    steps = list(
        run.steps.only("run", "kind", "status", "error_type", "result")
        .annotate(approval_outcome=F("approval__outcome"))
    )  # fmt: skip
    count_tool_calls(run, steps)
    return sum(1 for step in steps if step.approval_outcome == ApprovalOutcome.PENDING)


def count_tool_calls(run: AgentRun, steps: list[AgentStep] | None = None) -> None:
    """Set the run's tool call, tool error and format error counts (not saved).

    From ``steps`` (all the run's steps, as stored) when given, else with one query: the
    same counts either way (tests/chat/test_step_outcomes.py).
    """
    # A call the run's end closed (no result) did not fail: it never answered; nor did one
    # a policy or a person refused (agents.approvals.REFUSAL_TYPES): it never ran.
    if steps is not None:
        calls = [step for step in steps if step.kind == StepKind.TOOL_CALL]
        parsed = [step for step in calls if step.error_type not in FORMAT_ERROR_TYPES]
        run.tool_call_count = len(parsed)
        run.tool_error_count = sum(1 for step in parsed if _failed(step))
        run.format_error_count = len(calls) - len(parsed)
        return
    unparsed = format_error_q()
    failed = Q(status=StepStatus.ERROR) & ~Q(result="") & ~Q(error_type__in=REFUSAL_TYPES)
    counts = run.steps.filter(kind=StepKind.TOOL_CALL).aggregate(
        calls=Count("pk", filter=~unparsed),
        errors=Count("pk", filter=failed & ~unparsed),
        format_errors=Count("pk", filter=unparsed),
    )
    run.tool_call_count = counts["calls"]
    run.tool_error_count = counts["errors"]
    run.format_error_count = counts["format_errors"]


def storable(value: Any) -> Any:
    """Return ``value`` with every NUL character replaced by U+FFFD, at any depth.

    Model and tool output is stored as it came, but PostgreSQL refuses NUL in text and
    in JSON (SQLite takes it): strings, and the keys and values of JSON data, are cleaned
    so that both store the same thing and a run never fails on it.
    """
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


def fitted(model: type[Model], **values: Any) -> dict[str, Any]:
    """Return ``values`` for ``model``'s fields, :func:`storable` and cut to each column's
    ``max_length`` (a model's tool name or call id can be longer; PostgreSQL refuses it)."""
    fitted_values = {}
    for name, value in values.items():
        value = storable(value)
        max_length = model._meta.get_field(name).max_length
        if max_length and isinstance(value, str):
            value = value[:max_length]
        fitted_values[name] = value
    return fitted_values


def database_answers() -> None:
    """Run ``SELECT 1`` on the default database (the health check, ``chat/health.py``);
    raise whatever the driver raises."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
