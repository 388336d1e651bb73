"""Chats with a real model (SmolLM2-135M via llama-cpp-python) through the app's consumer.

A 135M model never writes the text strategies' formats reliably, never calls a tool by
itself and gets arithmetic wrong, so nothing here asks for a right answer. What is asked
is what every real model must get: plain answers stream; every run, whatever the model
writes, ends in a stated status with every step stored and finished (format errors as
error steps, never a crash, a hang or a blank "succeeded" answer); the next message in the
same conversation works; a forced named tool call reaches the tool with its exact name.
"""

from __future__ import annotations

import contextlib
import json
import re

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from agents.events import is_format_error
from chat.models import AgentRun, AgentStep, Conversation, Message
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import connect, make_conversation
from tests.real.conftest import FRAME_WAIT_S, MAX_ITERATIONS

# One event loop for the whole module, as Daphne has one: langchain-openai keeps one
# pooled async HTTP client per base URL for the process, and a connection left from an
# earlier test's closed loop fails the next request with "Event loop is closed".
pytestmark = [
    pytest.mark.real,
    pytest.mark.django_db(transaction=True),
    pytest.mark.asyncio(loop_scope="session"),
]

# An apostrophe in the question: a chat format that HTML-escapes its prompt shows up as
# "&#39;" in what the model copies back.
QUESTION = "What's 17 * 23? Use the calculator."
FOLLOW_UP = "Thanks. And what's 12 + 30?"
# How a run against a working server ends, whatever the model writes. "failed" is a
# defined status too, but here it would be ours or the server's fault (a refused request,
# an empty stream, a crash), never the model's: its broken formats are error steps.
ENDED = {"succeeded", "max_iterations"}
FINISHED = re.compile(r'class="run-status status-(?!running)')
HTML_ESCAPES = re.compile(r"&(?:#\d+|amp|lt|gt|quot|apos);")


async def converse(conversation: Conversation, user: User, questions: list[str]) -> list[list[str]]:
    """Send each question over one socket, in turn; return each run's frames up to its end."""
    communicator = await connect(conversation.pk, user)
    connected, _ = await communicator.connect()
    assert connected
    runs = []
    try:
        for question in questions:
            await communicator.send_to(text_data=json.dumps({"content": question}))
            frames: list[str] = []
            while not frames or not FINISHED.search(frames[-1]):
                frames.append(await communicator.receive_from(timeout=FRAME_WAIT_S))
            runs.append(frames)
            await wait_for_runs(FRAME_WAIT_S)
    except BaseException:
        # Say what went wrong, not that the consumer's task was cancelled on the way out.
        with contextlib.suppress(BaseException):
            await communicator.disconnect()
        raise
    await communicator.disconnect()
    return runs


@database_sync_to_async
def configure(conversation: Conversation, **fields: str) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(**fields)


@database_sync_to_async
def stored_runs() -> list[tuple[AgentRun, list[AgentStep], str | None]]:
    """Return every run with its steps in order and the assistant message it wrote."""
    return [
        (
            run,
            list(run.steps.order_by("ordinal")),
            Message.objects.filter(run=run, role="assistant")
            .values_list("content", flat=True)
            .first(),
        )
        for run in AgentRun.objects.order_by("id")
    ]


def describe(run: AgentRun, steps: list[AgentStep]) -> str:
    """Return a run and its steps in a few lines, for an assertion's message."""
    lines = [f"run {run.pk}: {run.status} after {run.iterations} turn(s); error {run.error!r}"]
    lines += [
        f"  {s.ordinal} {s.kind} {s.tool_name} {s.status} {s.error_type} {s.error[:200]!r} "
        f"text={s.text[:200]!r}"
        for s in steps
    ]
    return "\n".join(lines)


