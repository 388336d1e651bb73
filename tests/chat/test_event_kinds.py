"""Every kind of event in agents/events.py goes through every consumer of events.

The consumers are the recorder (rows and the page's fragments), the live page's publisher
and ``manage.py ask``'s trace printer. Each has one dispatch with a loud default: a kind it
does not know is a ``TypeError``, never silence. Adding a kind (docs/architecture.md,
"Adding an event kind") starts by adding it to :data:`ONE_OF_EACH` below; the first test
fails until then.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import typing
from io import StringIO

import pytest
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer
from django.utils import timezone

from agents import events
from agents.events import (
    ApprovalRequested,
    Event,
    ModelTurnFinished,
    ModelTurnStarted,
    ReasoningDelta,
    RunFinished,
    RunPaused,
    RunStarted,
    RunStatus,
    StepStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from chat.live import GroupPublisher, group_name
from chat.management.commands.ask import TracePrinter
from chat.models import AgentRun, Conversation, Message
from chat.recorder import RunRecorder

pytestmark = pytest.mark.django_db(transaction=True)

ONE_OF_EACH: list[Event] = [
    RunStarted(model="m", tools=("weather_forecast",), strategy="tool_calling"),
    ModelTurnStarted(iteration=1),
    ReasoningDelta(iteration=1, text="The user wants Suzhou's weather."),
    TextDelta(iteration=1, text="Checking "),
    ModelTurnFinished(
        iteration=1,
        text="Checking ",
        usage={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        duration_ms=4,
        raw={},
        tool_calls=(
            {"name": "weather_forecast", "args": {"town": "Suzhou"}, "id": "call_1"},
            {"name": "check_bnb_availability", "args": {"town": "Suzhou"}, "id": "call_2"},
        ),
        invalid_tool_calls=(),
        reasoning="The user wants Suzhou's weather.",
    ),
    ToolCallStarted(
        iteration=1, tool_call_id="call_1", name="weather_forecast", args={"town": "Suzhou"}
    ),
    ToolCallFinished(
        iteration=1,
        tool_call_id="call_1",
        name="weather_forecast",
        status=StepStatus.SUCCESS,
        result="Sunny.\n[image: image/png, 3 bytes]",
        observation="Sunny.\n[image: image/png, 3 bytes]",
        error="",
        duration_ms=3,
        blocks=(
            {"type": "text", "text": "Sunny."},
            {"type": "image", "base64": "iVBO", "mime_type": "image/png"},
        ),
        artifact={"high_c": 8},
    ),
    ApprovalRequested(
        iteration=1, tool_call_id="call_2", name="check_bnb_availability", args={"town": "Suzhou"}
    ),
    RunPaused(iterations=1, pending=("call_2",), usage={"total_tokens": 5}),
    RunFinished(status=RunStatus.SUCCEEDED, output="Sunny.", iterations=1),
]
"""One event of each kind, in an order a run could yield them."""


@dataclasses.dataclass(frozen=True)
class TrialEvent:
    """A kind no consumer knows yet."""

    iteration: int = 1


def test_one_of_each_covers_every_event_class_and_the_union_names_them_all():
    defined = {
        cls
        for _, cls in inspect.getmembers(events, inspect.isclass)
        if dataclasses.is_dataclass(cls) and cls.__module__ == events.__name__
    }
    assert set(typing.get_args(Event)) == defined
    assert {type(event) for event in ONE_OF_EACH} == defined


@database_sync_to_async
def _new_run() -> AgentRun:
    conversation = Conversation.objects.create()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    return AgentRun.objects.create(conversation=conversation, user_message=question,
                                   strategy="tool_calling", provider="demo", model_name="m",
                                   started_at=timezone.now())  # fmt: skip


async def test_every_kind_is_recorded_published_and_printed():
    run = await _new_run()
    recorder = RunRecorder(run)
    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(run.conversation_id), channel)
    publisher = GroupPublisher(layer, run.conversation_id, flush_s=0)
    out = StringIO()
    printer = TracePrinter(out)

    for event in ONE_OF_EACH:
        update = await recorder.record(event)
        assert update.event is event
        # Every kind but the run's start shows on the page.
        assert bool(update.html) is not isinstance(event, RunStarted), event
        await publisher(update)
        await printer(update)

    frames = [(await asyncio.wait_for(layer.receive(channel), 10))["html"] for _ in ONE_OF_EACH[1:]]
    assert 'data-status="succeeded"' in frames[-1]
    assert "→ weather_forecast" in out.getvalue() and "Run " in out.getvalue()
    assert "│ The user wants Suzhou's weather." in out.getvalue()


async def test_a_kind_a_consumer_does_not_know_is_a_type_error_not_silence():
    run = await _new_run()
    update = await RunRecorder(run).record(ONE_OF_EACH[0])
    with pytest.raises(TypeError, match="TrialEvent"):
        await RunRecorder(run).record(TrialEvent())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TrialEvent"):
        await TracePrinter(StringIO())(dataclasses.replace(update, event=TrialEvent()))
