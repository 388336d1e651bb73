"""A conversation through the app's own run path (chat.runs.execute_run, the model built
from settings) against a server as strict as vLLM's templates and as picky as llama.cpp's
(it json-parses every tool call's arguments of the history, ggml-org/llama.cpp#25510),
sending hostile shapes of issue 10's kinds between ordinary turns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from langchain_core.messages import AIMessage, convert_to_messages

from agents.events import RunStatus
from agents.history import role_order_problems
from agents.providers import ModelConfig
from chat.models import AgentRun
from chat.runs import create_run, execute_run
from tests.chat.test_consumer import make_conversation
from tests.chat.test_history import StrictModel, bnb_rooms
from tests.chat.test_history import ask as ask_with
from tests.fake_openai import FakeOpenAI, Reply, chunk, text_turn
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


class PickyServer(FakeOpenAI):
    """Answer 400 to a request with roles out of order, 500 to arguments that do not
    parse (llama.cpp's func_args_not_string); else play the script."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[str] = []

    def take(self, body: dict[str, Any]) -> Reply:
        problems = role_order_problems(convert_to_messages(body["messages"]))
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                try:
                    json.loads(call["function"]["arguments"])
                except ValueError:
                    problems.append("Failed to parse tool call arguments as JSON")
        if problems:
            self.refused.append("; ".join(problems))
            return Reply(status=500 if "JSON" in problems[-1] else 400, message=problems[-1])
        return super().take(body)


@pytest.fixture
def server() -> Iterator[PickyServer]:
    with PickyServer() as httpd:
        yield httpd


def cut_off_call() -> list[dict[str, Any]]:
    """A tool call whose arguments the token limit cut off (finish_reason "length")."""
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_cut", "type": "function",
                               "function": {"name": "calculator",
                                            "arguments": '{"expression": "17*'}}]}),
        chunk({}, finish="length"),
    ]  # fmt: skip


async def ask(conversation, content: str):
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content=content)  # fmt: skip
    return await execute_run(row.pk)


async def test_a_conversation_of_hostile_replies_keeps_every_request_valid(server, settings):
    settings.AGENT_MODEL = ModelConfig(provider="llamacpp", model="m", base_url=server.base_url,
                                       timeout_s=WAIT_S, max_retries=0)  # fmt: skip
    _, conversation = await make_conversation()
    python_tag = '<|python_tag|>{"name": "calculator", "parameters": {"expression": "17*23"}}'
    vllm_error = {"object": "error", "message": "maximum context length is 4096 tokens",
                  "type": "BadRequestError", "code": 400}  # fmt: skip
    server.script = [
        Reply(events=cut_off_call()), Reply(events=text_turn("Sorry, 17*23 = 391.")),
        Reply(events=[chunk({"role": "assistant", "content": ""}), vllm_error]),
        Reply(events=text_turn(python_tag)), Reply(events=text_turn("It is 391.")),
        Reply(events=[{"error": "model overloaded, try later"}]),
        Reply(events=text_turn("<THINK>", "They ask again.", "</THINK>", "Still 391.")),
    ]  # fmt: skip

    ended = [await ask(conversation, q) for q in
             ("17*23?", "And again?", "Use the tool.", "Once more?", "Last time?")]  # fmt: skip

    assert [(r.status, r.output) for r in ended] == [
        (RunStatus.SUCCEEDED, "Sorry, 17*23 = 391."), (RunStatus.FAILED, ""),
        (RunStatus.SUCCEEDED, "It is 391."), (RunStatus.FAILED, ""),
        (RunStatus.SUCCEEDED, "Still 391."),
    ], [(r.status, r.error) for r in ended]  # fmt: skip
    assert "maximum context length" in ended[1].error
    assert "overloaded" in ended[3].error
    assert server.refused == []
    assert not server.unscripted


def test_manage_py_ask_runs_a_deepseek_v3_markup_call_and_keeps_think_out(server, settings):
    settings.AGENT_MODEL = ModelConfig(provider="llamacpp", model="m", base_url=server.base_url,
                                       timeout_s=WAIT_S, max_retries=0)  # fmt: skip
    markup = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calculator\n"
        '```json\n{"expression": "17*23"}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )
    server.script = [
        Reply(events=text_turn(markup)),
        Reply(events=text_turn("<Think>Final Answer: 1</Think>", "17*23 = 391.")),
    ]
    out = StringIO()
    call_command("ask", "What is 17*23?", stdout=out)

    text = out.getvalue()
    assert "→ calculator(" in text and "← calculator success" in text
    run = AgentRun.objects.get()
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, "17*23 = 391.")
    assert server.refused == []


async def test_a_run_that_ended_on_markup_format_errors_leaves_a_valid_history(settings):
    # The demo entry reads no markup: each reply is a TextToolCall format error, whose
    # observation went back as a user message inside the run.
    settings.AGENT_MAX_ITERATIONS = 2
    _, conversation = await make_conversation()
    markup = '<tool_call>{"name": "bnb_rooms", "arguments": {"town": "Suzhou"}}</tool_call>'
    model = StrictModel(script=[AIMessage(markup), AIMessage(markup)])
    first = await ask_with(conversation, "Rooms?", model, tools=(bnb_rooms,))
    model.script = [AIMessage("None found.")]
    second = await ask_with(conversation, "And now?", model, tools=(bnb_rooms,))

    assert first.status == RunStatus.MAX_ITERATIONS
    assert (second.status, second.output) == (RunStatus.SUCCEEDED, "None found.")
    assert role_order_problems(model.prompts[-1]) == []
    assert all(role_order_problems(p) == [] for p in model.prompts)


async def test_an_answer_cut_off_at_max_tokens_fails_keeps_its_text_and_the_chat_goes_on(
    server, settings
):
    settings.AGENT_MODEL = ModelConfig(provider="llamacpp", model="m", base_url=server.base_url,
                                       timeout_s=WAIT_S, max_retries=0)  # fmt: skip
    _, conversation = await make_conversation()
    cut = [chunk({"role": "assistant", "content": "17*23 is three hundred and"}),
           chunk({}, finish="length")]  # fmt: skip
    server.script = [Reply(events=cut), Reply(events=text_turn("391."))]

    first = await ask(conversation, "17*23?")
    second = await ask(conversation, "And the number?")

    assert (first.status, first.output) == (RunStatus.FAILED, "")
    assert "cut off at its output limit" in first.error
    step = await database_sync_to_async(lambda: first.steps.get())()
    assert (step.status, step.error_type) == ("error", "LengthFinishReasonError")
    assert step.text == "17*23 is three hundred and" and step.result == ""
    assert (second.status, second.output) == (RunStatus.SUCCEEDED, "391.")
    assert server.refused == []
    sent = json.dumps(server.requests[-1]["messages"])
    assert "three hundred and" not in sent  # the partial text is no answer of the history
