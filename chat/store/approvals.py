"""Tool calls waiting for a person: held, decided, expired, and the runs they pause.

A paused run's state is its rows: the run (``waiting``), its steps (the held calls
``pending``) and one :class:`chat.models.Approval` per held call. Every change of state
is one conditional UPDATE, so two tabs, two processes or the expiry sweep racing for the
same approval or run change it once and the others are told (:class:`ApprovalRefused`),
and only one process resumes a run (:func:`run_claim_resume`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, QuerySet

from agents.approvals import Decision, Outcome
from agents.history import CallRecord, TurnRecord
from agents.timing import whole_ms
from chat.models import (
    AgentRun,
    AgentStep,
    Approval,
    ApprovalOutcome,
    RunStatus,
    StepStatus,
    ToolApprovalPolicy,
    ToolGrant,
)
from chat.store.conversations import full_ids, step_records
from chat.store.rows import fitted, runs_loaded

NEVER_RAN = "The run ended while this call waited for approval: it never ran."
NOT_A_HELD_CALL = "That step is not a tool call waiting for approval in this conversation."
ALREADY_DECIDED = "That tool call was already decided: {outcome}{by}{at}. Nothing was changed."


class ApprovalRefused(Exception):
    """A decision that cannot be taken; the message says why, for the person."""


def approval_request(
    *, run: AgentRun, step: AgentStep, arguments: Any, at: datetime, timeout_s: float
) -> Approval:
    """Store the approval a held call waits for (its step is inserted as ``pending``)."""
    expires = at + timedelta(seconds=timeout_s) if timeout_s else None
    approval = Approval.objects.create(
        run=run, step=step, requested_at=at, expires_at=expires,
        **fitted(Approval, tool_name=step.tool_name, tool_call_id=step.tool_call_id,
                 arguments=arguments),
    )  # fmt: skip
    step.approval = approval  # as select_related would set it: rendering reads it
    return approval


def run_pause(*, run_id: int, iterations: int, usage: dict[str, int], at: datetime) -> AgentRun:
    """Mark the run ``waiting`` since ``at`` (its loop has returned); return it loaded
    for rendering. Token counts so far are kept on it."""
    AgentRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(
        status=RunStatus.WAITING, paused_at=at, iterations=iterations,
        input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"),
        total_tokens=usage.get("total_tokens"),
    )  # fmt: skip
    return runs_loaded(AgentRun.objects.filter(pk=run_id)).get()


@dataclass(frozen=True)
class Decided:
    """A decision taken: the approval as stored, and whether its run has no call left
    waiting (it may be resumed)."""

    approval: Approval
    run_ready: bool


def approval_decide(
    *,
    conversation_id: int,
    step_id: int,
    outcome: Outcome,
    by: Any,
    at: datetime,
    edited_arguments: Any = None,
    reason: str = "",
    always: bool = False,
) -> Decided:
    """Store a person's decision on the held call of step ``step_id``.

    ``by`` is the deciding user (None for a guest owner; their name is kept beside the
    link); ``edited_arguments`` the arguments to run with (already checked against the
    tool's schema), None to run the call as asked; ``always`` also allows the tool for
    the rest of the conversation (:class:`chat.models.ToolGrant`). Who may decide is the
    caller's to check. Raises :class:`ApprovalRefused` for a step of another conversation
    or not held, and for a call decided already (by a person, an expiry or a stop), with
    who and when; nothing changes then.
    """
    approval = (
        Approval.objects.select_related("step", "decided_by")
        .filter(step_id=step_id, run__conversation_id=conversation_id)
        .first()
    )
    if approval is None:
        raise ApprovalRefused(NOT_A_HELD_CALL)
    user = by if getattr(by, "is_authenticated", False) else None
    name = user.get_username() if user is not None else "the chat's guest"
    with transaction.atomic():
        changed = Approval.objects.filter(pk=approval.pk, outcome=ApprovalOutcome.PENDING).update(
            outcome=outcome.value, decided_by=user, decided_at=at,
            **fitted(Approval, decided_by_name=name, reason=reason),
            edited_arguments=edited_arguments, always_allowed=always,
        )  # fmt: skip
        if not changed:
            approval.refresh_from_db()
            raise ApprovalRefused(_already(approval))
        if always:
            ToolGrant.objects.get_or_create(
                conversation_id=conversation_id, tool_name=approval.tool_name,
                defaults={"granted_by": user, "granted_at": at},
            )  # fmt: skip
    approval.refresh_from_db()
    return Decided(approval, run_ready=not _pending(approval.run_id).exists())


def _already(approval: Approval) -> str:
    by = f" by {approval.decided_by_name}" if approval.decided_by_name else ""
    at = f" at {approval.decided_at:%Y-%m-%d %H:%M:%S} UTC" if approval.decided_at else ""
    return ALREADY_DECIDED.format(outcome=approval.get_outcome_display().lower(), by=by, at=at)


def _pending(run_id: int) -> QuerySet[Approval]:
    return Approval.objects.filter(run_id=run_id, outcome=ApprovalOutcome.PENDING)


def approvals_close(*, run_id: int, at: datetime) -> None:
    """Mark the run's approvals still pending ``cancelled``: it ended (stopped, failed,
    interrupted) while calls waited, so none of them will run, and no decision on them
    may be taken any more."""
    _pending(run_id).update(outcome=ApprovalOutcome.CANCELLED, decided_at=at)


def approvals_expire(*, now: datetime) -> int:
    """Mark every pending approval past its ``expires_at`` expired (the model reads it
    as a denial once its run resumes, :func:`runs_ready`); return how many."""
    due = Approval.objects.filter(outcome=ApprovalOutcome.PENDING, expires_at__lte=now)
    return due.update(outcome=ApprovalOutcome.EXPIRED, decided_at=now)


def _none_pending() -> Exists:
    """A filter for runs with no approval left pending: ``~Exists`` of one."""
    return ~Exists(Approval.objects.filter(run_id=OuterRef("pk"), outcome=ApprovalOutcome.PENDING))


def runs_ready() -> list[int]:
    """Return the ids of waiting runs with no call left waiting (decided, not resumed:
    decided in the admin, expired, or their resuming process died), oldest first."""
    runs = AgentRun.objects.filter(status=RunStatus.WAITING).filter(_none_pending())
    return list(runs.order_by("paused_at", "id").values_list("pk", flat=True))


def run_claim_resume(*, run_id: int, at: datetime) -> int | None:
    """Take a waiting run with every call decided back to ``running`` for this process
    to resume; return its conversation's id, or None if another did first (or a call
    still waits, or it was stopped). The time it waited is added to ``waited_ms``."""
    run = AgentRun.objects.filter(pk=run_id).values("paused_at", "conversation_id").first()
    if run is None or run["paused_at"] is None:
        return None
    waited = max(0, whole_ms(at - run["paused_at"]))
    waiting = AgentRun.objects.filter(
        pk=run_id, status=RunStatus.WAITING, paused_at=run["paused_at"]
    ).filter(_none_pending())
    claimed = waiting.update(
        status=RunStatus.RUNNING, heartbeat_at=at, paused_at=None,
        waited_ms=F("waited_ms") + waited,
    )  # fmt: skip
    return run["conversation_id"] if claimed else None


@dataclass(frozen=True)
class ResumeState:
    """What resuming a run needs from its rows: its model turns and tool calls as
    history records, the decisions on its held calls by ``tool_call_id``, and the
    seconds of its wall clock spent outside waits."""

    turns: list[TurnRecord]
    calls: list[CallRecord]
    decisions: dict[str, Decision]
    spent_s: float


def run_resume_state(*, run: AgentRun, at: datetime, timeout_s: float) -> ResumeState:
    """Return the stored state of a claimed run (see :class:`ResumeState`).

    ``timeout_s`` is the approval time-out an expired call is said to have waited.
    """
    turns_by_run, calls_by_run = step_records(AgentStep.objects.filter(run_id=run.pk))
    turns = turns_by_run.get(run.pk, [])
    calls = full_ids(calls_by_run.get(run.pk, []), turns)
    limit = AgentStep._meta.get_field("tool_call_id").max_length
    by_step = {(c.iteration, c.tool_call_id[:limit]): c.tool_call_id for c in calls}
    decisions: dict[str, Decision] = {}
    held = Approval.objects.filter(run_id=run.pk, step__status=StepStatus.PENDING)
    for approval in held.select_related("step"):
        call_id = by_step.get((approval.step.iteration, approval.step.tool_call_id))
        if call_id is None:
            continue
        decisions[call_id] = Decision(
            outcome=Outcome(approval.outcome), args=approval.edited_arguments,
            reason=approval.reason, timeout_s=timeout_s,
        )  # fmt: skip
    spent = (at - run.started_at).total_seconds() - run.waited_ms / 1000
    return ResumeState(turns=turns, calls=calls, decisions=decisions, spent_s=max(0.0, spent))


def run_stop_waiting(
    *, conversation_id: int, at: datetime, run_id: int | None = None
) -> AgentRun | None:
    """Stop the conversation's waiting run (only if it is ``run_id``, when given): its
    pending approvals become ``cancelled`` and it is taken back to ``running`` (with its
    stop request) for the caller to record its cancelled end. Return it, or None when
    none waits (or another took it first)."""
    with transaction.atomic():
        waiting = AgentRun.objects.filter(conversation_id=conversation_id, status=RunStatus.WAITING)
        if run_id is not None:
            waiting = waiting.filter(pk=run_id)
        run = waiting.select_for_update().first()
        if run is None:
            return None
        approvals_close(run_id=run.pk, at=at)
        run.status, run.heartbeat_at = RunStatus.RUNNING, at
        run.cancel_requested_at = run.cancel_requested_at or at
        if run.paused_at is not None:
            run.waited_ms += max(0, whole_ms(at - run.paused_at))
            run.paused_at = None
        run.save(update_fields=["status", "heartbeat_at", "cancel_requested_at", "waited_ms",
                                "paused_at"])  # fmt: skip
        return run


def step_of_conversation(*, conversation_id: int, step_id: int) -> AgentStep | None:
    """Return step ``step_id`` (with its run) if it belongs to a run of the conversation,
    else None."""
    steps = AgentStep.objects.select_related("run")
    return steps.filter(pk=step_id, run__conversation_id=conversation_id).first()


def step_for_card(*, step_id: int) -> AgentStep:
    """Return a step loaded for its card (its run and approval)."""
    return AgentStep.objects.select_related("run", "approval").get(pk=step_id)


def run_steps_for_resume(*, run_id: int) -> list[AgentStep]:
    """Return the run's steps in order with their approvals, for its resumed recorder."""
    return list(
        AgentStep.objects.filter(run_id=run_id).select_related("approval").order_by("ordinal")
    )


def tool_policies() -> dict[str, str]:
    """Return the policies staff set in the admin, by tool name."""
    return dict(ToolApprovalPolicy.objects.values_list("tool_name", "policy"))


def conversation_grants(*, conversation_id: int) -> set[str]:
    """Return the tools "always allowed" in the conversation."""
    return set(
        ToolGrant.objects.filter(conversation_id=conversation_id).values_list(
            "tool_name", flat=True
        )
    )
