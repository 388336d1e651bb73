"""The parts of live export that face the SDK: the span exporter that reports what it
could not send and how full the processor's queue is, the span limits live spans obey,
a call bounded in time, and feedback as the GenAI conventions' evaluation event.

:mod:`chat.traces.live` is their one user; they log under its name, so one logger says
all that live export did.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.sdk.trace.export import SpanExporter

    from chat.traces.redaction import Redactor

logger = logging.getLogger("chat.traces.live")

NOT_SENT = "telemetry: %d span(s) of run(s) %s could not be sent to the collector"
FAILED = "telemetry: %s failed"
# Span attribute values are cut to this many characters when the environment sets no
# OTEL_[SPAN_]ATTRIBUTE_VALUE_LENGTH_LIMIT: a 2 MB tool result would make its batch too
# big for a collector (a 413 loses the whole batch, other runs' spans with it).
VALUE_LENGTH_LIMIT = 16_384

STOP_GRACE_S = 0.1


def in_thread(what: str, call: Callable[[], Any]) -> threading.Event:
    """Run ``call`` in a daemon thread; return an event set when it has returned (or
    raised, logged)."""
    done = threading.Event()

    def run() -> None:
        try:
            call()
        except Exception:
            logger.exception(FAILED, what)
        finally:
            done.set()

    threading.Thread(target=run, name=f"telemetry-{what}", daemon=True).start()
    return done


def span_limits() -> SpanLimits:
    """Return the SDK's span limits from the environment (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``,
    ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` and the rest, as the SDK's own spans obey them),
    with values cut to VALUE_LENGTH_LIMIT characters when the environment sets no length."""
    from opentelemetry.sdk.trace import SpanLimits

    limits = SpanLimits()
    if limits.max_attribute_length is None and limits.max_span_attribute_length is None:
        limits = SpanLimits(max_attribute_length=VALUE_LENGTH_LIMIT)
    return limits


class Reporting:
    """A span exporter that logs the runs of every batch its inner exporter could not
    send (the SDK's own log line names no run)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.send_cpu_s = 0.0  # CPU of the batch processor's thread in export()
        # Spans handed to the processor and not yet given back by it to export(): an
        # upper bound on its queue, whose own length the SDK does not publish.
        self.pending = 0
        self._room = threading.Condition()
        self._closed = False

    def reserve(self, count: int, capacity: int, timeout_s: float) -> bool:
        """Count ``count`` spans as handed over once ``pending + count <= capacity``,
        waiting up to ``timeout_s``; return False (nothing counted) if there was no room
        in time or the export is closing."""
        with self._room:
            room = self._room.wait_for(
                lambda: self._closed or self.pending + count <= capacity, timeout_s
            )
            if not room or self._closed:
                return False
            self.pending += count
            return True

    def close(self) -> None:
        """Make every reservation, waiting or to come, fail."""
        with self._room:
            self._closed = True
            self._room.notify_all()

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        from chat.traces.spans import span_run_ids

        began = time.thread_time()
        try:
            result = self.inner.export(spans)
        except Exception:
            logger.exception("telemetry: the span exporter raised")
            result = SpanExportResult.FAILURE
        finally:
            with self._room:
                self.pending -= len(spans)
                self._room.notify_all()
        self.send_cpu_s += time.thread_time() - began
        if result is not SpanExportResult.SUCCESS:
            logger.warning(NOT_SENT, len(spans), span_run_ids(spans) or "?")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)


def emit_evaluation(
    event_logger: Any,
    run_id: int,
    at_ns: int,
    attributes: dict[str, Any],
    *,
    redactor: Redactor,
) -> None:
    """Emit ``attributes`` as a ``gen_ai.evaluation.result`` event (an OTLP log record)
    of run ``run_id``'s ``invoke_agent`` span, at ``at_ns`` (ns since the epoch), every
    string through ``redactor`` and empty values left out."""
    from opentelemetry._logs import SeverityNumber
    from opentelemetry.trace import NonRecordingSpan, set_span_in_context

    from chat.traces.ids import run_context
    from chat.traces.span_events import EVALUATION_EVENT, NS

    attributes = {key: redactor.text(value) if isinstance(value, str) else value
                  for key, value in attributes.items() if value is not None}  # fmt: skip
    attributes[NS + "run.id"] = run_id
    context = set_span_in_context(NonRecordingSpan(run_context(run_id)))
    event_logger.emit(
        timestamp=at_ns, context=context, event_name=EVALUATION_EVENT,
        severity_number=SeverityNumber.INFO, attributes=attributes,
    )  # fmt: skip
