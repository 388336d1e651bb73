"""A chat through `manage.py ask` (the app's own run path, the model built from settings)
against servers as strict as Mistral's, OpenAI's reasoning models and DeepSeek's thinking
mode (tests/strict_servers.py): every later message of the chat works, and the rows keep
what the models sent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agents.events import RunStatus
from agents.providers import ModelConfig
from chat.models import AgentRun, AgentStep
from tests.fake_openai import FakeOpenAI, Reply, reasoning_turn, text_turn, tool_call_turn
from tests.strict_servers import (
    StrictServer,
    mistral_ids,
    reasoning_back,
    refuses,
    role_order,
    unique_ids,
)
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER = ("weather_forecast", {"town": "Suzhou"})


def use(settings, server: FakeOpenAI, provider: str = "openai") -> None:
    settings.AGENT_MODEL = ModelConfig(
        provider=provider,
        model="m",
        base_url=server.base_url,
        api_key="sk-test",
        timeout_s=WAIT_S,
        max_retries=0,
    )


def ask(question: str, *args: str) -> str:
    out = StringIO()
    call_command("ask", question, *args, stdout=out)
    return out.getvalue()


def last_run() -> AgentRun:
    return AgentRun.objects.order_by("-pk").first()


def chat_with_ids_from_elsewhere(settings) -> int:
    """Return a conversation of two answered questions whose server numbered every
    turn's call ``call_0`` (llama.cpp-style), as stored."""
    with FakeOpenAI() as lax:
        use(settings, lax)
        lax.script = [
            Reply(events=tool_call_turn(("call_0", *WEATHER))),
            Reply(events=text_turn("Sunny.")),
            Reply(events=tool_call_turn(("call_0", "weather_forecast", {"town": "Hangzhou"}))),
            Reply(events=text_turn("Rain.")),
        ]
        ask("Weather in Suzhou?")
        conversation = str(last_run().conversation_id)
        ask("And Hangzhou?", "--conversation", conversation)
    assert [r.status for r in AgentRun.objects.all()] == [RunStatus.SUCCEEDED] * 2
    return int(conversation)


@pytest.mark.parametrize("provider", ["mistral", "openai"])
def test_a_chat_moved_to_a_mistral_model_goes_on(settings, provider):
    conversation = chat_with_ids_from_elsewhere(settings)
    with StrictServer([mistral_ids, unique_ids, role_order]) as server:
        use(settings, server, provider)
        server.script = [
            Reply(events=tool_call_turn(("Xy7Kq2mPz", *WEATHER))),
            Reply(events=text_turn("Suzhou is drier.")),
            Reply(events=text_turn("Yes.")),
        ]
        ask("Which is drier?", "--conversation", str(conversation))
        ask("Sure?", "--conversation", str(conversation))

    runs = AgentRun.objects.filter(conversation_id=conversation).order_by("pk")
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 4, [r.error for r in runs]
    # The Mistral entry knows the ids beforehand; the generic one learns them once.
    assert len(server.refused) == (0 if provider == "mistral" else 1)
    # The rows keep each server's own ids.
    ids = AgentStep.objects.filter(run__conversation_id=conversation, kind="tool_call")
    assert sorted(ids.values_list("tool_call_id", flat=True)) == ["Xy7Kq2mPz", "call_0", "call_0"]


def test_parallel_calls_switched_off_on_a_model_that_refuses_them(settings):
    with StrictServer([refuses("parallel_tool_calls"), role_order]) as server:
        use(settings, server)
        server.script = [
            Reply(events=tool_call_turn(("call_w", *WEATHER))),
            Reply(events=text_turn("Sunny.")),
            Reply(events=text_turn("Still.")),
        ]
        ask("Weather?", "--no-parallel-tool-calls")
        conversation = str(last_run().conversation_id)
        ask("Again?", "--conversation", conversation)

    assert [r.status for r in AgentRun.objects.order_by("pk")] == [RunStatus.SUCCEEDED] * 2
    assert len(server.refused) == 1
    assert AgentRun.objects.filter(parallel_tool_calls=False).count() == 2


def test_a_server_that_wants_its_reasoning_back_behind_the_generic_entry(settings):
    with StrictServer([reasoning_back, role_order]) as server:
        use(settings, server)
        server.script = [
            Reply(events=reasoning_turn(["Need the weather."], tool_call_turn(("c1", *WEATHER)))),
            Reply(events=reasoning_turn(["Say it."], text_turn("Sunny."))),
            Reply(events=text_turn("Yes, sunny.")),
        ]
        ask("Weather?")
        conversation = str(last_run().conversation_id)
        ask("Sure?", "--conversation", conversation)

    assert [r.status for r in AgentRun.objects.order_by("pk")] == [RunStatus.SUCCEEDED] * 2
    assert len(server.refused) == 1
    # The next message's history carries the stored reasoning of the turn that made calls.
    history = server.requests[-1]["messages"]
    assistant = next(m for m in history if m["role"] == "assistant" and m.get("tool_calls"))
    assert assistant["reasoning_content"] == "Need the weather."


@pytest.mark.parametrize("same_id", ["call_0", "a b", "日本", ""])
def test_parallel_calls_sharing_one_id_are_sent_back_paired(settings, same_id):
    """A server that gives two parallel calls of one turn the same id (or none): the run
    itself copes (the strategy gives the second a fresh id); the next question's history,
    rebuilt from the rows, still pairs each call with its own result (tried by an
    adversarial pass; it held)."""
    with FakeOpenAI() as lax:
        use(settings, lax)
        lax.script = [
            Reply(
                events=tool_call_turn(
                    (same_id, "weather_forecast", {"town": "Suzhou"}),
                    (same_id, "calculator", {"expression": "17*23"}),
                )
            ),
            Reply(events=text_turn("Sunny, and 391.")),
        ]
        ask("Weather in Suzhou, and 17*23?")
    conversation = str(last_run().conversation_id)
    assert last_run().status == RunStatus.SUCCEEDED, last_run().error

    with StrictServer([mistral_ids, unique_ids, role_order]) as server:
        use(settings, server, "mistral")
        server.script = [Reply(events=text_turn("Yes."))]
        ask("Sure?", "--conversation", conversation)

    assert last_run().status == RunStatus.SUCCEEDED, (last_run().error, server.refused)
    history = server.requests[-1]["messages"]
    calls = [c for m in history for c in m.get("tool_calls") or []]
    results = [m for m in history if m["role"] == "tool"]
    assert len(calls) == 2 and len(results) == 2, history
    # Each result answers its own call: the weather result to the weather call.
    by_id = {c["id"]: c["function"]["name"] for c in calls}
    assert sorted(by_id[r["tool_call_id"]] for r in results) == ["calculator", "weather_forecast"]
    assert '"result": 391' in next(
        r["content"] for r in results if by_id[r["tool_call_id"]] == "calculator"
    )
