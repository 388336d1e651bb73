"""What a run must look like once Phoenix has stored its spans, checked against its stored rows.

The rows come from ``manage.py export_traces`` (the CSV, docs/csv-format.md: one row per
step with the run's fields repeated); the spans from Phoenix's REST API
(:mod:`tests.phoenix.client`). A run is one trace: an ``invoke_agent {agent}`` root, and
as its direct children a ``chat {model}`` span per model turn (with that turn's token
usage; the root has none) and an ``execute_tool {tool}`` span per tool call (with its
``gen_ai.tool.call.id`` and, content captured, its arguments). The conventions' names
are OpenTelemetry GenAI's; Phoenix keeps them as sent and adds its OpenInference reading
of them (span kind AGENT, LLM or TOOL, ``llm.token_count.*``, ``tool.name``...), which
its UI shows: both are checked.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from tests.phoenix.client import Span

USAGE_PREFIX = "gen_ai.usage."


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """A tool call step as the CSV has it: its tool and its arguments (parsed JSON)."""

    name: str
    arguments: Any


@dataclasses.dataclass(frozen=True)
class ExpectedRun:
    """A stored run as the CSV export describes it, for comparing with its spans."""

    run_id: int
    conversation_id: str
    status: str
    strategy: str
    turn_tokens: Counter[tuple[int | None, int | None]]  # (input, output) per model turn
    tool_calls: dict[str, ToolCall]  # by tool_call_id

    @property
    def span_count(self) -> int:
        return 1 + sum(self.turn_tokens.values()) + len(self.tool_calls)


def expected_runs(csv_text: str) -> list[ExpectedRun]:
    """Return the runs of a CSV export, in run id order."""
    by_run: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in csv.DictReader(io.StringIO(csv_text.lstrip("\ufeff"))):
        by_run[int(row["run_id"])].append(row)
    runs = []
    for run_id, rows in sorted(by_run.items()):
        turns: Counter[tuple[int | None, int | None]] = Counter()
        calls: dict[str, ToolCall] = {}
        for row in rows:
            if row["step_kind"] == "model_turn":
                turns[_int(row["input_tokens"]), _int(row["output_tokens"])] += 1
            elif row["step_kind"] == "tool_call":
                arguments = json.loads(row["arguments"])
                calls[row["tool_call_id"]] = ToolCall(row["tool_name"], arguments)
        first = rows[0]
        runs.append(ExpectedRun(
            run_id=run_id, conversation_id=first["conversation_id"], status=first["run_status"],
            strategy=first["strategy"], turn_tokens=turns, tool_calls=calls,
        ))  # fmt: skip
    return runs


def traces_by_conversation(spans: list[Span]) -> dict[str, list[Span]]:
    """Group spans by trace and key each trace by its root's ``gen_ai.conversation.id``.

    Raises AssertionError when a trace has no root, or two, or a root without the id.
    """
    traces: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        traces[span["context"]["trace_id"]].append(span)
    keyed: dict[str, list[Span]] = {}
    for trace_id, members in traces.items():
        roots = [span for span in members if span["parent_id"] is None]
        assert len(roots) == 1, (
            f"trace {trace_id}: {len(roots)} root spans, not 1: {[s['name'] for s in roots]}"
        )
        conversation = roots[0]["attributes"].get("gen_ai.conversation.id")
        assert conversation, f"trace {trace_id}: its root has no gen_ai.conversation.id"
        assert str(conversation) not in keyed, f"two traces for conversation {conversation}"
        keyed[str(conversation)] = members
    return keyed


def check_run(spans: list[Span], run: ExpectedRun, *, content: bool) -> None:
    """Assert that one trace's spans, as Phoenix stored them, are ``run``'s.

    ``content``: whether tool arguments must be there (content capture on, and always
    in files). Raises AssertionError naming the run and what differs.
    """
    where = f"run {run.run_id} ({run.strategy})"
    (root,) = [span for span in spans if span["parent_id"] is None]
    root_attrs = root["attributes"]
    assert root["name"].startswith("invoke_agent "), f"{where}: root is {root['name']!r}"
    assert root_attrs.get("gen_ai.operation.name") == "invoke_agent", (where, root_attrs)
    assert root["span_kind"] == "AGENT", f"{where}: Phoenix reads the root as {root['span_kind']}"
    assert str(root_attrs.get("session.id")) == run.conversation_id, (
        f"{where}: Phoenix's session is {root_attrs.get('session.id')!r}, "
        f"not the conversation {run.conversation_id}"
    )
    usage = sorted(key for key in root_attrs if key.startswith(USAGE_PREFIX))
    assert not usage, f"{where}: token usage on the invoke_agent span: {usage}"
    children = [span for span in spans if span is not root]
    for span in children:
        assert span["parent_id"] == root["context"]["span_id"], (
            f"{where}: {span['name']!r}'s parent is {span['parent_id']}, "
            f"not the root {root['context']['span_id']}"
        )
        assert _time(root["start_time"]) <= _time(span["start_time"]), (where, span["name"])
        assert _time(span["end_time"]) <= _time(root["end_time"]), (where, span["name"])
    chats = [span for span in children if span["name"].startswith("chat ")]
    tools = [span for span in children if span["name"].startswith("execute_tool ")]
    others = [span["name"] for span in children if span not in chats and span not in tools]
    assert not others, f"{where}: spans that are neither chat nor execute_tool: {others}"
    _check_chats(chats, run, where)
    _check_tools(tools, run, where, content=content)


def _check_chats(chats: list[Span], run: ExpectedRun, where: str) -> None:
    tokens: Counter[tuple[int | None, int | None]] = Counter()
    for span in chats:
        attrs = span["attributes"]
        assert attrs.get("gen_ai.operation.name") == "chat", (where, span["name"], attrs)
        assert span["span_kind"] == "LLM", f"{where}: Phoenix reads {span['name']!r} as not LLM"
        pair = (attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens"))
        tokens[pair] += 1
        # Phoenix's own reading, the one its UI counts and totals.
        assert (attrs.get("llm.token_count.prompt"), attrs.get("llm.token_count.completion")) \
            == pair, f"{where}: Phoenix's token counts of {span['name']!r}: {attrs}"  # fmt: skip
    assert tokens == run.turn_tokens, (
        f"{where}: chat spans' (input, output) tokens {dict(tokens)} are not the model "
        f"turns' {dict(run.turn_tokens)}"
    )


def _check_tools(tools: list[Span], run: ExpectedRun, where: str, *, content: bool) -> None:
    by_id = {}
    for span in tools:
        attrs = span["attributes"]
        call_id = attrs.get("gen_ai.tool.call.id")
        assert call_id not in by_id, f"{where}: two execute_tool spans for {call_id}"
        by_id[call_id] = span
    assert set(by_id) == set(run.tool_calls), (
        f"{where}: execute_tool spans for {sorted(map(str, by_id))}, "
        f"tool calls stored {sorted(run.tool_calls)}"
    )
    for call_id, call in run.tool_calls.items():
        span = by_id[call_id]
        attrs = span["attributes"]
        assert span["name"] == f"execute_tool {call.name}", (where, span["name"])
        assert attrs.get("gen_ai.operation.name") == "execute_tool", (where, attrs)
        assert attrs.get("gen_ai.tool.name") == call.name, (where, attrs)
        assert span["span_kind"] == "TOOL", f"{where}: Phoenix reads {span['name']!r} as not TOOL"
        assert (attrs.get("tool.name"), attrs.get("tool.id")) == (call.name, call_id), (
            f"{where}: Phoenix's reading of {span['name']!r}: {attrs}"
        )
        if content:
            sent = attrs.get("gen_ai.tool.call.arguments")
            assert sent is not None, f"{where}: {call_id} has no gen_ai.tool.call.arguments"
            assert json.loads(sent) == call.arguments, (
                f"{where}: {call_id}'s arguments {sent} are not the stored {call.arguments}"
            )


def _int(cell: str) -> int | None:
    return int(cell) if cell else None


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)
