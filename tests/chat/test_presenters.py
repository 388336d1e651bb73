"""What a step's presenter says of its stored facts, and nothing it does not know: the
observation the model was given decides the result's heading, an old row without one
makes no claim, and the models file imports no presenter (no import circle)."""

from __future__ import annotations

import ast
from pathlib import Path

from agents.approvals import edited_note
from agents.tool_calls import clip
from chat.models import AgentRun, AgentStep, StepKind, StepStatus, Strategy
from chat.presenters import RunPresenter, StepPresenter, presented

ROOT = Path(__file__).resolve().parents[2]


def _step(result: str, observation: str | None, strategy: str = Strategy.TOOL_CALLING):
    run = AgentRun(strategy=strategy, provider="demo")
    return AgentStep(run=run, kind=StepKind.TOOL_CALL, status=StepStatus.SUCCESS,
                     result=result, observation=observation)  # fmt: skip


def test_a_result_the_model_was_sent_whole_has_a_plain_heading():
    words = StepPresenter(_step("x" * 250, "x" * 250))
    assert words.result_label == "Result (ToolMessage)" and not words.observation_differs


def test_a_text_strategys_clipped_observation_is_said_in_its_own_word():
    words = StepPresenter(_step("x" * 250, clip("x" * 250, 100), Strategy.REACT))
    assert words.result_label == (
        "Result (observation): the model was sent the first 100 of 250 characters"
    )
    assert words.observation_differs


def test_a_person_edits_note_before_the_whole_result_is_no_clipping():
    words = StepPresenter(_step('{"ok": true}', edited_note({"nights": 2}) + '\n{"ok": true}'))
    assert words.result_label == "Result (ToolMessage)"
    assert words.observation_differs  # the admin shows what the model read, note and all


def test_an_old_row_clipped_in_storage_says_what_is_stored_and_not_what_was_sent():
    words = StepPresenter(_step(clip("z" * 5_000, 1_000), None))
    assert words.result_label == (
        "Result (ToolMessage): the tool returned 5,000 characters, the first 1,000 are stored"
    )
    assert words.observation_not_recorded and words.seen_chars is None


def test_a_call_its_runs_end_closed_is_not_said_to_lack_an_observation():
    step = _step("", None)
    step.status = StepStatus.ERROR
    assert step.is_unfinished and not StepPresenter(step).observation_not_recorded


def test_the_presented_filter_gives_each_row_its_presenter():
    step = _step("", None)
    assert isinstance(presented(step), StepPresenter)
    assert isinstance(presented(step.run), RunPresenter)


def _chat_imports(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chat")
    }


def test_the_models_import_no_words_and_the_text_helpers_no_model():
    assert not _chat_imports("chat/models.py") & {"chat.display", "chat.presenters"}
    assert "chat.models" not in _chat_imports("chat/display.py")
