"""A run's end (``chat.store.run_finish``): its counts, and the run it returns loaded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chat import fragments, store
from chat.models import AgentRun, AgentStep, Conversation, RunStatus, StepStatus
from chat.store.rows import count_tool_calls
from tests.chat.test_fragments import no_queries

pytestmark = pytest.mark.django_db


def _run_with_every_kind_of_call() -> AgentRun:
    conversation = Conversation.objects.create()
    started = timezone.now()
    run = store.run_start(conversation_id=conversation.pk, content="q", started_at=started)
    kinds = [  # (status, error_type, result)
        (StepStatus.SUCCESS, "", '{"ok": true}'),
        (StepStatus.ERROR, "TimeoutError", "Error: tool did not finish"),
        (StepStatus.ERROR, "OutputParserException", "Invalid format"),
        (StepStatus.ERROR, "InvalidToolCall", ""),
        (StepStatus.RUNNING, "", ""),  # the end closes it: unfinished, not failed
    ]
    store.step_start(run_id=run.pk, kind="model_turn", iteration=1, started_at=started)
    for status, error_type, result in kinds:
        step = store.step_start(run_id=run.pk, kind="tool_call", iteration=1,
                                started_at=started, tool_name="t")  # fmt: skip
        if status != StepStatus.RUNNING:
            AgentStep.objects.filter(pk=step.pk).update(
                status=status, error_type=error_type, result=result,
                finished_at=started + timedelta(milliseconds=5),
            )  # fmt: skip
    return run


def test_the_end_counts_calls_errors_and_format_errors_as_the_query_does():
    run = _run_with_every_kind_of_call()
    ended = store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED, output="done",
                             error="", iterations=1, usage={"input_tokens": 3},
                             finished_at=timezone.now())  # fmt: skip
    counted = AgentRun.objects.get(pk=run.pk)
    count_tool_calls(counted)  # the query
    assert (ended.tool_call_count, ended.tool_error_count, ended.format_error_count) == (
        counted.tool_call_count, counted.tool_error_count, counted.format_error_count,
    ) == (3, 1, 2)  # fmt: skip
    stored = AgentRun.objects.get(pk=run.pk)
    assert (stored.tool_call_count, stored.tool_error_count, stored.format_error_count) == (
        3, 1, 2,
    )  # fmt: skip


def test_the_ended_run_comes_back_with_its_steps_closed_and_renders_without_a_query():
    run = _run_with_every_kind_of_call()
    ended = store.run_finish(run_id=run.pk, status=RunStatus.CANCELLED, output="", error="",
                             iterations=1, usage={}, finished_at=timezone.now())  # fmt: skip
    with no_queries():
        html = fragments.run_ended(ended)
        steps = list(ended.steps.all())
    assert [step.ordinal for step in steps] == [1, 2, 3, 4, 5, 6]
    assert steps[-1].status == StepStatus.ERROR and steps[-1].finished_at is not None
    assert AgentStep.objects.get(pk=steps[-1].pk).status == StepStatus.ERROR
    assert f'id="run-{run.pk}"' in html and "Cancelled before this step finished." in html
    assert ended.conversation_usage is not None


def test_the_ended_runs_steps_are_a_queryset_as_a_prefetch_leaves_them():
    run = _run_with_every_kind_of_call()
    ended = store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED, output="done", error="",
                             iterations=1, usage={}, finished_at=timezone.now())  # fmt: skip
    with no_queries():
        assert len(ended.steps.all()) == 6 and ended.steps.all()[0].ordinal == 1
    assert ended.steps.filter(kind="model_turn").get().ordinal == 1  # a query, as after a prefetch
