"""The chat socket's frames: parsed once into types, refusals raised with the text the
user sees (no database, no socket)."""

from __future__ import annotations

import json

import pytest

from chat.frames import (
    BAD_DECISION,
    NOT_A_HELD_CALL,
    NOT_JSON,
    UNKNOWN_TYPE,
    DecisionFrame,
    DecisionRefused,
    FrameRefused,
    MessageFrame,
    StopFrame,
    parse_frame,
)


def parse(payload: object) -> object:
    return parse_frame(json.dumps(payload), None, max_chars=100)


def test_frames_are_parsed_once_into_their_types():
    assert parse({"content": "  cancel  "}) == MessageFrame("cancel")  # a message, not a stop
    assert parse({"type": "cancel", "HEADERS": {}}) == StopFrame()
    card = {"type": "approval", "step": "12", "decision": "deny", "reason": " no ", "always": "on"}
    assert parse(card) == DecisionFrame(12, "deny", reason=" no ", always=True)
    assert parse({"type": "approval", "step": 12, "decision": "approve"}) == DecisionFrame(
        12, "approve"
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", NOT_JSON),
        ('{"type": "dance"}', UNKNOWN_TYPE.format(kind="dance")),
        ('{"type": "approval", "step": 3, "decision": "maybe"}', BAD_DECISION),
        ('{"type": "approval", "step": 9223372036854775808, "decision": "deny"}', NOT_A_HELD_CALL),
    ],
)
def test_a_refused_frame_is_raised_with_the_text_the_user_sees(text, said):
    with pytest.raises(FrameRefused) as refused:
        parse_frame(text, None, max_chars=100)
    assert str(refused.value) == said


def test_a_decision_whose_step_is_known_is_refused_beside_that_steps_card():
    with pytest.raises(DecisionRefused) as refused:
        parse({"type": "approval", "step": 3, "decision": "deny", "reason": 5})
    assert refused.value.step_id == 3 and str(refused.value) == BAD_DECISION
