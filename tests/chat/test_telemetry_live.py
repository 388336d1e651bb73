"""Live OpenTelemetry export: each run that ends reaches a collector (a loopback one that
decodes the protobuf it is sent) as the GenAI conventions' spans, whatever the
collector does; feedback follows as an event; switched off, nothing runs."""

from __future__ import annotations

import logging
import socket
import threading
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone
from langchain_core.messages import AIMessage
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from agents.approvals import DENIED_BY_PERSON, Outcome
from agents.events import utcnow
from chat import owner, store
from chat.models import AgentRun, Conversation, Feedback
from chat.runs import create_run
from chat.traces import live
from chat.traces.ids import span_id_of, trace_id_of
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import TRAVEL_QUESTION
from tests.chat.test_interrupted import running_run
from tests.fakes import tool_call
from tests.otlp_collector import Collector, attributes
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What's the weather in Hangzhou, and what is 17*23?"
BOOKING = "check_bnb_availability"


@pytest.fixture
def collector():
    server = Collector()
    yield server
    server.close()


def live_export(url: str, *, capture_content: bool = False, timeout: float = WAIT_S):
    return live.LiveExport(
        OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=timeout),
        log_exporter=OTLPLogExporter(endpoint=f"{url}/v1/logs", timeout=timeout),
        capture_content=capture_content,
    )


@pytest.fixture
def exporting(settings, collector):
    """Live export on, to the loopback collector, content not captured."""
    settings.TELEMETRY_LIVE = True
    export = live_export(collector.url)
    previous = live.install(export)
    yield export
    export.shutdown(WAIT_S)
    live.install(previous)


def ask(question: str = QUESTION, *args: str) -> AgentRun:
    call_command("ask", question, *args, stdout=StringIO())
    return AgentRun.objects.latest("id")


def sent(collector: Collector, export: live.LiveExport, run: AgentRun) -> dict[str, list]:
    """Flush, then return the run's spans the collector has, by operation name."""
    assert export.flush(WAIT_S)
    by_operation: dict[str, list] = {}
    trace_id = trace_id_of(run.pk).to_bytes(16, "big")
    for span in collector.spans():
        if span.trace_id == trace_id:
            by_operation.setdefault(attributes(span)["gen_ai.operation.name"], []).append(span)
    return by_operation


@pytest.mark.parametrize("strategy", ["tool_calling", "react", "structured_chat", "xml"])
def test_every_strategys_run_is_sent_as_an_agent_span_with_turns_and_tool_calls(
    strategy, exporting, collector
):
    run = ask(QUESTION, "--strategy", strategy)
    spans = sent(collector, exporting, run)

    (root,) = spans["invoke_agent"]
    assert root.name == f"invoke_agent {run.agent_key}"
    assert root.parent_span_id == b""
    assert root.span_id == span_id_of(run.pk).to_bytes(8, "big")
    assert len(spans["chat"]) == run.steps.filter(kind="model_turn").count() >= 2
    assert {attributes(s)["gen_ai.tool.name"] for s in spans["execute_tool"]} == {
        "weather_forecast", "calculator"}  # fmt: skip
    for child in spans["chat"] + spans["execute_tool"]:
        assert child.parent_span_id == root.span_id
    root_attributes = attributes(root)
    assert root_attributes["agent_chat.run.status"] == "succeeded"
    assert root_attributes["agent_chat.run.strategy"] == strategy
    assert root_attributes["gen_ai.conversation.id"] == str(run.conversation_id)
    assert root_attributes["user.id"] == "(no owner)"
    assert root.status.code == 0 and "error.type" not in root_attributes
    # Usage on the chat spans only, the run's totals under our own namespace.
    assert not any(key.startswith("gen_ai.usage.") for key in root_attributes)
    assert root_attributes["agent_chat.run.usage.input_tokens"] == run.input_tokens
    turns = [attributes(s) for s in spans["chat"]]
    assert sum(t["gen_ai.usage.input_tokens"] for t in turns) == run.input_tokens
    assert all(t["gen_ai.request.model"] == run.model_name for t in turns)
    assert all(t["gen_ai.provider.name"] == "demo" for t in turns)
    assert turns[-1]["gen_ai.response.finish_reasons"] == ["stop"]
    # Times are the rows' own.
    assert root.start_time_unix_nano // 1000 == int(run.started_at.timestamp() * 1e6)


