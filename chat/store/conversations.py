"""Conversations and their owners: who may see a chat, its settings, its history."""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.backends.base import SessionBase
from django.db import transaction
from django.db.models import Case, Expression, F, Q, QuerySet, TextField, When
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Length, Substr
from django.utils import timezone

from agents.history import CallRecord, Exchange, TurnRecord
from chat.models import (
    AgentStep,
    Conversation,
    Message,
    RunStatus,
    StepKind,
    StepStatus,
    TitleSource,
)

# Re-exported: store.runs and store.limits take them from here.
from chat.store.titles import TITLE_LENGTH as TITLE_LENGTH
from chat.store.titles import title_from as title_from
from chat.store.tree import exchange_path

GUEST_KEY = "chat_guest_key"


@dataclass(frozen=True)
class Owner:
    """Who is asking: a logged-in user, or an anonymous browser's guest key."""

    user_id: int | None
    guest_key: str

    @classmethod
    def of(
        cls,
        user: AbstractBaseUser | AnonymousUser | None,
        session: SessionBase | None,
        *,
        create: bool = False,
    ) -> Owner:
        """Return the owner for a request's or a websocket scope's user and session.

        An anonymous visitor is identified by a random guest key in the session data;
        ``create=True`` gives a visitor without one a new key (the session is then saved
        by the session middleware). Reads the session, so call it from sync code.
        """
        if user is not None and user.is_authenticated:
            return cls(user_id=user.pk, guest_key="")
        if session is None:
            return cls(user_id=None, guest_key="")
        key = session.get(GUEST_KEY, "")
        if not key and create:
            key = session[GUEST_KEY] = secrets.token_urlsafe(24)
        return cls(user_id=None, guest_key=key)


def conversations_for_owner(*, owner: Owner) -> QuerySet[Conversation]:
    """Return the owner's conversations, newest first (none for a session-less visitor).

    A conversation the owner deleted (hidden, its runs kept for audit) is not theirs to
    see any more: it is left out here, so the page, the list and the socket all 404.
    """
    visible = Conversation.objects.filter(hidden_at__isnull=True)
    if owner.user_id is not None:
        return visible.filter(owner_id=owner.user_id)
    if not owner.guest_key:
        return Conversation.objects.none()
    return visible.filter(owner__isnull=True, guest_key=owner.guest_key)


def conversation_get(*, owner: Owner, conversation_id: int) -> Conversation | None:
    """Return the conversation if ``owner`` owns it, else None."""
    return conversations_for_owner(owner=owner).filter(pk=conversation_id).first()


def conversation_get_or_create_empty(
    *, owner: Owner, model_key: str = "default", strategy: str = ""
) -> Conversation:
    """Return the owner's newest conversation with no messages (a fork has the source's),
    moved to the top of the list, else a new one with ``model_key`` and ``strategy`` ("":
    ``AGENT_STRATEGY``).

    Any empty one, not only the newest: a chat written in or forked after the empty one
    was opened would otherwise make "New chat" (or ``/``) add another empty row.
    """
    empty = (
        conversations_for_owner(owner=owner)
        .filter(forked_from__isnull=True, messages__isnull=True)
        .first()
    )
    if empty is not None:
        empty.updated_at = timezone.now()
        Conversation.objects.filter(pk=empty.pk).update(updated_at=empty.updated_at)
        return empty
    return Conversation.objects.create(
        owner_id=owner.user_id, guest_key=owner.guest_key, model_key=model_key,
        strategy=strategy or settings.AGENT_STRATEGY,
    )  # fmt: skip


def conversations_adopt(*, guest_key: str, user_id: int) -> int:
    """Give a guest's conversations to the user who just logged in; return how many."""
    if not guest_key:
        return 0
    return Conversation.objects.filter(owner__isnull=True, guest_key=guest_key).update(
        owner_id=user_id, guest_key=""
    )


