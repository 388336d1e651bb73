"""Times that say "so far" and a running turn's first token, as the server draws them.

static/js/timeline.js counts on from ``data-so-far-ms`` (tests/browser/test_streaming.py
watches it tick); here the drawn values: the elapsed time as of the render, and no time to
first token until one is measured.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.template.loader import render_to_string
from django.utils import timezone

from chat import fragments
from chat.models import AgentRun, AgentStep, Conversation, RunStatus, StepKind, StepStatus
from chat.presenters import StepPresenter

TURN, CALL = StepKind.MODEL_TURN, StepKind.TOOL_CALL


def _running(started_s_ago: float = 2.5) -> tuple[AgentRun, datetime]:
    started = timezone.now() - timedelta(seconds=started_s_ago)
    run = AgentRun(pk=7, started_at=started, status=RunStatus.RUNNING,
                   conversation=Conversation(pk=3))  # fmt: skip
    return run, started


def _step(run, pk, kind, started, **fields) -> AgentStep:
    return AgentStep(pk=pk, run=run, kind=kind, iteration=1, status=StepStatus.RUNNING,
                     started_at=started, **fields)  # fmt: skip


def test_a_running_model_turn_waits_for_its_first_token_instead_of_showing_a_time():
    run, started = _running()
    html = fragments.timeline_replaced(run, [_step(run, 1, TURN, started)])
    assert (
        '<span class="tl-flag" data-tl-first-token-wait>waiting for the first token</span>' in html
    )
    assert "first token" not in html.replace("waiting for the first token", "")


def test_a_running_model_turn_with_text_is_streaming_and_its_first_token_shows_once_measured():
    run, started = _running()
    html = fragments.timeline_replaced(run, [_step(run, 1, TURN, started, text="Here")])
    assert '<span class="tl-flag">streaming</span>' in html
    assert "data-tl-first-token-wait" not in html
    ended = _step(run, 1, TURN, started, text="Here", first_token_ms=420)
    ended.status, ended.finished_at = StepStatus.SUCCESS, started + timedelta(seconds=1)
    html = fragments.timeline_replaced(run, [ended])
    assert "first token 420 ms" in html and "streaming" not in html


def test_the_timelines_summary_counts_on_from_the_time_it_was_drawn_at():
    run, started = _running(2.5)
    html = fragments.timeline_replaced(run, [_step(run, 1, TURN, started)])
    summary = html.split("</span>", 2)[:2]
    assert 'data-so-far-ms="' in summary[0] + summary[1]
    drawn = int(html.split('data-so-far-ms="', 1)[1].split('"', 1)[0])
    assert 2500 <= drawn < 60_000


@pytest.mark.django_db  # the card asks whether the call is held for approval
def test_a_running_tool_calls_card_says_how_long_it_has_run_so_far():
    run, started = _running(3.2)
    step = _step(run, 2, CALL, started, tool_name="weather_forecast", arguments={"town": "x"})
    assert 3200 <= StepPresenter(step).elapsed_ms < 60_000
    html = render_to_string("chat/_step.html", {"step": step})
    assert "Running…" in html and " so far</span>" in html
    assert 'data-so-far-ms="' in html
    # Without a start (never, for a stored step) it counts from nothing, not from 1970.
    step.started_at = None
    assert StepPresenter(step).elapsed_ms == 0
