"""Reasoning through the consumer: stored on the model turn, shown folded, exported; tool
calls written into text found by the format-error filter."""

from __future__ import annotations

import csv
import dataclasses
import io
import types

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.utils import timezone
from langchain_core.messages import AIMessage

from agents.events import ModelTurnStarted, ReasoningDelta, TextDelta
from agents.providers import Quirks
from chat import fragments
from chat.admin import AgentRunAdmin
from chat.catalog import run_strategy
from chat.export import COLUMNS, csv_lines, trace_rows
from chat.models import AgentRun, AgentStep, Conversation, Message
from chat.recorder import TEXT_SYNC_INTERVAL_S, RunRecorder
from tests.chat.conftest import FrozenClock
from tests.chat.test_consumer import ask_over_socket, make_conversation
from tests.fakes import tool_call

SUZHOU_CALL = '<tool_call>{"name": "weather_forecast", "arguments": {"town": "Suzhou"}}</tool_call>'


@database_sync_to_async
def stored() -> tuple[AgentRun, list[AgentStep]]:
    run = AgentRun.objects.get()
    return run, list(run.steps.order_by("ordinal"))


@pytest.mark.django_db(transaction=True)
async def test_reasoning_is_streamed_stored_shown_folded_on_reload_and_exported(scripted_model):
    scripted_model.script = [
        AIMessage(
            "", additional_kwargs={"reasoning_content": "Need <the> forecast."},
            tool_calls=[tool_call("weather_forecast", {"town": "Suzhou"}, "c1")],
        ),
        AIMessage("<think>Sunny, say so. Action: none</think>\n\nSunny in **Suzhou**."),
    ]  # fmt: skip
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "Weather in Suzhou?")
    html = "\n".join(frames)

    run, steps = await stored()
    turns = [s for s in steps if s.kind == "model_turn"]
    assert [(t.reasoning, t.text) for t in turns] == [
        ("Need <the> forecast.", ""),
        ("Sunny, say so. Action: none", "Sunny in **Suzhou**."),
    ]
    assert run.status == "succeeded" and run.output == "Sunny in **Suzhou**."
    # Live: the reasoning went into the turn's folded element, escaped, never as text.
    assert f"beforeend:#step-{turns[0].pk}-reasoning" in html
    assert "Need &lt;the&gt; forecast." in html
    assert "Action: none" not in "".join(f for f in frames if "-text" in f and "beforeend" in f)

    # A reload draws the same fold from the rows, closed.
    client = Client()
    await database_sync_to_async(client.force_login)(user)
    page = (await database_sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert page.count('<details class="reasoning" data-reasoning>') == 2
    assert "<summary>thinking</summary>" in page
    assert "Sunny, say so. Action: none</div>" in page

    # The CSV has it in its own last column, not in model_text or result.
    rows = list(csv.DictReader(io.StringIO(await database_sync_to_async(export)())))
    assert COLUMNS.index("step_reasoning") == 34  # column 35 of docs/csv-format.md
    by_ordinal = {row["step_ordinal"]: row for row in rows}
    last = by_ordinal[str(turns[1].ordinal)]
    assert last["step_reasoning"] == "Sunny, say so. Action: none"
    assert "Action" not in last["model_text"] + last["result"]


def export() -> str:
    return "".join(csv_lines(trace_rows(AgentRun.objects.all())))


@pytest.mark.django_db(transaction=True)
async def test_a_call_written_as_text_is_a_format_error_the_admin_filter_finds(scripted_model):
    scripted_model.script = [AIMessage(SUZHOU_CALL), AIMessage("Sunny in Suzhou.")]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "Weather in Suzhou?")

    run, steps = await stored()
    assert [(s.kind, s.error_type) for s in steps] == [
        ("model_turn", ""), ("tool_call", "TextToolCall"), ("model_turn", ""),
    ]  # fmt: skip
    assert steps[1].is_format_error and steps[1].error.startswith("TextToolCall: ")
    assert run.format_error_count == 1 and run.tool_call_count == 0
    assert "1 format error" in frames[-1]
    found = await database_sync_to_async(_format_filter_ids)()
    assert found == [run.pk]


def _format_filter_ids() -> list[int]:
    from django.contrib.admin.sites import site

    from chat.admin import HasToolErrorsFilter

    admin = AgentRunAdmin(AgentRun, site)
    flt = HasToolErrorsFilter(None, {"has_tool_errors": "format"}, AgentRun, admin)
    return list(flt.queryset(None, AgentRun.objects.all()).values_list("pk", flat=True))


@pytest.mark.django_db
def test_run_strategy_reads_markup_calls_when_the_run_s_provider_says_so(monkeypatch):
    conversation = Conversation.objects.create()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    run = AgentRun.objects.create(conversation=conversation, user_message=question,
                                  strategy="tool_calling", provider="demo", model_name="m",
                                  started_at=timezone.now())  # fmt: skip
    assert run_strategy(run).options.text_tool_calls is False

    entry = run.provider_entry
    quirky = dataclasses.replace(entry, quirks=Quirks(text_tool_calls=True))
    monkeypatch.setattr(AgentRun, "provider_entry", property(lambda self: quirky))
    assert run_strategy(run).options.text_tool_calls is True


@database_sync_to_async
def _run_row() -> AgentRun:
    conversation = Conversation.objects.create()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    return AgentRun.objects.create(conversation=conversation, user_message=question,
                                   strategy="tool_calling", provider="demo", model_name="m",
                                   started_at=timezone.now())  # fmt: skip


@database_sync_to_async
def _step_row(step_id: int) -> AgentStep:
    return AgentStep.objects.select_related("run").get(pk=step_id)


