"""Live export: each run that ends is sent as spans to the OTLP endpoint the standard
OpenTelemetry environment names, in the background; feedback given later follows as
the conventions' ``gen_ai.evaluation.result`` event (an OTLP log record).

Off (no ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or
``OTEL_SDK_DISABLED=true``: ``settings.TELEMETRY_LIVE``), a run's end costs one settings
read: no query, no thread, no OpenTelemetry import. On, the store hands each ended run's
id over when its transaction commits; a bounded queue feeds one daemon thread that
loads the runs waiting (:func:`chat.traces.loading.loaded_runs`, up to
:data:`RUNS_PER_LOAD` in one read), builds their spans
(:func:`chat.traces.spans.run_spans`) and gives them to the SDK's
``BatchSpanProcessor``, whose own thread sends them with the SDK's ``OTLPSpanExporter``
(endpoint, headers, timeout and compression from the environment). A collector that is
down or slow never slows, fails or loses a run: the rows are written first, a full
queue drops (and logs) what it cannot hold, and what could not be sent is logged with
its run ids. docs/telemetry.md says more.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections, transaction

if TYPE_CHECKING:
    from opentelemetry.sdk._logs.export import LogRecordExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger(__name__)

RUN_QUEUE_SIZE = 1000  # ids of runs waiting to be built into spans
RUNS_PER_LOAD = 100  # runs ended meanwhile are read together: a few queries for them all
COLLECT_S = 0.25  # how long the thread waits for more runs before reading them
SPAN_QUEUE_SIZE = 8192  # the BatchSpanProcessor's bound, in spans
FLUSH_TIMEOUT_S = 5.0  # what a stopping process gives export, at most
DROPPED = "telemetry: export queue full (%d); %s %s not exported"
NOT_SENT = "telemetry: %d span(s) of run(s) %s could not be sent to the collector"
FAILED = "telemetry: exporting %s %s failed"
COST = "telemetry: %d run(s) exported; CPU %.3f s reading and building spans, %.3f s sending"
LOGS_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")


class LiveExport:
    """The process's live export: a queue of ended runs (and feedback), one thread that
    builds their spans, and the SDK's processors that send them.

    ``span_exporter`` is any SDK ``SpanExporter`` (``OTLPSpanExporter`` in production);
    ``log_exporter``, when given, carries feedback events as log records; without one,
    feedback reaches telemetry only with its run's spans. ``capture_content`` includes
    messages, tool arguments and results (:func:`chat.traces.spans.run_spans`). Every
    method returns at once and never raises: export problems are logged.
    """

    def __init__(
        self,
        span_exporter: SpanExporter,
        *,
        capture_content: bool = False,
        resource: Resource | None = None,
        log_exporter: LogRecordExporter | None = None,
        queue_size: int = RUN_QUEUE_SIZE,
    ) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from chat.traces.spans import default_resource

        self.capture_content = capture_content
        self.resource = resource or default_resource()
        self.reporting = _Reporting(span_exporter)
        self.processor = BatchSpanProcessor(self.reporting, max_queue_size=SPAN_QUEUE_SIZE)
        self.log_provider: Any = None
        self.event_logger: Any = None
        if log_exporter is not None:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

            self.log_provider = LoggerProvider(resource=self.resource, shutdown_on_exit=False)
            self.log_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
            self.event_logger = self.log_provider.get_logger("agent_chat.traces")
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        # What export cost this process (its own threads' CPU, time.thread_time): logged
        # at shutdown, where bench/load.py reads it.
        self.runs_sent = 0
        self.build_cpu_s = 0.0

    def submit_run(self, run_id: int) -> None:
        """Queue run ``run_id`` (ended) to be sent; drop it with a log line when full."""
        self._put(("run", run_id))

    def submit_feedback(self, feedback_id: int) -> None:
        """Queue feedback ``feedback_id`` to be sent as an event of its run's span."""
        if self.event_logger is not None:
            self._put(("feedback", feedback_id))

    def _put(self, item: tuple[str, int]) -> None:
        if self._closed:
            logger.warning(DROPPED, 0, *item)
            return
        self.start()
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            logger.warning(DROPPED, self.queue.maxsize, *item)

    def start(self) -> None:
        """Start the thread that builds spans, if it is not running (idempotent)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="telemetry-export",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def _work(self) -> None:
        while True:
            items = [self.queue.get()]
            # Runs that end within COLLECT_S of it are read with it: one read for many.
            until = time.monotonic() + COLLECT_S
            while len(items) < RUNS_PER_LOAD and isinstance(items[-1], tuple):
                try:
                    items.append(self.queue.get(timeout=max(0.0, until - time.monotonic())))
                except queue.Empty:
                    break
            try:
                if not self._handle(items):
                    return
            finally:
                for _ in items:
                    self.queue.task_done()

    def _handle(self, items: list[Any]) -> bool:
        """Send the runs and feedback of ``items``, then release their flush markers;
        return False once told to stop."""
        began = time.thread_time()
        run_ids = [item[1] for item in items if isinstance(item, tuple) and item[0] == "run"]
        feedback_ids = [item[1] for item in items
                        if isinstance(item, tuple) and item[0] == "feedback"]  # fmt: skip
        try:
            if run_ids:
                self._send_runs(run_ids)
        except Exception:
            logger.exception(FAILED, "runs", run_ids)
        for feedback_id in feedback_ids:
            try:
                self._send_feedback(feedback_id)
            except Exception:
                logger.exception(FAILED, "feedback", feedback_id)
        # Django's end-of-request hygiene: a connection past CONN_MAX_AGE or broken goes.
        close_old_connections()
        self.build_cpu_s += time.thread_time() - began
        for item in items:
            if isinstance(item, threading.Event):  # a flush marker: all before it done
                item.set()
        return None not in items

    def _send_runs(self, run_ids: list[int]) -> None:
        from chat.models import AgentRun
        from chat.traces.loading import loaded_runs
        from chat.traces.redaction import active
        from chat.traces.spans import NOT_ENDED, run_spans

        redactor = active()
        for run in loaded_runs(AgentRun.objects.filter(pk__in=run_ids)):
            if run.status in NOT_ENDED:
                continue  # resumed meanwhile: its next end sends it whole
            spans = run_spans(run, redactor=redactor, capture_content=self.capture_content,
                              resource=self.resource)  # fmt: skip
            for span in spans:
                self.processor.on_end(span)
            self.runs_sent += 1

    def _send_feedback(self, feedback_id: int) -> None:
        from opentelemetry._logs import SeverityNumber
        from opentelemetry.trace import NonRecordingSpan, set_span_in_context

        from chat.models import Feedback
        from chat.traces.ids import ns, run_context
        from chat.traces.redaction import active
        from chat.traces.spans import EVALUATION_EVENT, feedback_attributes

        feedback = Feedback.objects.filter(pk=feedback_id).first()
        if feedback is None:
            return
        redactor = active()
        attributes = feedback_attributes(feedback, capture_content=self.capture_content)
        attributes = {key: redactor.text(value) if isinstance(value, str) else value
                      for key, value in attributes.items() if value is not None}  # fmt: skip
        attributes["agent_chat.run.id"] = feedback.run_id
        context = set_span_in_context(NonRecordingSpan(run_context(feedback.run_id)))
        self.event_logger.emit(
            timestamp=ns(feedback.updated_at), context=context, event_name=EVALUATION_EVENT,
            severity_number=SeverityNumber.INFO, attributes=attributes,
        )  # fmt: skip

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait up to ``timeout_s`` seconds for the queued runs to be built and their
        spans (and events) sent; return True if all were in time."""
        deadline = time.monotonic() + timeout_s
        done = True
        if self._thread is not None and self._thread.is_alive():
            marker = threading.Event()
            try:
                self.queue.put(marker, timeout=max(0.0, deadline - time.monotonic()))
                done = marker.wait(max(0.0, deadline - time.monotonic()))
            except queue.Full:
                done = False
        left_ms = max(0, int((deadline - time.monotonic()) * 1000))
        done = self.processor.force_flush(left_ms) and done
        if self.log_provider is not None:
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            done = bool(self.log_provider.force_flush(left_ms)) and done
        return done

    def shutdown(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Flush (up to ``timeout_s`` seconds, logged if not all was sent), then stop the
        thread and the SDK's processors; later runs are dropped with a log line."""
        if self._closed:
            return
        deadline = time.monotonic() + timeout_s
        if not self.flush(timeout_s):
            logger.warning("telemetry: not everything was sent within %g s at shutdown",
                           timeout_s)  # fmt: skip
        self._closed = True
        if self._thread is not None:
            with contextlib.suppress(queue.Full):  # the thread is a daemon: it goes with us
                self.queue.put_nowait(None)
            if self._thread.is_alive():
                self._thread.join(max(0.0, deadline - time.monotonic()))
        self.processor.shutdown()
        if self.log_provider is not None:
            self.log_provider.shutdown()
        logger.info(COST, self.runs_sent, self.build_cpu_s, self.reporting.send_cpu_s)


class _Reporting:
    """A span exporter that logs the runs of every batch its inner exporter could not
    send (the SDK's own log line names no run)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.send_cpu_s = 0.0  # CPU of the batch processor's thread in export()

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        from chat.traces.spans import span_run_ids

        began = time.thread_time()
        try:
            result = self.inner.export(spans)
        except Exception:
            logger.exception("telemetry: the span exporter raised")
            result = SpanExportResult.FAILURE
        self.send_cpu_s += time.thread_time() - began
        if result is not SpanExportResult.SUCCESS:
            logger.warning(NOT_SENT, len(spans), span_run_ids(spans) or "?")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def from_environment() -> LiveExport:
    """Return a live export configured by the standard OpenTelemetry environment: the
    SDK's ``OTLPSpanExporter`` (proto over HTTP) reads the endpoint, headers, timeout
    and compression itself; feedback events go to ``OTLPLogExporter`` when the
    environment names an endpoint for logs too (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    log_exporter = None
    if any(os.environ.get(name, "").strip() for name in LOGS_ENDPOINTS):
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

        log_exporter = OTLPLogExporter()
    return LiveExport(OTLPSpanExporter(), capture_content=settings.TELEMETRY_CAPTURE_CONTENT,
                      log_exporter=log_exporter)  # fmt: skip


_current: LiveExport | None = None
_current_lock = threading.Lock()


def current() -> LiveExport | None:
    """Return this process's live export (built from the environment at first use, shut
    down at exit with a bounded flush), or None when it is off."""
    global _current
    if not settings.TELEMETRY_LIVE:
        return None
    with _current_lock:
        if _current is None:
            _current = from_environment()
            atexit.register(_current.shutdown)
        return _current


def start() -> None:
    """Build this process's live export and start its thread now (a server starting),
    not at its first run's end; nothing when it is off. Never raises."""
    try:
        export = current()
        if export is not None:
            export.start()
    except Exception:  # a bad OTEL_* value: logged, and the server serves all the same
        logger.exception("telemetry: live export could not start")


def install(export: LiveExport | None) -> LiveExport | None:
    """Make ``export`` this process's live export (tests, benchmarks); return the one it
    replaces, which the caller shuts down."""
    global _current
    with _current_lock:
        previous, _current = _current, export
    return previous


def run_ended(run_id: int) -> None:
    """Hand run ``run_id``, which just reached its final status, to live export once
    the current transaction commits (at once outside one); nothing when it is off.

    Called by every place in ``chat.store`` that ends a run; never raises.
    """
    if settings.TELEMETRY_LIVE:
        transaction.on_commit(lambda: _submit("run", run_id))


def feedback_saved(feedback_id: int) -> None:
    """Send feedback ``feedback_id`` as an event of its run's span once the current
    transaction commits; nothing when live export (or its log exporter) is off."""
    if settings.TELEMETRY_LIVE:
        transaction.on_commit(lambda: _submit("feedback", feedback_id))


def _submit(kind: str, pk: int) -> None:
    try:
        export = current()
        if export is None:
            return
        if kind == "run":
            export.submit_run(pk)
        else:
            export.submit_feedback(pk)
    except Exception:  # telemetry never fails the run that already committed
        logger.exception(FAILED, kind, pk)

