"""The wait for a person's decision is drawn in the timeline, in the chat and the admin:
no unexplained gap between a held call's request and its run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone

from chat.models import AgentRun, AgentStep, Approval, RunStatus, StepKind, StepStatus
from chat.timeline import timeline_of
from tests.chat.test_approvals_admin import held_call

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TURN, CALL = StepKind.MODEL_TURN, StepKind.TOOL_CALL


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def _held_run(*, decided_ms: int | None, outcome: str, call_end_ms: int | None,
              call_start_ms: int = 600, finished_ms: int | None = 9_000):  # fmt: skip
    """A model turn, then a call held from 600 ms and decided (or not) at ``decided_ms``."""
    status = RunStatus.SUCCEEDED if finished_ms else RunStatus.WAITING
    run = AgentRun(pk=3, started_at=T0, status=status,
                   finished_at=at(finished_ms) if finished_ms else None)  # fmt: skip
    turn = AgentStep(pk=1, kind=TURN, iteration=1, status=StepStatus.SUCCESS,
                     started_at=at(0), finished_at=at(590))  # fmt: skip
    call_status = StepStatus.PENDING if call_end_ms is None else StepStatus.SUCCESS
    call = AgentStep(pk=2, kind=CALL, iteration=1, tool_name="check_bnb_availability",
                     status=call_status, started_at=at(call_start_ms),
                     finished_at=None if call_end_ms is None else at(call_end_ms))  # fmt: skip
    call.approval = Approval(requested_at=at(600), outcome=outcome,
                             decided_at=None if decided_ms is None else at(decided_ms))  # fmt: skip
    return run, [turn, call]


def test_an_approved_calls_wait_is_drawn_before_its_bar_and_counted_in_the_summary():
    run, steps = _held_run(decided_ms=4_600, outcome="approved", call_start_ms=4_610,
                           call_end_ms=5_010)  # fmt: skip
    timeline = timeline_of(run, steps, now=at(99_999))
    call = timeline.rows[1]

    assert (call.wait_start_ms, call.wait_end_ms, call.waited_ms) == (600, 4_600, 4_000)
    assert (call.start_ms, call.end_ms) == (4_610, 5_010)  # the call ran after the decision
    assert not call.waiting and not timeline.waiting and timeline.waited_ms == 4_000
    assert timeline.tool_calls == 1  # a wait is not a call

    html = render_to_string("chat/_timeline.html", {"run": run, "steps": steps})
    assert "1 model turn · 1 tool call · 9.0 s · 4.0 s of it waiting for a decision" in html
    assert "waited 4.0 s for a decision (approved)" in html
    assert 'class="tl-decision" style="left: 6.667%; width: 44.444%"' in html


def test_a_call_still_waiting_shows_a_growing_wait_and_no_bar_of_its_own():
    run, steps = _held_run(decided_ms=None, outcome="pending", call_end_ms=None,
                           finished_ms=None)  # fmt: skip
    timeline = timeline_of(run, steps, now=at(3_000))
    call = timeline.rows[1]

    assert call.waiting and (call.wait_start_ms, call.wait_end_ms) == (600, 3_000)
    assert call.start_ms == call.end_ms == 3_000  # nothing ran yet
    html = render_to_string("chat/_timeline.html", {"run": run, "steps": steps})
    assert 'status-pending waiting"' in html and "waiting for a decision<" in html
    assert html.count("data-tl-duration") == 1  # none ("0 ms") for a call that has not run
    assert " so far · " in html and " of it waiting for a decision" in html
    # The wait counts on in the page while nobody decides (static/js/timeline.js).
    assert timeline.waiting and "</span> of it waiting for a decision" in html


def test_a_denied_call_is_said_denied_and_its_bar_follows_the_decision():
    run, steps = _held_run(decided_ms=2_000, outcome="denied", call_start_ms=600,
                           call_end_ms=2_005)  # fmt: skip
    call = timeline_of(run, steps, now=at(99_999)).rows[1]
    assert (call.start_ms, call.end_ms, call.decision) == (2_000, 2_005, "denied")
    html = render_to_string("chat/_timeline.html", {"run": run, "steps": steps})
    assert "waited 1.4 s for a decision (denied)" in html


def test_a_step_loaded_without_its_approval_draws_no_wait_and_reads_nothing():
    run, steps = _held_run(decided_ms=2_000, outcome="denied", call_end_ms=2_005)
    bare = AgentStep(pk=2, kind=CALL, iteration=1, tool_name="x", status=StepStatus.SUCCESS,
                     started_at=at(600), finished_at=at(700))  # fmt: skip
    row = timeline_of(run, [steps[0], bare], now=at(0)).rows[1]  # no query: no db mark
    assert row.wait_start_ms is None and row.waited_ms == 0


@pytest.mark.django_db
def test_the_admins_run_page_draws_the_wait_for_a_decision(alice):
    _, conversation = alice
    approval = held_call(conversation, requested_at=timezone.now() - timedelta(seconds=90))
    Approval.objects.filter(pk=approval.pk).update(
        outcome="approved", decided_at=approval.requested_at + timedelta(seconds=60)
    )
    client = Client()
    user = User.objects.create_user("reviewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_agentrun"))
    client.force_login(user)

    html = client.get(f"/admin/chat/agentrun/{approval.run_id}/change/").content.decode()

    assert 'class="tl-decision"' in html
    assert "waited 60.0 s for a decision (approved)" in html
