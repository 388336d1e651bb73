"""Outcomes are fields: ``error_type`` and ``ToolMessage.status``'s words, old rows too."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps
from django.utils import timezone

from agents.model_turn import MODEL_TIMED_OUT
from chat.models import AgentRun, AgentStep, Conversation, Message

pytestmark = pytest.mark.django_db

migration = import_module("chat.migrations.0004_step_outcomes")


def _run(strategy: str) -> AgentRun:
    conversation = Conversation.objects.create()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    return AgentRun.objects.create(conversation=conversation, user_message=question,
                                   strategy=strategy, provider="demo", model_name="m",
                                   started_at=timezone.now())  # fmt: skip


def test_the_migration_fills_error_type_from_stored_errors_and_renames_ok():
    run = _run("react")
    stored = {
        "OutputParserException: Invalid format: missing 'Action:'": "OutputParserException",
        "InvalidToolCall: Expecting value": "InvalidToolCall",
        "UnknownTool: teleport": "UnknownTool",
        "TimeoutError": "TimeoutError",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error": "ValidationError",
        "Cancelled before this step finished.": "",
        "The server stopped before this step finished.": "",
        "": "",
    }
    for ordinal, error in enumerate(stored, start=1):
        AgentStep.objects.create(run=run, ordinal=ordinal, iteration=1, kind="tool_call",
                                 status="error" if error else "ok", error=error,
                                 started_at=timezone.now())  # fmt: skip

    migration.fill_error_types(apps, None)
    migration.ok_to_success(apps, None)

    steps = list(AgentStep.objects.order_by("ordinal"))
    assert {s.error: s.error_type for s in steps} == stored
    assert [s.is_format_error for s in steps[:3]] == [True, True, False]
    assert steps[-1].status == "success"


def test_the_migration_gives_a_model_turn_that_timed_out_the_type_new_ones_get():
    # The runtime stores a model time-out as a sentence (MODEL_TIMED_OUT), not
    # "TimeoutError: ...", and gives the step the error_type TimeoutError.
    run = _run("tool_calling")
    timed_out = MODEL_TIMED_OUT.format(seconds=120)
    AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="model_turn", status="error",
                             error=timed_out, started_at=timezone.now())  # fmt: skip

    migration.fill_error_types(apps, None)

    assert AgentStep.objects.get().error_type == "TimeoutError"
