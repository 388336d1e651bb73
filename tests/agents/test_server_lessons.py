"""Ids each server accepts, and what a server teaches by refusing (agents/providers/
call_ids.py, learned.py), through the real client against tests/strict_servers.py.

Each kind of issue 24's "ids and names the servers refuse" and "parameters and
requirements a server states only by refusing", for the profile that knows it and for
the generic entry that has to learn it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agents.events import RunStatus, ToolCallFinished
from agents.providers import ModelConfig, build_model
from agents.providers.call_ids import ALNUM9, PORTABLE, STYLES, derived_id, sendable_ids
from agents.providers.learned import Learned, learn, learned, lesson_from, server_key
from agents.runtime import run
from agents.strategies import StrategyOptions, get_strategy
from agents.tools import default_tools
from tests.fake_openai import Reply, reasoning_turn, text_turn, tool_call_turn
from tests.strict_servers import (
    StrictServer,
    mistral_ids,
    reasoning_back,
    refuses,
    role_order,
    unique_ids,
)
from tests.timing import WAIT_S

APP_MADE = "call_0123456789abcdef01234567"  # new_tool_call_id()'s shape
MISTRAL_ID_REFUSAL = "Tool call id was call_9866 but must be a-z, A-Z, 0-9, with a length of 9."
WEATHER = ("call_w", "weather_forecast", {"town": "Suzhou"})
# OpenAI's refusal of the output cap's value, in the field it came in.
MAX_TOKENS_TOO_LARGE = {
    "error": {
        "message": "max_tokens is too large: 100000. This model supports at most 16384 "
        "completion tokens, whereas you provided 100000.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "invalid_value",
    }
}


def strict(*rules) -> StrictServer:
    return StrictServer([*rules, role_order])


def model_for(server, provider: str = "openai", **options: Any):
    return build_model(
        ModelConfig(
            provider=provider,
            model="fake-model",
            base_url=server.base_url,
            api_key="sk-test",
            timeout_s=WAIT_S,
            max_retries=0,
            **options,
        )
    )


def earlier_exchanges() -> list[BaseMessage]:
    """Two answered questions whose calls bear ids from other servers and the app: an
    id the app made, and ``call_0`` twice (a server that numbers each turn's calls)."""
    history: list[BaseMessage] = [HumanMessage("Weather in Suzhou?")]
    for call_id in (APP_MADE, "call_0"):
        history += [
            AIMessage(
                "",
                tool_calls=[
                    {"name": "weather_forecast", "id": call_id, "args": {"town": "Suzhou"}}
                ],
            ),
            ToolMessage('{"sunny": true}', tool_call_id=call_id, name="weather_forecast"),
        ]
    history += [
        AIMessage("Sunny."),
        HumanMessage("And in Hangzhou?"),
        AIMessage(
            "",
            tool_calls=[{"name": "weather_forecast", "id": "call_0", "args": {"town": "Hangzhou"}}],
        ),
        ToolMessage('{"rain": true}', tool_call_id="call_0", name="weather_forecast"),
        AIMessage("Rain."),
        HumanMessage("Which is drier?"),
    ]
    return history


async def ask(model, messages: list[BaseMessage], **kwargs: Any) -> list[Any]:
    return [e async for e in run(model, default_tools(), messages, **kwargs)]


def sent_pairs(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Return ``(call id, result id)`` of each call in a request, paired by position."""
    pairs, calls = [], []
    for message in body["messages"]:
        if message.get("tool_calls"):
            calls = [c["id"] for c in message["tool_calls"]]
        elif message["role"] == "tool":
            pairs.append((calls.pop(0), message["tool_call_id"]))
    return pairs


# Ids ---------------------------------------------------------------------------------


async def test_a_conversation_moved_to_mistral_sends_ids_it_accepts_and_keeps_its_own():
    with strict(mistral_ids, unique_ids) as server:
        server.script = [
            Reply(events=tool_call_turn(("Ab3dE5gH7", *WEATHER[1:]))),
            Reply(events=text_turn("Suzhou.")),
        ]
        events = await ask(model_for(server, provider="mistral"), earlier_exchanges())

    assert events[-1].status is RunStatus.SUCCEEDED, events[-1].error
    assert server.refused == []
    first, second = server.requests
    assert all(
        call == result and STYLES[ALNUM9].fullmatch(call) for call, result in sent_pairs(second)
    )
    # The server's own id goes back as it came; the event (and so the row) keeps it.
    assert sent_pairs(second)[-1] == ("Ab3dE5gH7", "Ab3dE5gH7")
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallFinished)] == ["Ab3dE5gH7"]
    # Requests grow by appending: the earlier ids are sent the same each time.
    assert sent_pairs(first) == sent_pairs(second)[:-1]
    # The profile knew the style: nothing to learn (nor a warning saying so).
    assert learned(server_key(server.base_url, "fake-model")) == Learned()


async def test_the_generic_entry_learns_mistrals_ids_from_its_refusal_once():
    with strict(mistral_ids) as server:
        server.script = [Reply(events=text_turn("Suzhou.")), Reply(events=text_turn("Yes."))]
        model = model_for(server)
        first = await ask(model, earlier_exchanges())
        again = await ask(
            model_for(server), [*earlier_exchanges(), AIMessage("Suzhou."), HumanMessage("Sure?")]
        )

    assert [first[-1].status, again[-1].status] == [RunStatus.SUCCEEDED] * 2
    # One refused request in all: the next run of the same model is sent the ids at once.
    assert len(server.refused) == 1 and "length of 9" in server.refused[0]
    assert len(server.requests) == 3
    assert learned(model.server_key).tool_call_ids == ALNUM9


async def test_a_server_whose_own_ids_are_nine_characters_is_sent_that_style_at_once():
    with strict(mistral_ids) as server:
        server.script = [
            Reply(events=tool_call_turn(("K9x2mQ7aZ", *WEATHER[1:]))),
            Reply(events=text_turn("Sunny.")),
            Reply(events=text_turn("Rain.")),
        ]
        model = model_for(server)
        await ask(model, [HumanMessage("Weather in Suzhou?")])
        events = await ask(model, earlier_exchanges())

    assert events[-1].status is RunStatus.SUCCEEDED
    assert server.refused == []


async def test_ids_a_server_numbers_from_zero_every_turn_are_sent_unique_in_a_run():
    with strict(unique_ids) as server:
        server.script = [
            Reply(events=tool_call_turn(("call_0", *WEATHER[1:]))),
            Reply(events=tool_call_turn(("call_0", "weather_forecast", {"town": "Hangzhou"}))),
            Reply(events=text_turn("Suzhou is drier.")),
        ]
        events = await ask(model_for(server), [HumanMessage("Which is drier?")])

    assert events[-1].status is RunStatus.SUCCEEDED, events[-1].error
    assert server.refused == []
    [first, second] = sent_pairs(server.requests[-1])
    assert first[0] != second[0] and first[0] == first[1] and second[0] == second[1]
    # The events keep the server's ids, as the rows do.
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallFinished)] == [
        "call_0",
        "call_0",
    ]


def test_sendable_ids_keeps_ids_that_fit_and_pairs_every_result():
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "call_a"}, {"id": ""}, {"id": "x" * 41}]},
        {"role": "tool", "tool_call_id": "call_a"},
        {"role": "tool", "tool_call_id": ""},
        {"role": "tool", "tool_call_id": "x" * 41},
        {"role": "assistant", "tool_calls": [{"id": "call_a"}]},
        {"role": "tool", "tool_call_id": "call_a"},
    ]
    sendable_ids(messages, PORTABLE)

    calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == results and calls[0] == "call_a" and len(set(calls)) == 4
    assert all(STYLES[PORTABLE].fullmatch(i) for i in calls)
    assert calls[3] == derived_id("call_a", PORTABLE, 1)


def test_an_unknown_id_style_is_refused():
    with pytest.raises(ValueError, match="tool_call_ids"):
        sendable_ids([], "uuid")


# Parameters --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["openai", "pydantic"])
async def test_parallel_calls_switched_off_on_a_model_that_refuses_the_parameter(shape):
    options = StrategyOptions(parallel_tool_calls=False)
    with strict(refuses("parallel_tool_calls", shape=shape)) as server:
        server.script = [
            Reply(events=tool_call_turn(WEATHER)),
            Reply(events=text_turn("Sunny.")),
            Reply(events=text_turn("Still sunny.")),
        ]
        model = model_for(server)
        first = await ask(
            model, [HumanMessage("Weather?")], strategy=get_strategy("tool_calling", options)
        )
        second = await ask(
            model_for(server),
            [HumanMessage("Again?")],
            strategy=get_strategy("tool_calling", options),
        )

    assert [first[-1].status, second[-1].status] == [RunStatus.SUCCEEDED] * 2
    assert len(server.refused) == 1
    assert all("parallel_tool_calls" not in body for body in server.requests[1:])


async def test_a_react_run_on_a_model_that_refuses_stop_sequences():
    # Without stop, the model writes an observation of its own: the strategy cuts it off.
    with strict(refuses("stop")) as server:
        server.script = [
            Reply(events=text_turn("Thought: maths\nAction: calculator\nAction Input: ",
                                   '{"expression": "17*23"}\nObservation: 400')),
            Reply(events=text_turn("Thought: I now know the final answer\nFinal Answer: 391")),
        ]  # fmt: skip
        events = await ask(model_for(server), [HumanMessage("17*23?")],
                           strategy=get_strategy("react"))  # fmt: skip

    assert events[-1].status is RunStatus.SUCCEEDED and events[-1].output == "391"
    assert len(server.refused) == 1 and "stop" not in server.requests[-1]
    [call] = [e for e in events if isinstance(e, ToolCallFinished)]
    assert '"result": 391' in call.result


async def test_a_refusal_that_teaches_nothing_new_fails_the_run_without_a_loop(server):
    # A server that refuses the parameter and, without it, refuses again: two requests.
    server.script = [
        Reply(status=400, message="'parallel_tool_calls' is not supported"),
        Reply(status=400, message="'parallel_tool_calls' is not supported"),
    ]
    options = StrategyOptions(parallel_tool_calls=False)
    events = await ask(
        model_for(server),
        [HumanMessage("Weather?")],
        strategy=get_strategy("tool_calling", options),
    )

    assert events[-1].status is RunStatus.FAILED
    assert "parallel_tool_calls" in events[-1].error
    assert len(server.requests) == 2


async def test_the_generic_entry_learns_that_a_server_wants_its_reasoning_back():
    thinking = ["Need the weather."]
    with strict(reasoning_back) as server:
        server.script = [
            Reply(events=reasoning_turn(thinking, tool_call_turn(WEATHER))),
            Reply(events=reasoning_turn(["Say it."], text_turn("Sunny."))),
        ]
        events = await ask(model_for(server), [HumanMessage("Weather in Suzhou?")])

    assert events[-1].status is RunStatus.SUCCEEDED, events[-1].error
    assert len(server.refused) == 1 and "reasoning_content" in server.refused[0]
    assistant = next(m for m in server.requests[-1]["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "Need the weather."


@pytest.mark.parametrize(
    ("body", "sent", "learned_field"),
    [
        (
            {
                "error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with "
                    "this model. Use 'max_completion_tokens' instead.",
                    "param": "max_tokens",
                }
            },
            {"max_tokens": 5},
            ("max_tokens_field", "max_completion_tokens"),
        ),
        (
            {
                "error": {
                    "message": "Unsupported value: 'temperature' does not support 0.2 with "
                    "this model.",
                    "param": "temperature",
                }
            },
            {"temperature": 0.2},
            ("dropped", frozenset({"temperature"})),
        ),
        # OpenRouter passing Mistral's refusal on inside its own.
        (
            {
                "error": {
                    "message": "Provider returned error",
                    "metadata": {"raw": json.dumps({"message": MISTRAL_ID_REFUSAL})},
                }
            },
            {},
            ("tool_call_ids", ALNUM9),
        ),
    ],
)
def test_what_each_refusal_teaches(body, sent, learned_field):
    lesson = lesson_from(BadRequest(body), {"messages": [], **sent})
    assert lesson is not None
    name, value = learned_field
    assert getattr(lesson.applied(Learned()), name) == value


def test_a_lesson_is_logged_once_with_the_servers_host_and_never_its_credentials(caplog):
    key = server_key("https://user:sk-secret@models.example:8443/v1?key=sk-q", "m")
    lesson = lesson_from(Refused(), {"messages": [], "temperature": 1})
    assert lesson is not None
    with caplog.at_level("WARNING", logger="agents.providers.learned"):
        assert learn(key, lesson) and not learn(key, lesson)

    [record] = caplog.records
    assert "models.example:8443" in record.getMessage() and "temperature" in record.getMessage()
    assert "sk-" not in record.getMessage() and "user" not in record.getMessage()


class Refused(Exception):
    status_code = 400
    body = {"error": {"message": "'temperature' is not supported", "param": "temperature"}}


def test_a_refusal_of_something_not_sent_or_not_a_400_teaches_nothing():
    class Overloaded(Refused):
        status_code = 503

    assert lesson_from(Refused(), {"messages": []}) is None
    assert lesson_from(Overloaded(), {"messages": [], "temperature": 1}) is None


# Found by an adversarial pass -----------------------------------------------------------


class BadRequest(Exception):
    status_code = 400

    def __init__(self, body: Any) -> None:
        super().__init__(f"Error code: 400 - {body}")
        self.body = body


# Concurrent runs ----------------------------------------------------------------------


class RefuseTogether(StrictServer):
    """A strict server whose first ``count`` refusals are answered only once that many
    refused requests have arrived: two runs that started at the same time, as two people
    sending their first message after a restart do."""

    def __init__(self, rules, count: int = 2) -> None:
        super().__init__(rules)
        self.barrier = threading.Barrier(count, timeout=WAIT_S)
        self.waits = count

    def take(self, body):
        reply = super().take(body)
        if reply.status != 200:
            with self._lock:
                wait, self.waits = self.waits > 0, self.waits - 1
            if wait:
                self.barrier.wait()
        return reply


async def test_two_runs_refused_at_once_for_the_same_parameter_both_go_on():
    """Two runs of a model that refuses ``parallel_tool_calls``, whose first requests
    are both refused before either refusal is read: the first to read its refusal learns
    the lesson and retries; the second's ``learn`` changes nothing (already known), so
    ``_learned_from`` says "not worth sending again" and that run fails with the
    refusal, although a retry without the parameter would work."""
    options = StrategyOptions(parallel_tool_calls=False)
    with RefuseTogether([refuses("parallel_tool_calls"), role_order]) as server:
        server.script = [Reply(events=text_turn("One.")), Reply(events=text_turn("Two."))]
        results = await asyncio.gather(
            *(
                ask(
                    model_for(server),
                    [HumanMessage(question)],
                    strategy=get_strategy("tool_calling", options),
                )
                for question in ("First?", "Second?")
            )
        )

    statuses = [events[-1].status for events in results]
    errors = [getattr(events[-1], "error", "") for events in results]
    assert statuses == [RunStatus.SUCCEEDED] * 2, errors


# Refusals that name something incidentally ------------------------------------------


def test_a_max_tokens_value_too_large_teaches_no_field_swap():
    """OpenAI's refusal of a *value* ("max_tokens is too large: 100000. This model
    supports at most 16384 completion tokens") names the field it was sent in: read as
    "the server refuses max_tokens", the output cap moves to max_completion_tokens, whose
    refusal moves it back, and so on (every lesson a WARNING, four requests for one
    refusal, and the field left as the last flip had it)."""
    body = MAX_TOKENS_TOO_LARGE
    assert lesson_from(BadRequest(body), {"messages": [], "max_tokens": 100000}) is None


def test_vllms_context_length_refusal_teaches_no_field_swap():
    """vLLM's refusal when a conversation grows past the context ("'max_tokens' or
    'max_completion_tokens' is too large: 4096. This model's maximum context length is
    4096 tokens and your request has 312 input tokens") is about the prompt's length: it
    teaches the app to swap the output cap's field, then on the next refusal to swap it
    back, on every long conversation."""
    message = (
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum "
        "context length is 4096 tokens and your request has 312 input tokens "
        "(4096 > 4096 - 312)."
    )
    body = {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
    assert lesson_from(BadRequest(body), {"messages": [], "max_tokens": 4096}) is None


def test_a_refusal_whose_param_names_another_field_does_not_drop_a_word_it_quotes():
    """OpenAI's body names the refused field (``param``): here ``messages[3].content``.
    Its message quotes the offending content, a weather tool's result that has the word
    "temperature"; the app sent a temperature, so it learns "temperature is no longer
    sent (the server refused it)" for this server and model for the life of the
    process, and sends the request again for nothing."""
    body = {
        "error": {
            "message": "Invalid 'messages[3].content': expected a string, got an object "
            "({'temperature': 31, 'town': 'Suzhou'}).",
            "type": "invalid_request_error",
            "param": "messages[3].content",
            "code": "invalid_type",
        }
    }
    lesson = lesson_from(BadRequest(body), {"messages": [], "temperature": 0.2})
    assert lesson is None or lesson.applied(Learned()).dropped == frozenset(), lesson


async def test_a_value_refusal_leaves_the_output_cap_where_the_profile_put_it():
    """Through the real client: a server refusing the cap's *value* (too large) in
    whichever field it came is answered with a swap of the field, then the swap back,
    then again: four requests for one refusal, three WARNING lessons, and the field left
    as the last flip had it."""
    refusal = MAX_TOKENS_TOO_LARGE
    other = {
        "error": {
            **refusal["error"],
            "message": refusal["error"]["message"].replace("max_tokens", "max_completion_tokens"),
            "param": "max_completion_tokens",
        }
    }

    def too_large(body):
        from scripts.strict_rules import Refusal

        if "max_tokens" in body:
            return Refusal(400, refusal)
        if "max_completion_tokens" in body:
            return Refusal(400, other)
        return None

    with StrictServer([too_large]) as server:
        model = model_for(server, max_tokens=100000)
        events = await ask(model, [HumanMessage("Hi")])
        key = model.server_key

    assert events[-1].status is RunStatus.FAILED
    # One request, the refusal shown: nothing was learned from a value out of range.
    assert len(server.requests) == 1, [sorted(b) for b in server.requests]
    assert learned(key) == Learned()


# Several lessons at once ---------------------------------------------------------------


def forbids(*names: str):
    """A pydantic server (``extra="forbid"``): one HTTP 422 listing every field it does
    not take, as pydantic reports all of a body's errors at once."""
    from scripts.strict_rules import Refusal

    def rule(body):
        extra = [name for name in names if name in body]
        if not extra:
            return None
        detail = [
            {"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not "
             "permitted", "input": body[name]}
            for name in extra
        ]  # fmt: skip
        return Refusal(422, {"detail": detail})

    return rule


async def test_a_422_that_lists_four_fields_it_does_not_take_leads_to_a_working_run():
    """A strict pydantic server lists every field it forbids in its one refusal. The app
    learns one field per refusal and stops after three (MAX_LESSONS): a run with
    parallel calls off, a forced tool choice and a temperature, on a server that takes
    none of them nor ``stream_options``, fails its first message although the first
    refusal said everything needed."""
    options = StrategyOptions(parallel_tool_calls=False, tool_choice="required")
    rule = forbids("parallel_tool_calls", "tool_choice", "stream_options", "temperature")
    with StrictServer([rule, role_order]) as server:
        server.script = [Reply(events=text_turn("Hello."))]
        events = await ask(
            model_for(server, temperature=0.3),
            [HumanMessage("Hi")],
            strategy=get_strategy("tool_calling", options),
        )

    assert events[-1].status is RunStatus.SUCCEEDED, (events[-1].error, server.refused)


# What the person is told of a refusal in another shape ---------------------------------

FIELD_REQUIRED = {
    "type": "missing",
    "loc": ["body", "messages", 1, "content"],
    "msg": "Field required",
    "input": {"role": "assistant"},
}


async def test_a_pydantic_422_refusal_says_what_the_server_refused():
    """A pydantic server's refusal (``{"detail": [{"loc", "msg"}]}``, FastAPI/vLLM-style
    and what learned.py reads lessons from) that teaches nothing is shown to the person
    as "rejected the request (HTTP 422): Error code: 422": the server's words (which
    field, what is wrong) are lost, in the run's error and so in the page and the row."""
    from scripts.strict_rules import Refusal

    with StrictServer([lambda body: Refusal(422, {"detail": [FIELD_REQUIRED]})]) as server:
        events = await ask(model_for(server), [HumanMessage("Hi")])

    assert events[-1].status is RunStatus.FAILED
    assert "Field required" in events[-1].error, events[-1].error


async def test_mistrals_422_with_a_detail_object_as_its_message_says_what_was_refused():
    """Mistral's API wraps its validation errors in ``message`` as an object
    (``{"object": "error", "message": {"detail": [...]}}``): the run's error should carry
    the server's words, not only "Error code: 422"."""
    from scripts.strict_rules import Refusal

    body = {
        "object": "error",
        "message": {"detail": [FIELD_REQUIRED]},
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
    with StrictServer([lambda _body: Refusal(422, body)]) as server:
        events = await ask(model_for(server, provider="mistral"), [HumanMessage("Hi")])

    assert events[-1].status is RunStatus.FAILED
    assert "Field required" in events[-1].error, events[-1].error
