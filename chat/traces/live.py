"""Live export: each run that ends is sent as spans to the OTLP endpoint the standard
OpenTelemetry environment names, in the background; feedback given, changed or withdrawn
later follows as the conventions' ``gen_ai.evaluation.result`` event (an OTLP log record).

Off (no ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or
``OTEL_SDK_DISABLED=true``: ``settings.TELEMETRY_LIVE``), a run's end costs one settings
read: no query, no thread, no OpenTelemetry import. On, the store hands each ended run's
id over when its transaction commits; a bounded queue feeds one daemon thread that
loads the runs waiting (:func:`chat.store.runs_in_chunks`, up to
:data:`RUNS_PER_LOAD` in one read), builds their spans
(:func:`chat.traces.spans.run_spans`) and gives them to the SDK's
``BatchSpanProcessor``, whose own thread sends them with the SDK's ``OTLPSpanExporter``
(endpoint, headers, timeout and compression from the environment). A collector that is
down or slow never slows, fails or loses a run: the rows are written first, a full
queue drops (and logs) what it cannot hold, a run's spans are handed over only when the
span queue has room for them (else the run is dropped whole, logged), what could not be
sent is logged with its run ids, and a stopping process waits for none of it longer than
its budget. docs/telemetry.md says more.
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

from chat.traces.sending import STOP_GRACE_S, Reporting, emit_evaluation, in_thread, span_limits

if TYPE_CHECKING:
    from opentelemetry.sdk._logs.export import LogRecordExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanLimits
    from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger(__name__)

RUN_QUEUE_SIZE = 1000  # ids of runs waiting to be built into spans
RUNS_PER_LOAD = 100  # runs ended meanwhile are read together: a few queries for them all
COLLECT_S = 0.25  # how long the thread waits for more runs before reading them
SPAN_QUEUE_SIZE = 8192  # the BatchSpanProcessor's bound, in spans
SPAN_PIECE = 512  # a run bigger than the span queue goes in pieces of the SDK's batch size
ROOM_WAIT_S = 10.0  # how long a run's spans wait for room in the span queue, at most
FLUSH_TIMEOUT_S = 5.0  # what a stopping process gives export, at most
DROPPED = "telemetry: export queue full (%d); %s %s not exported"
FAILED = "telemetry: exporting %s %s failed"
NO_ROOM = "telemetry: no room in the span queue within %g s; run %d not exported (%d span(s))"
CUT_SHORT = (
    "telemetry: no room in the span queue within %g s; run %d cut short: "
    "%d of its %d span(s) not exported"
)
THREAD_FAILED = "telemetry: the export thread failed; it goes on with the next runs"
ABANDONED = (
    "telemetry: the exporter did not stop within %g s (a collector that hangs?); "
    "left behind, %d span(s) not sent"
)
PROTOCOL = "telemetry: %s=%s is not supported; sending http/protobuf to the same endpoint"
COST = "telemetry: %d run(s) exported; CPU %.3f s reading and building spans, %.3f s sending"
FEEDBACK_KINDS = ("feedback", "withdrawn")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
LOGS_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")


class LiveExport:
    """The process's live export: a queue of ended runs (and feedback), one thread that
    builds their spans, and the SDK's processors that send them.

    ``span_exporter`` is any SDK ``SpanExporter`` (``OTLPSpanExporter`` in production);
    ``log_exporter``, when given, carries feedback events as log records; without one,
    feedback reaches telemetry only with its run's spans. ``capture_content`` includes
    messages, tool arguments and results (:func:`chat.traces.spans.run_spans`);
    ``limits`` bound every span (default :func:`span_limits`). Every method returns at
    once (``flush`` and ``shutdown`` within their timeout) and never raises: export
    problems are logged.
    """

    def __init__(
        self,
        span_exporter: SpanExporter,
        *,
        capture_content: bool = False,
        resource: Resource | None = None,
        log_exporter: LogRecordExporter | None = None,
        queue_size: int = RUN_QUEUE_SIZE,
        limits: SpanLimits | None = None,
    ) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from chat.traces.spans import default_resource

        self.capture_content = capture_content
        self.resource = resource or default_resource()
        self.limits = limits or span_limits()
        self.reporting = Reporting(span_exporter)
        self.processor = BatchSpanProcessor(
            self.reporting, max_queue_size=SPAN_QUEUE_SIZE, max_export_batch_size=SPAN_PIECE
        )
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
        self._flushing: threading.Event | None = None  # the SDK's flush, in a thread
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

    def submit_withdrawal(self, run_id: int, at_ns: int, given_by: str) -> None:
        """Queue the news that run ``run_id``'s feedback was withdrawn (at ``at_ns``, ns
        since the epoch, by ``given_by``), sent as an event of its run's span."""
        if self.event_logger is not None:
            self._put(("withdrawn", run_id, at_ns, given_by))

    def _put(self, item: tuple[Any, ...]) -> None:
        if self._closed:
            logger.warning(DROPPED, 0, *item[:2])
            return
        self.start()
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            logger.warning(DROPPED, self.queue.maxsize, *item[:2])

    def start(self) -> None:
        """Start the thread that builds spans if it is not running (idempotent; a thread
        that died is replaced), unless the export was shut down."""
        with self._lock:
            if not self._closed and (self._thread is None or not self._thread.is_alive()):
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
            except Exception:  # a bug or a database gone: the next runs still go
                logger.exception(THREAD_FAILED)
            finally:
                for _ in items:
                    self.queue.task_done()

    def _handle(self, items: list[Any]) -> bool:
        """Send the runs and feedback of ``items``, then release their flush markers;
        return False once told to stop."""
        began = time.thread_time()
        run_ids = [item[1] for item in items if isinstance(item, tuple) and item[0] == "run"]
        feedback = [item for item in items
                    if isinstance(item, tuple) and item[0] in FEEDBACK_KINDS]  # fmt: skip
        try:
            if run_ids:
                self._send_runs(run_ids)
        except Exception:
            logger.exception(FAILED, "runs", run_ids)
        for item in feedback:  # in the order given: the latest record is the verdict
            try:
                if item[0] == "feedback":
                    self._send_feedback(item[1])
                else:
                    self._send_withdrawal(*item[1:])
            except Exception:
                logger.exception(FAILED, *item[:2])
        try:
            # Django's end-of-request hygiene: a connection past CONN_MAX_AGE or broken goes.
            close_old_connections()
        except Exception:
            logger.exception(THREAD_FAILED)
        self.build_cpu_s += time.thread_time() - began
        for item in items:
            if isinstance(item, threading.Event):  # a flush marker: all before it done
                item.set()
        return None not in items

    def _send_runs(self, run_ids: list[int]) -> None:
        from chat import store
        from chat.traces.redaction import active
        from chat.traces.spans import NOT_ENDED, run_spans

        redactor = active()
        for run in store.runs_in_chunks(store.runs_with_ids(run_ids=run_ids)):
            if run.status in NOT_ENDED:
                continue  # resumed meanwhile: its next end sends it whole
            spans = run_spans(run, redactor=redactor, capture_content=self.capture_content,
                              resource=self.resource, limits=self.limits)  # fmt: skip
            if self._hand_over(run.pk, spans):
                self.runs_sent += 1

    def _hand_over(self, run_id: int, spans: list[ReadableSpan]) -> bool:
        """Give a run's spans to the processor only when its queue has room for them,
        waiting up to ROOM_WAIT_S; return True if all went.

        The SDK's queue, full, drops its oldest span (the root of a run) with a log line
        naming none: so a run that fits goes whole or not at all, logged with its id; a
        run bigger than the whole queue goes in pieces, root first, as room is made, and
        what found no room in time is logged.
        """
        piece = len(spans) if len(spans) <= SPAN_QUEUE_SIZE else SPAN_PIECE
        for start in range(0, len(spans), piece):
            part = spans[start : start + piece]
            if not self.reporting.reserve(len(part), SPAN_QUEUE_SIZE, ROOM_WAIT_S):
                if start == 0:
                    logger.warning(NO_ROOM, ROOM_WAIT_S, run_id, len(spans))
                else:
                    logger.warning(CUT_SHORT, ROOM_WAIT_S, run_id, len(spans) - start,
                                   len(spans))  # fmt: skip
                return False
            for span in part:
                self.processor.on_end(span)
        return True

    def _send_feedback(self, feedback_id: int) -> None:
        from chat import store
        from chat.traces.ids import ns
        from chat.traces.redaction import active
        from chat.traces.span_events import feedback_attributes

        feedback = store.feedback_get(feedback_id=feedback_id)
        if feedback is None:
            return
        attributes = feedback_attributes(feedback, capture_content=self.capture_content)
        emit_evaluation(self.event_logger, feedback.run_id, ns(feedback.updated_at),
                        attributes, redactor=active())  # fmt: skip

    def _send_withdrawal(self, run_id: int, at_ns: int, given_by: str) -> None:
        from chat.traces.redaction import active
        from chat.traces.span_events import withdrawal_attributes

        attributes = withdrawal_attributes(given_by=given_by)
        emit_evaluation(self.event_logger, run_id, at_ns, attributes, redactor=active())

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
        # The SDK's force_flush ignores its timeout (each export waits for the exporter's
        # own, retries included): it runs in a thread of its own, waited for until the deadline.
        # One at a time: a flush still stuck on the collector is waited for, not joined by
        # another, and a new one then covers what was queued since it began.
        with self._lock:
            previous = self._flushing
        if previous is not None and not previous.wait(max(0.0, deadline - time.monotonic())):
            return False
        with self._lock:
            if self._flushing is previous:
                self._flushing = in_thread("flush", self._flush_processors)
            flushing = self._flushing
        return flushing.wait(max(0.0, deadline - time.monotonic())) and done

    def _flush_processors(self) -> None:
        self.processor.force_flush()
        if self.log_provider is not None:
            self.log_provider.force_flush()

    def shutdown(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Flush, then stop the thread and the SDK's processors, all within ``timeout_s``
        seconds (a little more when the flush took it all: the stop gets a last
        STOP_GRACE_S); later runs are dropped with a log line.

        What could not be sent in time is logged, and an exporter still waiting on a
        collector then is left to its daemon threads, which end with the process.
        """
        if self._closed:
            return
        deadline = time.monotonic() + timeout_s
        if not self.flush(timeout_s):
            logger.warning("telemetry: not everything was sent within %g s at shutdown",
                           timeout_s)  # fmt: skip
        self._closed = True
        self.reporting.close()  # a run waiting for room in the span queue waits no more
        if self._thread is not None:
            with contextlib.suppress(queue.Full):  # the thread is a daemon: it goes with us
                self.queue.put_nowait(None)
            if self._thread.is_alive():
                self._thread.join(max(0.0, deadline - time.monotonic()))
        stopped = in_thread("shutdown", self._stop_processors)
        if not stopped.wait(max(STOP_GRACE_S, deadline - time.monotonic())):
            logger.warning(ABANDONED, timeout_s, self.reporting.pending)
        logger.info(COST, self.runs_sent, self.build_cpu_s, self.reporting.send_cpu_s)

    def _stop_processors(self) -> None:
        self.processor.shutdown()
        if self.log_provider is not None:
            self.log_provider.shutdown()


def from_environment() -> LiveExport:
    """Return a live export configured by the standard OpenTelemetry environment: the
    SDK's ``OTLPSpanExporter`` (proto over HTTP) reads the endpoint, headers, timeout
    and compression itself; feedback events go to ``OTLPLogExporter`` when the
    environment names an endpoint for logs too (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    for name in PROTOCOLS:
        protocol = os.environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            logger.warning(PROTOCOL, name, protocol)
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


def feedback_withdrawn(run_id: int, given_by: str) -> None:
    """Send the news that run ``run_id``'s feedback (given by ``given_by``) was
    withdrawn, as an event of its run's span, once the current transaction commits;
    nothing when live export (or its log exporter) is off."""
    if settings.TELEMETRY_LIVE:
        at_ns = time.time_ns()
        transaction.on_commit(lambda: _submit("withdrawn", run_id, at_ns, given_by))


def _submit(kind: str, pk: int, *more: Any) -> None:
    try:
        export = current()
        if export is None:
            return
        if kind == "run":
            export.submit_run(pk)
        elif kind == "feedback":
            export.submit_feedback(pk)
        else:
            export.submit_withdrawal(pk, *more)
    except Exception:  # telemetry never fails the run that already committed
        logger.exception(FAILED, kind, pk)
