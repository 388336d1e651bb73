"""Export runs as JSONL: one run per line, its steps, approvals and feedback nested.

The shape is versioned (:data:`SCHEMA`, the ``schema`` key of every line), described in
docs/jsonl-format.md and checked by the JSON Schema docs/jsonl-schema.json. Additions keep
the version; removing a field or changing its meaning makes a new one. Runs come from
:func:`chat.store.runs_in_chunks`, a chunk at a time, so memory stays flat.

Every string a person, a model or a tool wrote passes the redactor: ``redactor.text`` on
text (questions, answers, results, observations, model text, reasoning, errors, tool
names, reasons, comments, usernames), ``redactor.value`` on JSON values (arguments,
artifacts). Machine values are written as stored, as the CSV's are
(``chat.export``): ids (``tool_call_id`` included), times, numbers, enumerations, the
snapshot digest, and what the configuration names (agent, provider, model, endpoint host,
``tool_choice``, an exception's class), so a detector cannot break the pairing of a call
with its result or the format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import QuerySet

from agents.tool_output import json_safe
from chat import store
from chat.export import iso_utc as _iso
from chat.export import owner_label
from chat.models import AgentRun, AgentStep, Approval
from chat.store.feedback import feedback_of
from chat.traces.redaction import Redactor

SCHEMA = "agent-chat.run/1"
CONTENT_TYPE = "application/jsonl; charset=utf-8"  # JSONL and OTLP JSON files alike


def _usage(row: AgentRun | AgentStep) -> dict[str, int | None]:
    return {
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "total_tokens": row.total_tokens,
    }


def _approval(step: AgentStep, redactor: Redactor) -> dict[str, Any] | None:
    """Return a held call's approval (how it ended, when, by whom, why), or None."""
    try:
        approval: Approval = step.approval  # type: ignore[attr-defined]
    except ObjectDoesNotExist:
        return None
    return {
        "outcome": approval.outcome,
        "requested_at": _iso(approval.requested_at),
        "expires_at": _iso(approval.expires_at),
        "decided_at": _iso(approval.decided_at),
        "decided_by": redactor.text(approval.decided_by_name),
        "arguments": redactor.value(approval.arguments),
        "edited_arguments": redactor.value(approval.edited_arguments),
        "reason": redactor.text(approval.reason),
        "always_allowed": approval.always_allowed,
    }


def _observation(step: AgentStep, redactor: Redactor) -> str | None:
    return None if step.observation is None else redactor.text(step.observation)


def step_record(step: AgentStep, *, redactor: Redactor) -> dict[str, Any]:
    """Return one step as the JSONL schema's ``steps`` item (docs/jsonl-format.md)."""
    return {
        "ordinal": step.ordinal,
        "iteration": step.iteration,
        "kind": step.kind,
        "status": step.status,
        "tool_name": redactor.text(step.tool_name),
        "tool_call_id": step.tool_call_id,
        "arguments": redactor.value(step.arguments),
        "result": redactor.text(step.result),
        "observation": _observation(step, redactor),
        "artifact": redactor.value(step.artifact),
        "text": redactor.text(step.text),
        "reasoning": redactor.text(step.reasoning),
        "error": redactor.text(step.error),
        "error_type": step.error_type,
        "started_at": _iso(step.started_at),
        "finished_at": _iso(step.finished_at),
        "duration_ms": step.duration_ms,
        "first_token_ms": step.first_token_ms,
        "usage": _usage(step),
        "approval": _approval(step, redactor),
    }


def _feedback(run: AgentRun, redactor: Redactor) -> dict[str, Any] | None:
    feedback = feedback_of(run)
    if feedback is None:
        return None
    return {
        "rating": feedback.rating,
        "comment": redactor.text(feedback.comment),
        "given_by": redactor.text(feedback.given_by_name),
        "created_at": _iso(feedback.created_at),
        "updated_at": _iso(feedback.updated_at),
    }


def _cost(run: AgentRun) -> dict[str, str] | None:
    """Return the run's cost as a plain decimal string (no float rounding), or None."""
    if run.cost is None:
        return None
    return {"amount": f"{run.cost.normalize():f}", "currency": run.cost_currency}


def run_record(run: AgentRun, *, redactor: Redactor) -> dict[str, Any]:
    """Return one run (loaded by :func:`chat.store.runs_in_chunks`) as a JSONL record."""
    return {
        "schema": SCHEMA,
        "run_id": run.pk,
        "conversation_id": run.conversation_id,
        "user": redactor.text(owner_label(run.conversation)),
        "question": redactor.text(run.user_message.content),
        "agent": run.agent_key,
        "agent_snapshot": run.snapshot.digest if run.snapshot is not None else None,
        "strategy": run.strategy,
        "tool_choice": run.tool_choice,
        "parallel_tool_calls": run.parallel_tool_calls,
        "provider": run.provider,
        "model": run.model_name,
        "endpoint": run.endpoint,
        "status": run.status,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_ms": run.duration_ms,
        "waited_ms": run.waited_ms,
        "iterations": run.iterations,
        "tool_call_count": run.tool_call_count,
        "tool_error_count": run.tool_error_count,
        "format_error_count": run.format_error_count,
        "usage": {**_usage(run), "estimated": run.usage_estimated},
        "cost": _cost(run),
        "output": redactor.text(run.output),
        "error": redactor.text(run.error),
        "feedback": _feedback(run, redactor),
        "branched_from": run.branched_from_id,
        "branch_kind": run.branch_kind or None,
        "model_key": run.model_key or None,
        "steps": [step_record(step, redactor=redactor) for step in run.steps.all()],
    }


def _line(record: dict[str, Any]) -> str:
    """Return ``record`` as one line of JSON (UTF-8 kept, line breaks escaped) with "\\n".

    A value JSON cannot hold (NaN in arguments a SQLite row kept) is written as text,
    so the line stays valid JSON.
    """
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(json_safe(record), ensure_ascii=False, allow_nan=False)
    return text + "\n"


def jsonl_lines(runs: QuerySet[AgentRun], *, redactor: Redactor) -> Iterator[str]:
    """Yield one JSON line (ending in ``"\\n"``) per run of ``runs``, in id order.

    Each line is :func:`run_record`'s object; an empty queryset yields nothing (an empty
    file). Memory holds one chunk of runs (:func:`chat.store.runs_in_chunks`) whatever the total.
    """
    for run in store.runs_in_chunks(runs):
        yield _line(run_record(run, redactor=redactor))
