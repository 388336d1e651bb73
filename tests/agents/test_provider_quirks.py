"""The quirks profile and CompatibleChatOpenAI on the dicts themselves: each streamed shape
it repairs (chunk dicts in, message chunks out) and each request change a profile asks
for (messages in, request body out). The same shapes go through HTTP in
test_openai_compatible.py."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk

from agents.model_errors import EmptyReply, IncompleteReply
from agents.providers import ModelConfig, Quirks, build_model
from agents.providers.compatible import (
    CompatibleChatOpenAI,
    StreamRepair,
    apply_assistant_quirks,
    reasoning_text,
    repair_delta,
)
from tests.fake_openai import chunk


def model(**quirks) -> CompatibleChatOpenAI:
    return CompatibleChatOpenAI(model="m", api_key="k", quirks=Quirks(**quirks))


def converted(client: CompatibleChatOpenAI, *events: dict) -> AIMessageChunk:
    """Return the merged message of ``events`` as the client streams them."""
    repair = StreamRepair()
    merged = None
    for event in events:
        generation = client._convert_chunk_to_generation_chunk(event, AIMessageChunk, {})
        assert generation is not None
        message = repair.chunk(generation).message
        merged = message if merged is None else merged + message
    repair.end()
    assert isinstance(merged, AIMessageChunk)
    return merged


def call_delta(index, name=None, args=None, call_id=None) -> dict:
    function = {k: v for k, v in {"name": name, "arguments": args}.items() if v is not None}
    call = {"index": index, "type": "function", "function": function}
    if call_id:
        call["id"] = call_id
    return {"tool_calls": [call]}


# Received ------------------------------------------------------------------------------


def test_arguments_given_as_an_object_become_their_json_text():
    delta = call_delta(0, "weather_forecast", {"town": "苏州"}, "call_1")
    repair_delta(delta)
    assert delta["tool_calls"][0]["function"]["arguments"] == '{"town": "苏州"}'
    merged = converted(model(), chunk(delta), chunk({}, finish="tool_calls"))
    assert merged.tool_calls == [
        {"name": "weather_forecast", "args": {"town": "苏州"}, "id": "call_1", "type": "tool_call"}
    ]


def test_a_string_argument_piece_is_left_as_it_is():
    delta = call_delta(0, args='{"town": "Su')
    repair_delta(delta)
    assert delta["tool_calls"][0]["function"]["arguments"] == '{"town": "Su'


def test_a_tool_call_without_an_index_gets_its_position():
    delta = {"tool_calls": [{"id": "a", "function": {"name": "x", "arguments": "{}"}},
                            {"id": "b", "function": {"name": "y", "arguments": "{}"}}]}  # fmt: skip
    repair_delta(delta)
    assert [c["index"] for c in delta["tool_calls"]] == [0, 1]


def test_a_tool_name_repeated_on_every_chunk_of_a_call_is_kept_once():
    events = [
        chunk(call_delta(0, "calculator", '{"expre', "call_c")),
        chunk(call_delta(0, "calculator", 'ssion": "17', "call_c")),
        chunk(call_delta(0, "calculator", '*23"}', "call_c")),
        chunk({}, finish="tool_calls"),
    ]
    merged = converted(model(), *events)
    assert [(c["name"], c["args"], c["id"]) for c in merged.tool_calls] == [
        ("calculator", {"expression": "17*23"}, "call_c")
    ]


def test_a_whole_object_repeated_on_every_chunk_is_kept_once():
    events = [chunk(call_delta(0, "calculator", {"expression": "2"}, "c"))] * 3
    merged = converted(model(), *events, chunk({}, finish="tool_calls"))
    assert [c["args"] for c in merged.tool_calls] == [{"expression": "2"}]


def test_a_name_streamed_in_pieces_is_still_joined():
    events = [chunk(call_delta(0, "weather_", "", "c")), chunk(call_delta(0, "forecast", "{}")),
              chunk({}, finish="tool_calls")]  # fmt: skip
    assert [c["name"] for c in converted(model(), *events).tool_calls] == ["weather_forecast"]


def test_parallel_calls_numbered_zero_each_stay_two_calls():
    events = [
        chunk(call_delta(0, "weather_forecast", '{"town": "Suzhou"}', "call_a")),
        chunk(call_delta(0, "calculator", '{"expression": "1+1"}', "call_b")),
        chunk({}, finish="tool_calls"),
    ]
    merged = converted(model(), *events)
    assert [(c["name"], c["id"]) for c in merged.tool_calls] == [
        ("weather_forecast", "call_a"), ("calculator", "call_b"),
    ]  # fmt: skip


def test_conforming_parallel_calls_are_unchanged():
    events = [
        chunk(call_delta(0, "weather_forecast", "", "call_a")),
        chunk(call_delta(0, args='{"town": "Suzhou"}')),
        chunk(call_delta(1, "calculator", '{"expression": "1+1"}', "call_b")),
        chunk({}, finish="tool_calls"),
    ]
    merged = converted(model(), *events)
    assert [(c["name"], c["args"], c["id"]) for c in merged.tool_calls] == [
        ("weather_forecast", {"town": "Suzhou"}, "call_a"),
        ("calculator", {"expression": "1+1"}, "call_b"),
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_pieces_arrive_in_additional_kwargs_whatever_the_field(field):
    events = [chunk({"role": "assistant", field: "Think "}), chunk({field: "hard."}),
              chunk({"content": "Answer."}), chunk({}, finish="stop")]  # fmt: skip
    merged = converted(model(), *events)
    assert merged.additional_kwargs["reasoning_content"] == "Think hard."
    assert merged.content == "Answer."


def test_reasoning_content_wins_when_a_server_sends_both_names():
    assert reasoning_text({"reasoning_content": "a", "reasoning": "a"}) == "a"
    assert reasoning_text({"reasoning": "b", "content": "x"}) == "b"
    assert reasoning_text({"reasoning_content": None, "reasoning": ""}) == ""


@pytest.mark.parametrize("last", [{"index": 0, "delta": None, "finish_reason": "stop"},
                                  {"index": 0, "finish_reason": "stop"}])  # fmt: skip
def test_a_last_chunk_without_a_delta_still_ends_the_reply(last):
    end = {**chunk({}), "choices": [last]}
    merged = converted(model(), chunk({"role": "assistant", "content": "Done."}), end)
    assert merged.content == "Done."


def test_a_stream_with_no_chunk_is_an_empty_reply():
    with pytest.raises(EmptyReply):
        StreamRepair().end()


def test_a_stream_without_a_finish_reason_is_an_incomplete_reply():
    repair = StreamRepair()
    repair.chunk(ChatGenerationChunk(message=AIMessageChunk(content="Half a")))
    with pytest.raises(IncompleteReply):
        repair.end()
    repair.chunk(ChatGenerationChunk(message=AIMessageChunk(content=""),
                                     generation_info={"finish_reason": "length"}))  # fmt: skip
    repair.end()


# Sent ----------------------------------------------------------------------------------

HISTORY = [
    HumanMessage("Weather in Suzhou?"),
    AIMessage("", tool_calls=[{"name": "weather_forecast", "args": {"town": "Suzhou"},
                               "id": "call_w"}],
              additional_kwargs={"reasoning_content": "Need the tool."}),
    ToolMessage('{"sunny": true}', tool_call_id="call_w"),
    AIMessage("It is sunny.", additional_kwargs={"reasoning_content": "Say it."}),
    AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "1"}, "id": "c2"}]),
]  # fmt: skip


def assistant_messages(client: CompatibleChatOpenAI) -> list[dict]:
    payload = client._get_request_payload(HISTORY)
    return [m for m in payload["messages"] if m["role"] == "assistant"]


def test_by_default_no_reasoning_is_sent_and_tool_call_content_is_null():
    sent = assistant_messages(model())
    assert [m.get("reasoning_content") for m in sent] == [None, None, None]
    assert "reasoning_content" not in json.dumps(sent)
    assert [m["content"] for m in sent] == [None, "It is sunny.", None]


def test_send_reasoning_content_returns_each_messages_reasoning():
    sent = assistant_messages(model(send_reasoning_content=True))
    # The last one made tool calls with no reasoning known: the field is there, empty.
    assert [m.get("reasoning_content") for m in sent] == ["Need the tool.", "Say it.", ""]


def test_empty_content_with_tool_calls_sends_an_empty_string_not_null():
    sent = assistant_messages(model(empty_content_with_tool_calls=True))
    assert [m["content"] for m in sent] == ["", "It is sunny.", ""]


def test_apply_assistant_quirks_leaves_text_content_alone():
    sent = {"role": "assistant", "content": "Hi", "tool_calls": [{"id": "x"}]}
    apply_assistant_quirks(Quirks(empty_content_with_tool_calls=True), AIMessage("Hi"), sent)
    assert sent["content"] == "Hi"


@pytest.mark.parametrize(
    ("field", "absent"),
    [("max_tokens", "max_completion_tokens"), ("max_completion_tokens", "max_tokens")],
)
def test_max_tokens_goes_in_the_field_the_profile_names(field, absent):
    client = CompatibleChatOpenAI(model="m", api_key="k", max_tokens=99,
                                  quirks=Quirks(max_tokens_field=field))  # fmt: skip
    payload = client._get_request_payload([HumanMessage("hi")])
    assert payload[field] == 99 and absent not in payload


def test_no_cap_is_sent_when_max_tokens_is_unset():
    client = build_model(ModelConfig(provider="llamacpp"))
    payload = client._get_request_payload([HumanMessage("hi")])
    assert "max_tokens" not in payload and "max_completion_tokens" not in payload


def test_a_profile_names_only_known_max_tokens_fields():
    with pytest.raises(ValueError, match="max_tokens_field"):
        Quirks(max_tokens_field="max_new_tokens")
