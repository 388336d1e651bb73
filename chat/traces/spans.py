"""One stored run as OpenTelemetry spans, following the GenAI semantic conventions.

The tree (open-telemetry/semantic-conventions-genai, ``gen-ai-agent-spans.md`` and
``gen-ai-spans.md``): an ``invoke_agent {agent}`` root per run, a ``chat {model}`` span
per model turn and an ``execute_tool {tool}`` span per tool call, both children of the
root, each with the rows' own timestamps. Token usage is on the ``chat`` spans only (as
pydantic-ai keeps it off its agent spans, so a backend that sums spans counts it once);
the run's totals and what the conventions have no name for are under ``agent_chat.``.
The same function serves live export and files, so both send one run alike, with the
same ids (derived from the run's id: re-sending a run is idempotent). docs/telemetry.md
lists every span, attribute and event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from agents.approvals import DENIED_BY_POLICY, REFUSAL_TYPES
from chat.export import owner_label
from chat.models import AgentRun, AgentStep, Approval, RunStatus, StepStatus
from chat.traces.ids import SAMPLED, ns, run_context, span_id_of, trace_id_of
from chat.traces.redaction import Redactor
from chat.traces.span_events import (
    EVALUATION_EVENT,
    NS,
    approval_event,
    denied_by_policy_event,
    feedback_attributes,
)

SCOPE = InstrumentationScope("agent_chat.traces")
DEFAULT_SERVICE_NAME = "agent-chat"
DEFAULT_AGENT_NAME = "agent"
OTHER_ERROR = "_OTHER"  # the conventions' error.type when nothing names it better
# OpenAI's finish reasons as the conventions' output message schema names them.
FINISH_REASONS = {"tool_calls": "tool_call", "function_call": "tool_call"}
NOT_ENDED = (RunStatus.RUNNING, RunStatus.WAITING)
# A run's columns on its span as stored, ``agent_chat.run.<column>``; its token totals are
# ``agent_chat.run.usage.<column>`` (the conventions' usage is on the chat spans only).
RUN_COLUMNS = (
    "status", "strategy", "iterations", "duration_ms", "waited_ms", "tool_call_count",
    "tool_error_count", "format_error_count", "cost_currency", "tool_choice",
    "parallel_tool_calls",
)  # fmt: skip
TOKEN_COLUMNS = ("input_tokens", "output_tokens", "total_tokens")


class RedactedJson(str):
    """A JSON attribute value encoded from :meth:`Redactor.value`, keys and strings
    redacted already, which ``_Builder._clean`` does not pass through the redactor again
    (one policy for every path: the JSON is redacted as values, as in the CSV and JSONL)."""


def default_resource() -> Resource:
    """Return the SDK's resource from the environment (``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``), named ``agent-chat`` when the environment names no
    service."""
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
    return resource


def agent_name(run: AgentRun) -> str:
    """Return the run's agent name: its ``agent_key``, else the name its snapshot
    recorded, else ``agent``."""
    if run.agent_key:
        return run.agent_key
    snapshot = run.snapshot
    if snapshot is not None:
        return str(snapshot.content.get("agent", {}).get("name", "")) or DEFAULT_AGENT_NAME
    return DEFAULT_AGENT_NAME


def server_attributes(endpoint: str) -> dict[str, Any]:
    """Return ``server.address`` and ``server.port`` from a run's ``host[:port]``."""
    if not endpoint:
        return {}
    host, sep, port = endpoint.rpartition(":")
    if sep and port.isdigit() and not host.endswith(":"):  # an IPv6 host has colons
        return {"server.address": host.strip("[]"), "server.port": int(port)}
    return {"server.address": endpoint.strip("[]")}


def run_spans(
    run: AgentRun,
    *,
    redactor: Redactor,
    capture_content: bool,
    resource: Resource,
    limits: SpanLimits | None = None,
) -> list[ReadableSpan]:
    """Return run ``run`` as spans: its ``invoke_agent`` span first, then one span per
    step in ordinal order.

    ``run`` is loaded as :func:`chat.store.runs_in_chunks` yields it (no query
    here). Content (messages, tool arguments and results, reasoning, a comment, an
    edited argument) is included only with ``capture_content``; every string value,
    names included, goes through ``redactor``. A run not ended yet (running or waiting)
    ends its spans at the latest instant its rows know, with ``agent_chat.run.status``
    saying so; live export sends only ended runs.

    ``limits`` (default: the SDK's ``SpanLimits`` from the environment,
    ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, ``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` and the
    rest) bound every span's attributes, events and links as the SDK bounds its own
    spans: a longer value is truncated, what exceeds a count is dropped and counted.
    """
    builder = _Builder(run, redactor, capture_content, resource, limits or SpanLimits())
    return builder.spans()


