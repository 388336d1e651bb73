"""Traces that leave the app: OpenTelemetry spans (live and as OTLP JSON files), JSONL,
and the one redaction policy every way out applies (docs/telemetry.md)."""
