"""Two runs' steps aligned for comparison (chat.compare): pure functions, no database."""

from __future__ import annotations

import json

from chat.compare import RunSide, StepSide, align_steps, compare_runs, durations_differ


def turn(ordinal: int, text: str = "", *, answer: bool = False, tokens: int | None = 50,
         ms: int = 300, running: bool = False) -> StepSide:  # fmt: skip
    status = "running" if running else "answer" if answer else "ok"
    return StepSide(ordinal=ordinal, iteration=1, kind="model_turn", result=text, status=status,
                    duration_ms=None if running else ms, tokens=tokens, is_answer=answer,
                    running=running)  # fmt: skip


def call(ordinal: int, tool: str, args: dict | None = None, result: str = "{}", *,
         status: str = "ok", ms: int = 200, format_error: bool = False,
         running: bool = False) -> StepSide:  # fmt: skip
    arguments = json.dumps(args or {}, sort_keys=True)
    return StepSide(ordinal=ordinal, iteration=1, kind="tool_call", tool=tool,
                    arguments=arguments, arguments_shown=arguments, result=result,
                    status="running" if running else status, duration_ms=None if running else ms,
                    is_format_error=format_error, running=running)  # fmt: skip


def run(run_id: int, *steps: StepSide, status: str = "succeeded", **facts) -> RunSide:
    return RunSide(run_id=run_id, status=status, status_label=status.capitalize(),
                   steps=steps, **facts)  # fmt: skip


def shape(rows) -> list[tuple[int | None, int | None]]:
    """Each row as (left ordinal, right ordinal), None for a missing side."""
    return [
        (row.left.ordinal if row.left else None, row.right.ordinal if row.right else None)
        for row in rows
    ]


WEATHER = {"city": "Hangzhou"}


def test_identical_runs_pair_every_step_and_mark_nothing():
    steps = (turn(1), call(2, "get_weather", WEATHER), turn(3, "Sunny.", answer=True))
    rows = align_steps(steps, steps)
    assert shape(rows) == [(1, 1), (2, 2), (3, 3)]
    assert all(row.change == "same" and not row.changed for row in rows)


def test_a_call_inserted_in_the_second_run_stands_alone_and_the_rest_pair():
    left = (turn(1), call(2, "get_weather", WEATHER), turn(3, "A", answer=True))
    right = (turn(1), call(2, "get_weather", WEATHER), call(3, "calculator", {"e": "17*23"}),
             turn(4, "A", answer=True))  # fmt: skip
    rows = align_steps(left, right)
    assert shape(rows) == [(1, 1), (2, 2), (None, 3), (3, 4)]
    assert rows[2].change == "only in B" and rows[2].changed and not rows[2].moved
    assert rows[3].change == "same"


def test_a_call_removed_from_the_second_run_stands_alone_on_the_first_side():
    left = (turn(1), call(2, "get_weather", WEATHER), call(3, "search_bnb"), turn(4, answer=True))
    right = (turn(1), call(2, "get_weather", WEATHER), turn(3, answer=True))
    rows = align_steps(left, right)
    assert shape(rows) == [(1, 1), (2, 2), (3, None), (4, 3)]
    assert rows[2].change == "only in A"


def test_reordered_calls_pair_one_and_mark_the_other_as_moved_on_both_sides():
    a, b = call(2, "get_weather", WEATHER), call(3, "calculator", {"e": "1+1"})
    left = (turn(1), a, b, turn(4, answer=True))
    right = (turn(1), call(2, "calculator", {"e": "1+1"}), call(3, "get_weather", WEATHER),
             turn(4, answer=True))  # fmt: skip
    rows = align_steps(left, right)
    paired = [row for row in rows if row.paired]
    lone = [row for row in rows if not row.paired]
    assert len(paired) == 3  # both model turns and one of the calls
    assert len(lone) == 2 and all(row.moved for row in lone)
    assert {row.change for row in lone} == {"only in A", "only in B"}
    assert (lone[0].left or lone[0].right).tool == (lone[1].left or lone[1].right).tool


def test_a_lone_call_with_other_arguments_on_the_other_side_is_not_moved():
    left = (call(1, "get_weather", {"city": "Suzhou"}), call(2, "calculator", {"e": "1"}))
    right = (call(1, "calculator", {"e": "2"}), call(2, "get_weather", {"city": "Shanghai"}))
    rows = align_steps(left, right)
    assert sum(1 for row in rows if row.paired) == 1
    assert not any(row.moved for row in rows)