class _Builder:
    """The state one run's spans share: the run, its redactor, and its root context."""

    def __init__(
        self,
        run: AgentRun,
        redactor: Redactor,
        capture_content: bool,
        resource: Resource,
        limits: SpanLimits,
    ) -> None:
        self.run = run
        self.limits = limits
        self.redactor = redactor
        self.content = capture_content
        self.resource = resource
        self.trace_id = trace_id_of(run.pk)
        self.root = run_context(run.pk)
        self.steps: list[AgentStep] = list(run.steps.all())
        self.calls_of: dict[int, list[AgentStep]] = {}
        for step in self.steps:
            if step.is_tool_call:
                self.calls_of.setdefault(step.iteration, []).append(step)
        self.first_turn = next((s.ordinal for s in self.steps if s.is_model_turn), 0)
        self.common = {
            "gen_ai.provider.name": run.provider or "unknown",
            "gen_ai.conversation.id": str(run.conversation_id),
            **server_attributes(run.endpoint),
        }

    def spans(self) -> list[ReadableSpan]:
        turns: dict[int, SpanContext] = {}
        children = []
        for step in self.steps:
            if step.is_model_turn:
                span = self._chat(step)
                turns[step.iteration] = span.context
            else:
                span = self._tool(step, turns.get(step.iteration))
            children.append(span)
        return [self._invoke_agent(), *children]

    def _context(self, ordinal: int) -> SpanContext:
        return SpanContext(self.trace_id, span_id_of(self.run.pk, ordinal), is_remote=False,
                           trace_flags=SAMPLED)  # fmt: skip

    def _span(
        self, name: str, *, context: SpanContext, parent: SpanContext | None, kind: SpanKind,
        start: datetime, end: datetime | None, attributes: dict[str, Any],
        status: Status, events: Sequence[Event] = (), links: Sequence[Link] = (),
    ) -> ReadableSpan:  # fmt: skip
        end_ns = ns(max(end, start)) if end is not None else ns(self._last_instant(start))
        limits = self.limits
        bounded_events = [
            Event(e.name, BoundedAttributes(limits.max_event_attributes,
                                            self._clean(dict(e.attributes or {})),
                                            max_value_len=limits.max_attribute_length),
                  e.timestamp)
            for e in events
        ]  # fmt: skip
        bounded_links = [
            Link(link.context, BoundedAttributes(limits.max_link_attributes, link.attributes,
                                                 max_value_len=limits.max_attribute_length))
            for link in links
        ]  # fmt: skip
        return ReadableSpan(
            name=self.redactor.text(name), context=context, parent=parent,
            resource=self.resource,
            attributes=BoundedAttributes(limits.max_span_attributes, self._clean(attributes),
                                         max_value_len=limits.max_span_attribute_length),
            events=BoundedList.from_seq(limits.max_events, bounded_events),
            links=BoundedList.from_seq(limits.max_links, bounded_links),
            kind=kind, instrumentation_scope=SCOPE, status=status,
            start_time=ns(start), end_time=end_ns,
        )  # fmt: skip

    def _last_instant(self, start: datetime) -> datetime:
        """The latest instant a run not ended yet has rows for (its spans' end)."""
        run = self.run
        instants = [start, run.started_at, run.heartbeat_at, run.paused_at]
        for step in self.steps:
            instants += [step.started_at, step.finished_at]
        return max(instant for instant in instants if instant is not None)

    def _clean(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Drop empty values; pass every string (in a list too) through the redactor."""
        cleaned: dict[str, Any] = {}
        for key, value in attributes.items():
            if value is None or value == "":
                continue
            if isinstance(value, RedactedJson):
                value = str(value)
            elif isinstance(value, str):
                value = self.redactor.text(value)
            elif isinstance(value, list | tuple):
                value = [self.redactor.text(v) if isinstance(v, str) else v for v in value]
            cleaned[key] = value
        return cleaned

    def _json(self, value: Any) -> RedactedJson:
        """A JSON value as the conventions' JSON string, its keys and strings redacted."""
        return RedactedJson(json.dumps(self.redactor.value(value), ensure_ascii=False))

    def _invoke_agent(self) -> ReadableSpan:
        run = self.run
        name = agent_name(run)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.request.model": run.model_name,
            **self.common,
            "user.id": owner_label(run.conversation),
            NS + "run.id": run.pk,
            **{NS + "run." + column: getattr(run, column) for column in RUN_COLUMNS},
            **{NS + "run.usage." + column: getattr(run, column) for column in TOKEN_COLUMNS},
            NS + "run.cost": float(run.cost) if run.cost is not None else None,
            NS + "snapshot.digest": run.snapshot.digest if run.snapshot is not None else None,
            NS + "run.branched_from": run.branched_from_id,
            NS + "run.branch_kind": run.branch_kind or None,
        }
        failed = run.status not in (RunStatus.SUCCEEDED, *NOT_ENDED)
        if failed:
            attributes["error.type"] = run.status
        if self.content:
            question = run.user_message.content
            attributes["gen_ai.input.messages"] = self._json(
                [{"role": "user", "parts": [{"type": "text", "content": question}]}]
            )
            if run.output:
                attributes["gen_ai.output.messages"] = self._json([{
                    "role": "assistant", "parts": [{"type": "text", "content": run.output}],
                    "finish_reason": "stop",
                }])  # fmt: skip
            if run.snapshot is not None and run.snapshot.content.get("system_prompt"):
                prompt = run.snapshot.content["system_prompt"]
                attributes["gen_ai.system_instructions"] = self._json(
                    [{"type": "text", "content": prompt}]
                )
        status = Status(StatusCode.ERROR, self.redactor.text(run.error or run.status)) \
            if failed else Status(StatusCode.UNSET)  # fmt: skip
        return self._span(
            f"invoke_agent {name}", context=self.root, parent=None, kind=SpanKind.INTERNAL,
            start=run.started_at, end=None if run.status in NOT_ENDED else run.finished_at,
            attributes=attributes, status=status, events=self._feedback_events(),
            links=self._branch_links(),
        )  # fmt: skip

    def _branch_links(self) -> list[Link]:
        """Return a link to the root span of the run this one is another take of (a
        retry, regenerate or edit: docs/branches.md), whose trace is that run's."""
        run = self.run
        if run.branched_from_id is None:
            return []
        kind = {NS + "link": "branched_from", NS + "run.branch_kind": run.branch_kind}
        return [Link(run_context(run.branched_from_id), kind)]

    def _feedback_events(self) -> list[Event]:
        try:
            feedback = self.run.feedback  # type: ignore[attr-defined]
        except ObjectDoesNotExist:
            return []
        attributes = feedback_attributes(feedback, capture_content=self.content)
        return [Event(EVALUATION_EVENT, attributes, ns(feedback.updated_at))]

    def _chat(self, step: AgentStep) -> ReadableSpan:
        run = self.run
        metadata = (step.raw or {}).get("response_metadata") or {}
        response_model = metadata.get("model_name") or metadata.get("model") or ""
        reason = str(metadata.get("finish_reason") or metadata.get("stop_reason") or "")
        reason = FINISH_REASONS.get(reason, reason)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": run.model_name,
            "gen_ai.response.model": response_model,
            "gen_ai.response.finish_reasons": [reason] if reason else None,
            "gen_ai.request.stream": True,
            **self.common,
            NS + "run.id": run.pk,
            "gen_ai.usage.input_tokens": step.input_tokens,
            "gen_ai.usage.output_tokens": step.output_tokens,
            "gen_ai.response.time_to_first_chunk": (
                step.first_token_ms / 1000 if step.first_token_ms is not None else None
            ),
            NS + "step.ordinal": step.ordinal,
            NS + "step.iteration": step.iteration,
            NS + "step.status": step.status,
        }
        status = self._step_status(step, attributes)
        if self.content:
            self._chat_content(step, attributes, reason)
        # A scripted stand-in (the offline demo) answers in-process: no client call.
        entry = run.provider_entry
        kind = SpanKind.INTERNAL if entry is not None and entry.scripted else SpanKind.CLIENT
        return self._span(
            f"chat {run.model_name}", context=self._context(step.ordinal), parent=self.root,
            kind=kind, start=step.started_at, end=step.finished_at, attributes=attributes,
            status=status,
        )  # fmt: skip

    def _chat_content(self, step: AgentStep, attributes: dict[str, Any], reason: str) -> None:
        """Add a turn's messages: what it was given since the turn before (the question
        for the first turn, the tool results after) and what it answered."""
        attributes["gen_ai.input.messages"] = self._json(self._turn_input(step))
        parts: list[dict[str, Any]] = []
        if step.reasoning:
            parts.append({"type": "reasoning", "content": step.reasoning})
        if step.text:
            parts.append({"type": "text", "content": step.text})
        # The calls as the steps stored them, so a text strategy's parsed calls show too;
        # a held call's as the model asked (a person's edit is on its approval event).
        for call in self.calls_of.get(step.iteration, []):
            held = call.held
            arguments = held.arguments if held is not None else call.arguments
            parts.append({"type": "tool_call", "id": call.tool_call_id, "name": call.tool_name,
                          "arguments": arguments})  # fmt: skip
        message = {"role": "assistant", "parts": parts,
                   "finish_reason": reason or ("error" if step.is_error else "stop")}  # fmt: skip
        attributes["gen_ai.output.messages"] = self._json([message])

    def _turn_input(self, step: AgentStep) -> list[dict[str, Any]]:
        if step.ordinal == self.first_turn:
            content = self.run.user_message.content
            return [{"role": "user", "parts": [{"type": "text", "content": content}]}]
        # One tool message per result, as each ToolMessage was (Phoenix reads one each).
        return [{"role": "tool", "parts": [{
            "type": "tool_call_response", "id": call.tool_call_id,
            "response": call.observation if call.observation is not None else call.result
            or call.error,
        }]} for call in self.calls_of.get(step.iteration - 1, [])]  # fmt: skip

    def _step_status(self, step: AgentStep, attributes: dict[str, Any]) -> Status:
        """Set ``error.type`` for a step that failed; return its span status. A call a
        policy or a person refused did not fail (it never ran): not an error."""
        if step.status in (StepStatus.SUCCESS, StepStatus.RUNNING, StepStatus.PENDING):
            return Status(StatusCode.UNSET)
        if step.error_type in REFUSAL_TYPES:
            attributes[NS + "tool.refusal"] = step.error_type
            return Status(StatusCode.UNSET)
        # A step the run's end closed has no type of its own: the run's ending names it.
        attributes["error.type"] = step.error_type or self.run.status or OTHER_ERROR
        return Status(StatusCode.ERROR, self.redactor.text(step.error or step.status))

    def _tool(self, step: AgentStep, turn: SpanContext | None) -> ReadableSpan:
        approval = step.held
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step.tool_name,
            "gen_ai.tool.call.id": step.tool_call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": str(self.run.conversation_id),
            NS + "run.id": self.run.pk,
            NS + "step.ordinal": step.ordinal,
            NS + "step.iteration": step.iteration,
            NS + "step.status": step.status,
            NS + "step.format_error": step.is_format_error or None,
        }
        if turn is not None:
            attributes[NS + "step.model_turn_span_id"] = format(turn.span_id, "016x")
        status = self._step_status(step, attributes)
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = self._json(step.arguments)
            if step.status == StepStatus.SUCCESS:
                attributes["gen_ai.tool.call.result"] = self._json(_parsed(step.result))
        events = []
        start = step.started_at
        if approval is not None:
            events.append(self._approval_event(approval))
            start = min(start, approval.requested_at)  # the span covers the wait
        elif step.error_type == DENIED_BY_POLICY:
            events.append(denied_by_policy_event(ns(step.started_at)))
        links = [Link(turn, {NS + "link": "model_turn"})] if turn is not None else []
        return self._span(
            f"execute_tool {step.tool_name}", context=self._context(step.ordinal),
            parent=self.root, kind=SpanKind.INTERNAL, start=start, end=step.finished_at,
            attributes=attributes, status=status, events=events, links=links,
        )  # fmt: skip

    def _approval_event(self, approval: Approval) -> Event:
        edited = approval.edited_arguments
        edited_json = self._json(edited) if self.content and edited is not None else None
        return approval_event(approval, edited_json=edited_json)


def _parsed(result: str) -> Any:
    """A tool's result as JSON when it is JSON (the conventions expect an object)."""
    try:
        return json.loads(result)
    except ValueError:
        return result


def span_run_ids(spans: Iterable[ReadableSpan]) -> list[int]:
    """Return the run ids the spans belong to (``agent_chat.run.id`` of their root
    spans), in order, each once: what a failed export names in its log line."""
    ids: dict[int, None] = {}
    for span in spans:
        value = (span.attributes or {}).get(NS + "run.id")
        if isinstance(value, int):
            ids.setdefault(value)
    return list(ids)