def conversation_exchanges(
    *, conversation_id: int, before_message_id: int, max_result_chars: int | None = None
) -> list[Exchange]:
    """Return the questions before the given message on its branch, with their runs.

    One :class:`agents.history.Exchange` per question on the path from the root to the
    message's parent (:func:`chat.store.tree.exchange_path`: never a sibling branch's, so
    a regenerated answer does not see the one it replaces; a fork's inherited questions
    first), oldest first: the run's strategy, status and answer, its model turns (text,
    reasoning, native tool calls from the stored AIMessage) and tool calls (arguments,
    status, result, log, observation), in step order. Three queries whatever the length
    of the conversation (its question tree, the path's messages with their runs, then
    every step of those runs; one more per conversation it was forked from), reading only
    the columns the history needs; a question with no run (none is stored that way, but
    data may be edited) has status "". With ``max_result_chars``, a tool result (stored
    up to ``AGENT_MAX_RESULT_CHARS``, a megabyte) is read only that far, its whole length
    in ``CallRecord.result_chars``: a call stored without its observation is shown no
    more than ``AGENT_MAX_OBSERVATION_CHARS`` of it.
    """
    path = exchange_path(message_id=before_message_id, conversation_id=conversation_id)
    rows = (
        Message.objects.filter(id__in=path)
        .values_list("id", "content", "triggered_run__id", "triggered_run__strategy",
                     "triggered_run__status", "triggered_run__output")
    )  # fmt: skip
    by_id = {row[0]: row[1:] for row in rows}
    steps = AgentStep.objects.filter(run__user_message_id__in=path)
    turns, calls = step_records(steps, max_result_chars=max_result_chars)
    exchanges = []
    for content, run_id, strategy, status, output in (by_id[q] for q in path if q in by_id):
        if run_id is None:
            exchanges.append(Exchange(question=content, status=""))
            continue
        run_turns = tuple(turns.get(run_id, ()))
        exchanges.append(Exchange(
            question=content, strategy=strategy, status=status, answer=output,
            turns=run_turns, calls=tuple(full_ids(calls.get(run_id, ()), run_turns)),
        ))  # fmt: skip
    return exchanges


def step_records(
    steps: QuerySet[AgentStep], *, max_result_chars: int | None = None
) -> tuple[dict[int, list[TurnRecord]], dict[int, list[CallRecord]]]:
    """Return the model turns and tool calls of ``steps`` as history records, by run id,
    in step order (one query, only the columns the history reads; see
    :func:`conversation_exchanges` for ``max_result_chars``). A call a person approved
    with other arguments has them (and the model's own) from its approval, joined in the
    same query, so its history says so whatever its stored observation holds."""
    rows = steps.order_by("run_id", "ordinal").values(
        "run_id", "kind", "iteration", "status", "text", "reasoning", "error_type", "tool_name",
        "tool_call_id", "arguments", "observation", calls=KeyTransform("tool_calls", "raw"),
        head=_result_head(max_result_chars), chars=Length("result"),
        asked=F("approval__arguments"), edited=F("approval__edited_arguments"),
    )  # fmt: skip
    turns: dict[int, list[TurnRecord]] = defaultdict(list)
    calls: dict[int, list[CallRecord]] = defaultdict(list)
    for step in rows:
        if step["kind"] == StepKind.MODEL_TURN:
            turns[step["run_id"]].append(TurnRecord(
                iteration=step["iteration"], text=step["text"], reasoning=step["reasoning"],
                tool_calls=tuple(_tool_calls(step["calls"])),
                finished=step["status"] == StepStatus.SUCCESS, answer=step["head"],
            ))  # fmt: skip
        else:
            calls[step["run_id"]].append(CallRecord(
                iteration=step["iteration"], tool_call_id=step["tool_call_id"],
                name=step["tool_name"], args=step["arguments"], status=step["status"],
                result=step["head"], error_type=step["error_type"], log=step["text"],
                result_chars=step["chars"] if step["chars"] > len(step["head"]) else 0,
                observation=step["observation"], edited_args=step["edited"],
                asked_args=step["asked"] if step["edited"] is not None else None,
            ))  # fmt: skip
    return turns, calls


def _result_head(max_chars: int | None) -> Expression:
    """Return a step's result as read: a tool call's cut to ``max_chars`` (if given)."""
    if not max_chars:
        return F("result")
    cut = Substr("result", 1, max_chars)
    return Case(When(kind=StepKind.TOOL_CALL, then=cut), default=F("result"),
                output_field=TextField())  # fmt: skip


def _tool_calls(raw_calls: object) -> list[dict[str, Any]]:
    """Return the well-formed ``ToolCall`` dicts of a stored AIMessage's ``tool_calls``."""
    if not isinstance(raw_calls, list):
        return []
    return [call for call in raw_calls
            if isinstance(call, dict) and call.get("id") and call.get("name")]  # fmt: skip


def full_ids(calls: Iterable[CallRecord], turns: Iterable[TurnRecord]) -> list[CallRecord]:
    """Return ``calls`` with each id the step column cut restored from its turn's call
    (stored in full in the turn's AIMessage)."""
    limit = AgentStep._meta.get_field("tool_call_id").max_length
    full = {(t.iteration, c["id"][:limit]): c["id"] for t in turns for c in t.tool_calls}
    return [
        replace(call, tool_call_id=full.get((call.iteration, call.tool_call_id), call.tool_call_id))
        for call in calls
    ]