@pytest.mark.django_db(transaction=True)
async def test_streamed_reasoning_is_saved_on_the_timer_not_per_token_and_survives_a_reload(
    monkeypatch,
):
    clock = FrozenClock()
    monkeypatch.setattr("chat.recorder.time", types.SimpleNamespace(monotonic=clock.monotonic))
    recorder = RunRecorder(await _run_row())
    started = await recorder.record(ModelTurnStarted(iteration=1))
    step_id = recorder.turns[1].step.pk

    first = await recorder.record(ReasoningDelta(iteration=1, text="Weigh "))
    assert first.streamed is not None and first.streamed.target == "reasoning"
    assert first.html == fragments.text_delta(step_id, "Weigh ", 0, target="reasoning")
    assert (await _step_row(step_id)).reasoning == ""  # not written per token

    clock.advance(TEXT_SYNC_INTERVAL_S + 0.01)
    snapshot = await recorder.record(ReasoningDelta(iteration=1, text="the <options>."))
    assert snapshot.streamed.whole and snapshot.html == fragments.reasoning_replaced(
        step_id, "Weigh the <options>."
    )
    step = await _step_row(step_id)
    assert step.reasoning == "Weigh the <options>."
    # A page opened now draws it from the row, in the element later deltas go into.
    reloaded = await database_sync_to_async(fragments.step_replaced)(step)
    assert f'id="step-{step_id}-reasoning">Weigh the &lt;options&gt;.</div>' in reloaded
    assert started.html and 'class="reasoning"' in started.html


@pytest.mark.django_db(transaction=True)
async def test_a_moved_delta_takes_the_streamed_text_into_the_reasoning_at_once():
    recorder = RunRecorder(await _run_row())
    await recorder.record(ModelTurnStarted(iteration=1))
    step_id = recorder.turns[1].step.pk
    await recorder.record(TextDelta(iteration=1, text="Thinking hard."))
    update = await recorder.record(ReasoningDelta(iteration=1, text="Thinking hard.", moved=True))

    assert update.streamed is None  # sent at once, not folded into held deltas
    assert fragments.text_replaced(step_id, "") in update.html
    assert fragments.reasoning_replaced(step_id, "Thinking hard.") in update.html
    step = await _step_row(step_id)
    assert (step.text, step.reasoning) == ("", "Thinking hard.")


@pytest.mark.django_db
def test_the_admin_run_page_shows_a_turn_s_reasoning_apart_from_its_text(client):
    from tests.chat.test_admin import staff_user

    conversation = Conversation.objects.create()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    run = AgentRun.objects.create(conversation=conversation, user_message=question,
                                  strategy="tool_calling", provider="demo", model_name="m",
                                  started_at=timezone.now())  # fmt: skip
    AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="model_turn",
                             status="success", text="Sunny.", result="Sunny.",
                             reasoning="Check <the> sky.", started_at=timezone.now())  # fmt: skip
    client.force_login(staff_user())
    page = client.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()

    assert '<details class="trace-reasoning">' in page
    assert "Check &lt;the&gt; sky." in page


async def test_ask_prints_reasoning_behind_a_prefix_apart_from_the_answer():
    from agents.events import ModelTurnFinished
    from chat.management.commands.ask import THINKING_PREFIX, TracePrinter
    from chat.recorder import Update

    out = io.StringIO()
    printer = TracePrinter(out)
    events = [
        ReasoningDelta(iteration=1, text="Line one\nline two"),
        TextDelta(iteration=1, text="Sunny."),
    ]
    for event in events:
        await printer(Update(event=event, run_id=1, conversation_id=1))
    assert out.getvalue() == (
        f"\n{THINKING_PREFIX}thinking:\n{THINKING_PREFIX}Line one\n{THINKING_PREFIX}line two\n"
        "Sunny."
    ).lstrip("\n")

    quiet = io.StringIO()
    printer = TracePrinter(quiet, stream_text=False)
    turn = ModelTurnFinished(
        iteration=1, text="Sunny.", tool_calls=(), invalid_tool_calls=(), usage=None,
        duration_ms=1, raw={}, reasoning="Look up.\nDone.",
    )  # fmt: skip
    await printer(Update(event=ReasoningDelta(iteration=1, text="x"), run_id=1, conversation_id=1))
    await printer(Update(event=turn, run_id=1, conversation_id=1))
    assert (
        quiet.getvalue()
        == f"{THINKING_PREFIX}thinking:\n{THINKING_PREFIX}Look up.\n{THINKING_PREFIX}Done.\n"
    )


async def test_the_publisher_coalesces_text_and_reasoning_each_into_its_own_element():
    from channels.layers import InMemoryChannelLayer

    from chat.live import GroupPublisher, group_name
    from chat.recorder import StreamedText, Update

    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(1), channel)
    # A rate cap far off: only another element's delta or a plain fragment sends what is
    # held; "m." joins "Hm" because no call yields before the publisher's sender runs.
    publisher = GroupPublisher(layer, 1, flush_s=3600)

    def delta(text: str, offset: int, target: str) -> Update:
        event = (ReasoningDelta if target == "reasoning" else TextDelta)(iteration=1, text=text)
        return Update(event=event, run_id=1, conversation_id=1,
                      streamed=StreamedText(7, text, offset, target=target))  # fmt: skip

    await publisher(delta("Hm", 0, "reasoning"))
    await publisher(delta("m.", 2, "reasoning"))
    await publisher(delta("Sun", 0, "text"))
    await publisher(Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1,
                           html="<div id='x'></div>"))  # fmt: skip

    sent = [(await layer.receive(channel))["html"] for _ in range(3)]
    assert sent == [
        fragments.text_delta(7, "Hmm.", 0, target="reasoning"),
        fragments.text_delta(7, "Sun", 0),
        "<div id='x'></div>",
    ]
