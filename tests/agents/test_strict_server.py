"""Histories through ChatOpenAI to a server as strict as vLLM's and Mistral's templates.

The server (:class:`tests.fake_openai.FakeOpenAI`) answers HTTP 400 "Conversation roles
must alternate" to a request :func:`agents.history.role_order_problems` finds fault with,
after converting it back from the JSON langchain-openai sent, so what is checked is what
goes over the wire.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage, convert_to_messages

from agents.events import ModelTurnFinished, RunStatus, ToolCallFinished
from agents.history import EMPTY_REPLY_SHOWN, history_messages, role_order_problems
from agents.runtime import run
from agents.strategies import STRATEGIES, get_strategy
from agents.tools import default_tools
from tests.agents.test_history import WRITERS, endings
from tests.agents.test_openai_compatible import model_for
from tests.fake_openai import FakeOpenAI, Reply, chunk, text_turn, tool_call_turn

ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."


class StrictOpenAI(FakeOpenAI):
    """Refuse a request whose roles a strict chat template refuses; else play the script.

    ``refused`` keeps the problems found in each refused request (which is not kept in
    ``requests``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[list[str]] = []

    def take(self, body: dict[str, Any]) -> Reply:
        problems = role_order_problems(convert_to_messages(body["messages"]))
        if problems:
            self.refused.append(problems)
            return Reply(status=400, message=ALTERNATE)
        return super().take(body)


@pytest.fixture
def strict_server() -> Iterator[StrictOpenAI]:
    with StrictOpenAI() as server:
        yield server


def answer_turn() -> list[dict[str, Any]]:
    return text_turn("Canal House ", "is the cheapest.")


def calls_turn() -> list[dict[str, Any]]:
    return tool_call_turn(("call_w", "weather_forecast", {"town": "Suzhou"}))


async def run_through(server, messages, strategy="tool_calling") -> list[Any]:
    model = model_for(server)
    return [e async for e in run(model, default_tools(), messages,
                                 strategy=get_strategy(strategy))]  # fmt: skip


async def test_the_server_refuses_two_user_messages_in_a_row_as_before(strict_server):
    strict_server.script = [Reply(events=answer_turn())]
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
        strict_server.script = [Reply(events=calls_turn()), Reply(events=answer_turn())]
    else:
        final = WRITERS[strategy][1]("Canal House.")
        strict_server.script = [Reply(events=[chunk({"role": "assistant", "content": final}),
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
        Reply(events=[chunk({"role": "assistant", "content": ""}), chunk({}, finish="stop")]),
        Reply(events=[chunk({"role": "assistant", "content": final}), chunk({}, finish="stop")]),
    ]

    events = await run_through(strict_server, [SystemMessage("s"), HumanMessage("q")], strategy)

    assert strict_server.refused == []
    assert events[-1].status == RunStatus.SUCCEEDED, events[-1].error
    assert strict_server.requests[1]["messages"][2] == {
        "role": "assistant", "content": EMPTY_REPLY_SHOWN,
    }  # fmt: skip


def nameless_args_turn(call_id: str, name: str | None, arguments: str) -> list[dict[str, Any]]:
    """A call whose arguments are not JSON, with ``name`` (None: no name at all)."""
    function = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                               "function": function}]}),
        chunk({}, finish="tool_calls"),
    ]  # fmt: skip


UNUSABLE = {
    "empty name": tool_call_turn(("call_a", "", {"town": "Suzhou"})),
    "dotted name": tool_call_turn(("call_a", "functions.weather_forecast", {"town": "Suzhou"})),
    "name too long": tool_call_turn(("call_a", "w" * 65, {"town": "Suzhou"})),
    "no name and no id": tool_call_turn(("", "", {"town": "Suzhou"})),
    "no name, arguments not JSON": nameless_args_turn("call_a", None, '{"town": '),
    "beside a good call": tool_call_turn(("call_a", "", {"town": "Suzhou"}),
                                         ("call_b", "weather_forecast", {"town": "Suzhou"})),
    "two nameless beside a good one": tool_call_turn(
        ("call_a", "", {}), ("call_b", "weather_forecast", {"town": "Suzhou"}),
        ("call_c", "bad name", {})),
}  # fmt: skip


SENT_NAMES = {
    "empty name": [""], "dotted name": ["functions.weather_forecast"],
    "name too long": ["w" * 65], "no name and no id": [""],
    "no name, arguments not JSON": [""], "beside a good call": [""],
    "two nameless beside a good one": ["", "bad name"],
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(UNUSABLE))
async def test_a_live_run_whose_model_sends_a_call_without_a_usable_name_recovers(
    strict_server, kind
):
    strict_server.script = [Reply(events=UNUSABLE[kind]), Reply(events=calls_turn()),
                            Reply(events=answer_turn())]  # fmt: skip

    events = await run_through(strict_server, [SystemMessage("s"), HumanMessage("Weather?")])

    assert strict_server.refused == []
    assert events[-1].status == RunStatus.SUCCEEDED, events[-1].error
    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    refused = [c for c in turn.invalid_tool_calls if c["error"].startswith("Error: your tool")]
    # The event (and so the rows) keep each name as the model sent it.
    assert sorted(c["name"] for c in refused) == sorted(SENT_NAMES[kind])
    ends = [e for e in events if isinstance(e, ToolCallFinished) and e.iteration == 1]
    assert {e.error_type for e in ends if e.name != "weather_forecast"} == {"InvalidToolName"}
    # The model is told in the request after its slip, the call's name not sent back.
    told = [m for m in strict_server.requests[1]["messages"] if m["role"] == "tool"]
    assert any("Call a tool by its exact name" in m["content"] for m in told)
    for request in strict_server.requests:
        for message in request["messages"]:
            for call in message.get("tool_calls") or []:
                assert call["function"]["name"] in ("weather_forecast", "unusable_tool_name")
                assert call["id"]


@pytest.mark.parametrize("strategy", sorted(WRITERS))
async def test_a_text_run_whose_model_writes_a_nameless_action_recovers(strict_server, strategy):
    write, final, _ = WRITERS[strategy]
    replies = [write("", {"town": "Suzhou"}, "weather"), write("weather_forecast",
               {"town": "Suzhou"}, "weather"), final("Sunny.")]  # fmt: skip
    strict_server.script = [
        Reply(events=[chunk({"role": "assistant", "content": text}), chunk({}, finish="stop")])
        for text in replies
    ]

    events = await run_through(strict_server, [SystemMessage("s"), HumanMessage("q")], strategy)

    assert strict_server.refused == []
    assert events[-1].status == RunStatus.SUCCEEDED, events[-1].error
    assert all("tool_calls" not in m for r in strict_server.requests for m in r["messages"])