def test_different_arguments_and_result_are_marked_on_the_pair():
    left = (call(1, "get_weather", {"city": "Suzhou"}, '{"t": 12}'),)
    right = (call(1, "get_weather", {"city": "Shanghai"}, '{"t": 15}'),)
    (row,) = align_steps(left, right)
    assert row.paired and row.change == "differs"
    assert row.differs == {"arguments", "result"}
    assert row.differs_labels == "Arguments, Result"
    assert [name for name, _, differs in row.fields if differs] == ["arguments", "result"]


def test_the_same_arguments_in_another_key_order_are_the_same():
    left = (call(1, "f", {"a": 1, "b": 2}),)
    right = (call(1, "f", {"b": 2, "a": 1}),)
    assert align_steps(left, right)[0].differs == frozenset()


def test_an_error_against_a_success_pairs_the_call_and_marks_status_and_result():
    left = (call(1, "get_weather", WEATHER, "UnknownTown: no such town", status="error"),)
    right = (call(1, "get_weather", WEATHER, '{"t": 12}'),)
    (row,) = align_steps(left, right)
    assert row.paired
    assert {"status", "result"} <= row.differs


def test_a_format_error_does_not_pair_with_a_call_that_ran():
    left = (call(1, "get_weather", format_error=True, status="format error"), turn(2))
    right = (call(1, "get_weather"), turn(2))
    rows = align_steps(left, right)
    assert shape(rows) == [(1, None), (None, 1), (2, 2)]
    assert not any(row.moved for row in rows)


def test_timings_differ_only_when_noticeably_apart():
    assert not durations_differ(200, 260)  # a few ms: every run has those
    assert not durations_differ(20, 90)  # more than 1.5 times, but under 100 ms apart
    assert durations_differ(200, 900)
    assert durations_differ(None, 900)
    assert not durations_differ(None, None)
    left, right = (call(1, "f", ms=200),), (call(1, "f", ms=2000),)
    assert align_steps(left, right)[0].differs == {"duration"}


def test_token_counts_that_differ_are_marked():
    (row,) = align_steps((turn(1, tokens=40),), (turn(1, tokens=None),))
    assert row.differs == {"tokens"}


def test_an_empty_run_against_a_run_with_steps_shows_every_step_alone():
    rows = align_steps((), (turn(1), call(2, "f")))
    assert shape(rows) == [(None, 1), (None, 2)]
    assert align_steps((), ()) == []
    comparison = compare_runs(run(1, status="failed"), run(2, turn(1)))
    assert comparison.changed_rows == 1
    status = next(total for total in comparison.totals if total.name == "status")
    assert status.differs and (status.left, status.right) == ("Failed", "Succeeded")


def test_a_run_still_going_is_compared_as_far_as_it_got():
    ended = run(1, turn(1), call(2, "get_weather", WEATHER), turn(3, "Sunny", answer=True),
                tool_calls=1, model_turns=2)  # fmt: skip
    going = run(2, turn(1), call(2, "get_weather", WEATHER, "", running=True),
                status="running", running=True, tool_calls=1, model_turns=1)  # fmt: skip
    comparison = compare_runs(ended, going)
    assert comparison.running
    assert shape(comparison.rows) == [(1, 1), (2, 2), (3, None)]
    assert {"status", "result"} <= comparison.rows[1].differs
    turns = next(total for total in comparison.totals if total.name == "model_turns")
    assert (turns.left, turns.right) == ("2", "1 so far") and turns.differs
    calls = next(total for total in comparison.totals if total.name == "tool_calls")
    assert calls.right == "1 so far" and not calls.differs


def test_totals_mark_what_differs_and_only_that():
    left = run(1, model="demo (Demo)", strategy="Native tool calling", answer="Sunny.",
               tokens=300, duration_ms=1000, question="Weather?")  # fmt: skip
    right = run(2, model="demo (Demo)", strategy="ReAct (text)", answer="Sunny.",
                tokens=420, duration_ms=1050, question="Weather?")  # fmt: skip
    totals = {total.name: total for total in compare_runs(left, right).totals}
    assert {name for name, total in totals.items() if total.differs} == {"strategy", "tokens"}
    assert totals["tokens"].left == "300" and totals["tokens"].right == "420"
    assert compare_runs(left, right).differing_totals == 2


def test_a_long_result_is_previewed_but_compared_whole():
    long_a, long_b = "x" * 5000 + "a", "x" * 5000 + "b"
    (row,) = align_steps((call(1, "f", result=long_a),), (call(1, "f", result=long_b),))
    assert "result" in row.differs
    assert row.left.result_preview == row.right.result_preview
    assert row.left.result_preview.endswith("[5,001 characters]")