def conversation_started(*, conversation_id: int) -> bool:
    """Return True once the conversation has a message, or is a fork (it continues
    another's): its strategy is then fixed."""
    started = Q(messages__isnull=False) | Q(forked_from__isnull=False)
    return Conversation.objects.filter(started, pk=conversation_id).exists()


class ConversationStarted(Exception):
    """The conversation has messages already; its strategy can no longer change."""


def conversation_configure(
    *,
    owner: Owner,
    conversation_id: int,
    strategy: str,
    tool_choice: str,
    parallel_tool_calls: bool,
    model_key: str | None = None,
    agent_key: str | None = None,
) -> Conversation | None:
    """Set how a conversation's runs ask for tools; return it, or None if not the owner's.

    Only a conversation with no messages yet can change, so every run of a conversation
    uses one strategy (compare strategies with a new chat each). ``model_key`` and
    ``agent_key`` (None: unchanged) pick one of the configured models and agents. Values
    are stored as given: the
    caller validates them (:class:`chat.forms.StrategyForm`).
    Raises :class:`ConversationStarted` once it has messages.
    """
    with transaction.atomic():
        conversation = conversation_get(owner=owner, conversation_id=conversation_id)
        if conversation is None:
            return None
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        if conversation_started(conversation_id=conversation.pk):
            raise ConversationStarted(conversation_id)
        conversation.strategy = strategy
        conversation.tool_choice = tool_choice
        conversation.parallel_tool_calls = parallel_tool_calls
        changed = ["strategy", "tool_choice", "parallel_tool_calls"]
        if model_key is not None:
            conversation.model_key = model_key
            changed.append("model_key")
        if agent_key is not None:
            conversation.agent_key = agent_key
            changed.append("agent_key")
        conversation.save(update_fields=changed)
        return conversation


def conversation_replace_model(
    *, owner: Owner, conversation_id: int, old_key: str, model_key: str
) -> Conversation | None:
    """Move a started conversation off a model that is no longer configured; return it.

    The only change a conversation with messages allows: its model ``old_key`` is gone
    from the configuration (the caller checks that), so it could not answer any more.
    Returns None if it is not the owner's, or the conversation unchanged if its model is
    no longer ``old_key`` (another tab switched it first) or a run is going (or waiting
    for a decision on a tool call).
    """
    with transaction.atomic():
        conversation = conversation_get(owner=owner, conversation_id=conversation_id)
        if conversation is None:
            return None
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        # A waiting run goes on with its conversation's model when it resumes.
        going = conversation.runs.filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
        if conversation.model_key != old_key or going.exists():
            return conversation
        conversation.model_key = model_key
        conversation.save(update_fields=["model_key", "updated_at"])
        return conversation


def clean_title(title: str) -> str:
    """Return a title as stored: one line, spaces collapsed (it may come back empty)."""
    return " ".join(title.split())


def conversation_rename(*, owner: Owner, conversation_id: int, title: str) -> Conversation | None:
    """Set the conversation's title; return it, or None if it is not ``owner``'s.

    The caller validates ``title`` (:class:`chat.forms.ConversationTitleForm`). The list's
    order is kept: ``updated_at`` is when it was last talked to, not renamed.
    """
    conversation = conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        return None
    conversation.title = clean_title(title)
    conversation.title_source = TitleSource.OWNER  # never replaced by a model's title
    Conversation.objects.filter(pk=conversation.pk).update(
        title=conversation.title, title_source=conversation.title_source
    )
    return conversation


def conversation_delete(*, owner: Owner, conversation_id: int, at: datetime) -> bool | None:
    """Delete the conversation from its owner's list; None if it is not ``owner``'s.

    Runs are evidence (only a superuser deletes them, and ``purge_runs`` by age), so a
    conversation with messages is hidden at ``at``: its owner can no longer open, list
    or search it, while its runs, steps and messages stay for audit until the retention
    purge deletes them (then the conversation goes with them,
    :func:`chat.store.limits.runs_delete`). One with no messages holds nothing to audit
    and is deleted. Returns True when it was hidden, False when it was deleted.
    """
    with transaction.atomic():
        conversation = conversation_get(owner=owner, conversation_id=conversation_id)
        if conversation is None:
            return None
        if not conversation_started(conversation_id=conversation.pk):
            conversation.delete()
            return False
        Conversation.objects.filter(pk=conversation.pk).update(hidden_at=at)
        return True
