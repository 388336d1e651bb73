"""Conversations that last: every ending of a run, then the next question, on a strict server.

Runs are driven through :func:`chat.runs.execute_run` with their rows stored as a real run
stores them; the model refuses, like vLLM's and Mistral's chat templates, any request
whose roles do not alternate (HTTP 400 "Conversation roles must alternate").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from agents.context import approximate_tokens, tools_tokens
from agents.events import RunStatus, utcnow
from agents.history import describe, role_order_problems
from chat import fragments, store
from chat.catalog import context_window
from chat.models import AgentRun, AgentStep, Message, StepKind, StepStatus
from chat.presenters import StepPresenter
from chat.runs import create_run, execute_run
from tests.agents.test_history import WRITERS
from tests.chat.test_consumer import make_conversation
from tests.fakes import ScriptedChatModel, tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

ROOMS = {"town": "Suzhou", "rooms": [{"name": "Garden Inn", "price": 380},
                                     {"name": "Canal House", "price": 260}]}  # fmt: skip
HELD: dict[str, asyncio.Event] = {}


class RolesMustAlternate(Exception):
    """Shaped like the OpenAI SDK's BadRequestError from a vLLM server."""

    status_code = 400

    def __init__(self, problems: list[str]) -> None:
        reason = "; ".join(problems)
        super().__init__(f"Error code: 400 - Conversation roles must alternate: {reason}")
        self.body = {"error": {"message": "Conversation roles must alternate"}}


class StrictModel(ScriptedChatModel):
    """A scripted model that refuses what a strict chat template refuses."""

    def _next(self, messages: list[BaseMessage], stop=None, **kwargs: Any) -> AIMessage:
        problems = role_order_problems(messages)
        if problems:
            self.prompts.append(list(messages))
            raise RolesMustAlternate(problems)
        return super()._next(messages, stop, **kwargs)


@tool
def bnb_rooms(town: str) -> str:
    """Return the B&B rooms free in ``town``."""
    return json.dumps({**ROOMS, "town": town})


@tool
def huge_result(town: str) -> str:
    """Return 200,000 characters."""
    return "r" * 200_000


@tool
async def held_rooms(town: str) -> str:
    """Return rooms only once the test lets it (never, here: the run is stopped)."""
    HELD["tool"].set()
    await asyncio.Event().wait()
    return "never"


def call(strategy: str, tool_name: str = "bnb_rooms", town: str = "Suzhou", n: int = 1):
    if strategy == "tool_calling":
        return AIMessage("", tool_calls=[tool_call(tool_name, {"town": town}, f"call_{n}")])
    return AIMessage(WRITERS[strategy][0](tool_name, {"town": town}, "look for rooms"))


def answer(strategy: str, text: str) -> AIMessage:
    return AIMessage(text if strategy == "tool_calling" else WRITERS[strategy][1](text))


def malformed(strategy: str) -> AIMessage:
    if strategy == "tool_calling":
        return AIMessage("", invalid_tool_calls=[{"name": "bnb_rooms", "args": '{"town": ',
                                                  "id": "bad_1", "error": None}])  # fmt: skip
    return AIMessage(WRITERS[strategy][2]("bnb_rooms", {"town": "Suzhou"}, "rooms"))


async def ask(conversation, content: str, model, tools=(bnb_rooms,)) -> AgentRun:
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content=content)  # fmt: skip
    return await execute_run(row.pk, model=model, tools=list(tools))


