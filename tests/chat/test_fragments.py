"""Every fragment renders from what the store loaded, with database access forbidden.

Fragments are rendered in the same sync call that loaded their rows (chat/recorder.py,
chat/live.py, chat/consumers.py), so a relation a store function forgot to load would
cost a query per fragment per event there. These tests render each fragment from the
rows each store function returns while any query raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.template.loader import render_to_string
from django.utils import timezone

from chat import fragments, store
from chat.models import AgentRun, Conversation, RunStatus, StepKind, StepStatus
from tests.images import png_base64

pytestmark = pytest.mark.django_db


@contextlib.contextmanager
def no_queries() -> Iterator[None]:
    """Make any database query inside the block fail the test, naming the SQL."""

    def refuse(execute, sql, params, many, context):
        raise AssertionError(f"a query while rendering: {sql}")

    with connection.execute_wrapper(refuse):
        yield


def _start(conversation: Conversation, question: str = "Weather in Suzhou?") -> AgentRun:
    return store.run_start(conversation_id=conversation.pk, content=question, provider="demo",
                           model_name="demo-scripted", started_at=timezone.now())  # fmt: skip


def _steps(run: AgentRun) -> list[str]:
    """Record a model turn, a tool call and a format error; return their fragments."""
    now = timezone.now()
    html = []
    turn = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=1, started_at=now)
    with no_queries():
        html.append(fragments.step_appended(turn))
    with no_queries():
        html.append(fragments.text_delta(turn.pk, "Thought", 0, target="reasoning"))
        html.append(fragments.reasoning_replaced(turn.pk, "Thought <b>"))
    turn = store.step_finish(step_id=turn.pk, finished_at=now, status=StepStatus.SUCCESS,
                             text="Thought: weather\nAction: weather_forecast",
                             reasoning="The user <b>asks</b>.")  # fmt: skip
    with no_queries():
        html.append(fragments.step_replaced(turn))
    assert "The user &lt;b&gt;asks&lt;/b&gt;." in html[-1] and "Thought &lt;b&gt;" in html[-2]
    for name, error_type, status in (
        ("weather_forecast", "", StepStatus.SUCCESS),
        ("weather_forecast", "OutputParserException", StepStatus.ERROR),
    ):
        call = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1,
                                started_at=now, tool_name=name, tool_call_id=f"call_{status}",
                                arguments={"town": "Suzhou"}, text="Action: x")  # fmt: skip
        with no_queries():
            html.append(fragments.step_appended(call))
        call = store.step_finish(step_id=call.pk, finished_at=now, status=status,
                                 result='{"high_c": 8}', error_type=error_type,
                                 error=f"{error_type}: bad" if error_type else "")  # fmt: skip
        with no_queries():
            html.append(fragments.step_replaced(call))
    return html


@pytest.mark.parametrize("strategy", ["tool_calling", "react"])
def test_a_run_renders_start_to_end_from_what_each_store_call_loaded(strategy):
    conversation = Conversation.objects.create(strategy=strategy)
    run = _start(conversation)
    with no_queries():
        started = fragments.run_started(run)
        resumed = fragments.run_resumed(run)
    assert f'id="run-{run.pk}"' in started
    assert 'data-status="running"' in resumed and 'hx-swap-oob="true"' in resumed
    shown = _steps(run)
    assert len(shown) == 8 and 'data-status="success"' in shown[-3]
    assert "format error" in shown[-1]

    for status in (RunStatus.FAILED, RunStatus.SUCCEEDED):
        ended = store.run_finish(run_id=run.pk, status=status, output="", error="x",
                                 iterations=1, usage={}, finished_at=timezone.now())  # fmt: skip
        with no_queries():
            assert f'id="run-{run.pk}-status"' in fragments.run_ended(ended)
        AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)


def test_catching_up_and_reloading_render_every_run_without_a_query():
    conversation = Conversation.objects.create()
    for question in ("first?", "second?"):
        run = _start(conversation, question)
        _steps(run)
        store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED, output="Sunny.", error="",
                         iterations=1, usage={}, finished_at=timezone.now())  # fmt: skip

    caught_up = store.runs_to_catch_up(conversation_id=conversation.pk)
    loaded = store.conversation_runs(conversation_id=conversation.pk)
    with no_queries():
        assert len([fragments.run_caught_up(run) for run in caught_up]) == 1
        for run in loaded:
            page = render_to_string("chat/_run.html", {"run": run, "steps": run.steps.all()})
            assert page.count('class="tool-card') == 2


def test_an_interrupted_run_renders_from_what_the_sweep_loaded(settings):
    settings.AGENT_STALE_AFTER_S = 60
    conversation = Conversation.objects.create()
    run = _start(conversation)
    _steps(run)
    long_ago = timezone.now() - timedelta(hours=1)
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=long_ago, started_at=long_ago)

    interrupted = store.runs_interrupt_stale(now=timezone.now())
    with no_queries():
        html = [fragments.run_ended(run) for run in interrupted]
    assert len(html) == 1 and 'data-status="interrupted"' in html[0]


def test_a_run_a_return_direct_tool_answered_renders_its_answer_without_a_query():
    conversation = Conversation.objects.create()
    run = _start(conversation)
    now = timezone.now()
    turn = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=1, started_at=now)
    store.step_finish(step_id=turn.pk, finished_at=now, status=StepStatus.SUCCESS, text="")
    call = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1, started_at=now,
                            tool_name="book_room", tool_call_id="call_1",
                            arguments={"town": "Suzhou"})  # fmt: skip
    store.step_finish(step_id=call.pk, finished_at=now, status=StepStatus.SUCCESS,
                      result="Booked <b>BK-42</b>")  # fmt: skip
    ended = store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED,
                             output="Booked <b>BK-42</b>", error="", iterations=1, usage={},
                             finished_at=timezone.now())  # fmt: skip
    with no_queries():
        html = fragments.run_ended(ended)
    assert f'id="run-{run.pk}-answer"' in html and 'data-tool="book_room"' in html
    assert "<b>BK-42</b>" not in html  # tool output is untrusted: sanitised Markdown


def test_a_card_with_an_image_and_an_artifact_renders_without_a_query():
    conversation = Conversation.objects.create()
    run = _start(conversation)
    now = timezone.now()
    image = png_base64()
    call = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1, started_at=now,
                            tool_name="chart", tool_call_id="call_1",
                            arguments={"town": "Suzhou"})  # fmt: skip
    call = store.step_finish(
        step_id=call.pk, finished_at=now, status=StepStatus.SUCCESS,
        result="Rain:\n[image: image/png, 7,028 bytes]", artifact={"rows": ["<b>1</b>"]},
        result_blocks=[{"type": "text", "text": "Rain:"},
                       {"type": "image", "base64": image, "mime_type": "image/png"}],
    )  # fmt: skip
    with no_queries():
        html = fragments.step_replaced(call)
    assert html.count("<img ") == 1 and f'src="data:image/png;base64,{image}"' in html
    assert '<details class="artifact"' in html and "&lt;b&gt;1&lt;/b&gt;" in html


def test_the_queue_renders_from_what_the_store_listed_without_a_query():
    from chat.models import QueuedMessage

    conversation = Conversation.objects.create()
    for text in ("second?", "third?"):
        QueuedMessage.objects.create(conversation=conversation, content=text,
                                     created_at=timezone.now())  # fmt: skip
    listed = store.queue_list(conversation_id=conversation.pk)
    with no_queries():
        html = fragments.queue_replaced(listed)
        empty = fragments.queue_replaced([])
    assert html.count('class="queued-message"') == 2 and 'id="queued-messages"' in html
    assert " hidden" in empty and 'hx-swap-oob="true"' in empty