def assert_ended_cleanly(run: AgentRun, steps: list[AgentStep], answer: str | None) -> None:
    """Assert a defined end: a stated status, every step finished, nothing blank or lost."""
    assert run.status in ENDED, describe(run, steps)
    assert run.finished_at is not None and run.duration_ms is not None
    assert steps, "a run without a single stored step"
    assert all(s.status in ("success", "error") and s.finished_at for s in steps), [
        (s.ordinal, s.kind, s.status) for s in steps
    ]
    turns = [s for s in steps if s.kind == "model_turn"]
    assert len(turns) == run.iterations <= MAX_ITERATIONS
    # A turn that did not end the run asked for something: a tool call or a format error
    # card, whose observation the next turn read.
    for turn in turns[:-1]:
        assert any(s.kind == "tool_call" and s.iteration == turn.iteration for s in steps), (
            describe(run, steps)
        )
    first = steps[0].ordinal
    assert [s.ordinal for s in steps] == list(range(first, first + len(steps)))
    for call in (s for s in steps if s.kind == "tool_call"):
        assert call.status == "success" or call.error, f"an error step without its error: {call}"
        if call.status == "error":
            assert call.error_type, f"an error step without its kind: {call.error}"
    if run.status == "succeeded":
        assert run.output.strip(), "a succeeded run with a blank answer"
        assert answer == run.output
    else:
        assert run.iterations == MAX_ITERATIONS
        assert run.error.strip()
    for step in steps:
        assert not HTML_ESCAPES.search(step.text + step.result), (
            f"HTML escapes reached the model's text: {step.text!r}"
        )


async def test_a_plain_answer_streams_and_is_stored():
    user, conversation = await make_conversation()
    # Native tool calling, tool_choice auto: the tools are offered, this model answers in text.
    (frames,) = await converse(conversation, user, ["Say hello to Alice in one sentence."])

    ((run, steps, answer),) = await stored_runs()
    assert run.status == "succeeded", describe(run, steps)
    turn = steps[-1]
    streamed = [f for f in frames if f"step-{turn.pk}-text" in f and "run-status" not in f]
    assert len(streamed) >= 2, f"the answer arrived in {len(streamed)} frame(s), not streamed"
    assert answer and answer.strip() and answer == run.output
    assert "status-succeeded" in frames[-1]
    assert_ended_cleanly(run, steps, answer)


@pytest.mark.parametrize("strategy", ["tool_calling", "react", "structured_chat", "xml"])
async def test_every_strategy_ends_each_run_in_a_defined_state(strategy):
    user, conversation = await make_conversation()
    await configure(conversation, strategy=strategy)
    runs = await converse(conversation, user, [QUESTION, FOLLOW_UP])

    stored = await stored_runs()
    assert len(stored) == len(runs) == 2
    for frames, (run, steps, answer) in zip(runs, stored, strict=True):
        assert run.strategy == strategy
        assert f"status-{run.status}" in frames[-1]
        assert_ended_cleanly(run, steps, answer)
        for step in steps:
            if step.kind == "tool_call" and is_format_error(step.error_type):
                assert f'id="step-{step.pk}"' in "\n".join(frames)


async def test_a_forced_named_tool_call_reaches_the_tool():
    user, conversation = await make_conversation()
    await configure(conversation, strategy="tool_calling", tool_choice="calculator")
    runs = await converse(conversation, user, [QUESTION, FOLLOW_UP])

    (first_frames, _), ((run, steps, answer), (after, after_steps, after_answer)) = (
        runs,
        await stored_runs(),
    )
    calls = [s for s in steps if s.kind == "tool_call"]
    assert calls, "the forced tool call never reached the tool:\n" + describe(run, steps)
    call = calls[0]
    # The exact name: a server that repeats it in every streamed chunk must not glue it.
    assert call.tool_name == "calculator"
    assert call.tool_call_id
    card = f'data-tool="calculator" data-status="{call.status}"'
    assert card in "\n".join(first_frames)
    if call.status == "success":
        assert "result" in json.loads(call.result)
    else:
        assert call.error and call.error_type, "a failed tool call must say why"
    # The tool's result goes back to the server with the call: the turn after it is a model
    # turn that ran, not a request the server refused.
    turns = [s for s in steps if s.kind == "model_turn"]
    assert len(turns) >= 2 and turns[1].status == "success", (turns[-1].error, run.error)
    assert_ended_cleanly(run, steps, answer)
    # And the next message, whose history holds that call and its result, works too.
    assert_ended_cleanly(after, after_steps, after_answer)