async def ask_and_stop(conversation, content: str, model, held: asyncio.Event) -> AgentRun:
    """Start a run, wait for ``held`` (set while the run is stuck), stop it."""
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content=content)  # fmt: skip
    task = asyncio.ensure_future(execute_run(row.pk, model=model, tools=[held_rooms]))
    await asyncio.wait_for(held.wait(), WAIT_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return await database_sync_to_async(store.run_get)(run_id=row.pk)


@database_sync_to_async
def interrupted_mid_tool(conversation, strategy: str) -> AgentRun:
    """A run whose process died while a tool ran, swept as the run owner's sweep sweeps it."""
    row = create_run(conversation_id=conversation.pk, content="Rooms in Wuxi, then?")
    now = utcnow()
    turn = store.step_start(run_id=row.pk, kind=StepKind.MODEL_TURN, iteration=1, started_at=now)
    message = call(strategy, town="Wuxi", n=9)
    store.step_finish(step_id=turn.pk, finished_at=now, status=StepStatus.SUCCESS,
                      text=message.text, raw=message.model_dump(mode="json"))  # fmt: skip
    store.step_start(run_id=row.pk, kind=StepKind.TOOL_CALL, iteration=1, started_at=now,
                     tool_name="bnb_rooms", tool_call_id="call_9", arguments={"town": "Wuxi"},
                     text="" if strategy == "tool_calling" else message.text)  # fmt: skip
    AgentRun.objects.filter(pk=row.pk).update(heartbeat_at=now - timedelta(hours=1))
    store.runs_interrupt_stale(conversation_id=conversation.pk, now=now)
    return store.run_get(run_id=row.pk)


@pytest.mark.parametrize("strategy", [*sorted(WRITERS), "tool_calling"])
async def test_after_every_kind_of_ending_the_next_question_is_answered(
    strategy, settings, monkeypatch
):
    settings.AGENT_MAX_ITERATIONS = 2
    _, conversation = await make_conversation()
    await database_sync_to_async(
        lambda: type(conversation).objects.filter(pk=conversation.pk).update(strategy=strategy)
    )()
    model = StrictModel()
    ended = []

    model.script = [call(strategy), answer(strategy, "Garden Inn 380 and Canal House 260.")]
    ended.append(await ask(conversation, "Any B&B rooms in Suzhou?", model))
    model.script = [call(strategy, town="Hangzhou"), RuntimeError("the model broke")]
    ended.append(await ask(conversation, "And in Hangzhou?", model))
    model.script = [call(strategy), call(strategy, town="Wuxi", n=2)]
    ended.append(await ask(conversation, "Keep looking.", model))
    model.script = [malformed(strategy), malformed(strategy)]
    ended.append(await ask(conversation, "A format error at the end.", model))
    HELD["tool"] = asyncio.Event()
    model.script = [call(strategy, "held_rooms")]
    ended.append(await ask_and_stop(conversation, "Stop mid-tool.", model, HELD["tool"]))
    called, model.gates = asyncio.Event(), {1: asyncio.Event()}
    model.script = [lambda _: called.set() or AIMessage("The rooms I found are many")]
    ended.append(await ask_and_stop(conversation, "Stop mid-model.", model, called))
    model.gates = {}
    ended.append(await interrupted_mid_tool(conversation, strategy))
    with monkeypatch.context() as patch:
        patch.setattr(
            "chat.catalog.chat_model_for", lambda: (_ for _ in ()).throw(ValueError("no key"))
        )
        row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                       content="A config error.")  # fmt: skip
        ended.append(await execute_run(row.pk, tools=[bnb_rooms]))

    assert [run.status for run in ended] == [
        RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.MAX_ITERATIONS,
        RunStatus.MAX_ITERATIONS, RunStatus.CANCELLED, RunStatus.CANCELLED,
        RunStatus.INTERRUPTED, RunStatus.FAILED,
    ], [(run.status, run.error) for run in ended]  # fmt: skip
    assert "roles must alternate" not in " ".join(run.error for run in ended)

    model.script = [answer(strategy, "Canal House, at 260 yuan.")]
    last = await ask(conversation, "Which of those B&Bs was the cheapest?", model)

    assert (last.status, last.output) == (RunStatus.SUCCEEDED, "Canal House, at 260 yuan.")
    sent = model.prompts[-1]
    assert role_order_problems(sent) == [], describe(sent)
    assert sent[-1].text == "Which of those B&Bs was the cheapest?"
    assert sum("Canal House" in m.text and "260" in m.text for m in sent) >= 1, describe(sent)
    assert sum(m.text.startswith("(No answer: ") for m in sent) == 7


