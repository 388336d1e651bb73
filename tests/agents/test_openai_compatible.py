"""The loop against the real client (langchain-openai over the OpenAI SDK) and a fake
OpenAI-compatible server on 127.0.0.1 (tests/fake_openai.py), in the shapes real servers
send: text, tool calls split over chunks, parallel calls, Chinese arguments, arguments as
an object, repeated tool names, reasoning, retried and final HTTP errors, an empty
stream, a dropped connection, a slow server and one that never answers.

Each shape the client repairs has a unit test on the dicts in test_provider_quirks.py;
here it goes through HTTP, chunk merging and the run as the app does it.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agents.events import ModelTurnFinished, RunStatus, StepStatus, TextDelta, ToolCallFinished
from agents.model_errors import DROPPED, EMPTY_REPLY, EmptyReply
from agents.providers import ModelConfig, build_model
from agents.runtime import run
from agents.strategies import StrategyOptions, get_strategy
from agents.tools import default_tools
from tests.fake_openai import (
    FakeOpenAI,
    Reply,
    args_object_turn,
    reasoning_turn,
    repeated_name_turn,
    text_turn,
    tool_call_turn,
    usage_every_chunk_turn,
)
from tests.timing import WAIT_S

WEATHER = ("call_w", "weather_forecast", {"town": "Suzhou"})
CALCULATOR = ("call_c", "calculator", {"expression": "17*23"})


def model_for(server: FakeOpenAI, provider: str = "openai", **overrides: Any):
    options: dict[str, Any] = {"timeout_s": WAIT_S, "max_retries": 0, **overrides}
    config = ModelConfig(provider=provider, model="fake-model", base_url=server.base_url,
                         api_key="sk-test", **options)  # fmt: skip
    return build_model(config)


async def run_events(model, question: str = "hi", **kwargs: Any) -> list[Any]:
    return [e async for e in run(model, default_tools(), [HumanMessage(question)], **kwargs)]


def finished_calls(events: list[Any]) -> dict[str, ToolCallFinished]:
    return {e.tool_call_id: e for e in events if isinstance(e, ToolCallFinished)}


def turns(events: list[Any]) -> list[ModelTurnFinished]:
    return [e for e in events if isinstance(e, ModelTurnFinished)]


async def test_a_run_through_chat_openai_pairs_results_by_tool_call_id(server):
    server.script = [Reply(events=tool_call_turn(WEATHER, CALCULATOR)),
                     Reply(events=text_turn("Suzhou looks ", "fine; 17*23 = 391."))]  # fmt: skip
    events = await run_events(model_for(server))

    finished = finished_calls(events)
    assert set(finished) == {"call_w", "call_c"}
    assert all(e.status is StepStatus.SUCCESS for e in finished.values())
    assert '"result": 391' in finished["call_c"].result
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "Suzhou looks fine; 17*23 = 391."
    )
    end = events[-1]
    assert end.status is RunStatus.SUCCEEDED
    assert end.usage == {"input_tokens": 80, "output_tokens": 16, "total_tokens": 96}

    first, second = server.requests
    assert first["stream"] is True
    assert first["model"] == "fake-model"
    assert {t["function"]["name"] for t in first["tools"]} >= {"weather_forecast", "calculator"}
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_w", "call_c"]
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_w", "call_c"]
    # OpenAI's own shape: null content beside tool calls, and no reasoning field.
    assert assistant["content"] is None and "reasoning_content" not in assistant


async def test_chinese_arguments_split_mid_character_run_the_tool(server):
    call = ("call_zh", "weather_forecast", {"town": "苏州"})
    server.script = [Reply(events=tool_call_turn(call, pieces=7)),
                     Reply(events=text_turn("苏州天气不错。"))]  # fmt: skip
    events = await run_events(model_for(server), "苏州天气怎么样？")

    [finished] = finished_calls(events).values()
    assert finished.status is StepStatus.SUCCESS
    assert events[-1].status is RunStatus.SUCCEEDED and events[-1].output == "苏州天气不错。"
    assistant = next(m for m in server.requests[1]["messages"] if m["role"] == "assistant")
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"town": "苏州"}


async def test_arguments_sent_as_a_json_object_run_the_tool(server):
    server.script = [Reply(events=args_object_turn(WEATHER, CALCULATOR)),
                     Reply(events=text_turn("Done."))]  # fmt: skip
    events = await run_events(model_for(server))

    finished = finished_calls(events)
    assert {k: e.status for k, e in finished.items()} == {
        "call_w": StepStatus.SUCCESS, "call_c": StepStatus.SUCCESS,
    }  # fmt: skip
    assert '"result": 391' in finished["call_c"].result
    assert events[-1].status is RunStatus.SUCCEEDED
    # Sent back as the string the protocol asks for.
    assistant = next(m for m in server.requests[1]["messages"] if m["role"] == "assistant")
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        {"town": "Suzhou"}, {"expression": "17*23"},
    ]  # fmt: skip


async def test_a_tool_name_repeated_on_every_chunk_is_kept_once(server):
    server.script = [Reply(events=repeated_name_turn(*CALCULATOR)),
                     Reply(events=text_turn("391."))]  # fmt: skip
    events = await run_events(model_for(server, provider="llamacpp"))

    [turn, _] = turns(events)
    assert [c["name"] for c in turn.tool_calls] == ["calculator"]
    assert [c["id"] for c in turn.tool_calls] == ["call_c"]
    [finished] = finished_calls(events).values()
    assert finished.status is StepStatus.SUCCESS and '"result": 391' in finished.result
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_the_llamacpp_profile_sends_empty_content_and_max_tokens(server):
    server.script = [Reply(events=repeated_name_turn(*CALCULATOR)),
                     Reply(events=text_turn("391."))]  # fmt: skip
    events = await run_events(model_for(server, provider="llamacpp", max_tokens=256))

    assert events[-1].status is RunStatus.SUCCEEDED
    first, second = server.requests
    assert first["max_tokens"] == 256 and "max_completion_tokens" not in first
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"]


async def test_openai_gets_the_output_cap_as_max_completion_tokens(server):
    server.script = [Reply(events=text_turn("Hi."))]
    await run_events(model_for(server, max_tokens=64))
    [request] = server.requests
    assert request["max_completion_tokens"] == 64 and "max_tokens" not in request


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_reach_the_turn_and_never_the_answer(server, field):
    thinking = ["The user wants ", "the product. ", "Use the calculator."]
    server.script = [
        Reply(events=reasoning_turn(thinking, tool_call_turn(CALCULATOR), field=field)),
        Reply(events=reasoning_turn(["Now answer."], text_turn("391."), field=field)),
    ]
    events = await run_events(model_for(server, provider="qwen"))

    assert events[-1].status is RunStatus.SUCCEEDED and events[-1].output == "391."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "391."
    first, _ = turns(events)
    assert first.raw["additional_kwargs"]["reasoning_content"] == "".join(thinking)
    # Qwen's servers need no reasoning back: it is not sent.
    assert "reasoning_content" not in json.dumps(server.requests[1]["messages"])


async def test_deepseek_gets_its_reasoning_back_on_the_next_request(server):
    thinking = ["Need the weather. ", "Call the tool."]
    server.script = [
        Reply(events=reasoning_turn(thinking, tool_call_turn(WEATHER))),
        Reply(events=reasoning_turn(["Answer it."], text_turn("Sunny in Suzhou."))),
    ]
    events = await run_events(model_for(server, provider="deepseek", max_tokens=100))

    assert events[-1].status is RunStatus.SUCCEEDED
    first, second = server.requests
    assert first["max_tokens"] == 100
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "".join(thinking)
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_w"]


async def test_usage_repeated_on_every_chunk_is_the_replys_not_the_sum(server):
    # Passes once model_turn.py keeps the per-key maximum within one response (part B).
    server.script = [Reply(events=usage_every_chunk_turn("Su", "zhou ", "is ", "sunny."))]
    events = await run_events(model_for(server))

    [turn] = turns(events)
    assert turn.usage is not None and turn.usage["input_tokens"] == 713
    assert turn.usage["output_tokens"] == 4
    assert events[-1].usage["input_tokens"] == 713


async def test_a_react_run_through_chat_openai_sends_stop_and_no_tools(server):
    server.script = [
        Reply(events=text_turn("Thought: maths\nAction: calculator\nAction Input: ",
                               '{"expression": "17*23"}')),
        Reply(events=text_turn("Thought: I now know the final answer\nFinal Answer: ", "391")),
    ]  # fmt: skip
    events = await run_events(model_for(server), "17*23?", strategy=get_strategy("react"))

    assert events[-1].status is RunStatus.SUCCEEDED and events[-1].output == "391"
    first, second = server.requests
    assert first["stop"] == ["\nObservation"] and "tools" not in first
    assert '"name": "calculator"' in first["messages"][0]["content"]
    assert second["messages"][-2] == {
        "role": "assistant",
        "content": 'Thought: maths\nAction: calculator\nAction Input: {"expression": "17*23"}',
    }
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith('Observation: {"expression": "17*23"')


async def test_native_options_reach_the_provider_on_the_first_turn_only(server):
    server.script = [Reply(events=tool_call_turn(WEATHER, CALCULATOR)),
                     Reply(events=text_turn("Done."))]  # fmt: skip
    options = StrategyOptions(tool_choice="weather_forecast", parallel_tool_calls=False)
    events = await run_events(model_for(server), strategy=get_strategy("tool_calling", options))

    assert events[-1].status is RunStatus.SUCCEEDED
    first, second = server.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "weather_forecast"}}
    assert first["parallel_tool_calls"] is False
    assert "tool_choice" not in second and second["parallel_tool_calls"] is False


async def test_a_rate_limit_is_retried_with_backoff_and_the_run_succeeds(server):
    server.script = [Reply(429, message="Rate limit reached"),
                     Reply(429, message="Rate limit reached"),
                     Reply(events=text_turn("Hello."))]  # fmt: skip
    events = await run_events(model_for(server, max_retries=2))
    assert events[-1].status is RunStatus.SUCCEEDED
    assert len(server.requests) == 3


async def test_an_authentication_error_is_not_retried_and_fails_in_plain_words(server):
    server.script = [Reply(401, message="Incorrect API key provided")]
    events = await run_events(model_for(server, max_retries=2))
    end = events[-1]
    assert end.status is RunStatus.FAILED
    assert end.error.startswith("The model provider refused the credentials (HTTP 401)")
    [turn] = turns(events)
    assert "AuthenticationError: " in turn.error and "Incorrect API key" in turn.error
    assert len(server.requests) == 1  # retrying cannot fix a refused key


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        ([Reply(429, message="Rate limit reached")] * 3, "limiting requests (HTTP 429)"),
        ([Reply(503, message="overloaded")] * 3, "server error (HTTP 503)"),
        ([Reply(500, message="Value is not callable: null")] * 3,
         "could not handle this request (HTTP 500)"),
        ([Reply(400, message="This model's maximum context length is 8192 tokens")],
         "rejected the request (HTTP 400): This model's maximum context length"),
        ([Reply(404, message="The model `gpt-9` does not exist")], "does not know this model"),
    ],
)  # fmt: skip
async def test_provider_errors_fail_the_run_in_plain_words(server, replies, expected):
    server.script = list(replies)
    events = await run_events(model_for(server, max_retries=2))
    end = events[-1]
    assert end.status is RunStatus.FAILED and expected in end.error
    assert "{" not in end.error  # no raw JSON payload in what the user reads
    assert len(server.requests) == len(replies)  # 429 and 5xx were retried, 4xx not


async def test_a_500_on_every_retry_says_the_request_will_fail_again(server):
    server.script = [Reply(500, message="Value is not callable: null at row 12")] * 2
    events = await run_events(model_for(server, provider="llamacpp", max_retries=1))
    error = events[-1].error
    assert "could not handle this request" in error and "Value is not callable" in error
    assert "Try again later" not in error


async def test_an_empty_stream_says_the_server_sent_no_reply_and_the_next_run_works(server):
    server.script = [Reply(events=[]), Reply(events=text_turn("Hello again."))]
    model = model_for(server, provider="llamacpp")
    events = await run_events(model)
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == EMPTY_REPLY
    assert "context" in events[-1].error
    [turn] = turns(events)
    assert turn.error_type == "EmptyReply"

    again = await run_events(model, "hello?")
    assert again[-1].status is RunStatus.SUCCEEDED and again[-1].output == "Hello again."


@pytest.mark.parametrize(
    "reply",
    [
        Reply(events=text_turn("Suzhou is ", "sunny ", "today."), drop_after=2),
        Reply(events=text_turn("Suzhou is ", "sunny ")[:2], done=False),
        Reply(events=tool_call_turn(WEATHER)[:3], done=False),
    ],
    ids=["broken-off-mid-body", "ended-without-finish", "tool-call-cut-off"],
)
async def test_a_connection_dropped_mid_reply_fails_cleanly_and_the_next_run_works(server, reply):
    server.script = [reply, Reply(events=text_turn("Sunny."))]
    model = model_for(server)
    events = await run_events(model)

    end = events[-1]
    assert end.status is RunStatus.FAILED and end.error == DROPPED
    assert not finished_calls(events)  # a cut-off call never runs
    [turn] = turns(events)
    assert turn.error  # the provider's own words, for the log

    again = await run_events(model, "and now?")
    assert again[-1].status is RunStatus.SUCCEEDED and again[-1].output == "Sunny."


async def test_an_error_event_in_the_stream_fails_with_the_servers_words(server):
    error = {
        "error": {
            "code": 400,
            "type": "exceed_context_size_error",
            "message": "the request (9000 tokens) exceeds the available context",
        }
    }
    server.script = [Reply(events=[error])]  # fmt: skip
    events = await run_events(model_for(server, provider="llamacpp"))
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == (
        "The model server reported an error while it was replying: "
        "the request (9000 tokens) exceeds the available context"
    )


async def test_a_last_chunk_with_a_null_delta_still_ends_the_reply(server):
    events = text_turn("All ", "done.")
    events[2] = {**events[2], "choices": [{"index": 0, "delta": None, "finish_reason": "stop"}]}
    server.script = [Reply(events=events)]
    result = await run_events(model_for(server))
    assert result[-1].status is RunStatus.SUCCEEDED and result[-1].output == "All done."


async def test_a_slow_server_streams_every_piece_in_order(server):
    pieces = ["Suzhou ", "is ", "mild ", "this ", "week."]
    server.script = [Reply(events=text_turn(*pieces), delay_s=0.05)]
    events = await run_events(model_for(server))
    assert [e.text for e in events if isinstance(e, TextDelta)] == pieces
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_a_provider_that_does_not_answer_times_out_in_plain_words(server):
    server.script = [Reply(hang=True)]
    events = await run_events(model_for(server, max_retries=0, timeout_s=0.5))
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == "The model provider did not answer in time, even after retries."


async def test_a_server_that_stalls_mid_stream_times_out_in_plain_words(server):
    server.script = [Reply(events=text_turn("Suzhou ", "is ", "sunny."), stall_after=2)]
    events = await run_events(model_for(server, max_retries=0, timeout_s=0.5))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Suzhou ", "is "]
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == "The model provider did not answer in time, even after retries."
    [turn] = turns(events)
    assert turn.text == "Suzhou is"  # what arrived is kept on the turn (stripped)


async def test_an_unreachable_provider_fails_in_plain_words():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = ModelConfig(provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1",
                         api_key="sk-test", timeout_s=2, max_retries=0)  # fmt: skip
    events = await run_events(build_model(config))
    assert events[-1].status is RunStatus.FAILED
    assert "could not be reached" in events[-1].error


def test_the_synchronous_stream_is_repaired_and_checked_the_same_way(server):
    server.script = [Reply(events=repeated_name_turn(*CALCULATOR)), Reply(events=[])]
    model = model_for(server, provider="llamacpp")
    merged = None
    for piece in model.stream([HumanMessage("17*23?")]):
        merged = piece if merged is None else merged + piece
    assert merged is not None
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [
        ("calculator", {"expression": "17*23"})
    ]
    with pytest.raises(EmptyReply):
        list(model.stream([HumanMessage("again")]))
