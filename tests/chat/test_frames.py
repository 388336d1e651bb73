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
    assert parse({"content": "  cancel  "}) == MessageFrame("  cancel")  # a message, not a stop
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


def test_a_queued_messages_remove_and_send_now_and_a_messages_client_id_are_parsed():
    from chat.frames import (
        BAD_CLIENT_ID,
        BAD_QUEUED,
        QueueFrameRefused,
        SteerFrame,
        UnqueueFrame,
    )

    assert parse({"type": "unqueue", "queued": "12", "HEADERS": {}}) == UnqueueFrame(12)
    assert parse({"type": "steer", "queued": 12}) == SteerFrame(12)
    assert parse({"content": "hi", "client_id": "a-1_B"}) == MessageFrame("hi", "a-1_B")
    for bad in (None, "x", 0, -1, True, "9" * 30):
        with pytest.raises(QueueFrameRefused, match="'queued'") as refused:
            parse({"type": "unqueue", "queued": bad})
        assert str(refused.value) == BAD_QUEUED
    for bad in (12, "has space", "x" * 65, "é"):
        with pytest.raises(FrameRefused) as refused:
            parse({"content": "hi", "client_id": bad})
        assert str(refused.value) == BAD_CLIENT_ID


def test_the_runs_a_reconnecting_page_shows_going_are_read_from_its_url_as_a_hint():
    from chat.frames import MAX_GOING, parse_going

    assert parse_going(b"") == ()
    assert parse_going(b"going=7,3&going=12") == (3, 7, 12)
    # Not row ids: left out, never a refusal (the page still gets its catch-up).
    assert parse_going(b"going=x,-1,0,%C2%B2,," + b"9" * 30 + b",5&other=1") == (5,)
    many = ",".join(str(run) for run in range(1, 100)).encode()
    assert parse_going(b"going=" + many) == tuple(range(100 - MAX_GOING, 100))


def test_the_newest_run_a_reconnecting_page_shows_is_read_from_its_url_as_a_hint():
    from chat.frames import parse_last

    assert parse_last(b"") is None
    assert parse_last(b"last=12&going=3") == 12
    assert parse_last(b"last=0") == 0  # the page shows no run
    for junk in (b"last=x", b"last=-1", b"last=" + b"9" * 30, b"last="):
        assert parse_last(junk) is None


def test_a_stop_and_a_send_now_may_name_the_run_the_page_showed_going():
    from chat.frames import BAD_STOP_RUN, QueueFrameRefused, SteerFrame

    assert parse({"type": "cancel"}) == StopFrame()
    assert parse({"type": "cancel", "run": "12", "HEADERS": {}}) == StopFrame(12)
    assert parse({"type": "cancel", "run": ""}) == StopFrame()  # none going on the page
    assert parse({"type": "steer", "queued": 3, "run": 12}) == SteerFrame(3, 12)
    for bad in ("x", 0, -1, True, "9" * 30):
        with pytest.raises(FrameRefused) as refused:
            parse({"type": "cancel", "run": bad})
        assert str(refused.value) == BAD_STOP_RUN
        with pytest.raises(QueueFrameRefused):
            parse({"type": "steer", "queued": 3, "run": bad})