async def test_a_native_history_sends_the_calls_and_their_results_as_the_model_saw_them(settings):
    settings.AGENT_MAX_OBSERVATION_CHARS = 100
    _, conversation = await make_conversation()
    model = StrictModel(script=[call("tool_calling"), answer("tool_calling", "Two rooms.")])
    await ask(conversation, "Any B&B rooms in Suzhou?", model)

    model.script = [answer("tool_calling", "Canal House.")]
    await ask(conversation, "Which was the cheapest?", model)

    _, question, asked, result, answered, new = model.prompts[-1]
    assert question.text == "Any B&B rooms in Suzhou?"
    assert asked.tool_calls == [tool_call("bnb_rooms", {"town": "Suzhou"}, "call_1")]
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call_1"
    assert result.content == model.prompts[1][-1].content  # clipped as it was
    assert "[clipped: showing the first 100 of" in result.content
    assert (answered.text, new.text) == ("Two rooms.", "Which was the cheapest?")


async def test_a_later_question_sends_the_observation_stored_not_one_clipped_anew(settings):
    settings.AGENT_MAX_OBSERVATION_CHARS = 100
    _, conversation = await make_conversation()
    model = StrictModel(script=[call("tool_calling"), answer("tool_calling", "Two rooms.")])
    await ask(conversation, "Any B&B rooms in Suzhou?", model)
    first_seen = model.prompts[1][-1].content
    step = await database_sync_to_async(AgentStep.objects.get)(kind=StepKind.TOOL_CALL)
    assert step.observation == first_seen and step.result != first_seen

    settings.AGENT_MAX_OBSERVATION_CHARS = 5_000  # changed after the run
    model.script = [answer("tool_calling", "Canal House.")]
    await ask(conversation, "Which was the cheapest?", model)
    assert model.prompts[-1][3].content == first_seen


async def test_a_results_heading_reads_the_stored_observation_not_todays_setting(settings):
    settings.AGENT_MAX_OBSERVATION_CHARS = 100
    _, conversation = await make_conversation()
    model = StrictModel(script=[call("tool_calling"), answer("tool_calling", "Two rooms.")])
    await ask(conversation, "Any B&B rooms in Suzhou?", model)
    load = AgentStep.objects.select_related("run", "approval").get
    step = await database_sync_to_async(load)(kind=StepKind.TOOL_CALL)
    stored = len(step.result)
    label = f"Result (ToolMessage): the model was sent the first 100 of {stored} characters"

    settings.AGENT_MAX_OBSERVATION_CHARS = 5_000  # changed after the run
    assert StepPresenter(step).result_label == label
    assert label in fragments.step_replaced(step)


def exchanges_rows(conversation, count: int) -> None:
    """Store ``count`` answered questions (2 x ``count`` messages), each run with a model
    turn that made a call, the call and the answering turn, in bulk (as run_start, the
    recorder and run_finish would store them one by one)."""
    now = utcnow()
    questions = Message.objects.bulk_create(
        Message(conversation=conversation, role=Message.Role.USER, content=f"Rooms in town {n}?")
        for n in range(count)
    )
    for before, question in pairwise(questions):
        question.parent = before  # in line, as run_start links each to the branch's leaf
    Message.objects.bulk_update(questions[1:], ["parent"])
    runs = AgentRun.objects.bulk_create(
        AgentRun(conversation=conversation, user_message=question, strategy="tool_calling",
                 provider="demo", model_name="m", status=RunStatus.SUCCEEDED, started_at=now,
                 output=f"Rooms in town {n}: two.")
        for n, question in enumerate(questions)
    )  # fmt: skip
    Message.objects.bulk_create(
        Message(conversation=conversation, role=Message.Role.ASSISTANT, content=run.output,
                run=run)
        for run in runs
    )  # fmt: skip
    steps = []
    for n, run in enumerate(runs):
        raw = call("tool_calling", town=f"Town {n}", n=n).model_dump(mode="json")
        common = {"run": run, "started_at": now, "status": StepStatus.SUCCESS}
        steps += [
            AgentStep(ordinal=1, iteration=1, kind=StepKind.MODEL_TURN, raw=raw, **common),
            AgentStep(ordinal=2, iteration=1, kind=StepKind.TOOL_CALL, tool_name="bnb_rooms",
                      tool_call_id=f"call_{n}", arguments={"town": f"Town {n}"},
                      result=json.dumps({**ROOMS, "town": f"Town {n}"}), **common),
            AgentStep(ordinal=3, iteration=2, kind=StepKind.MODEL_TURN, text=run.output,
                      result=run.output, **common),
        ]  # fmt: skip
    AgentStep.objects.bulk_create(steps)


