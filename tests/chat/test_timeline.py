"""The run timeline: rows from steps (no database), stored timing, the live fragment.

``chat.timeline.timeline_of`` is pure, so most of these pass unsaved rows. The recorder
tests run the real loop with a scripted model and tools that wait for each other, so
"parallel calls overlap" is a state the test creates, not a race it hopes to win.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from django.utils import timezone
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from agents.runtime import RunLimits, run
from agents.timing import whole_ms
from chat import fragments, store
from chat.models import AgentRun, AgentStep, Conversation, RunStatus, StepKind, StepStatus
from chat.recorder import RunRecorder
from chat.timeline import overlapping_pairs, overlaps, ticks, timeline_of
from tests.chat.test_fragments import no_queries
from tests.fakes import ScriptedChatModel, tool_call

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def _run(*, finished_ms: int | None = None, pk: int = 7) -> AgentRun:
    if finished_ms is None:
        return AgentRun(pk=pk, started_at=T0, status=RunStatus.RUNNING)
    return AgentRun(pk=pk, started_at=T0, finished_at=at(finished_ms), status=RunStatus.SUCCEEDED)


def _step(pk, kind, start, end, *, iteration=1, name="", status=None, **fields) -> AgentStep:
    status = status or (StepStatus.RUNNING if end is None else StepStatus.SUCCESS)
    return AgentStep(pk=pk, kind=kind, iteration=iteration, tool_name=name, status=status,
                     started_at=at(start), finished_at=None if end is None else at(end),
                     **fields)  # fmt: skip


TURN, CALL = StepKind.MODEL_TURN, StepKind.TOOL_CALL


def _travel_run():
    """A model turn asking for three parallel calls (one slow), then the answer."""
    steps = [
        _step(1, TURN, 10, 610, first_token_ms=150),
        _step(2, CALL, 620, 1020, name="weather_forecast"),
        _step(3, CALL, 621, 1021, name="search_guide"),
        _step(4, CALL, 622, 2622, name="find_rooms"),
        _step(5, TURN, 2630, 3130, iteration=2, first_token_ms=80),
    ]
    return _run(finished_ms=3140), steps


def test_rows_are_offsets_from_the_run_start_in_step_order_with_names_and_durations():
    run, steps = _travel_run()
    timeline = timeline_of(run, steps, now=at(99_999))
    assert [(r.name, r.start_ms, r.end_ms, r.duration_ms) for r in timeline.rows] == [
        ("model turn 1", 10, 610, 600),
        ("weather_forecast", 620, 1020, 400),
        ("search_guide", 621, 1021, 400),
        ("find_rooms", 622, 2622, 2000),
        ("model turn 2", 2630, 3130, 500),
    ]
    assert timeline.span_ms == 3140 and not timeline.running
    assert (timeline.model_turns, timeline.tool_calls) == (2, 3)


def test_bars_are_placed_in_percent_of_the_axis_and_the_slow_call_is_the_longest():
    run, steps = _travel_run()
    rows = timeline_of(run, steps, now=at(0)).rows
    slow = rows[3]
    assert slow.left_pct == pytest.approx(100 * 622 / 3140)
    assert slow.width_pct == pytest.approx(100 * 2000 / 3140)
    assert max(rows, key=lambda r: r.width_pct) is slow
    assert slow.style == "left: 19.809%; width: 63.694%"


def test_parallel_calls_of_one_turn_overlap_and_sequential_steps_do_not():
    run, steps = _travel_run()
    rows = timeline_of(run, steps, now=at(0)).rows
    pairs = {(a.name, b.name) for a, b in overlapping_pairs(rows)}
    assert pairs == {
        ("weather_forecast", "search_guide"),
        ("weather_forecast", "find_rooms"),
        ("search_guide", "find_rooms"),
    }
    assert not overlaps(rows[0], rows[1]) and not overlaps(rows[3], rows[4])


def test_the_first_token_is_marked_in_percent_of_its_own_bar():
    run, steps = _travel_run()
    rows = timeline_of(run, steps, now=at(0)).rows
    assert rows[0].first_token_pct == pytest.approx(25.0)
    assert rows[0].first_token_style == "width: 25.000%"
    assert rows[1].first_token_pct is None and rows[1].first_token_style == ""


def test_a_running_step_grows_to_now_and_the_axis_ends_at_now_while_the_run_goes():
    steps = [_step(1, TURN, 5, 300), _step(2, CALL, 310, None, name="find_rooms")]
    timeline = timeline_of(_run(), steps, now=at(1000))
    assert timeline.running and timeline.span_ms == 1000
    assert timeline.rows[1].running and timeline.rows[1].end_ms == 1000
    assert not timeline.rows[0].running


def test_a_step_closed_without_a_finish_ends_at_the_run_end_and_is_not_running():
    steps = [_step(1, CALL, 100, None, name="slow", status=StepStatus.ERROR)]
    row = timeline_of(_run(finished_ms=900), steps, now=at(5000)).rows[0]
    assert (row.end_ms, row.running) == (900, False)


def test_a_call_the_run_end_closed_says_it_did_not_finish_not_that_it_failed():
    steps = [_step(1, CALL, 100, 900, name="slow", status=StepStatus.ERROR, error="Cancelled")]
    run = _run(finished_ms=900)
    assert timeline_of(run, steps, now=at(0)).rows[0].unfinished
    html = render_to_string("chat/_timeline.html", {"run": run, "steps": steps})
    assert ">did not finish</span>" in html and ">error</span>" not in html


def test_a_step_stamped_before_the_run_moves_the_origin_and_no_offset_is_negative():
    steps = [_step(1, TURN, -50, 100)]
    timeline = timeline_of(_run(finished_ms=200), steps, now=at(0))
    assert timeline.rows[0].start_ms == 0 and timeline.span_ms == 250


def test_a_run_without_steps_has_an_axis_and_no_rows():
    timeline = timeline_of(_run(finished_ms=0), [], now=at(0))
    assert timeline.rows == () and timeline.span_ms == 1


def test_ticks_are_round_steps_across_the_span_at_most_five_after_zero():
    assert [t.at_ms for t in ticks(3140)] == [0, 1000, 2000, 3000]
    assert [t.at_ms for t in ticks(450)] == [0, 100, 200, 300, 400]
    assert ticks(1)[0].pct == 0
    assert len(ticks(10 * 3_600_000)) == 11  # longer than the steps go: the largest step


def test_the_timeline_template_is_a_list_of_labelled_links_to_each_step():
    run, steps = _travel_run()
    steps[1].tool_name = "<img src=x onerror=alert(1)>"
    steps[2].status, steps[2].error_type = StepStatus.ERROR, "TimeoutError"
    steps[2].result = "Error: tool did not finish within 30 seconds."
    html = render_to_string("chat/_timeline.html", {"run": run, "steps": steps})
    assert 'id="run-7-timeline"' in html and "<details" in html and " open" not in html
    assert "2 model turns · 3 tool calls · 3.1 s" in html
    assert html.count('<li class="tl-row') == 5
    assert 'href="#step-4"' in html and "2.0 s" in html  # the slow call, named with its time
    assert "<img" not in html and "&lt;img src=x" in html
    assert re.search(r'kind-tool_call status-error">.*?>error</span>', html, re.S)
    assert "first token 150 ms" in html
    opened = render_to_string("chat/_timeline.html",
                              {"run": run, "steps": steps, "timeline_open": True})  # fmt: skip
    assert 'data-timeline="7" open' in opened


def test_the_live_fragment_replaces_the_summary_and_the_bars_but_not_the_folding():
    steps = [_step(1, TURN, 5, 300), _step(2, CALL, 310, None, name="find_rooms")]
    html = fragments.timeline_replaced(_run(), steps)
    assert html.startswith(
        '<span class="tl-summary" id="run-7-timeline-summary" hx-swap-oob="true">'
    )
    assert 'id="run-7-timeline-body"' in html and "data-running" in html
    assert "so far" in html and "<details" not in html
    assert '<span class="tl-flag">running</span>' in html


@pytest.mark.django_db
def test_the_timeline_renders_with_a_stored_run_without_a_query():
    conversation = Conversation.objects.create()
    run_row = store.run_start(conversation_id=conversation.pk, content="q",
                              started_at=timezone.now())  # fmt: skip
    store.step_start(run_id=run_row.pk, kind=TURN, iteration=1, started_at=timezone.now())
    loaded = store.run_with_steps(run_id=run_row.pk)
    with no_queries():
        html = fragments.timeline_replaced(loaded, list(loaded.steps.all()))
    assert "model turn 1" in html


@pytest.mark.django_db
def test_a_finish_replaces_the_start_and_the_duration_is_always_the_difference():
    conversation = Conversation.objects.create()
    run_row = store.run_start(conversation_id=conversation.pk, content="q", started_at=T0)
    step = store.step_start(run_id=run_row.pk, kind=CALL, iteration=1, started_at=at(3),
                            tool_name="x")  # fmt: skip
    step = store.step_finish(step_id=step.pk, started_at=at(10), finished_at=at(441),
                             status=StepStatus.SUCCESS)  # fmt: skip
    step.refresh_from_db()
    assert (step.started_at, step.finished_at, step.duration_ms) == (at(10), at(441), 431)
    with pytest.raises(TypeError, match="finished_at - started_at"):
        store.step_finish(step_id=step.pk, finished_at=at(500), duration_ms=12)


@pytest.mark.django_db
def test_steps_a_run_end_closes_get_a_duration_that_agrees_with_their_instants():
    conversation = Conversation.objects.create()
    run_row = store.run_start(conversation_id=conversation.pk, content="q", started_at=T0)
    store.step_start(run_id=run_row.pk, kind=CALL, iteration=1, started_at=at(100), tool_name="x")
    store.run_finish(run_id=run_row.pk, status=RunStatus.CANCELLED, output="", error="",
                     iterations=1, usage={}, finished_at=at(1531))  # fmt: skip
    step = AgentStep.objects.get(run=run_row)
    assert step.duration_ms == 1431 == whole_ms(step.finished_at - step.started_at)
    assert AgentRun.objects.get(pk=run_row.pk).duration_ms == 1531


def _waiting_tools(parties: int):
    arrived: list[None] = []
    everyone = asyncio.Event()

    @tool
    async def lookup(town: str) -> str:
        """Look a town up."""
        arrived.append(None)
        if len(arrived) >= parties:
            everyone.set()
        await everyone.wait()  # every call has started before any ends
        await asyncio.sleep(0.02)
        return town.upper()

    return [lookup]


@database_sync_to_async
def _new_run() -> AgentRun:
    conversation = Conversation.objects.create()
    return store.run_start(conversation_id=conversation.pk, content="q", started_at=timezone.now())


@database_sync_to_async
def _stored(run_id: int) -> AgentRun:
    return store.run_with_steps(run_id=run_id)


@pytest.mark.django_db(transaction=True)
async def test_a_recorded_run_stores_consistent_durations_and_its_parallel_calls_overlap():
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("lookup", {"town": t}, f"c{i}")
                                      for i, t in enumerate(["suzhou", "hangzhou", "xian"])]),
            AIMessage("All three found."),
        ]
    )  # fmt: skip
    run_row = await _new_run()
    recorder = RunRecorder(run_row)
    shown = []
    async for event in run(model, _waiting_tools(3), [HumanMessage("q")], limits=RunLimits()):
        shown.append((await recorder.record(event)).html)

    stored = await _stored(run_row.pk)
    steps = list(stored.steps.all())
    assert [s.kind for s in steps] == [TURN, CALL, CALL, CALL, TURN]
    for step in steps:
        assert step.duration_ms == whole_ms(step.finished_at - step.started_at), step
    assert all(s.first_token_ms is not None for s in steps if s.kind == TURN)
    assert stored.duration_ms == whole_ms(stored.finished_at - stored.started_at)

    timeline = timeline_of(stored, steps, now=timezone.now())
    calls = [r for r in timeline.rows if not r.is_model_turn]
    assert len(overlapping_pairs(timeline.rows)) == 3, calls
    assert timeline.rows[0].end_ms <= min(c.start_ms for c in calls)
    assert max(c.end_ms for c in calls) <= timeline.rows[-1].start_ms
    # The timeline was redrawn at each turn's start, once the calls had all started, at
    # each call's end but the last (the next turn's start follows at once) and at the
    # run's end; not per streamed text, nor where another redraw followed at once.
    redrawn = [f'id="run-{run_row.pk}-timeline-body"' in html for html in shown]
    assert sum(redrawn) == 6
    assert redrawn[-1]  # the run's end


@pytest.mark.django_db
def test_the_admin_run_page_shows_the_timeline_open_above_the_steps(client):
    from tests.chat.test_admin import make_run, run_page, staff_user, weather_call

    client.force_login(staff_user())
    run_row = make_run(
        Conversation.objects.create(), calls=[weather_call("c1"), weather_call("c2")]
    )
    html = client.get(run_page(run_row)).content.decode()
    assert f'data-timeline="{run_row.pk}" open' in html
    assert html.index('class="tl-rows"') < html.index('class="trace-step ')
    first_call = run_row.steps.get(tool_call_id="c1")
    assert f'href="#step-{first_call.pk}"' in html and f'id="step-{first_call.pk}"' in html
    assert "css/timeline.css" in html and "js/timeline.js" in html


@pytest.mark.django_db
def test_the_admin_run_page_names_a_model_turns_time_to_first_token(client):
    from tests.chat.test_admin import make_run, run_page, staff_user

    client.force_login(staff_user())
    run_row = make_run(Conversation.objects.create())
    run_row.steps.filter(ordinal=1).update(first_token_ms=240)
    html = client.get(run_page(run_row)).content.decode()
    assert html.count(">first token 240 ms</span>") == 2  # its timeline bar and its header


@pytest.mark.django_db
def test_the_chat_page_folds_each_runs_timeline_under_it(alice):
    client, conversation = alice
    store.run_start(conversation_id=conversation.pk, content="q", started_at=timezone.now())
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert re.search(r'<details class="timeline" id="run-\d+-timeline" data-timeline="\d+">', html)


@pytest.mark.django_db
def test_the_csv_gives_each_model_turns_time_to_first_token_in_column_39():
    import csv
    import io

    from chat.export import COLUMNS, csv_lines, trace_rows
    from tests.chat.test_admin import make_run

    run_row = make_run(Conversation.objects.create())
    run_row.steps.filter(ordinal=1).update(first_token_ms=240)
    text = "".join(csv_lines(trace_rows(AgentRun.objects.filter(pk=run_row.pk))))
    rows = [dict(zip(COLUMNS, row, strict=True)) for row in csv.reader(io.StringIO(text))]
    assert COLUMNS.index("step_first_token_ms") == 38  # column 39 of docs/csv-format.md
    by_ordinal = {row["step_ordinal"]: row for row in rows[1:]}
    assert by_ordinal["1"]["step_first_token_ms"] == "240"
    assert all(row["step_first_token_ms"] == "" for key, row in by_ordinal.items() if key != "1")


def test_the_bars_show_a_names_hidden_characters_and_escape_it_in_the_title():
    run, steps = _travel_run()
    steps[1].tool_name = 'evil\u202e"><b>'
    html = fragments.timeline_replaced(run, steps)
    assert "&lt;U+202E&gt;" in html  # the name shown with its marker
    assert 'title="evil\u202e&quot;&gt;&lt;b&gt;: 400 ms, from 620 ms to 1.0 s"' in html
    assert "<b>" not in html


def test_a_timeline_without_steps_has_an_empty_body_with_its_axis_length():
    timeline = timeline_of(_run(finished_ms=50), [], now=at(60))
    html = render_to_string("chat/_timeline_body.html", {"timeline": timeline})
    assert (
        html.strip() == '<div class="tl-body" id="run-7-timeline-body" data-span-ms="50">\n</div>'
    )
