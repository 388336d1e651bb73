"""Hostile servers of the kinds issue 10 lists, but not its listed examples: each shape
through the real client (langchain-openai over HTTP, tests/fake_openai.py) and the run."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.agents import AgentFinish
from langchain_core.messages import AIMessage, HumanMessage

from agents.events import ModelTurnFinished, RunStatus, StepStatus, ToolCallFinished
from agents.history import Exchange, TurnRecord, history_messages, role_order_problems
from agents.model_turn import CUT_OFF
from agents.providers import ModelConfig, build_model
from agents.runtime import run
from agents.strategies import StrategyOptions, get_strategy
from agents.strategies.tool_markup import find_tool_markup
from agents.tools import default_tools
from tests.agents.test_history import WRITERS
from tests.agents.test_openai_compatible import model_for, run_events
from tests.fake_openai import (
    Reply,
    chunk,
    text_turn,
    tool_call_turn,
    usage,
    usage_chunk,
)
from tests.timing import WAIT_S

CALC = ("call_c", "calculator", {"expression": "17*23"})


def turns(events):
    return [e for e in events if isinstance(e, ModelTurnFinished)]


def calls(events):
    return [e for e in events if isinstance(e, ToolCallFinished)]


def one_call(arguments: Any) -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                               "function": {"name": "calculator", "arguments": arguments}}]}),
        chunk({}, finish="tool_calls"),
    ]  # fmt: skip


@pytest.mark.parametrize("arguments", [5, None, True, ["17*23"], 1.5])
async def test_arguments_of_any_json_kind_end_the_turn_as_a_format_error_not_a_crash(
    server, arguments
):
    server.script = [Reply(events=one_call(arguments)), Reply(events=text_turn("391."))]
    events = await run_events(model_for(server, provider="llamacpp"))
    first = turns(events)[0]
    assert first.error_type == "", first.error  # not a pydantic ValidationError
    if arguments is not None:  # not an object: an invalid call the model is told about
        assert first.invalid_tool_calls and "not an object" in first.invalid_tool_calls[0]["error"]
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_usage_in_the_first_chunk_only_is_kept(server):
    events = text_turn("Su", "zhou.", with_usage=False)
    events[0] = {**events[0], "usage": usage(321, 5)}
    server.script = [Reply(events=events)]
    result = await run_events(model_for(server))
    [turn] = turns(result)
    assert turn.usage and turn.usage["input_tokens"] == 321


async def test_usage_inside_the_choice_is_kept(server):
    events = text_turn("Hi", with_usage=False)
    events[-1]["choices"][0]["usage"] = usage(99, 2)
    server.script = [Reply(events=events)]
    result = await run_events(model_for(server))
    [turn] = turns(result)
    assert turn.usage and (turn.usage["input_tokens"], turn.usage["output_tokens"]) == (99, 2)


async def test_usage_with_token_details_repeated_is_not_summed(server):
    detail = {**usage(700, 3), "prompt_tokens_details": {"cached_tokens": 600},
              "completion_tokens_details": {"reasoning_tokens": 2}}  # fmt: skip
    events = [
        chunk({"role": "assistant", "content": "A"}, usage=detail),
        chunk({"content": "B"}, usage=detail),
        chunk({}, finish="stop", usage=detail),
    ]
    server.script = [Reply(events=events)]
    result = await run_events(model_for(server))
    [turn] = turns(result)
    assert turn.usage["input_tokens"] == 700
    assert turn.usage["input_token_details"]["cache_read"] == 600


async def test_reasoning_in_both_fields_is_kept_once(server):
    both = {"role": "assistant", "content": None, "reasoning": "Think.",
            "reasoning_content": "Think."}  # fmt: skip
    events = [chunk(both), *text_turn("391.")[1:]]
    events[1]["choices"][0]["delta"]["content"] = "391."
    server.script = [Reply(events=events)]
    result = await run_events(model_for(server))
    [turn] = turns(result)
    assert turn.reasoning == "Think."
    assert result[-1].output == "391."


@pytest.mark.parametrize("opening", ["<THINK>", "<Think>"])
async def test_inline_reasoning_in_other_case_is_not_the_answer(server, opening):
    closing = opening.replace("<", "</")
    server.script = [Reply(events=text_turn(opening, "Final Answer: no", closing, "\n391."))]
    result = await run_events(model_for(server))
    assert result[-1].output == "391."


async def test_a_stream_of_only_a_role_chunk_fails_cleanly(server):
    server.script = [Reply(events=[chunk({"role": "assistant", "content": ""})]),
                     Reply(events=text_turn("ok"))]  # fmt: skip
    model = model_for(server)
    result = await run_events(model)
    assert result[-1].status is RunStatus.FAILED
    again = await run_events(model)
    assert again[-1].status is RunStatus.SUCCEEDED


async def test_a_vllm_error_object_in_the_stream_says_the_servers_words(server):
    error = {"object": "error", "message": "maximum context length is 4096 tokens",
             "type": "BadRequestError", "param": None, "code": 400}  # fmt: skip
    server.script = [Reply(events=[chunk({"role": "assistant", "content": ""}), error])]
    result = await run_events(model_for(server))
    assert result[-1].status is RunStatus.FAILED
    assert "maximum context length" in result[-1].error


async def test_a_string_error_in_the_stream_says_the_servers_words(server):
    server.script = [Reply(events=[{"error": "model overloaded, try later"}])]
    result = await run_events(model_for(server))
    assert result[-1].status is RunStatus.FAILED
    assert "overloaded" in result[-1].error


async def test_finish_length_mid_tool_call_runs_nothing(server):
    events = tool_call_turn(CALC, pieces=3)
    cut = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"] is None][:-1]
    server.script = [Reply(events=[*cut, chunk({}, finish="length")]),
                     Reply(events=text_turn("ok"))]  # fmt: skip
    result = await run_events(model_for(server))
    assert not [c for c in calls(result) if c.status is StepStatus.SUCCESS]


def cut_reply(text: str, finish: str = "length") -> Reply:
    return Reply(events=[chunk({"role": "assistant", "content": text}),
                         chunk({}, finish=finish), usage_chunk(9, 3)])  # fmt: skip


@pytest.mark.parametrize("finish", ["length", "max_tokens"])
async def test_a_text_reply_cut_off_by_length_is_not_a_whole_answer(server, finish):
    server.script = [cut_reply("The answer is", finish)]
    result = await run_events(model_for(server))
    end, turn = result[-1], turns(result)[0]
    assert end.status is RunStatus.FAILED and end.output == ""
    assert end.error == CUT_OFF and "cut off" in end.error and "AGENT_MAX_TOKENS" in end.error
    assert turn.error_type == "LengthFinishReasonError" and turn.error == CUT_OFF
    assert turn.text == "The answer is" and turn.final_answer == ""  # kept, not an answer
    assert turn.usage and turn.usage["output_tokens"] == 3


@pytest.mark.parametrize("strategy", ["react", "xml"])
async def test_a_text_strategy_answer_cut_off_by_length_fails_the_run(server, strategy):
    written = WRITERS[strategy][1]("The answer is")
    server.script = [cut_reply(written)]
    result = await run_events(model_for(server), strategy=get_strategy(strategy))
    assert result[-1].status is RunStatus.FAILED and result[-1].error == CUT_OFF
    assert turns(result)[0].text == written.strip()
    assert turns(result)[0].error_type == "LengthFinishReasonError"


async def test_a_reply_that_stopped_normally_after_a_repeated_finish_is_an_answer(server):
    # A finish_reason sent on two chunks merges to "stopstop": read per chunk, never merged.
    stop = chunk({}, finish="stop")
    server.script = [Reply(events=[chunk({"role": "assistant", "content": "Done."}), stop, stop])]
    result = await run_events(model_for(server))
    assert result[-1].status is RunStatus.SUCCEEDED and result[-1].output == "Done."


async def test_a_cut_off_text_after_tool_calls_still_runs_nothing_and_fails_clearly(server):
    # A reply cut by length in the middle of a later answer, after a tool ran.
    server.script = [Reply(events=tool_call_turn(CALC)), cut_reply("17*23 is")]
    result = await run_events(model_for(server))
    assert [c.status for c in calls(result)] == [StepStatus.SUCCESS]
    assert result[-1].status is RunStatus.FAILED and result[-1].error == CUT_OFF


async def test_the_next_message_after_a_cut_off_answer_works(server):
    server.script = [cut_reply("The answer is"), Reply(events=text_turn("391."))]
    first = await run_events(model_for(server), question="What is 17*23?")
    turn = turns(first)[0]
    # Stored as the chat stores it: a model turn whose step is an error is not finished.
    stored = TurnRecord(iteration=1, text=turn.text, finished=not turn.error)
    exchange = Exchange(question="What is 17*23?", status=first[-1].status, turns=(stored,))
    earlier = history_messages([exchange], get_strategy("tool_calling"), max_observation_chars=1000)
    messages = [*earlier, HumanMessage("And 17*24?")]
    assert role_order_problems(messages) == []
    second = [e async for e in run(model_for(server), default_tools(), messages)]
    assert second[-1].status is RunStatus.SUCCEEDED and second[-1].output == "391."
    sent = server.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert "The answer is" not in json.dumps(sent)  # the partial text is not sent as an answer


@pytest.mark.parametrize(
    "markup",
    [
        '<|python_tag|>{"name": "calculator", "parameters": {"expression": "17*23"}}',
        '<function_call>{"name": "calculator", "arguments": {"expression": "17*23"}}'
        "</function_call>",
        pytest.param(
            '{"name": "calculator", "parameters": {"expression": "17*23"}}', id="bare-json"
        ),
        pytest.param('[calculator(expression="17*23")]', id="pythonic"),
        '[TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "17*23"}}]',
        "<tool_call>{'name': 'calculator', 'arguments': {'expression': '17*23'}}</tool_call>",
        '<tool_call>{"name": "calculator", "arguments": {"expression": "17*23"},}</tool_call>',
        '<tool_call>{"name": "nosuch", "arguments": {}}</tool_call>',
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calculator\n```json\n"
        '{"expression": "17*23"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ],
)
async def test_markup_is_never_a_successful_answer(server, markup):
    server.script = [Reply(events=text_turn(markup)), Reply(events=text_turn("391."))]
    result = await run_events(model_for(server, provider="llamacpp"))
    first = turns(result)[0]
    assert first.final_answer == "", first.final_answer


@pytest.mark.parametrize(
    "markup",
    [
        '<|python_tag|>{"name": "calculator", "parameters": {"expression": "17*23"}}',
        '<function_call>{"name": "calculator", "arguments": {"expression": "17*23"}}'
        "</function_call>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calculator\n```json\n"
        '{"expression": "17*23"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    ],
    ids=["python_tag", "function_call", "deepseek-v3"],
)
async def test_other_markup_families_run_the_tool_where_the_profile_says_so(server, markup):
    server.script = [Reply(events=text_turn(markup)), Reply(events=text_turn("391."))]
    strategy = get_strategy("tool_calling", StrategyOptions(text_tool_calls=True))
    result = await run_events(model_for(server, provider="llamacpp"), strategy=strategy)
    [finished] = calls(result)
    assert finished.status is StepStatus.SUCCESS and '"result": 391' in finished.result
    assert result[-1].status is RunStatus.SUCCEEDED and result[-1].output == "391."


@pytest.mark.parametrize("arguments", ['{"expression": "17*2', "5", "{"])
async def test_an_invalid_call_goes_back_with_object_arguments_a_parsing_server_accepts(
    server, arguments
):
    # llama.cpp's server json-parses every arguments string of the history and answers
    # HTTP 500 to one that does not parse (ggml-org/llama.cpp#25510): the run would be stuck.
    server.script = [Reply(events=one_call(arguments)), Reply(events=text_turn("391."))]
    result = await run_events(model_for(server, provider="llamacpp"))
    assert result[-1].status is RunStatus.SUCCEEDED
    assistant = next(m for m in server.requests[1]["messages"] if m["role"] == "assistant")
    [sent] = assistant["tool_calls"]
    assert isinstance(json.loads(sent["function"]["arguments"]), dict)
    tool = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert tool["tool_call_id"] == sent["id"] and "not" in tool["content"]


class _WholeJSON(BaseHTTPRequestHandler):
    """A server that ignores ``stream: true`` and answers one ``chat.completion`` body."""

    body = json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Hello from JSON."}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }).encode()  # fmt: skip

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


@pytest.mark.xfail(strict=True, reason="a 200 JSON body to a streamed request is read as an "
                   "empty stream and blamed on the context window; reading it needs the body "
                   "before the SDK's SSE decoder drops it (an httpx hook or a non-streamed "
                   "retry): a design decision")  # fmt: skip
async def test_a_server_that_ignores_stream_and_sends_one_json_body_is_read_or_named():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _WholeJSON)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        config = ModelConfig(provider="openai", model="m", api_key="k", max_retries=0,
                             base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1",
                             timeout_s=WAIT_S)  # fmt: skip
        result = await run_events(build_model(config))
    finally:
        httpd.shutdown()
        httpd.server_close()
    end = result[-1]
    assert end.output == "Hello from JSON." or "context" not in end.error


@pytest.mark.parametrize(
    "markup",
    [
        '[TOOL_CALLS]calculator[CALL_ID]a1b2c3d4e[ARGS]{"expression": "17*23"}',
        '<tool_call>[{"name": "calculator", "arguments": {"expression": "17*23"}}]</tool_call>',
    ],
    ids=["mistral-call-id", "array-in-tool-call"],
)
def test_more_markup_forms_read_as_the_call_they_make(markup):
    found = find_tool_markup(markup)
    assert found is not None
    assert [(c.name, c.args, c.error) for c in found.calls] == [
        ("calculator", {"expression": "17*23"}, "")
    ]


TOOL_NAMES = frozenset(tool.name for tool in default_tools())


def test_a_pythonic_call_list_is_not_an_answer():
    found = find_tool_markup('[calculator(expression="17*23")]', tool_names=TOOL_NAMES)
    assert found is not None and found.text == ""
    assert [(c.name, c.args, c.error) for c in found.calls] == [
        ("calculator", {"expression": "17*23"}, "")
    ]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"name": "calculator", "arguments": {"expression": "17*23"}}',
         [("calculator", {"expression": "17*23"})]),
        ('{"type": "function", "name": "calculator", "parameters": {"expression": "1+1"}}',
         [("calculator", {"expression": "1+1"})]),
        ('  [{"name": "calculator", "parameters": {"expression": "1"}},\n'
         ' {"name": "calculator", "parameters": {"expression": "2"}}]  ',
         [("calculator", {"expression": "1"}), ("calculator", {"expression": "2"})]),
        ('```json\n{"name": "calculator", "parameters": {"expression": "2*3"}}\n```',
         [("calculator", {"expression": "2*3"})]),
        ("```python\n[calculator(expression='2*3')]\n```", [("calculator", {"expression": "2*3"})]),
        ('[calculator(expression="1"), calculator(expression="2")]',
         [("calculator", {"expression": "1"}), ("calculator", {"expression": "2"})]),
        ("[calculator()]", [("calculator", {})]),
        ('[calculator(expression="苏州", extra=(1, 2), flag=True, none=None)]',
         [("calculator", {"expression": "苏州", "extra": [1, 2], "flag": True, "none": None})]),
    ],
    ids=["arguments", "type-function", "json-list", "fenced-json", "fenced-pythonic",
         "pythonic-two", "pythonic-no-args", "pythonic-literals"],
)  # fmt: skip
def test_a_bare_call_naming_known_tools_is_read_as_calls(reply, expected):
    found = find_tool_markup(reply, tool_names=TOOL_NAMES)
    assert found is not None and found.text == ""
    assert [(c.name, c.args) for c in found.calls] == expected
    assert all(not c.error for c in found.calls)
    assert find_tool_markup(reply) is None  # without the names nothing bare is read


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "Alice", "age": 3}',
        '{"name": "Alice", "parameters": {"age": 3}}',
        '{"name": "calculator", "description": "Evaluates arithmetic.", "parameters": {}}',
        '{"name": "calculator"}',
        '{"name": ["calculator"], "parameters": {}}',
        '[{"name": "calculator", "parameters": {}}, {"name": "Alice", "parameters": {}}]',
        "[]",
        "[1, 2, 3]",
        "[print(x) for x in y]",
        "[len(s)]",
        "[calculator(expression=x)]",
        '[calculator("17*23")]',
        "[calculator(**opts)]",
        "[calculator(expression={1, 2})]",
        "[math.calculator(expression='1')]",
        "[calculator(expression='1'), len(s)]",
        "(calculator(expression='1'))",
        'Here it is: {"name": "calculator", "parameters": {"expression": "1"}}',
        '```json\n{"name": "calculator", "parameters": {}}\n```\nThat is the call.',
        '```\n{"name": "calculator", "parameters": {}}\n```\n```\nmore\n```',
        "[calculator(expression='" + "1" * 20_000 + "')]",
        "[" * 5000 + "]" * 5000,
    ],
)
def test_a_reply_that_is_not_wholly_a_known_call_stays_an_answer(reply):
    assert find_tool_markup(reply, tool_names=TOOL_NAMES) is None


# Llama 3's llama3_json call and vLLM's pythonic call list: no tag, only known tool names.
BARE_CALLS = [
    '{"name": "calculator", "parameters": {"expression": "17*23"}}',
    '[calculator(expression="17*23")]',
]


@pytest.mark.parametrize("reply", BARE_CALLS, ids=["bare-json", "pythonic"])
async def test_a_bare_call_runs_the_tool_where_the_profile_says_so(server, reply):
    server.script = [Reply(events=text_turn(reply)), Reply(events=text_turn("391."))]
    strategy = get_strategy("tool_calling", StrategyOptions(text_tool_calls=True))
    result = await run_events(model_for(server, provider="llamacpp"), strategy=strategy)
    [finished] = calls(result)
    assert finished.status is StepStatus.SUCCESS and '"result": 391' in finished.result
    assert result[-1].status is RunStatus.SUCCEEDED and result[-1].output == "391."
    # The call went back as a native tool call, paired with its result.
    sent = server.requests[-1]["messages"]
    assert [m["role"] for m in sent[-2:]] == ["assistant", "tool"]
    assert sent[-2]["tool_calls"][0]["id"] == sent[-1]["tool_call_id"]


@pytest.mark.parametrize("reply", BARE_CALLS, ids=["bare-json", "pythonic"])
async def test_a_bare_call_without_the_profile_is_a_format_error(server, reply):
    server.script = [Reply(events=text_turn(reply)), Reply(events=text_turn("391."))]
    result = await run_events(model_for(server))
    [error] = calls(result)
    assert error.error_type == "TextToolCall" and error.status is StepStatus.ERROR
    assert result[-1].status is RunStatus.SUCCEEDED and result[-1].output == "391."


@pytest.mark.parametrize("text_tool_calls", [True, False])
@pytest.mark.parametrize(
    "answer", ['{"name": "Alice", "age": 3}', "[len(s)]", "[print(x) for x in y]"]
)
async def test_an_answer_that_looks_like_a_call_stays_an_answer(server, answer, text_tool_calls):
    server.script = [Reply(events=text_turn(answer))]
    strategy = get_strategy("tool_calling", StrategyOptions(text_tool_calls=text_tool_calls))
    result = await run_events(model_for(server, provider="llamacpp"), strategy=strategy)
    assert not calls(result)
    assert result[-1].status is RunStatus.SUCCEEDED and result[-1].output == answer


@pytest.mark.parametrize("strategy", ["xml", "react", "structured_chat"])
@pytest.mark.parametrize(
    "answer",
    [
        "Close it with `</final_answer>` and open it with `<final_answer>`.",
        "Write `<tool>search</tool><tool_input>x</tool_input>` to call a tool.",
        "Write `Action: search` then `Final Answer: done`.",
    ],
)
def test_a_delimiter_in_an_inline_code_span_of_an_answer_is_content(strategy, answer):
    parsed = get_strategy(strategy).parse(AIMessage(WRITERS[strategy][1](answer)))
    assert isinstance(parsed, AgentFinish) and parsed.return_values["output"] == answer
