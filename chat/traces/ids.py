"""A run's trace and span ids, and OTLP's time unit: the same for every export of a run."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils.crypto import salted_hmac
from opentelemetry.trace import SpanContext, TraceFlags

SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def trace_id_of(run_id: int) -> int:
    """Return the 128-bit trace id of run ``run_id``: an HMAC of its id under
    ``SECRET_KEY`` (Django's ``salted_hmac``), never 0, the same in every export."""
    digest = salted_hmac("chat.traces.trace", str(run_id)).digest()
    return int.from_bytes(digest[:16], "big") or 1


def span_id_of(run_id: int, ordinal: int = 0) -> int:
    """Return the 64-bit span id of run ``run_id``'s step ``ordinal`` (0: the run's
    own ``invoke_agent`` span), derived as :func:`trace_id_of` is, never 0."""
    digest = salted_hmac("chat.traces.span", f"{run_id}:{ordinal}").digest()
    return int.from_bytes(digest[:8], "big") or 1


def run_context(run_id: int) -> SpanContext:
    """Return the span context of run ``run_id``'s ``invoke_agent`` span (what an event
    sent later, such as feedback, is parented to)."""
    return SpanContext(trace_id_of(run_id), span_id_of(run_id), is_remote=False,
                       trace_flags=SAMPLED)  # fmt: skip


def ns(value: datetime) -> int:
    """Return an aware datetime as nanoseconds since the Unix epoch (OTLP's unit)."""
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
