"""A per-user limit on new runs: a clear message, nothing stored, other users unaffected."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from chat import store
from chat.models import AgentRun, Conversation, Message
from tests.chat.test_consumer import connect, make_conversation, receive_until_finished

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def backdate_runs(seconds: int) -> None:
    """Pretend the runs so far started ``seconds`` ago."""
    AgentRun.objects.update(started_at=timezone.now() - timedelta(seconds=seconds))


async def send_and_wait(communicator, content: str) -> list[str]:
    await communicator.send_to(text_data=json.dumps({"content": content}))
    return await receive_until_finished(communicator)


async def test_over_the_limit_a_message_is_refused_with_the_wait_and_nothing_stored(settings):
    settings.CHAT_RUNS_PER_MINUTE = 2
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await send_and_wait(communicator, "one")
    await send_and_wait(communicator, "two")

    await communicator.send_to(text_data=json.dumps({"content": "three"}))
    refusal = await communicator.receive_from()
    assert "started 2 runs in the last minute" in refusal and "try again in" in refusal
    assert await database_sync_to_async(AgentRun.objects.count)() == 2
    assert not await database_sync_to_async(Message.objects.filter(content="three").exists)()

    # Another chat of the same user is limited too; a minute later it goes through.
    other = await database_sync_to_async(Conversation.objects.create)(owner=user)
    second = await connect(other.pk, user)
    await second.connect()
    await second.send_to(text_data=json.dumps({"content": "four"}))
    assert "runs in the last minute" in await second.receive_from()
    await backdate_runs(61)
    frames = await send_and_wait(second, "four")
    assert "status-succeeded" in frames[-1]
    await communicator.disconnect()
    await second.disconnect()


async def test_the_limit_is_per_owner(settings):
    settings.CHAT_RUNS_PER_MINUTE = 1
    alice, alices = await make_conversation("alice")
    bob, bobs = await make_conversation("bob")
    for user, conversation in ((alice, alices), (bob, bobs)):
        communicator = await connect(conversation.pk, user)
        await communicator.connect()
        frames = await send_and_wait(communicator, "hi")
        assert "status-succeeded" in frames[-1]
        await communicator.disconnect()


def test_the_wait_is_until_the_oldest_counted_run_leaves_the_minute(db, django_user_model):
    user = django_user_model.objects.create_user("carol")
    conversation = Conversation.objects.create(owner=user)
    now = timezone.now()
    for seconds_ago in (50, 20):
        started = now - timedelta(seconds=seconds_ago)
        store.run_start(conversation_id=conversation.pk, content="q", provider="demo",
                        model_name="m", started_at=started)  # fmt: skip
        AgentRun.objects.update(status="succeeded")
    with pytest.raises(store.RateLimited) as info:
        store.run_start(conversation_id=conversation.pk, content="q", provider="demo",
                        model_name="m", started_at=now, runs_per_minute=2)  # fmt: skip
    assert info.value.retry_after_s == 10
