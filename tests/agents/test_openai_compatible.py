"""The loop against langchain-openai's ChatOpenAI and a fake OpenAI-compatible server.

The server is a few lines of ``http.server`` on 127.0.0.1 that speaks the chat-completions
streaming protocol (server-sent events, tool-call deltas, a final usage chunk), so the
real client, chunk merging and ``tool_call_id`` pairing are exercised with no network.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agents.events import ModelTurnFinished, RunStatus, StepStatus, TextDelta, ToolCallFinished
from agents.providers import ModelConfig, build_model
from agents.runtime import run
from agents.strategies import StrategyOptions, get_strategy
from agents.tools import default_tools
from tests.timing import WAIT_S


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


USAGE = {
    "id": "chatcmpl-fake",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "fake-model",
    "choices": [],
    "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
}


def tool_call_turn() -> list[dict[str, Any]]:
    """Two parallel tool calls whose JSON arguments arrive in pieces."""
    return [
        chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_w", "type": "function",
             "function": {"name": "weather_forecast", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"town": "Su'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'zhou"}'}}]}),
        chunk({"tool_calls": [
            {"index": 1, "id": "call_c", "type": "function",
             "function": {"name": "calculator", "arguments": '{"expression": "17*23"}'}}]}),
        chunk({}, finish="tool_calls"),
        USAGE,
    ]  # fmt: skip


def answer_turn() -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": "Suzhou looks "}),
        chunk({"content": "fine; 17*23 = 391."}),
        chunk({}, finish="stop"),
        USAGE,
    ]


class FakeOpenAI(BaseHTTPRequestHandler):
    """Answer POST /v1/chat/completions from the server's ``script`` (a list of turns)."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append(body)  # type: ignore[attr-defined]
        status, turn = self.server.script.pop(0)  # type: ignore[attr-defined]
        if status == "hang":
            # Until the test is over, however long the client takes to give up.
            self.server.hung_up.wait(WAIT_S)  # type: ignore[attr-defined]
            return
        if status != 200:
            payload = json.dumps({"error": {"message": turn, "type": "invalid_request_error"}})
            self.send_response(status)
            self.send_header("content-type", "application/json")
            # The client honours it: retries wait 10 ms instead of its 0.5 s+ backoff.
            self.send_header("retry-after-ms", "10")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for event in turn:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    httpd.requests = []  # type: ignore[attr-defined]
    httpd.script = []  # type: ignore[attr-defined]
    httpd.hung_up = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.hung_up.set()  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


def openai_model(server: ThreadingHTTPServer, **overrides: Any):
    host, port = server.server_address
    options: dict[str, Any] = {"timeout_s": WAIT_S, "max_retries": 0, **overrides}
    config = ModelConfig(
        provider="openai", model="fake-model", base_url=f"http://{host}:{port}/v1",
        api_key="sk-test", **options,
    )  # fmt: skip
    return build_model(config)


async def test_a_run_through_chat_openai_pairs_results_by_tool_call_id(server):
    server.script = [(200, tool_call_turn()), (200, answer_turn())]
    events = [e async for e in run(openai_model(server), default_tools(), [HumanMessage("hi")])]

    finished = {e.tool_call_id: e for e in events if isinstance(e, ToolCallFinished)}
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


async def test_an_authentication_error_is_not_retried_and_fails_in_plain_words(server):
    server.script = [(401, "Incorrect API key provided")]
    model = openai_model(server, max_retries=2)
    events = [e async for e in run(model, default_tools(), [HumanMessage("hi")])]
    end = events[-1]
    assert end.status is RunStatus.FAILED
    assert end.error.startswith("The model provider refused the credentials (HTTP 401)")
    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert "AuthenticationError: " in turn.error and "Incorrect API key" in turn.error
    assert len(server.requests) == 1  # retrying cannot fix a refused key


def text_turn(*pieces: str) -> list[dict[str, Any]]:
    """A streamed text reply in ``pieces``."""
    return [
        chunk({"role": "assistant", "content": pieces[0]}),
        *(chunk({"content": piece}) for piece in pieces[1:]),
        chunk({}, finish="stop"),
        USAGE,
    ]


async def test_a_react_run_through_chat_openai_sends_stop_and_no_tools(server):
    server.script = [
        (200, text_turn("Thought: maths\nAction: calculator\nAction Input: ",
                        '{"expression": "17*23"}')),
        (200, text_turn("Thought: I now know the final answer\nFinal Answer: ", "391")),
    ]  # fmt: skip
    model = openai_model(server)
    events = [
        e
        async for e in run(model, default_tools(), [HumanMessage("17*23?")],
                           strategy=get_strategy("react"))
    ]  # fmt: skip

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
    server.script = [(200, tool_call_turn()), (200, answer_turn())]
    options = StrategyOptions(tool_choice="weather_forecast", parallel_tool_calls=False)
    strategy = get_strategy("tool_calling", options)
    events = [
        e async for e in run(openai_model(server), default_tools(), [HumanMessage("hi")],
                             strategy=strategy)
    ]  # fmt: skip

    assert events[-1].status is RunStatus.SUCCEEDED
    first, second = server.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "weather_forecast"}}
    assert first["parallel_tool_calls"] is False
    assert "tool_choice" not in second and second["parallel_tool_calls"] is False


async def test_a_rate_limit_is_retried_with_backoff_and_the_run_succeeds(server):
    server.script = [(429, "Rate limit reached"), (429, "Rate limit reached"),
                     (200, answer_turn())]  # fmt: skip
    model = openai_model(server, max_retries=2)
    events = [e async for e in run(model, default_tools(), [HumanMessage("hi")])]
    assert events[-1].status is RunStatus.SUCCEEDED
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ([(429, "Rate limit reached")] * 3, "limiting requests (HTTP 429)"),
        ([(503, "overloaded")] * 3, "server error (HTTP 503)"),
        ([(400, "This model's maximum context length is 8192 tokens")],
         "rejected the request (HTTP 400): This model's maximum context length"),
        ([(404, "The model `gpt-9` does not exist")], "does not know this model"),
    ],
)  # fmt: skip
async def test_provider_errors_fail_the_run_in_plain_words(server, script, expected):
    server.script = list(script)
    model = openai_model(server, max_retries=2)
    events = [e async for e in run(model, default_tools(), [HumanMessage("hi")])]
    end = events[-1]
    assert end.status is RunStatus.FAILED and expected in end.error
    assert "{" not in end.error  # no raw JSON payload in what the user reads
    assert len(server.requests) == len(script)  # 429 and 5xx were retried, 4xx not


async def test_a_provider_that_does_not_answer_times_out_in_plain_words(server):
    server.script = [("hang", None)]
    model = openai_model(server, max_retries=0, timeout_s=0.5)
    events = [e async for e in run(model, default_tools(), [HumanMessage("hi")])]
    assert events[-1].status is RunStatus.FAILED
    assert events[-1].error == "The model provider did not answer in time, even after retries."


async def test_an_unreachable_provider_fails_in_plain_words():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = ModelConfig(provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1",
                         api_key="sk-test", timeout_s=2, max_retries=0)  # fmt: skip
    events = [e async for e in run(build_model(config), default_tools(), [HumanMessage("hi")])]
    assert events[-1].status is RunStatus.FAILED
    assert "could not be reached" in events[-1].error
