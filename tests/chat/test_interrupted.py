"""Runs whose process died are marked interrupted, so their conversation is not locked."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from langchain_core.messages import AIMessage

from chat import owner, store
from chat.models import AgentRun, AgentStep, Conversation, Message
from chat.runs import create_run
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


def running_run(conversation: Conversation, *, heartbeat_age_s: float) -> AgentRun:
    started = timezone.now() - timedelta(seconds=heartbeat_age_s + 5)
    message = Message.objects.create(conversation=conversation, role="user", content="q")
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider="demo", model_name="demo-scripted", started_at=started,
        heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age_s),
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=1, iteration=1, kind="tool_call", tool_name="weather_forecast",
        tool_call_id="c1", arguments={"town": "Suzhou"}, started_at=started,
    )  # fmt: skip
    return run


def test_a_run_without_a_heartbeat_is_interrupted_and_the_conversation_freed(settings):
    settings.AGENT_STALE_AFTER_S = 60
    conversation = Conversation.objects.create()
    dead = running_run(conversation, heartbeat_age_s=120)

    new = create_run(conversation_id=conversation.pk, content="hello again")

    dead.refresh_from_db()
    assert dead.status == "interrupted"
    assert "server stopped" in dead.error
    step = dead.steps.get()
    assert (step.status, step.tool_name) == ("error", "weather_forecast")
    assert new.status == "running"


def test_a_run_with_a_fresh_heartbeat_still_blocks_a_second_message(settings):
    settings.AGENT_STALE_AFTER_S = 60
    conversation = Conversation.objects.create()
    running_run(conversation, heartbeat_age_s=5)
    with pytest.raises(store.RunAlreadyGoing):
        create_run(conversation_id=conversation.pk, content="too soon")


def test_opening_the_page_shows_a_dead_run_as_interrupted(client, settings):
    settings.AGENT_STALE_AFTER_S = 60
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    running_run(conversation, heartbeat_age_s=300)
    client.force_login(user)

    html = client.get(f"/c/{conversation.pk}/").content.decode()

    assert 'data-status="interrupted"' in html
    assert "Working…" not in html


async def test_a_live_run_keeps_its_heartbeat_fresh(scripted_model, settings):
    from channels.db import database_sync_to_async

    settings.AGENT_HEARTBEAT_S = 0.05
    go_on = asyncio.Event()
    scripted_model.script = [AIMessage("slow " * 10)]
    scripted_model.gates = {5: go_on}  # mid-answer until a heartbeat has been written
    conversation = await database_sync_to_async(Conversation.objects.create)()
    run = await database_sync_to_async(create_run)(
        conversation_id=conversation.pk, content="take your time"
    )
    task = owner.current().start(run.pk)

    @database_sync_to_async
    def beaten() -> bool:
        heartbeat = AgentRun.objects.get(pk=run.pk).heartbeat_at
        return heartbeat > run.started_at + timedelta(seconds=0.05)

    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not await beaten():
        assert asyncio.get_running_loop().time() < deadline, "no heartbeat while running"
        await asyncio.sleep(0.05)
    go_on.set()
    finished = await asyncio.wait_for(task, WAIT_S)

    assert finished.status == "succeeded"


async def test_tabs_already_open_are_told_when_a_dead_run_is_marked_interrupted(settings):
    from channels.db import database_sync_to_async

    from tests.chat.test_consumer import connect

    settings.AGENT_STALE_AFTER_S = 60

    @database_sync_to_async
    def setup():
        user = User.objects.create_user("alice")
        conversation = Conversation.objects.create(owner=user)
        return user, conversation, running_run(conversation, heartbeat_age_s=5)

    @database_sync_to_async
    def age_heartbeat(run):
        AgentRun.objects.filter(pk=run.pk).update(
            heartbeat_at=timezone.now() - timedelta(seconds=300)
        )

    user, conversation, run = await setup()
    open_tab = await connect(conversation.pk, user)
    await open_tab.connect()
    assert 'data-status="running"' in await open_tab.receive_from()  # catch-up: still alive

    await age_heartbeat(run)  # its process died and time passed
    new_tab = await connect(conversation.pk, user)
    await new_tab.connect()

    told = await open_tab.receive_from()
    assert f'id="run-{run.pk}-status"' in told
    assert 'data-status="interrupted"' in told
    caught_up = await new_tab.receive_from()
    caught_up += await new_tab.receive_from()
    assert 'data-status="interrupted"' in caught_up
    await open_tab.disconnect()
    await new_tab.disconnect()


async def test_an_open_tab_is_told_when_a_run_goes_stale_without_a_reload(settings):
    """Found by the crash test: a tab that reconnected before the run went stale kept
    showing "Working…"; each process now sweeps stale runs every heartbeat."""
    import json as _json

    from channels.db import database_sync_to_async

    from tests.chat.test_consumer import connect, make_conversation

    settings.AGENT_HEARTBEAT_S = 0.05
    settings.AGENT_STALE_AFTER_S = 60
    user, conversation = await make_conversation()
    run = await database_sync_to_async(running_run)(conversation, heartbeat_age_s=1)
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    caught_up = await communicator.receive_from()  # the run, still running
    assert 'data-status="running"' in caught_up

    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        heartbeat_at=timezone.now() - timedelta(seconds=120)
    )
    frame = await communicator.receive_from()
    assert 'data-status="interrupted"' in frame and "send your message again" in frame
    assert "The server stopped before this step finished." in frame
    await communicator.send_to(text_data=_json.dumps({"type": "cancel"}))
    assert "Nothing to stop" in await communicator.receive_from()
    await communicator.disconnect()
    run = await database_sync_to_async(AgentRun.objects.get)(pk=run.pk)
    assert run.iterations == 1 and run.status == "interrupted"


def test_a_stopped_run_with_no_heartbeat_since_is_taken_for_dead(settings):
    """Stop pressed on a run whose process died: no wait for the stale cut-off."""
    settings.AGENT_HEARTBEAT_S = 10
    settings.AGENT_STALE_AFTER_S = 60
    conversation = Conversation.objects.create()
    dead = running_run(conversation, heartbeat_age_s=45)  # not stale yet
    AgentRun.objects.filter(pk=dead.pk).update(
        cancel_requested_at=timezone.now() - timedelta(seconds=31)
    )
    (interrupted,) = store.runs_interrupt_stale(now=timezone.now())
    assert interrupted.pk == dead.pk and interrupted.status == "interrupted"

    alive = running_run(conversation, heartbeat_age_s=1)  # beat after the request: alive
    AgentRun.objects.filter(pk=alive.pk).update(
        cancel_requested_at=timezone.now() - timedelta(seconds=31)
    )
    assert store.runs_interrupt_stale(now=timezone.now()) == []