def test_a_tool_error_is_an_error_span_in_a_run_that_succeeded(scripted_model, exporting,
                                                               collector):  # fmt: skip
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("calculator", {"expression": "1/0"}, "call_a")]),
        AIMessage("Division by zero is undefined."),
    ]
    run = ask("what is 1/0?")
    spans = sent(collector, exporting, run)

    (tool,) = spans["execute_tool"]
    assert tool.status.code == 2  # STATUS_CODE_ERROR
    assert attributes(tool)["error.type"] == run.steps.get(kind="tool_call").error_type
    assert attributes(tool)["gen_ai.tool.call.id"] == "call_a"
    (root,) = spans["invoke_agent"]
    assert root.status.code == 0
    assert attributes(root)["agent_chat.run.tool_error_count"] == 1


def test_content_is_sent_only_when_capture_is_switched_on(settings, collector):
    settings.TELEMETRY_LIVE = True
    for capture in (False, True):
        export = live_export(collector.url, capture_content=capture)
        previous = live.install(export)
        run = ask()
        spans = sent(collector, export, run)
        export.shutdown(WAIT_S)
        live.install(previous)
        turn = attributes(spans["chat"][0])
        tool = attributes(spans["execute_tool"][0])
        if not capture:
            assert "gen_ai.input.messages" not in turn and "gen_ai.output.messages" not in turn
            assert "gen_ai.tool.call.arguments" not in tool
            continue
        assert '"role": "user"' in turn["gen_ai.input.messages"]
        assert QUESTION in turn["gen_ai.input.messages"]
        assert '"type": "tool_call"' in turn["gen_ai.output.messages"]
        assert "Hangzhou" in tool["gen_ai.tool.call.arguments"]
        assert "gen_ai.tool.call.result" in tool


def pause(user: User | None = None) -> AgentRun:
    """Ask the travel question in a new conversation; its booking call waits."""
    args = ["--user", user.username] if user is not None else []
    with pytest.raises(CommandError, match="waiting for approval"):
        call_command("ask", TRAVEL_QUESTION, *args, stdout=StringIO())
    run = AgentRun.objects.latest("id")
    assert run.status == "waiting"
    return run


def resume(run_id: int) -> None:
    """Resume a decided run as a server's owner does, and wait for it."""

    async def go() -> None:
        assert await owner.current().resume_ready([run_id]) == [run_id]
        await wait_for_runs()

    async_to_sync(go)()


@pytest.mark.parametrize("outcome", [Outcome.APPROVED, Outcome.DENIED])
def test_a_paused_run_is_sent_once_whole_when_it_ends_with_its_approval(
    outcome, settings, exporting, collector
):
    settings.AGENT_TOOL_POLICIES = {BOOKING: "ask"}
    user = User.objects.create_user("alice")
    run = pause(user)
    assert sent(collector, exporting, run) == {}  # a pause is not an end

    held = run.approvals.get()
    store.approval_decide(conversation_id=run.conversation_id, step_id=held.step_id,
                          outcome=outcome, by=user, at=utcnow(), reason="not today")  # fmt: skip
    resume(run.pk)
    run.refresh_from_db()
    assert run.status == "succeeded"
    spans = sent(collector, exporting, run)

    assert len(spans["invoke_agent"]) == 1
    assert attributes(spans["invoke_agent"][0])["user.id"] == "alice"
    assert len(spans["chat"]) == run.steps.filter(kind="model_turn").count()
    (booking,) = [s for s in spans["execute_tool"] if s.name == f"execute_tool {BOOKING}"]
    (event,) = booking.events
    assert event.name == "agent_chat.approval"
    decided = attributes(event)
    assert decided["agent_chat.approval.policy"] == "ask"
    assert decided["agent_chat.approval.outcome"] == outcome.value
    assert decided["agent_chat.approval.decided_by"] == "alice"
    assert decided["agent_chat.approval.reason"] == "not today"
    assert decided["agent_chat.approval.wait_ms"] >= 0
    assert booking.status.code == 0  # neither a denial nor the wait is an error
    if outcome == Outcome.DENIED:
        assert attributes(booking)["agent_chat.tool.refusal"] == DENIED_BY_PERSON
    # The span covers the wait: it starts when the call was held.
    assert booking.start_time_unix_nano // 1000 == int(held.requested_at.timestamp() * 1e6)


