"""Histories through ChatOpenAI to a server as strict as vLLM's and Mistral's templates.

The server (the fake of ``test_openai_compatible``) answers HTTP 400 "Conversation roles
must alternate" to a request :func:`agents.history.role_order_problems` finds fault with,
after converting it back from the JSON langchain-openai sent, so what is checked is what
goes over the wire.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage, convert_to_messages

from agents.events import RunStatus
from agents.history import EMPTY_REPLY_SHOWN, history_messages, role_order_problems
from agents.runtime import run
from agents.strategies import STRATEGIES, get_strategy
from agents.tools import default_tools
from tests.agents.test_history import WRITERS, endings
from tests.agents.test_openai_compatible import (
    FakeOpenAI,
    answer_turn,
    chunk,
    openai_model,
    tool_call_turn,
)

ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."


class StrictOpenAI(FakeOpenAI):
    """Refuse a request whose roles a strict chat template refuses; else play the script."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length))
        problems = role_order_problems(convert_to_messages(body["messages"]))
        if problems:
            self.server.refused.append(problems)  # type: ignore[attr-defined]
            payload = json.dumps({"error": {"message": ALTERNATE, "type": "BadRequestError"}})
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload.encode())
            return
        # FakeOpenAI reads the body itself: hand it the same bytes again.
        self.rfile = _Replay(json.dumps(body).encode())
        self.headers.replace_header("content-length", str(len(json.dumps(body).encode())))
        super().do_POST()


class _Replay:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, _: int) -> bytes:
        return self.data


@pytest.fixture
def strict_server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StrictOpenAI)
    httpd.requests, httpd.script, httpd.refused = [], [], []  # type: ignore[attr-defined]
    httpd.hung_up = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.hung_up.set()  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


async def run_through(server, messages, strategy="tool_calling") -> list[Any]:
    model = openai_model(server)
    return [e async for e in run(model, default_tools(), messages,
                                 strategy=get_strategy(strategy))]  # fmt: skip


async def test_the_server_refuses_two_user_messages_in_a_row_as_before(strict_server):
    strict_server.script = [(200, answer_turn())]
    old_shape = [SystemMessage("s"), HumanMessage("Rooms in Suzhou?"), HumanMessage("Hello?")]

    events = await run_through(strict_server, old_shape)

    assert events[-1].status == RunStatus.FAILED
    assert strict_server.refused and strict_server.requests == []


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
async def test_a_history_of_every_ending_goes_through_a_strict_server(strict_server, strategy):
    history = history_messages(list(endings(strategy).values()), get_strategy(strategy),
                               max_observation_chars=8_000)  # fmt: skip
    messages = [SystemMessage("s"), *history, HumanMessage("Which was the cheapest?")]
    if strategy == "tool_calling":
        strict_server.script = [(200, tool_call_turn()), (200, answer_turn())]
    else:
        final = WRITERS[strategy][1]("Canal House.")
        strict_server.script = [(200, [chunk({"role": "assistant", "content": final}),
                                       chunk({}, finish="stop")])]  # fmt: skip

    events = await run_through(strict_server, messages, strategy)

    assert strict_server.refused == []
    assert events[-1].status == RunStatus.SUCCEEDED, events[-1].error
    assert len(strict_server.requests) == (2 if strategy == "tool_calling" else 1)
    sent = strict_server.requests[0]["messages"]
    assert sent[-1] == {"role": "user", "content": "Which was the cheapest?"}
    assert [m["role"] for m in sent].count("system") == 1


@pytest.mark.parametrize("strategy", sorted(WRITERS))
async def test_an_empty_reply_in_a_text_run_is_not_sent_back_empty(strict_server, strategy):
    final = WRITERS[strategy][1]("Canal House.")
    strict_server.script = [
        (200, [chunk({"role": "assistant", "content": ""}), chunk({}, finish="stop")]),
        (200, [chunk({"role": "assistant", "content": final}), chunk({}, finish="stop")]),
    ]

    events = await run_through(strict_server, [SystemMessage("s"), HumanMessage("q")], strategy)

    assert strict_server.refused == []
    assert events[-1].status == RunStatus.SUCCEEDED, events[-1].error
    assert strict_server.requests[1]["messages"][2] == {
        "role": "assistant", "content": EMPTY_REPLY_SHOWN,
    }  # fmt: skip
