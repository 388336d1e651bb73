"""Live export stays within its bounds whatever the collector does: a stopping process
waits no longer than its budget, a run's spans go whole or are dropped with a log line
naming the run (never the SDK's silent drop of the oldest), and one failure does not end
the export thread."""

from __future__ import annotations

import logging
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import OperationalError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chat.models import AgentRun, AgentStep
from chat.traces import live
from chat.traces.ids import span_id_of
from tests.otlp_collector import Collector
from tests.timing import WAIT_S, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def ask() -> AgentRun:
    call_command("ask", "What is 17*23?", stdout=StringIO())
    return AgentRun.objects.latest("id")


def with_extra_steps(run: AgentRun, count: int) -> int:
    """Copy the run's last step ``count`` times after it; return the run's span count."""
    template = run.steps.order_by("ordinal").last()
    copies = []
    for i in range(1, count + 1):
        step = AgentStep.objects.get(pk=template.pk)
        step.pk, step.ordinal = None, template.ordinal + i
        copies.append(step)
    AgentStep.objects.bulk_create(copies, batch_size=2000)
    return run.steps.count() + 1


class Gated(InMemorySpanExporter):
    """An in-memory exporter whose first export waits for ``gate`` (a slow collector)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def export(self, spans):
        self.entered.set()
        self.gate.wait(WAIT_S)
        return super().export(spans)


@pytest.fixture
def small_span_queue(monkeypatch):
    """A span queue of 50 spans, handed over 10 at a time for a run bigger than it."""
    monkeypatch.setattr(live, "SPAN_QUEUE_SIZE", 50)
    monkeypatch.setattr(live, "SPAN_PIECE", 10)


# The exporter would wait this long for the held request; the export must not.
HELD_REQUEST_TIMEOUT_S = 10 * WAIT_S


def in_a_thread(call, *args) -> threading.Event:
    """Start ``call(*args)`` in a daemon thread; return an event set once it returns."""
    done = threading.Event()

    def target():
        call(*args)
        done.set()

    threading.Thread(target=target, daemon=True).start()
    return done


def test_shutdown_within_its_timeout_while_the_collector_holds_a_request(settings, caplog):
    collector = Collector()
    collector.hold()  # accepts the request and does not answer until released
    export = live.LiveExport(OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces",
                                              timeout=HELD_REQUEST_TIMEOUT_S))  # fmt: skip
    try:
        export.submit_run(ask().pk)
        export.flush(0.5)  # starts the send, which the collector holds
        assert collector.entered.wait(WAIT_S)
        with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
            stopped = in_a_thread(export.shutdown, 1.0)
            # Returned while the request is still held: the stop did not wait for the
            # exporter's own time-out (ten times this wait), whatever the machine's speed.
            assert stopped.wait(WAIT_S), "shutdown(1.0) waited for the held request"
    finally:
        collector.close()
    assert any("did not stop within" in r.getMessage() for r in caplog.records)


def test_flush_returns_within_its_timeout_while_the_collector_holds_a_request():
    collector = Collector()
    collector.hold()
    export = live.LiveExport(OTLPSpanExporter(endpoint=f"{collector.url}/v1/traces",
                                              timeout=HELD_REQUEST_TIMEOUT_S))  # fmt: skip
    try:
        export.submit_run(ask().pk)
        in_a_thread(export.flush, 0.5)
        assert collector.entered.wait(WAIT_S)
        results = []
        flushed = in_a_thread(lambda: results.append(export.flush(1.0)))
        assert flushed.wait(WAIT_S), "flush(1.0) waited for the held request"
        assert results == [False]
    finally:
        collector.release()
        export.shutdown(WAIT_S)
        collector.close()


def test_a_run_bigger_than_the_span_queue_goes_whole_in_pieces_root_first(
    settings, small_span_queue, monkeypatch, caplog
):
    monkeypatch.setattr(live, "ROOM_WAIT_S", WAIT_S)
    settings.TELEMETRY_LIVE = False
    run = ask()
    total = with_extra_steps(run, 120)
    exporter = Gated()
    export = live.LiveExport(exporter)
    try:
        with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
            export.submit_run(run.pk)
            # The queue is full and the export thread waits for room: the collector is slow.
            wait_until(lambda: export.reporting.pending == 50 and exporter.entered.is_set(),
                       "a full span queue")  # fmt: skip
            exporter.gate.set()
            assert export.flush(WAIT_S)
    finally:
        export.shutdown(WAIT_S)
    spans = exporter.get_finished_spans()
    assert len(spans) == total
    assert spans[0].context.span_id == span_id_of(run.pk)
    assert export.runs_sent == 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_run_that_finds_no_room_in_time_is_dropped_whole_and_named(
    settings, small_span_queue, monkeypatch, caplog
):
    monkeypatch.setattr(live, "ROOM_WAIT_S", 0.2)
    settings.TELEMETRY_LIVE = False
    first = ask()
    first_total = with_extra_steps(first, 40 - first.steps.count() - 1)  # 40 spans: fits
    second = ask()
    second_total = with_extra_steps(second, 15)
    exporter = Gated()
    export = live.LiveExport(exporter)
    try:
        with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
            export.submit_run(first.pk)
            wait_until(lambda: export.reporting.pending == first_total, "the first run queued")
            export.submit_run(second.pk)
            wait_until(lambda: any(str(second.pk) in r.getMessage() for r in caplog.records),
                       "the second run's drop logged")  # fmt: skip
            exporter.gate.set()
            assert export.flush(WAIT_S)
    finally:
        export.shutdown(WAIT_S)
    run_ids = {s.attributes["agent_chat.run.id"] for s in exporter.get_finished_spans()}
    assert run_ids == {first.pk}
    assert len(exporter.get_finished_spans()) == first_total
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"run {second.pk} not exported ({second_total} span(s))" in line
    assert export.runs_sent == 1


def test_a_failure_outside_the_guarded_calls_does_not_end_live_export(settings, monkeypatch,
                                                                     caplog):  # fmt: skip
    settings.TELEMETRY_LIVE = False
    first, second = ask(), ask()
    failures = [OperationalError("server closed the connection unexpectedly")]

    def close_old_connections():
        if failures:
            raise failures.pop()

    monkeypatch.setattr(live, "close_old_connections", close_old_connections)
    exporter = InMemorySpanExporter()
    export = live.LiveExport(exporter)
    try:
        with caplog.at_level(logging.ERROR, logger="chat.traces.live"):
            export.submit_run(first.pk)
            assert export.flush(WAIT_S)
        assert any(r.exc_info and r.exc_info[0] is OperationalError for r in caplog.records)
        export.submit_run(second.pk)
        assert export.flush(WAIT_S)
    finally:
        export.shutdown(WAIT_S)
    run_ids = {s.attributes["agent_chat.run.id"] for s in exporter.get_finished_spans()}
    assert run_ids == {first.pk, second.pk}


def test_an_export_thread_that_ended_is_started_again_by_the_next_run(settings):
    settings.TELEMETRY_LIVE = False
    run = ask()
    exporter = InMemorySpanExporter()
    export = live.LiveExport(exporter)
    try:
        export.start()
        dead = export._thread
        export.queue.put(None)  # what ends the thread
        dead.join(WAIT_S)
        assert not dead.is_alive()
        export.submit_run(run.pk)
        assert export.flush(WAIT_S)
        assert export._thread is not dead
    finally:
        export.shutdown(WAIT_S)
    assert {s.attributes["agent_chat.run.id"] for s in exporter.get_finished_spans()} == {run.pk}


def test_a_protocol_other_than_http_protobuf_is_logged_at_start_up(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with caplog.at_level(logging.WARNING, logger="chat.traces.live"):
        export = live.from_environment()
    export.shutdown(WAIT_S)
    assert any("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported" in r.getMessage()
               for r in caplog.records)  # fmt: skip