def load_exchanges(conversation_id: int, before_message_id: int) -> tuple[list, int, float]:
    """Return the exchanges, the number of queries and the milliseconds it took."""
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        exchanges = store.conversation_exchanges(
            conversation_id=conversation_id, before_message_id=before_message_id
        )
        return exchanges, len(queries), (time.perf_counter() - started) * 1000


async def test_a_conversation_of_1000_messages_still_answers_within_the_window(settings):
    settings.AGENT_MODEL = dataclasses.replace(settings.AGENT_MODEL, context_window=8_192)
    _, conversation = await make_conversation()
    await database_sync_to_async(exchanges_rows)(conversation, 500)
    model = StrictModel(script=[answer("tool_calling", "Canal House.")])

    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content="Which was the cheapest?")  # fmt: skip
    exchanges, queries, loaded_ms = await database_sync_to_async(load_exchanges)(
        conversation.pk, row.user_message_id
    )
    finished = await execute_run(row.pk, model=model, tools=[bnb_rooms])

    assert len(exchanges) == 500 and queries == 3, loaded_ms
    assert all(len(e.turns) == 2 and len(e.calls) == 1 for e in exchanges)
    assert finished.status == RunStatus.SUCCEEDED
    (sent,) = model.prompts
    window = await database_sync_to_async(context_window)(finished)
    schemas = tools_tokens([bnb_rooms])
    assert sum(approximate_tokens(m) for m in sent) + schemas <= window.budget
    assert role_order_problems(sent) == []
    assert sent[1].text != "Rooms in town 0?" and sent[-2].text == "Rooms in town 499: two."


async def test_a_question_too_long_for_the_window_fails_saying_so_and_the_next_one_works(settings):
    settings.AGENT_MODEL = dataclasses.replace(settings.AGENT_MODEL, context_window=2_048)
    _, conversation = await make_conversation()
    model = StrictModel(script=[])

    too_long = await ask(conversation, "where " * 3_000, model)
    model.script = [answer("tool_calling", "Hello.")]
    after = await ask(conversation, "Hi", model)

    assert too_long.status == RunStatus.FAILED
    assert "does not fit the model's context window" in too_long.error
    assert "2,048 tokens" in too_long.error
    assert (after.status, after.output) == (RunStatus.SUCCEEDED, "Hello.")
    (sent,) = model.prompts
    assert [type(m) for m in sent[1:]] == [HumanMessage], describe(sent)


async def test_a_call_id_longer_than_its_column_still_pairs_with_its_result():
    _, conversation = await make_conversation()
    long_id = "call_" + "x" * 295
    model = StrictModel(script=[
        AIMessage("", tool_calls=[tool_call("bnb_rooms", {"town": "Suzhou"}, long_id)]),
        answer("tool_calling", "Two rooms."),
    ])  # fmt: skip
    await ask(conversation, "Any B&B rooms in Suzhou?", model)

    model.script = [answer("tool_calling", "Canal House.")]
    await ask(conversation, "Which was the cheapest?", model)

    sent = model.prompts[-1]
    assert role_order_problems(sent) == [], describe(sent)
    assert sent[2].tool_calls[0]["id"] == sent[3].tool_call_id == long_id


async def test_a_huge_stored_result_is_read_only_as_far_as_the_model_is_shown(settings):
    settings.AGENT_MAX_OBSERVATION_CHARS = 1_000
    _, conversation = await make_conversation()
    model = StrictModel(script=[call("tool_calling", "huge_result"), answer("tool_calling", "Ok.")])
    await ask(conversation, "Read it all.", model, tools=[huge_result])
    first_seen = model.prompts[1][-1].content

    model.script = [answer("tool_calling", "Done.")]
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content="And now?")  # fmt: skip
    (exchange,) = await database_sync_to_async(store.conversation_exchanges)(
        conversation_id=conversation.pk, before_message_id=row.user_message_id,
        max_result_chars=1_000,
    )  # fmt: skip
    await execute_run(row.pk, model=model, tools=[huge_result])

    (record,) = exchange.calls
    assert (len(record.result), record.result_chars) == (1_000, 200_000)
    assert model.prompts[-1][3].content == first_seen
    assert first_seen.endswith("[clipped: showing the first 1,000 of 200,000 characters]")
