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

from agents.events import RunStatus
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
