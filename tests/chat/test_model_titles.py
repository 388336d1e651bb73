"""With a real model, a short title made by the model after the first run, pushed live.

Through the websocket and the run owner, against the fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
import logging
import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from django.contrib.auth.models import User
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from agents.providers import ModelConfig
from chat import store
from chat.models import Conversation
from chat.routing import websocket_urlpatterns
from chat.titles import clean_model_title, title_after_run
from tests.chat.conftest import Communicator, wait_for_runs
from tests.fake_openai import FakeOpenAI, Reply, text_turn
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Plan 3 days in Suzhou: sights to visit, the weather, and a B&B room."
OFFLINE = "Suzhou, 3 days: sights to visit, the weather, and a B&B room"
ENDED = re.compile(r'class="run-status status-(?!running)')


@pytest.fixture
def server(settings):
    with FakeOpenAI() as httpd:
        settings.AGENT_MODEL = ModelConfig(provider="openai", model="m", api_key="sk-test",
                                           base_url=httpd.base_url, timeout_s=WAIT_S,
                                           max_retries=0)  # fmt: skip
        yield httpd


@database_sync_to_async
def make_conversation() -> tuple[User, Conversation]:
    user = User.objects.create_user("alice", password="pw")
    return user, Conversation.objects.create(owner=user)


async def ask(content: str, *, until=ENDED) -> tuple[Conversation, Communicator, list[str]]:
    """Connect, send a question, collect frames until ``until`` matches one."""
    user, conversation = await make_conversation()
    communicator = Communicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation.pk}/")
    communicator.scope["user"] = user
    communicator.scope["session"] = None
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": content}))
    frames = [await communicator.receive_from()]
    while not until.search(frames[-1]):
        frames.append(await communicator.receive_from())
    return conversation, communicator, frames


async def title_of(conversation: Conversation) -> str:
    return (await Conversation.objects.aget(pk=conversation.pk)).title


async def test_the_models_title_replaces_the_offline_one_and_reaches_the_open_page(server):
    server.script = [Reply(events=text_turn("Day 1: the gardens.")),
                     Reply(events=text_turn('Title: "Three days in Suzhou."'))]  # fmt: skip
    titled = re.compile(r'id="conversation-title" hx-swap-oob="true">Three days in Suzhou<')

    conversation, communicator, frames = await ask(QUESTION, until=titled)
    await wait_for_runs()
    await communicator.disconnect()

    assert any(">Suzhou, 3 days: sights to visit" in frame for frame in frames)  # offline first
    assert 'id="conversation-link-' in frames[-1] and ">Three days in Suzhou</a>" in frames[-1]
    stored = await Conversation.objects.aget(pk=conversation.pk)
    assert (stored.title, stored.title_source) == ("Three days in Suzhou", "model")
    asked = server.requests[-1]
    assert "tools" not in asked and QUESTION in asked["messages"][-1]["content"]
    assert not server.unscripted


async def test_a_failing_title_request_keeps_the_offline_title_and_logs_why(server, caplog):
    server.script = [Reply(events=text_turn("Day 1.")), Reply(status=500, message="down")]

    with caplog.at_level(logging.ERROR, logger="chat.titles"):
        conversation, communicator, frames = await ask(QUESTION)
        await wait_for_runs()
        await communicator.disconnect()

    assert "status-succeeded" in frames[-1]  # the run did not fail
    assert await title_of(conversation) == OFFLINE
    assert "the model's title failed" in caplog.text
    assert len(server.requests) == 2


async def test_a_title_request_that_never_answers_gives_up_in_bounded_time(
    server, caplog, monkeypatch
):
    monkeypatch.setattr("chat.titles.TITLE_TIMEOUT_S", 0.2)
    server.script = [Reply(events=text_turn("Day 1.")), Reply(hang=True)]

    with caplog.at_level(logging.WARNING, logger="chat.titles"):
        conversation, communicator, frames = await ask(QUESTION)
        await wait_for_runs()
        await communicator.disconnect()

    assert "status-succeeded" in frames[-1]
    assert await title_of(conversation) == OFFLINE
    assert "no title from the model in time" in caplog.text


@pytest.mark.parametrize("given", ["Mum's birthday", OFFLINE])
async def test_a_title_the_owner_gave_is_never_overwritten(server, given):
    # Even one that repeats the offline title's words: it is the owner's now.
    server.script = [Reply(events=text_turn("Day 1.")), Reply(status=500, message="down")]
    conversation, communicator, _ = await ask(QUESTION)
    await wait_for_runs()
    await communicator.disconnect()
    run = await conversation.runs.afirst()
    owner = await database_sync_to_async(store.Owner.of)(
        await User.objects.aget(username="alice"), None
    )
    await database_sync_to_async(store.conversation_rename)(
        owner=owner, conversation_id=conversation.pk, title=given
    )
    server.script = [Reply(events=text_turn("Suzhou trip"))]

    assert await title_after_run(run.pk, None) == ""

    stored = await Conversation.objects.aget(pk=conversation.pk)
    assert (stored.title, stored.title_source) == (given, "owner")
    assert len(server.requests) == 2  # no title was asked for after the rename


async def test_a_rename_while_the_model_answers_wins(server, monkeypatch):
    server.script = [Reply(events=text_turn("Day 1.")), Reply(status=500, message="down")]
    conversation, communicator, _ = await ask(QUESTION)
    await wait_for_runs()
    await communicator.disconnect()
    run = await conversation.runs.afirst()

    async def renamed_meanwhile(messages):
        await Conversation.objects.filter(pk=conversation.pk).aupdate(
            title="Mine", title_source="owner"
        )
        return AIMessage("Suzhou trip")

    model = RunnableLambda(renamed_meanwhile)
    monkeypatch.setattr("chat.catalog.chat_model_for", lambda run=None: model)

    assert await title_after_run(run.pk, None) == ""
    assert await title_of(conversation) == "Mine"


async def test_only_the_first_run_of_a_conversation_asks_for_a_title(server):
    server.script = [Reply(events=text_turn("Day 1.")), Reply(events=text_turn("Suzhou trip")),
                     Reply(events=text_turn("Day 2."))]  # fmt: skip
    conversation, communicator, _ = await ask(QUESTION)
    await wait_for_runs()
    await communicator.send_to(text_data=json.dumps({"content": "And day 2?"}))
    frames = [await communicator.receive_from()]
    while not (ENDED.search(frames[-1]) and "Day 2." in "".join(frames)):
        frames.append(await communicator.receive_from())
    await wait_for_runs()
    await communicator.disconnect()

    assert await title_of(conversation) == "Suzhou trip"
    assert len(server.requests) == 3 and not server.unscripted


async def test_the_offline_demo_model_asks_for_no_title(settings):
    conversation, communicator, _ = await ask("What is 17*23?")
    await wait_for_runs()
    await communicator.disconnect()

    assert await title_of(conversation) == "17*23"


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ('"Suzhou gardens."', "Suzhou gardens"),
        ("<think>They want a title.</think>\nTitle: Suzhou gardens", "Suzhou gardens"),
        ("**Suzhou gardens**\nA chat about gardens.", "Suzhou gardens"),
        ("标题：苏州园林之旅。", "苏州园林之旅"),
        ("  ", ""),
    ],
)
def test_a_models_reply_is_cleaned_into_a_title(reply, title):
    assert clean_model_title(reply) == title


async def test_a_first_run_that_failed_asks_for_no_title(server):
    server.script = [Reply(status=500, message="model down")]
    conversation, communicator, frames = await ask(QUESTION)
    await wait_for_runs()
    await communicator.disconnect()

    assert "status-failed" in frames[-1]
    assert await title_of(conversation) == OFFLINE
    assert len(server.requests) == 1 and not server.unscripted


def test_the_fake_provider_tells_the_title_request_from_a_runs():
    """scripts/fake_provider.py answers the title request aside (it takes no step of a
    browser test's script): it knows the request by how the prompt starts."""
    from chat.titles import TITLE_PROMPT
    from scripts.fake_provider import TITLE_REQUEST

    assert TITLE_PROMPT.encode().startswith(TITLE_REQUEST)