def test_a_waiting_run_that_is_stopped_is_sent_as_cancelled(settings, exporting, collector):
    settings.AGENT_TOOL_POLICIES = {BOOKING: "ask"}
    run = pause()
    owner.request_stop_sync(run.conversation_id)
    run.refresh_from_db()
    assert run.status == "cancelled"
    spans = sent(collector, exporting, run)

    (root,) = spans["invoke_agent"]
    assert attributes(root)["error.type"] == "cancelled"
    assert root.status.code == 2
    (booking,) = [s for s in spans["execute_tool"] if s.name == f"execute_tool {BOOKING}"]
    assert booking.status.code == 0  # it never ran: not a tool error
    assert attributes(booking.events[0])["agent_chat.approval.outcome"] == "cancelled"


def test_an_interrupted_run_is_sent_when_the_sweep_ends_it(settings, exporting, collector):
    settings.AGENT_STALE_AFTER_S = 60
    conversation = Conversation.objects.create()
    dead = running_run(conversation, heartbeat_age_s=120)
    create_run(conversation_id=conversation.pk, content="hello again")  # sweeps it
    spans = sent(collector, exporting, dead)

    (root,) = spans["invoke_agent"]
    assert attributes(root)["error.type"] == "interrupted"
    assert root.status.code == 2
    (tool,) = spans["execute_tool"]
    assert attributes(tool)["error.type"] == "interrupted"


def test_feedback_given_after_the_run_was_sent_follows_as_an_evaluation_event(exporting, collector):
    run = ask()
    sent(collector, exporting, run)
    now = timezone.now()
    feedback = Feedback.objects.create(run=run, rating="down", comment="wrong town",
                                       given_by_name="(guest)", created_at=now,
                                       updated_at=now)  # fmt: skip
    assert exporting.flush(WAIT_S)
    feedback.rating = "up"
    feedback.save()
    assert exporting.flush(WAIT_S)

    records = collector.log_records()
    assert [r.event_name for r in records] == ["gen_ai.evaluation.result"] * 2
    changed = attributes(records[-1])
    assert changed["gen_ai.evaluation.name"] == "user_feedback"
    assert changed["gen_ai.evaluation.score.label"] == "up"
    assert changed["gen_ai.evaluation.score.value"] == 1.0
    assert "gen_ai.evaluation.explanation" not in changed  # content is off
    assert records[-1].trace_id == trace_id_of(run.pk).to_bytes(16, "big")
    assert records[-1].span_id == span_id_of(run.pk).to_bytes(8, "big")


def test_feedback_taken_back_is_sent_as_a_withdrawal_the_latest_record(exporting, collector):
    run = ask()
    sent(collector, exporting, run)
    store.feedback_give(conversation_id=run.conversation_id, run_id=run.pk, by=None,
                        at=timezone.now(), rating="up")  # fmt: skip
    assert exporting.flush(WAIT_S)
    store.feedback_remove(conversation_id=run.conversation_id, run_id=run.pk)
    assert not Feedback.objects.filter(run=run).exists()
    assert exporting.flush(WAIT_S)

    given, withdrawn = collector.log_records()
    assert attributes(given)["gen_ai.evaluation.score.label"] == "up"
    assert withdrawn.event_name == "gen_ai.evaluation.result"
    assert withdrawn.span_id == span_id_of(run.pk).to_bytes(8, "big")
    assert withdrawn.time_unix_nano >= given.time_unix_nano
    assert attributes(withdrawn) == {
        "gen_ai.evaluation.name": "user_feedback",
        "agent_chat.feedback.withdrawn": True,
        "agent_chat.feedback.given_by": "(guest)",
        "agent_chat.run.id": run.pk,
    }


def test_a_run_sent_after_its_feedback_carries_it_on_its_span(exporting, collector):
    run = ask()
    assert exporting.flush(WAIT_S)
    now = timezone.now()
    Feedback.objects.create(run=run, rating="down", given_by_name="(guest)", created_at=now,
                            updated_at=now)  # fmt: skip
    exporting.submit_run(run.pk)  # sent again (the same ids)
    assert exporting.flush(WAIT_S)
    roots = [s for s in collector.spans() if s.name.startswith("invoke_agent")]
    assert [s.span_id for s in roots] == [span_id_of(run.pk).to_bytes(8, "big")] * 2
    (event,) = roots[-1].events
    assert event.name == "gen_ai.evaluation.result"
    assert attributes(event)["gen_ai.evaluation.score.value"] == 0.0


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_collector_that_is_down_fails_no_run_and_is_logged(settings, caplog):
    settings.TELEMETRY_LIVE = True
    export = live_export(f"http://127.0.0.1:{closed_port()}", timeout=1)
    previous = live.install(export)
    try:
        with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
            run = ask()
            assert run.status == "succeeded"
            export.flush(WAIT_S)
    finally:
        export.shutdown(WAIT_S)
        live.install(previous)
    lines = [r.getMessage() for r in caplog.records if r.name == "chat.traces.live"]
    assert any("could not be sent" in line and str(run.pk) in line for line in lines)


