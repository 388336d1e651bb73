"""Branches: a conversation's questions form a tree, and the page shows one path of it.

Each question's ``parent`` is the question before it on its branch (ChatGPT's ``parent``
/ ``current_node`` shape); a fork's first question's parent is the question of the
source conversation it continues after. ``Conversation.current_message`` is the leaf of
the branch shown (null: the newest question). Retry, regenerate and edit add a sibling
question with a new run (``AgentRun.branched_from``); a fork is a new conversation;
switching branch moves ``current_message``. Nothing is deleted: runs are evidence.

The tree is read as ``(id, parent_id)`` pairs, one query per conversation on the path
(a fork's source costs one more), and walked in Python: a conversation of 1,000
questions is a few kilobytes of integers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from chat.models import (
    TOOL_CHOICE_AUTO,
    AgentRun,
    BranchKind,
    Conversation,
    Message,
    QueuedMessage,
    RunStatus,
    Strategy,
)
from chat.store.conversations import Owner, conversation_get
from chat.store.limits import check_rate, runs_interrupt_stale
from chat.store.tree import ancestors, children_of, newest_leaf, path_leaf, question_tree

# Statuses a retry may follow: every end but a success (a success is regenerated).
RETRYABLE = (
    RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED, RunStatus.MAX_ITERATIONS,
    RunStatus.TIME_LIMIT, RunStatus.REPEATED_FAILURE, RunStatus.BUDGET_EXCEEDED,
)  # fmt: skip
GOING = (RunStatus.RUNNING, RunStatus.WAITING)

NOT_A_RUN = "No such run in this conversation: it may be another chat's. Nothing was started."
INHERITED = (
    "That exchange belongs to the conversation this one was forked from: open that one "
    "to run it again. Nothing was started."
)
NOT_RETRYABLE = (
    "Only a run that did not succeed (failed, stopped, interrupted, or over a limit) can be "
    "retried; regenerate an answer instead. Nothing was started."
)
NOT_A_QUESTION = "No such question in this conversation. Nothing was changed."
FORK_WHILE_GOING = (
    "That exchange's run has not ended yet: fork it once it has. Nothing was changed."
)
SWITCH_WHILE_QUEUED = (
    "Messages are waiting to be sent after this branch's last answer: remove them (or let "
    "them go) before switching branch. Nothing was changed."
)
SWITCH_WHILE_GOING = (
    "The agent is still working on this chat: wait for it to finish (or press Stop) "
    "before switching branch. Nothing was changed."
)


class BranchRefused(Exception):
    """A retry, regenerate, edit, fork or branch switch that is not done; the text says
    why, for the user. Nothing is stored."""


@dataclass
class ConversationPath:
    """The branch a conversation shows: its questions from the root to the current leaf.

    ``questions``: message ids, oldest first, a fork's inherited ones (of its source)
    first. ``siblings``: for a question of this conversation that has other takes (the
    same parent), every take's id in order, itself included. ``leaf``: the last of
    ``questions`` (None for an empty conversation).
    """

    questions: list[int]
    siblings: dict[int, list[int]] = field(default_factory=dict)

    @property
    def leaf(self) -> int | None:
        """Return the newest question of the path (None when it has none)."""
        return self.questions[-1] if self.questions else None


def conversation_path(*, conversation: Conversation) -> ConversationPath:
    """Return the branch ``conversation`` shows (:class:`ConversationPath`).

    One query for its questions' tree, and one per conversation it was forked from.
    """
    tree = question_tree(conversation.pk)
    own = set(tree)
    questions = ancestors(path_leaf(conversation, tree), tree)
    children = children_of({q: p for q, p in tree.items() if q in own})
    siblings = {}
    for question in questions:
        if question in own:
            takes = children[tree[question]]
            if len(takes) > 1:
                siblings[question] = takes
    return ConversationPath(questions=questions, siblings=siblings)


@dataclass(frozen=True)
class BranchChoice:
    """What a branch run uses: ``model_key`` ("" : its conversation's), ``strategy``
    ("" : its conversation's), and the new question's ``content`` for an edit."""

    model_key: str = ""
    strategy: str = ""
    content: str = ""


def run_branch(
    *,
    conversation_id: int,
    run_id: int,
    kind: BranchKind,
    choice: BranchChoice,
    started_at: datetime,
    runs_per_minute: int | None = None,
    model_of: Callable[[str], tuple[str, str, str]],
    agent_of: Callable[[str], str] | None = None,
) -> AgentRun:
    """Store another take of run ``run_id``'s question and a new running run for it.

    The new question is a sibling of the old one (same parent; same content but for an
    ``edit``) and becomes the conversation's ``current_message``; the run records
    ``branched_from`` and ``branch_kind``, and ``choice``'s model key and strategy when
    they differ from the conversation's (which stay as they are: docs/branches.md). The
    native options are the conversation's for native tool calling, none for a text
    strategy. ``model_of`` and ``agent_of`` are as for :func:`chat.store.run_start`.

    Raises :class:`BranchRefused` for a run that is not this conversation's (or is a
    fork's inherited one) or (``retry``) one that succeeded; and, as
    :func:`chat.store.run_start` does, ``ConversationGone``, ``RunWaiting`` /
    ``RunAlreadyGoing`` and ``RateLimited``. Nothing is stored then.
    """
    from chat.store.runs import ConversationGone, RunAlreadyGoing, RunWaiting

    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.hidden_at is not None:
            raise ConversationGone(conversation_id)
        runs_interrupt_stale(conversation_id=conversation_id, now=started_at)
        old = AgentRun.objects.select_related("user_message").filter(pk=run_id).first()
        if old is None or old.conversation_id != conversation_id:
            shown = ancestors(path_leaf(conversation), question_tree(conversation_id))
            inherited = old is not None and old.user_message_id in shown
            raise BranchRefused(INHERITED if inherited else NOT_A_RUN)
        status = conversation.runs.filter(status__in=GOING).values_list("status", flat=True)
        going = status.first()
        if going == RunStatus.WAITING:
            raise RunWaiting(conversation_id)
        if going is not None:
            raise RunAlreadyGoing(conversation_id)
        if kind == BranchKind.RETRY and old.status not in RETRYABLE:
            raise BranchRefused(NOT_RETRYABLE)
        if runs_per_minute is not None:
            check_rate(conversation, runs_per_minute, started_at)
        message = Message.objects.create(
            conversation=conversation, role=Message.Role.USER,
            content=choice.content or old.user_message.content,
            parent_id=old.user_message.parent_id,
        )  # fmt: skip
        if agent_of is not None and not conversation.agent_key:
            conversation.agent_key = agent_of(conversation.agent_key)
        conversation.current_message = message
        conversation.save(update_fields=["current_message", "agent_key", "updated_at"])
        model_key = choice.model_key if choice.model_key != conversation.model_key else ""
        strategy = choice.strategy or conversation.strategy
        tool_choice, parallel = _native_options(conversation, strategy)
        provider, model_name, endpoint = model_of(model_key or conversation.model_key)
        return AgentRun.objects.create(
            conversation=conversation, user_message=message, agent_key=conversation.agent_key,
            strategy=strategy, tool_choice=tool_choice, parallel_tool_calls=parallel,
            provider=provider, model_name=model_name, endpoint=endpoint,
            started_at=started_at, heartbeat_at=started_at,
            branched_from=old, branch_kind=kind, model_key=model_key,
        )  # fmt: skip


def _native_options(conversation: Conversation, strategy: str) -> tuple[str, bool | None]:
    """Return the ``tool_choice`` and parallel calls a run of ``strategy`` records: the
    conversation's for its own native strategy, the defaults for native calling picked
    by a regenerate, none for a text strategy."""
    if strategy != Strategy.TOOL_CALLING:
        return "", None
    if conversation.uses_native_tool_calls:
        return conversation.tool_choice, conversation.parallel_tool_calls
    return TOOL_CHOICE_AUTO, True


def branch_switch(*, owner: Owner, conversation_id: int, question_id: int) -> Conversation | None:
    """Show the branch of question ``question_id``: set the conversation's
    ``current_message`` to the newest leaf under it; return the conversation, or None if
    it is not ``owner``'s.

    Raises :class:`BranchRefused` for a question that is not one of this conversation's,
    while a run of it is going or waiting (its live fragments belong to the branch
    shown), and while messages wait in its queue (they follow the branch shown).
    """
    with transaction.atomic():
        conversation = conversation_get(owner=owner, conversation_id=conversation_id)
        if conversation is None:
            return None
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        tree = question_tree(conversation.pk)
        if question_id not in tree:
            raise BranchRefused(NOT_A_QUESTION)
        if conversation.runs.filter(status__in=GOING).exists():
            raise BranchRefused(SWITCH_WHILE_GOING)
        if QueuedMessage.objects.filter(conversation=conversation).exists():
            raise BranchRefused(SWITCH_WHILE_QUEUED)  # they follow the branch shown
        conversation.current_message_id = newest_leaf(question_id, tree)
        Conversation.objects.filter(pk=conversation.pk).update(
            current_message_id=conversation.current_message_id
        )
        return conversation


# The mark first: the list cuts a long title at its end (about 11 Chinese characters on a
# phone), where "(fork)" used to be, so a fork and its source looked the same there.
FORK_TITLE = "Fork: {title}"


def conversation_fork(*, owner: Owner, conversation_id: int, question_id: int) -> Conversation:
    """Start a new conversation that continues after question ``question_id`` of
    conversation ``conversation_id``; return it.

    Same owner, agent, model, strategy and native options; ``forked_from`` is the
    question, so its page shows the source's path up to that exchange (read only) and
    its history includes it. Raises :class:`BranchRefused` unless the conversation is
    ``owner``'s and the question is on a branch of it (a fork's inherited question too),
    and while the question's run is going or waiting.
    """
    conversation = conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise BranchRefused(NOT_A_QUESTION)
    tree = question_tree(conversation.pk)
    own = set(tree)  # before the walk: it adds the source's whole tree, every branch of it
    leaf = path_leaf(conversation, tree)
    on_path = set(ancestors(leaf, tree))
    if question_id not in own and question_id not in on_path:
        raise BranchRefused(NOT_A_QUESTION)
    if AgentRun.objects.filter(user_message_id=question_id, status__in=GOING).exists():
        raise BranchRefused(FORK_WHILE_GOING)  # the fork would show it half done, for good
    title = FORK_TITLE.format(title=conversation.title or f"Conversation {conversation.pk}")
    return Conversation.objects.create(
        owner_id=owner.user_id, guest_key=owner.guest_key, title=title[:200],
        strategy=conversation.strategy, tool_choice=conversation.tool_choice,
        parallel_tool_calls=conversation.parallel_tool_calls,
        model_key=conversation.model_key, agent_key=conversation.agent_key,
        forked_from_id=question_id,
    )  # fmt: skip
