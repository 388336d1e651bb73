"""Hostile decision frames, races and restarts against the approvals feature (issue 13):
each test pins a fault found by trying to break it, or a guarantee that held."""

from __future__ import annotations

import json

import pytest

from chat.models import ApprovalOutcome
from tests.chat.conftest import wait_for_runs
from tests.chat.test_approvals import ask_and_wait, decision, rows
from tests.chat.test_consumer import receive_until_finished

pytestmark = pytest.mark.django_db(transaction=True)

BOOKING = "check_bnb_availability"


@pytest.fixture(autouse=True)
def _ask_for_booking(settings):
    settings.AGENT_TOOL_POLICIES = {BOOKING: "ask"}
    settings.AGENT_APPROVAL_TIMEOUT_S = 3600


async def _refused_and_still_pending(tab, conversation, frame: str, expected: str) -> None:
    """Send ``frame``; the socket answers with an error naming ``expected``, stays open,
    and the call is still pending."""
    await tab.send_to(text_data=frame)
    answer = await tab.receive_from()
    assert "chat-error" in answer and expected in answer, answer
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING


@pytest.mark.parametrize(
    "step",
    ["\u00b2", "\u2460", 10**30, "99999999999999999999999", 2**63, -(2**63) - 1],
    ids=["superscript-two", "circled-one", "huge-int", "huge-text", "2^63", "below-int64"],
)
async def test_a_step_id_no_database_can_hold_is_refused_not_a_crash(step):
    """'²'.isdigit() is true but int('²') raises ValueError; 10**30 overflows SQLite's
    INTEGER (OverflowError) and Postgres' bigint (DataError). Either killed the socket."""
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    frame = json.dumps({"type": "approval", "step": step, "decision": "approve"})
    await tab.send_to(text_data=frame)
    answer = await tab.receive_from()
    assert "chat-error" in answer
    assert (await rows(conversation.pk))[2].outcome == ApprovalOutcome.PENDING
    # The socket still works: the real decision goes through.
    _, held, _ = await rows(conversation.pk)
    await tab.send_to(text_data=decision(held.pk))
    await receive_until_finished(tab)
    await wait_for_runs()
    await tab.disconnect()


@pytest.mark.parametrize(
    "fields",
    [
        {"decision": "deny", "reason": "no \ud800 way"},
        {"decision": "approve", "arguments": '{"town": "Su\ud800zhou"}'},
        {"decision": "approve", "arguments": '{"town": "Su\\ud800zhou"}'},
        {"decision": "approve", "arguments": '{"town": "Su\\u0000zhou"}'},
        {"decision": "deny", "reason": "x\u0000y"},
        {"decision": "approve", "arguments": '{"town": ' + "[" * 9000 + "]" * 9000 + "}"},
        {"decision": "approve", "arguments": "[" * 19_990 + "]" * 10},
        {"decision": "approve", "arguments": '["town", "Suzhou"]'},
        {"decision": "approve", "arguments": '"Suzhou"'},
        {"decision": "approve", "arguments": "null"},
        {"decision": "approve", "arguments": "NaN"},
        {"decision": "approve", "arguments": '{"town": "' + "x" * 20_000 + '"}'},
    ],
    ids=["raw-surrogate-reason", "raw-surrogate-args", "escaped-surrogate-args",
         "escaped-nul-args", "nul-reason", "nested-9000", "unclosed-20000", "a-list",
         "a-string", "null", "nan", "over-20000"],
)  # fmt: skip
async def test_text_no_database_can_store_is_refused_in_a_decision(fields):
    """The message path refuses NUL and lone surrogates (clean_message); a decision's
    reason and arguments must too, including JSON escapes (\\ud800, \\u0000) that only
    become those characters once parsed (Postgres refuses both in jsonb and text)."""
    from tests.chat.test_consumer import make_conversation

    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    _, held, _ = await rows(conversation.pk)
    frame = json.dumps({"type": "approval", "step": held.pk, **fields})
    await _refused_and_still_pending(tab, conversation, frame, "")
    await tab.send_to(text_data=decision(held.pk))
    await receive_until_finished(tab)
    await wait_for_runs()
    await tab.disconnect()
