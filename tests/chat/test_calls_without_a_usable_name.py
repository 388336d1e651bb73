"""A model's tool call with no name (or one strict servers refuse), through the app: the
run that got it goes on, the rows keep it as sent, and no later request of the chat
carries it, whether the run answered, paused for a person or was stored by an older
version (which recorded such a call as an ``UnknownTool`` error).

The models refuse what OpenAI, Mistral and vLLM's templates refuse
(:func:`agents.history.role_order_problems`): a scripted one (:class:`StrictModel`) and an
HTTP fake (:class:`tests.agents.test_strict_server.StrictOpenAI`) for ``manage.py ask``.
"""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.utils import timezone
from langchain_core.messages import AIMessage

from agents.approvals import Outcome
from agents.events import INVALID_TOOL_NAME
from agents.history import describe
from agents.providers import ModelConfig
from chat import store
from chat.models import AgentRun, AgentStep, Conversation, RunStatus, StepKind, StepStatus
from chat.runs import create_run, execute_run
from tests.agents.test_strict_server import StrictOpenAI
from tests.chat.test_branches import make_conversation
from tests.chat.test_history import StrictModel, bnb_rooms
from tests.fake_openai import Reply, text_turn, tool_call_turn
from tests.fakes import ScriptedChatModel, tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

NAMELESS = tool_call("", {"town": "Suzhou"}, "call_nameless")
DOTTED = tool_call("functions.bnb_rooms", {"town": "Suzhou"}, "call_dotted")
ROOMS = tool_call("bnb_rooms", {"town": "Suzhou"}, "call_rooms")


@pytest.fixture
def strict_server() -> Iterator[StrictOpenAI]:
    with StrictOpenAI() as server:
        yield server


async def ask(conversation: Conversation, content: str, model, **kwargs) -> AgentRun:
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content=content)  # fmt: skip
    return await execute_run(row.pk, model=model, tools=[bnb_rooms], **kwargs)


@database_sync_to_async
def call_rows(conversation: Conversation) -> list[tuple[str, str, str]]:
    steps = AgentStep.objects.filter(run__conversation=conversation, kind=StepKind.TOOL_CALL)
    return list(steps.order_by("id").values_list("tool_name", "status", "error_type"))


async def test_a_chat_whose_model_sent_a_nameless_call_answers_now_and_next_time():
    _, conversation = await database_sync_to_async(make_conversation)()
    model = StrictModel(script=[
        AIMessage("", tool_calls=[NAMELESS, DOTTED]), AIMessage("", tool_calls=[ROOMS]),
        AIMessage("Canal House."), AIMessage("260 yuan."),
    ])  # fmt: skip

    first = await ask(conversation, "Rooms in Suzhou?", model)
    second = await ask(conversation, "How much?", model)

    assert (first.status, first.output) == (RunStatus.SUCCEEDED, "Canal House."), first.error
    assert (second.status, second.output) == (RunStatus.SUCCEEDED, "260 yuan."), second.error
    assert await call_rows(conversation) == [
        ("", StepStatus.ERROR, INVALID_TOOL_NAME),
        ("functions.bnb_rooms", StepStatus.ERROR, INVALID_TOOL_NAME),
        ("bnb_rooms", StepStatus.SUCCESS, ""),
    ]  # the rows keep what the model sent
    turn = await database_sync_to_async(AgentStep.objects.filter(
        run=first, kind=StepKind.MODEL_TURN).order_by("id").first)()  # fmt: skip
    assert [c["name"] for c in turn.raw["tool_calls"]] == ["", "functions.bnb_rooms"]
    # The next question's history leaves the slip out, as it does every format error.
    last = model.prompts[-1]
    assert [c["name"] for m in last for c in getattr(m, "tool_calls", [])] == ["bnb_rooms"]


async def test_a_paused_run_with_a_nameless_call_beside_the_held_one_resumes_and_the_chat_goes_on(
    settings,
):
    settings.AGENT_TOOL_POLICIES = {"bnb_rooms": "ask"}
    _, conversation = await database_sync_to_async(make_conversation)()
    model = StrictModel(script=[
        AIMessage("", tool_calls=[NAMELESS, DOTTED, ROOMS]), AIMessage("Canal House."),
        AIMessage("260 yuan."),
    ])  # fmt: skip
    paused = await ask(conversation, "Rooms in Suzhou?", model)
    assert paused.status == RunStatus.WAITING, paused.error
    held = await database_sync_to_async(AgentStep.objects.get)(
        run=paused, status=StepStatus.PENDING
    )
    await database_sync_to_async(store.approval_decide)(
        conversation_id=conversation.pk, step_id=held.pk, outcome=Outcome.APPROVED, by=None,
        at=timezone.now(),
    )  # fmt: skip
    assert await database_sync_to_async(store.run_claim_resume)(run_id=paused.pk,
                                                                 at=timezone.now())  # fmt: skip

    resumed = await execute_run(paused.pk, model=model, tools=[bnb_rooms], resume=True)
    settings.AGENT_TOOL_POLICIES = {}
    after = await ask(conversation, "How much?", model)

    assert (resumed.status, resumed.output) == (RunStatus.SUCCEEDED, "Canal House."), (
        resumed.error, describe(model.prompts[-1]))  # fmt: skip
    assert (after.status, after.output) == (RunStatus.SUCCEEDED, "260 yuan."), after.error


def as_an_older_version_stored_it(conversation: Conversation) -> None:
    """Record the nameless calls as versions before InvalidToolName did: tools that were
    not found (``UnknownTool``), their observations saying so."""
    steps = AgentStep.objects.filter(run__conversation=conversation, tool_name__in=["", "x y"])
    for step in steps:
        step.error_type = "UnknownTool"
        step.error = f"UnknownTool: {step.tool_name}"
        step.observation = step.result = f"Error: there is no tool named {step.tool_name!r}."
        step.save()


def test_manage_py_ask_continues_a_stored_chat_with_nameless_calls_on_a_strict_server(
    strict_server, settings
):
    _, conversation = make_conversation()
    stored = ScriptedChatModel(script=[  # as an older version's run went
        AIMessage("", tool_calls=[NAMELESS]), AIMessage("", tool_calls=[
            tool_call("x y", {}, "call_xy"), ROOMS]),
        AIMessage("Canal House."),
    ])  # fmt: skip
    first = async_to_sync(ask)(conversation, "Rooms in Suzhou?", stored)
    assert first.status == RunStatus.SUCCEEDED, first.error
    as_an_older_version_stored_it(conversation)
    settings.AGENT_MODEL = ModelConfig(
        provider="openai", model="m", base_url=strict_server.base_url, api_key="sk-test",
        timeout_s=WAIT_S, max_retries=0,
    )  # fmt: skip
    strict_server.script = [Reply(events=tool_call_turn(("", "", {"town": "Suzhou"}))),
                            Reply(events=text_turn("It is 260 yuan."))]  # fmt: skip

    out = StringIO()
    call_command("ask", "How much?", "--conversation", str(conversation.pk), stdout=out)

    run = AgentRun.objects.filter(conversation=conversation).latest("id")
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, "It is 260 yuan."), run.error
    assert strict_server.refused == []
    sent = [c["function"]["name"] for r in strict_server.requests for m in r["messages"]
            for c in m.get("tool_calls") or []]  # fmt: skip
    assert set(sent) <= {"bnb_rooms", "unusable_tool_name"}, sent
