"""Branches in the store: questions continue the branch shown, a retry / regenerate / edit
is a sibling with a run linked to the one it retakes, the history and the page follow the
branch (never a sibling's), a switch moves to the newest leaf, a fork continues after
another conversation's question and sees it."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from langchain_core.messages import AIMessage

from agents.configured_models import ConfiguredModel
from agents.providers import ModelConfig
from chat import store
from chat.branches import create_branch
from chat.catalog import run_model_key
from chat.models import AgentRun, BranchKind, Conversation, Message, RunStatus
from chat.runs import create_run, execute_run
from chat.store.branches import INHERITED, NOT_A_RUN, NOT_RETRYABLE
from tests.fakes import ScriptedChatModel

pytestmark = pytest.mark.django_db(transaction=True)

OTHER = ConfiguredModel(
    key="local", label="Local",
    config=ModelConfig(provider="openai", model="qwen2.5", base_url="http://127.0.0.1:9/v1",
                       api_key="sk-l"),
)  # fmt: skip


def make_conversation(name: str = "alice") -> tuple[store.Owner, Conversation]:
    user = User.objects.create_user(name)
    return store.Owner(user_id=user.pk, guest_key=""), Conversation.objects.create(owner=user)


def ended(run: AgentRun, answer: str = "", status: str = RunStatus.SUCCEEDED) -> AgentRun:
    """End ``run`` as the recorder would, with ``answer`` as its output."""
    return store.run_finish(run_id=run.pk, status=status, output=answer, error="",
                            iterations=1, usage={}, finished_at=run.started_at)  # fmt: skip


def asked(conversation: Conversation, question: str, answer: str = "ok") -> AgentRun:
    return ended(create_run(conversation_id=conversation.pk, content=question), answer)


def path_contents(conversation: Conversation) -> list[str]:
    conversation.refresh_from_db()
    path = store.conversation_path(conversation=conversation).questions
    contents = dict(Message.objects.filter(pk__in=path).values_list("pk", "content"))
    return [contents[pk] for pk in path]


def regenerate(conversation: Conversation, run: AgentRun, **kwargs) -> AgentRun:
    return create_branch(conversation_id=conversation.pk, run_id=run.pk,
                         kind=BranchKind.REGENERATE, **kwargs)  # fmt: skip


def test_each_new_question_follows_the_last_and_becomes_the_current_message():
    _, conversation = make_conversation()
    first = asked(conversation, "Weather in Suzhou?")
    second = asked(conversation, "And tomorrow?")

    conversation.refresh_from_db()
    assert second.user_message.parent_id == first.user_message_id
    assert first.user_message.parent_id is None
    assert conversation.current_message_id == second.user_message_id


def test_a_regenerate_is_a_sibling_with_a_run_linked_to_the_one_it_retakes():
    _, conversation = make_conversation()
    asked(conversation, "Q1")
    old = asked(conversation, "Q2")

    new = regenerate(conversation, old)

    assert new.user_message.content == "Q2" and new.user_message_id != old.user_message_id
    assert new.user_message.parent_id == old.user_message.parent_id
    assert (new.branched_from_id, new.branch_kind) == (old.pk, BranchKind.REGENERATE)
    assert new.status == RunStatus.RUNNING
    assert path_contents(conversation) == ["Q1", "Q2"]
    window = store.runs_window(conversation_id=conversation.pk, exchanges=10)
    assert [run.pk for run in window.runs][-1] == new.pk
    takes = window.runs[-1].takes
    assert (takes.index, takes.count, takes.previous, takes.next) == (
        2, 2, old.user_message_id, None
    )  # fmt: skip


def test_regenerating_an_earlier_exchange_leaves_the_later_ones_on_their_branch():
    _, conversation = make_conversation()
    first = asked(conversation, "Q1")
    asked(conversation, "Q2")
    asked(conversation, "Q3")

    ended(regenerate(conversation, first), "other")

    assert path_contents(conversation) == ["Q1"]
    assert Message.objects.filter(role="user").count() == 4  # nothing deleted


def test_an_edit_runs_the_new_question_in_the_old_ones_place():
    _, conversation = make_conversation()
    asked(conversation, "Q1")
    old = asked(conversation, "Weather in Suzhou?")

    new = create_branch(conversation_id=conversation.pk, run_id=old.pk, kind=BranchKind.EDIT,
                        content="Weather in Hangzhou?")  # fmt: skip

    assert new.branch_kind == BranchKind.EDIT
    assert path_contents(conversation) == ["Q1", "Weather in Hangzhou?"]
    assert Message.objects.get(pk=old.user_message_id).content == "Weather in Suzhou?"


def test_a_retry_follows_a_failed_run_and_is_refused_for_one_that_succeeded():
    _, conversation = make_conversation()
    good = asked(conversation, "Q1")
    bad = ended(create_run(conversation_id=conversation.pk, content="Q2"), "", RunStatus.FAILED)

    retried = create_branch(conversation_id=conversation.pk, run_id=bad.pk,
                            kind=BranchKind.RETRY)  # fmt: skip
    ended(retried, "fine now")
    with pytest.raises(store.BranchRefused, match=re.escape(NOT_RETRYABLE)):
        create_branch(conversation_id=conversation.pk, run_id=good.pk, kind=BranchKind.RETRY)

    assert (retried.branched_from_id, retried.branch_kind) == (bad.pk, BranchKind.RETRY)
    assert AgentRun.objects.count() == 3


def test_a_branch_is_refused_while_a_run_goes_and_for_another_chats_run():
    _, conversation = make_conversation()
    old = asked(conversation, "Q1")
    going = create_run(conversation_id=conversation.pk, content="Q2")
    _, other = make_conversation("bob")
    theirs = asked(other, "Their question")

    with pytest.raises(store.RunAlreadyGoing):
        regenerate(conversation, old)
    with pytest.raises(store.RunAlreadyGoing):
        regenerate(conversation, going)
    with pytest.raises(store.BranchRefused, match=re.escape(NOT_A_RUN)):
        regenerate(conversation, theirs)

    assert AgentRun.objects.filter(conversation=conversation).count() == 2


def test_a_regenerate_with_another_model_and_strategy_records_them_on_its_run_only(settings):
    settings.AGENT_EXTRA_MODELS = [OTHER]
    _, conversation = make_conversation()
    old = asked(conversation, "Q1")

    new = regenerate(conversation, old, model="local", strategy="react")

    conversation.refresh_from_db()
    assert (new.model_key, new.model_name, new.strategy) == ("local", "qwen2.5", "react")
    assert (new.tool_choice, new.parallel_tool_calls) == ("", None)
    assert run_model_key(new) == "local"
    assert (conversation.model_key, conversation.strategy) == ("default", "tool_calling")
    ended(new, "from the other model")
    follow_up = create_run(conversation_id=conversation.pk, content="Q2")
    assert (follow_up.model_key, follow_up.strategy) == ("", "tool_calling")
    assert follow_up.user_message.parent_id == new.user_message_id


def test_a_model_or_strategy_the_agent_does_not_allow_is_refused(settings):
    _, conversation = make_conversation()
    old = asked(conversation, "Q1")

    with pytest.raises(store.BranchRefused, match="cannot use the model 'gpt-9'"):
        regenerate(conversation, old, model="gpt-9")
    with pytest.raises(store.BranchRefused, match="cannot use the strategy 'telepathy'"):
        regenerate(conversation, old, strategy="telepathy")

    assert AgentRun.objects.count() == 1


def test_a_switch_shows_the_newest_branch_under_the_chosen_take():
    owner, conversation = make_conversation()
    first = asked(conversation, "Q1")
    asked(conversation, "Q2")
    asked(conversation, "Q3")
    ended(regenerate(conversation, first), "other")

    store.branch_switch(owner=owner, conversation_id=conversation.pk,
                        question_id=first.user_message_id)  # fmt: skip
    follow_up = asked(conversation, "Q4")

    assert path_contents(conversation) == ["Q1", "Q2", "Q3", "Q4"]
    assert Message.objects.get(pk=follow_up.user_message_id).parent.content == "Q3"


def test_a_switch_is_refused_while_a_run_goes_and_for_a_question_not_of_the_chat():
    owner, conversation = make_conversation()
    first = asked(conversation, "Q1")
    create_run(conversation_id=conversation.pk, content="Q2")
    _, other = make_conversation("bob")
    theirs = asked(other, "Theirs")

    with pytest.raises(store.BranchRefused, match="still working"):
        store.branch_switch(owner=owner, conversation_id=conversation.pk,
                            question_id=first.user_message_id)  # fmt: skip
    with pytest.raises(store.BranchRefused, match="No such question"):
        store.branch_switch(owner=owner, conversation_id=conversation.pk,
                            question_id=theirs.user_message_id)  # fmt: skip
    assert store.branch_switch(owner=store.Owner(user_id=None, guest_key="x"),
                               conversation_id=conversation.pk, question_id=0) is None  # fmt: skip


def test_a_fork_shows_the_source_up_to_its_question_read_only_and_continues_after_it():
    owner, conversation = make_conversation()
    first = asked(conversation, "Q1", "A1")
    asked(conversation, "Q2", "A2")

    fork = store.conversation_fork(owner=owner, conversation_id=conversation.pk,
                                   question_id=first.user_message_id)  # fmt: skip
    window = store.runs_window(conversation_id=fork.pk, exchanges=10)
    started = store.conversation_started(conversation_id=fork.pk)
    own = asked(fork, "Q2 in the fork")

    assert [run.pk for run in window.runs] == [first.pk] and window.runs[0].inherited
    assert started  # its settings are fixed: it continues a conversation that had them
    assert own.user_message.parent_id == first.user_message_id
    assert path_contents(fork) == ["Q1", "Q2 in the fork"]
    assert path_contents(conversation) == ["Q1", "Q2"]
    assert (fork.model_key, fork.strategy, fork.agent_key) == (
        conversation.model_key, conversation.strategy, conversation.agent_key
    )  # fmt: skip
    with pytest.raises(store.BranchRefused, match=re.escape(INHERITED)):
        regenerate(fork, first)


def test_a_fork_is_refused_for_someone_elses_conversation():
    _, conversation = make_conversation()
    first = asked(conversation, "Q1")
    bob, _ = make_conversation("bob")

    with pytest.raises(store.BranchRefused):
        store.conversation_fork(owner=bob, conversation_id=conversation.pk,
                                question_id=first.user_message_id)  # fmt: skip
    assert Conversation.objects.count() == 2


# What the model is sent


async def run_scripted(run: AgentRun, answer: str) -> ScriptedChatModel:
    """Run ``run`` with a model that answers ``answer``; return the model (its prompts)."""
    model = ScriptedChatModel(script=[AIMessage(answer)])
    await execute_run(run.pk, model=model, tools=[])
    return model


async def answered(
    conversation_id: int, question: str, answer: str
) -> tuple[AgentRun, ScriptedChatModel]:
    """Ask ``question`` in the conversation (on the branch shown) and run it, answering
    ``answer``; return the run and the model."""
    run = await database_sync_to_async(create_run)(
        conversation_id=conversation_id, content=question
    )
    return run, await run_scripted(run, answer)


async def test_a_regenerated_answer_is_not_sent_the_answer_it_replaces():
    _, conversation = await database_sync_to_async(make_conversation)()
    await answered(conversation.pk, "Q1", "A1")
    second, _ = await answered(conversation.pk, "Q2", "A2 the first take")

    again = await database_sync_to_async(regenerate)(conversation, second)
    model = await run_scripted(again, "A2 the second take")

    sent = [message.text for message in model.prompts[0][1:]]
    assert sent == ["Q1", "A1", "Q2"]


async def test_a_forks_first_question_is_sent_the_source_exchanges_before_it():
    owner, conversation = await database_sync_to_async(make_conversation)()
    first, _ = await answered(conversation.pk, "Q1", "A1")
    await answered(conversation.pk, "Q2", "A2")
    fork = await database_sync_to_async(store.conversation_fork)(
        owner=owner, conversation_id=conversation.pk, question_id=first.user_message_id
    )

    _, model = await answered(fork.pk, "Q3", "A3")

    assert [message.text for message in model.prompts[0][1:]] == ["Q1", "A1", "Q3"]
