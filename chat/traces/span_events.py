"""The events our spans and log records carry beyond the GenAI conventions' spans: a held
call's approval, and a person's feedback on an answer.

Feedback is the conventions' ``gen_ai.evaluation.result`` (open-telemetry
semantic-conventions-genai, ``gen-ai-events.md``), on the run's ``invoke_agent`` span in a
file and as an OTLP log record when given after the run was sent. The conventions have no
attribute for approvals yet (semantic-conventions-genai#95): they are ``agent_chat.approval``
events on the tool's span. docs/telemetry.md lists every attribute.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from opentelemetry.sdk.trace import Event

from agents.timing import whole_ms
from chat.export import iso_utc as _iso
from chat.models import Approval
from chat.traces.ids import ns

NS = "agent_chat."  # our namespace, for what the conventions have no name for
APPROVAL_EVENT = NS + "approval"
EVALUATION_EVENT = "gen_ai.evaluation.result"
FEEDBACK_EVALUATION = "user_feedback"
SCORES = {"up": 1.0, "down": 0.0}


def feedback_attributes(feedback: Any, *, capture_content: bool) -> dict[str, Any]:
    """Return the ``gen_ai.evaluation.result`` event's attributes for a Feedback row:
    ``user_feedback``, label ``up``/``down``, score 1/0, the comment as explanation
    only with ``capture_content``."""
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": FEEDBACK_EVALUATION,
        "gen_ai.evaluation.score.label": feedback.rating,
        "gen_ai.evaluation.score.value": SCORES.get(feedback.rating, 0.0),
        NS + "feedback.given_by": feedback.given_by_name,
        NS + "feedback.created_at": _iso(feedback.created_at),
    }
    if capture_content and feedback.comment:
        attributes["gen_ai.evaluation.explanation"] = feedback.comment
    return attributes


def withdrawal_attributes(*, given_by: str) -> dict[str, Any]:
    """Return the ``gen_ai.evaluation.result`` event's attributes for feedback that was
    withdrawn: ``user_feedback``, no score, ``agent_chat.feedback.withdrawn`` true (the
    conventions have no way to say so; the latest record is the verdict)."""
    return {
        "gen_ai.evaluation.name": FEEDBACK_EVALUATION,
        NS + "feedback.withdrawn": True,
        NS + "feedback.given_by": given_by,
    }


def approval_event(approval: Approval, *, edited_json: str | None) -> Event:
    """Return a held call's ``agent_chat.approval`` event (policy ``ask``): the outcome,
    who decided when and why, the wait (ms), and ``edited_json``, the edited arguments as
    JSON, when content is captured; timed at the decision (at the request while none)."""
    at = approval.decided_at or approval.requested_at
    attributes: dict[str, Any] = {
        NS + "approval.policy": "ask",
        NS + "approval.outcome": approval.outcome,
        NS + "approval.decided_by": approval.decided_by_name,
        NS + "approval.decided_at": _iso(approval.decided_at),
        NS + "approval.requested_at": _iso(approval.requested_at),
        NS + "approval.expires_at": _iso(approval.expires_at),
        NS + "approval.reason": approval.reason,
        NS + "approval.always_allowed": approval.always_allowed,
        NS + "approval.edited": approval.edited_arguments is not None,
        NS + "approval.wait_ms": _ms(approval.requested_at, approval.decided_at),
    }
    if edited_json is not None:
        attributes[NS + "approval.edited_arguments"] = edited_json
    return Event(APPROVAL_EVENT, attributes, ns(at))


def denied_by_policy_event(at_ns: int) -> Event:
    """Return the ``agent_chat.approval`` event of a call a ``deny`` policy refused."""
    attributes = {NS + "approval.policy": "deny", NS + "approval.outcome": "denied",
                  NS + "approval.decided_by": "policy"}  # fmt: skip
    return Event(APPROVAL_EVENT, attributes, at_ns)


def _ms(start: datetime, end: datetime | None) -> int | None:
    if end is None:
        return None
    return max(0, whole_ms(end - start))