def test_a_slow_collector_does_not_hold_up_runs(exporting, collector):
    collector.hold()
    first = ask()
    flushing = threading.Thread(target=exporting.flush, args=(WAIT_S * 4,), daemon=True)
    flushing.start()
    assert collector.entered.wait(WAIT_S)  # the collector holds the first run's request

    second = ask()  # runs and ends while the collector still holds that request

    assert second.status == "succeeded"
    assert not collector.gate.is_set() and collector.traces == []
    collector.release()
    flushing.join(WAIT_S * 4)
    assert sent(collector, exporting, first)["invoke_agent"]
    assert sent(collector, exporting, second)["invoke_agent"]


def test_switched_off_a_run_starts_no_export_at_all(settings):
    settings.TELEMETRY_LIVE = False
    previous = live.install(None)
    try:
        ask()
        assert live.current() is None
        assert not any(t.name == "telemetry-export" for t in threading.enumerate())
    finally:
        live.install(previous)


def test_a_full_queue_drops_the_run_with_a_log_line_and_the_run_succeeds(settings, collector,
                                                                         caplog):  # fmt: skip
    settings.TELEMETRY_LIVE = True
    export = live.LiveExport(OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces"),
                             queue_size=1)  # fmt: skip
    previous = live.install(export)
    busy = threading.Event()
    export._thread = threading.Thread(target=busy.wait, args=(WAIT_S,), daemon=True)
    export._thread.start()  # as if its thread were busy
    export.queue.put(("run", 0))  # and the queue full
    try:
        with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
            run = ask()
        assert run.status == "succeeded"
        assert any("queue full" in r.getMessage() and str(run.pk) in r.getMessage()
                   for r in caplog.records)  # fmt: skip
    finally:
        busy.set()
        export._thread.join(WAIT_S)
        export.shutdown(WAIT_S)
        live.install(previous)


@pytest.mark.parametrize(
    ("environment", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"},
            False,
        ),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ],
)
def test_the_standard_environment_switches_live_export(monkeypatch, environment, on):
    from project.env import env_otel_traces_endpoint

    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_SDK_DISABLED"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert env_otel_traces_endpoint() is on


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("true", True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("false", False),
        ("NO_CONTENT", False),
        ("EVENT_ONLY", False),
        ("", False),
    ],
)
def test_content_capture_reads_the_genai_instrumentations_values(monkeypatch, value, on):
    from project.env import env_content_capture

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    assert env_content_capture("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", False) is on


def test_a_content_capture_value_that_means_nothing_stops_start_up(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from project.env import env_content_capture

    monkeypatch.setenv("TELEMETRY_CAPTURE_CONTENT", "sometimes")
    with pytest.raises(ImproperlyConfigured, match="TELEMETRY_CAPTURE_CONTENT"):
        env_content_capture("TELEMETRY_CAPTURE_CONTENT", False)


def test_a_stopping_process_sends_what_is_queued_and_takes_no_more(settings, collector,
                                                                   caplog):  # fmt: skip
    settings.TELEMETRY_LIVE = True
    export = live_export(collector.url)
    previous = live.install(export)
    try:
        run = ask()
        export.shutdown(WAIT_S)  # what atexit does: no flush before it
        assert f"invoke_agent {run.agent_key}" in {s.name for s in collector.spans()}
        with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
            export.submit_run(run.pk)
        assert any("not exported" in r.getMessage() for r in caplog.records)
    finally:
        live.install(previous)


def test_an_exporter_that_cannot_be_built_is_logged_and_fails_no_run(settings, monkeypatch,
                                                                      caplog):  # fmt: skip
    settings.TELEMETRY_LIVE = True

    def broken():
        raise ValueError("OTEL_EXPORTER_OTLP_CERTIFICATE: no such file")

    monkeypatch.setattr(live, "from_environment", broken)
    previous = live.install(None)
    try:
        with caplog.at_level(logging.ERROR, logger="chat.traces.live"):
            live.start()  # the server starting
            run = ask()
        assert run.status == "succeeded"
        messages = [r.getMessage() for r in caplog.records if r.name == "chat.traces.live"]
        assert any("could not start" in m for m in messages)
        assert any(f"exporting run {run.pk} failed" in m for m in messages)
    finally:
        live.install(previous)
