"""A person's edit of a held call's arguments, in the history of the next question.

The run pauses on a call to an ``ask`` tool, a person approves it with other arguments,
the run resumes from its rows and answers; the next question's history
(:func:`chat.store.conversation_exchanges` + :func:`agents.history.history_messages`) must
show the model what its resumed run was shown: its call as it asked it, and a result
that starts with the note of what a person changed and what ran.
"""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone
from langchain_core.messages import AIMessage, SystemMessage

from agents.approvals import Outcome, edited_note
from agents.history import describe, history_messages
from agents.strategies import STRATEGIES, get_strategy
from chat import store
from chat.models import AgentStep, Conversation, StepKind, StepStatus
from chat.runs import create_run, execute_run
from tests.chat.test_consumer import make_conversation
from tests.chat.test_history import StrictModel, answer, bnb_rooms, call

pytestmark = pytest.mark.django_db(transaction=True)

EDITED = {"town": "Hangzhou"}


async def edited_run(strategy: str, settings) -> tuple[Conversation, StrictModel]:
    """Ask, pause on the held call, approve it with :data:`EDITED`, resume to the answer."""
    settings.AGENT_TOOL_POLICIES = {"bnb_rooms": "ask"}
    _, conversation = await make_conversation()
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        strategy=strategy
    )
    model = StrictModel(script=[call(strategy, town="Suzhou"), answer(strategy, "Hangzhou.")])
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content="Rooms in Suzhou?")  # fmt: skip
    paused = await execute_run(row.pk, model=model, tools=[bnb_rooms])
    assert paused.status == "waiting", paused.error
    step = await database_sync_to_async(AgentStep.objects.get)(
        run_id=row.pk, status=StepStatus.PENDING
    )
    await database_sync_to_async(store.approval_decide)(
        conversation_id=conversation.pk, step_id=step.pk, outcome=Outcome.APPROVED, by=None,
        at=timezone.now(), edited_arguments=EDITED,
    )  # fmt: skip
    assert await database_sync_to_async(store.run_claim_resume)(run_id=row.pk, at=timezone.now())
    done = await execute_run(row.pk, model=model, tools=[bnb_rooms], resume=True)
    assert done.status == "succeeded", done.error
    return conversation, model


@database_sync_to_async
def next_history(conversation: Conversation, strategy: str) -> list:
    """Return the history the next question of ``conversation`` is sent."""
    row = create_run(conversation_id=conversation.pk, content="Which was cheapest?")
    exchanges = store.conversation_exchanges(conversation_id=conversation.pk,
                                             before_message_id=row.user_message_id)  # fmt: skip
    return history_messages(exchanges, get_strategy(strategy), max_observation_chars=8_000)


def shown(messages) -> list[tuple]:
    """Return what the model reads of ``messages``: kind, text, calls."""
    return [
        (type(m).__name__, m.text, [(c["name"], c["args"], c["id"]) for c in
                                    getattr(m, "tool_calls", [])])
        for m in messages
    ]  # fmt: skip


def resumed_scratchpad(model: StrictModel) -> list:
    """Return the scratchpad of the resumed run's last request (after its question)."""
    prompt = model.prompts[-1]
    assert isinstance(prompt[0], SystemMessage)
    return prompt[2:]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
async def test_the_next_question_sees_the_edited_call_as_the_resumed_run_saw_it(settings, strategy):
    conversation, model = await edited_run(strategy, settings)

    history = await next_history(conversation, strategy)

    work = history[1:-1]  # between the question and the answer
    assert shown(work) == shown(resumed_scratchpad(model)), describe(history, 200)
    assert edited_note(EDITED) in work[-1].text
    if strategy == "tool_calling":
        assert work[0].tool_calls[0]["args"] == {"town": "Suzhou"}  # as the model asked
    else:
        assert '"Suzhou"' in work[0].text


@database_sync_to_async
def as_stored_before(conversation: Conversation, kind: str) -> None:
    """Make the run's rows look as older versions stored them."""
    steps = AgentStep.objects.filter(run__conversation_id=conversation.pk)
    calls = steps.filter(kind=StepKind.TOOL_CALL)
    if kind == "observation without the note":  # before the note was on the event
        for step in calls:
            step.observation = step.result
            step.save(update_fields=["observation"])
    elif kind == "no observation":  # before observations were kept
        calls.update(observation=None)
    else:  # a turn whose stored message has no calls (they were read from markup)
        for step in steps.filter(kind=StepKind.MODEL_TURN, iteration=1):
            step.raw = {**step.raw, "tool_calls": []}
            step.save(update_fields=["raw"])


@pytest.mark.parametrize("kind", ["observation without the note", "no observation",
                                  "stored message without calls"])  # fmt: skip
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
async def test_older_rows_of_an_edited_call_still_say_a_person_edited_it(settings, strategy, kind):
    conversation, model = await edited_run(strategy, settings)
    await as_stored_before(conversation, kind)

    history = await next_history(conversation, strategy)

    work = history[1:-1]
    assert work[-1].text.count(edited_note(EDITED)) == 1, describe(history, 200)
    assert shown(work) == shown(resumed_scratchpad(model)), describe(history, 200)
    assert isinstance(history[-1], AIMessage)
