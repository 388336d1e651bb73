"""A failing model: the page says why in plain words; the audit trail keeps the whole error."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from chat.models import AgentRun
from tests.chat.test_consumer import ask_over_socket, make_conversation

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
