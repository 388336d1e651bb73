"""A failing model: the page says why in plain words; the audit trail keeps the whole error."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from chat.models import AgentRun
from tests.chat.test_consumer import ask_over_socket, make_conversation
from tests.fakes import tool_call

pytestmark = pytest.mark.django_db(transaction=True)

RAW = (
    'Error code: 429 - {"error": {"message": "Rate limit reached for gpt-4o", '
    '"code": "rate_limit"}}'
)


class RateLimitError(Exception):
    """Shaped like the OpenAI SDK's: a status code and the provider's JSON body."""

    status_code = 429
    body = {"error": {"message": "Rate limit reached for gpt-4o"}}


async def test_a_rate_limited_model_shows_plain_words_and_stores_the_error(scripted_model):
    scripted_model.script = [RateLimitError(RAW)]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "hi")
    page = "\n".join(frames)

    assert "status-failed" in frames[-1]
    assert "limiting requests (HTTP 429)" in page
    assert "rate_limit" not in page and "Error code" not in page  # no raw payload shown
    run = await database_sync_to_async(AgentRun.objects.get)()
    turn = await database_sync_to_async(lambda: run.steps.get())()
    assert run.error.startswith("The model provider is limiting requests")
    assert turn.error == f"RateLimitError: {RAW}"  # the whole error, for the admin


@tool
def echo(text: str) -> str:
    """Return ``text`` as it came."""
    return text


async def test_model_output_no_column_can_take_as_is_is_stored_in_a_form_every_database_can(
    scripted_model, monkeypatch
):
    # PostgreSQL refuses NUL characters in text and JSON, and text over a varchar's length;
    # SQLite takes both. Either way the run goes on and the trail keeps what it can.
    monkeypatch.setattr("chat.catalog.code_tools_for", lambda *_: [echo])
    long_name, long_id = "t" * 300, "c" * 300
    scripted_model.script = [
        AIMessage(
            "Thinking\x00 aloud",
            tool_calls=[
                tool_call("echo", {"text": "a\x00b", "k\x00": 1}, "call_1"),
                tool_call(long_name, {}, long_id),
            ],
        ),
        AIMessage("The answer\x00."),
    ]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "hi")

    run = await database_sync_to_async(AgentRun.objects.get)()
    assert (run.status, run.error) == ("succeeded", "")
    assert run.output == "The answer\ufffd."
    turn, echoed, unknown, answer = await database_sync_to_async(
        lambda: list(run.steps.order_by("ordinal"))
    )()
    assert turn.text == "Thinking\ufffd aloud"
    assert echoed.arguments == {"text": "a\ufffdb", "k\ufffd": 1}
    assert "\x00" not in echoed.result
    assert (unknown.tool_name, unknown.tool_call_id) == (long_name[:200], long_id[:200])
    # A name over 64 characters is one strict servers refuse: a format error, kept whole.
    assert unknown.error_type == "InvalidToolName" and len(unknown.error) > 200  # a text column
    assert answer.result == "The answer\ufffd."
