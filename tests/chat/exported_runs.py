"""Runs stored with every field an export writes, for the file-download tests."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from chat.models import (
    AgentRun,
    AgentSnapshot,
    AgentStep,
    Approval,
    Conversation,
    Feedback,
    Message,
)
from chat.traces.redaction import Redactor


def stored_run(
    conversation: Conversation | None = None,
    *,
    text: str = "苏州",
    steps: bool = True,
    status: str = "succeeded",
    result: str | None = None,
) -> AgentRun:
    """Store a run with a model turn, a tool call held for approval and decided, an
    answer turn, a snapshot, a cost and feedback; ``text`` goes into every field a person,
    a model or a tool wrote (question, answer, error, arguments, result, observation,
    artifact, model text, reasoning, tool name, reason, who decided, comment, who gave
    it); machine values (ids, model, endpoint, exception class) do not hold it."""
    conversation = conversation or Conversation.objects.create(guest_key="guest-key")
    now = timezone.now()
    message = Message.objects.create(
        conversation=conversation, role="user", content=f"Weather in {text}?"
    )
    snapshot, _ = AgentSnapshot.objects.get_or_create(digest="a" * 64, defaults={"content": {}})
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        tool_choice="auto", parallel_tool_calls=True, agent_key="travel", snapshot=snapshot,
        provider="openai", model_name="gpt-4o-mini", endpoint="api.openai.com",
        status=status, started_at=now, finished_at=now + timedelta(seconds=2),
        duration_ms=2000, iterations=2, tool_call_count=1, output=f"It is sunny in {text}.",
        error=f"no error in {text}", input_tokens=100, output_tokens=20, total_tokens=120,
        cost=Decimal("0.0000618"), cost_currency="USD",
    )  # fmt: skip
    if not steps:
        return run
    AgentStep.objects.create(
        run=run, ordinal=1, iteration=1, kind="model_turn", status="success", started_at=now,
        finished_at=now, duration_ms=700, first_token_ms=120, text=f"Let me check {text}.",
        reasoning=f"I think about {text}.", input_tokens=60, output_tokens=10, total_tokens=70,
    )  # fmt: skip
    call = AgentStep.objects.create(
        run=run, ordinal=2, iteration=1, kind="tool_call", status="success", started_at=now,
        finished_at=now, duration_ms=15, tool_name=f"weather_{text}", tool_call_id="call_w1",
        arguments={"town": text, "days": [1, text]},
        result=result if result is not None else f'{{"town": "{text}", "high_c": 8}}',
        observation=f"sent {text}", artifact={"source": text}, error=f"warning {text}",
        error_type="UserWarning",
    )  # fmt: skip
    Approval.objects.create(
        run=run, step=call, tool_name=call.tool_name, tool_call_id=call.tool_call_id,
        arguments=call.arguments, edited_arguments={"town": f"{text}!"}, requested_at=now,
        outcome="approved", decided_by_name=f"boss-{text}", decided_at=now,
        reason=f"fine for {text}", always_allowed=True,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=3, iteration=2, kind="model_turn", status="success", started_at=now,
        finished_at=now, duration_ms=500, text=run.output, result=run.output,
        input_tokens=40, output_tokens=10, total_tokens=50,
    )  # fmt: skip
    Feedback.objects.create(
        run=run, rating="up", comment=f"good for {text}", given_by_name=f"fan-{text}",
        created_at=now, updated_at=now,
    )  # fmt: skip
    Message.objects.create(conversation=conversation, role="assistant", content="a", run=run)
    return run


def owned_by(username: str) -> Conversation:
    """Return a new conversation of a new user called ``username``."""
    return Conversation.objects.create(owner=User.objects.create_user(username))


class Marking(Redactor):
    """A redactor that replaces ``SECRET`` everywhere it is given a string, and counts."""

    enabled = True  # whatever the settings' policy says, this one changes text

    def __init__(self) -> None:
        self.calls = 0

    def text(self, value: str) -> str:
        self.calls += 1
        return value.replace("SECRET", "[REDACTED:test]")

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        return value
