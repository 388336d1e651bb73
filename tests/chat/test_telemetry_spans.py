"""One stored run as spans: what a failure, a refusal and a run still waiting look like,
straight from :func:`chat.traces.spans.run_spans` (no collector)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from opentelemetry.trace import SpanKind, StatusCode

from chat import store
from chat.models import AgentRun, AgentStep
from chat.traces import live
from chat.traces.redaction import active
from chat.traces.spans import default_resource, run_spans, server_attributes
from tests.chat.exported_runs import stored_run
from tests.planted_secrets import planted_json

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What's the weather in Hangzhou, and what is 17*23?"


def spans_of(run: AgentRun, *, content: bool = False):
    (loaded,) = store.runs_in_chunks(AgentRun.objects.filter(pk=run.pk))
    return run_spans(loaded, redactor=active(), capture_content=content,
                     resource=default_resource())  # fmt: skip


def test_a_failed_model_call_is_an_error_on_its_turn_and_on_the_run(scripted_model):
    scripted_model.script = [TimeoutError("model timed out")]
    with pytest.raises(CommandError):
        call_command("ask", "hello", stdout=StringIO())
    run = AgentRun.objects.get()
    root, turn = spans_of(run)

    assert root.attributes["error.type"] == "failed"
    assert root.status.status_code == StatusCode.ERROR
    assert root.status.description == run.error
    assert turn.name == f"chat {run.model_name}"
    assert turn.attributes["error.type"] == run.steps.get().error_type
    assert turn.status.status_code == StatusCode.ERROR


def test_a_call_the_policy_denies_is_a_decision_not_an_error(settings):
    settings.AGENT_TOOL_POLICIES = {"calculator": "deny"}
    call_command("ask", QUESTION, stdout=StringIO())
    run = AgentRun.objects.get()
    (calculator,) = [s for s in spans_of(run) if s.name == "execute_tool calculator"]

    assert calculator.status.status_code == StatusCode.UNSET
    assert calculator.attributes["agent_chat.tool.refusal"] == "ToolDenied"
    (event,) = calculator.events
    assert event.name == "agent_chat.approval"
    assert dict(event.attributes) == {"agent_chat.approval.policy": "deny",
                                      "agent_chat.approval.outcome": "denied",
                                      "agent_chat.approval.decided_by": "policy"}  # fmt: skip


def test_a_run_still_waiting_ends_its_spans_at_the_last_instant_its_rows_know(settings):
    settings.AGENT_TOOL_POLICIES = {"check_bnb_availability": "ask"}
    from tests.chat.test_consumer import TRAVEL_QUESTION

    with pytest.raises(CommandError):
        call_command("ask", TRAVEL_QUESTION, stdout=StringIO())
    run = AgentRun.objects.get()
    spans = spans_of(run)

    root = spans[0]
    assert root.attributes["agent_chat.run.status"] == "waiting"
    assert root.status.status_code == StatusCode.UNSET
    assert all(span.end_time <= root.end_time for span in spans)
    (held,) = [s for s in spans if s.name == "execute_tool check_bnb_availability"]
    assert held.attributes["agent_chat.step.status"] == "pending"
    assert held.events[0].attributes["agent_chat.approval.outcome"] == "pending"


def test_reasoning_is_a_reasoning_part_of_the_turns_output(scripted_model):
    from langchain_core.messages import AIMessage

    scripted_model.script = [AIMessage("<think>Add them.</think>\n\nFour.")]
    call_command("ask", "2+2?", stdout=StringIO())
    run = AgentRun.objects.get()
    turn = spans_of(run, content=True)[1]
    output = turn.attributes["gen_ai.output.messages"]
    assert '{"type": "reasoning", "content": "Add them."}' in output
    assert '{"type": "text", "content": "Four."}' in output
    assert '"finish_reason"' in output


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("", {}),
        ("api.openai.com", {"server.address": "api.openai.com"}),
        ("127.0.0.1:8001", {"server.address": "127.0.0.1", "server.port": 8001}),
        ("[::1]:11434", {"server.address": "::1", "server.port": 11434}),
    ],
)
def test_the_runs_endpoint_becomes_server_address_and_port(endpoint, expected):
    assert server_attributes(endpoint) == expected


@pytest.mark.parametrize("strategy", ["tool_calling", "react", "structured_chat", "xml"])
def test_a_turns_output_names_the_calls_it_asked_for_in_every_strategy(strategy):
    call_command("ask", QUESTION, "--strategy", strategy, stdout=StringIO())
    run = AgentRun.objects.get()
    turns = {span.attributes["agent_chat.step.iteration"]: span
             for span in spans_of(run, content=True) if span.name.startswith("chat ")}  # fmt: skip
    calls = run.steps.filter(kind="tool_call")
    assert calls.count() == 2
    for call in calls:
        output = turns[call.iteration].attributes["gen_ai.output.messages"]
        assert f'"id": "{call.tool_call_id}", "name": "{call.tool_name}"' in output


PART_FIELDS = {  # what the conventions' message schemas require of each part type we send
    "text": {"content"},
    "reasoning": {"content"},
    "tool_call": {"name"},
    "tool_call_response": {"response"},
}
FINISH_REASONS = {"stop", "length", "content_filter", "tool_call", "error"}


def check_messages(value: str, *, output: bool) -> None:
    import json

    messages = json.loads(value)
    assert isinstance(messages, list) and messages
    for message in messages:
        assert message["role"] in {"system", "user", "assistant", "tool"}
        if output:
            assert message["finish_reason"] in FINISH_REASONS
        for part in message["parts"]:
            assert PART_FIELDS[part["type"]] <= part.keys(), part


def test_content_follows_the_conventions_message_shapes(scripted_model):
    from langchain_core.messages import AIMessage

    from tests.fakes import tool_call

    scripted_model.script = [
        AIMessage("<think>Look it up.</think>",
                  tool_calls=[tool_call("calculator", {"expression": "17*23"}, "c1")]),
        AIMessage("391."),
    ]  # fmt: skip
    call_command("ask", "17*23?", stdout=StringIO())
    run = AgentRun.objects.get()
    spans = spans_of(run, content=True)

    for span in spans:
        attributes = span.attributes
        if "gen_ai.input.messages" in attributes:
            check_messages(attributes["gen_ai.input.messages"], output=False)
        if "gen_ai.output.messages" in attributes:
            check_messages(attributes["gen_ai.output.messages"], output=True)
    import json

    instructions = json.loads(spans[0].attributes["gen_ai.system_instructions"])
    assert [part["type"] for part in instructions] == ["text"]
    second_turn = [s for s in spans if s.name.startswith("chat ")][1]
    given = json.loads(second_turn.attributes["gen_ai.input.messages"])
    assert given == [{"role": "tool", "parts": [
        {"type": "tool_call_response", "id": "c1", "response": run.steps.get(
            kind="tool_call").observation}]}]  # fmt: skip


def test_a_tool_calls_arguments_leave_redacted_as_the_jsonl_has_them_keys_included(planted_run):
    # One policy: the span's JSON is Redactor.value of the stored arguments, the same
    # value the JSONL and CSV write, not a second text pass over the encoded JSON.
    spans = spans_of(planted_run.run, content=True)
    (tool,) = [span for span in spans if span.name.startswith("execute_tool")]

    arguments = json.loads(tool.attributes["gen_ai.tool.call.arguments"])
    assert arguments == active().value(planted_json())
    assert "[REDACTED:email]" in arguments and "[REDACTED:api_key]" in arguments


def big_tool_result_spans(limits=None):
    run = stored_run()
    AgentStep.objects.filter(run=run, kind="tool_call").update(result="x" * 2_000_000,
                                                                status="success")  # fmt: skip
    (loaded,) = store.runs_in_chunks(AgentRun.objects.filter(pk=run.pk))
    return run_spans(loaded, redactor=active(), capture_content=True,
                     resource=default_resource(), limits=limits)  # fmt: skip


def longest_value(spans) -> int:
    values = [v for s in spans for v in (s.attributes or {}).values()]
    values += [v for s in spans for e in s.events for v in (e.attributes or {}).values()]
    return max(len(v) for v in values if isinstance(v, str))


def test_the_standard_attribute_limits_apply_to_every_span(monkeypatch):
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "1000")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "5")
    spans = big_tool_result_spans()
    assert longest_value(spans) == 1000
    assert all(len(s.attributes) <= 5 for s in spans)
    assert any(s.dropped_attributes for s in spans)  # counted, as the SDK counts them


def test_a_file_without_limits_in_the_environment_keeps_a_long_result_whole(monkeypatch):
    monkeypatch.delenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", raising=False)
    monkeypatch.delenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", raising=False)
    assert longest_value(big_tool_result_spans()) > 2_000_000


def test_live_spans_cut_long_values_when_the_environment_sets_no_limit(monkeypatch):
    monkeypatch.delenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", raising=False)
    monkeypatch.delenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", raising=False)
    assert longest_value(big_tool_result_spans(live.span_limits())) == 16_384
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "100000")
    assert longest_value(big_tool_result_spans(live.span_limits())) == 100_000


def test_a_model_turn_is_a_client_call_unless_a_scripted_stand_in_answered_it():
    call_command("ask", "What is 17*23?", stdout=StringIO())
    run = AgentRun.objects.get()
    (demo_turn,) = [s for s in spans_of(run) if s.name.startswith("chat ")][:1]
    assert demo_turn.kind == SpanKind.INTERNAL  # the offline demo answers in-process

    AgentRun.objects.filter(pk=run.pk).update(provider="openai")
    (served_turn,) = [s for s in spans_of(run) if s.name.startswith("chat ")][:1]
    assert served_turn.kind == SpanKind.CLIENT
