"""Conversations and their owners: who may see a chat, its settings, its history."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.backends.base import SessionBase
from django.db import transaction
from django.db.models import QuerySet

from chat.models import Conversation, Message, RunStatus

TITLE_LENGTH = 60
GUEST_KEY = "chat_guest_key"


def title_from(content: str) -> str:
    """Return a conversation title from a question: one line, at most TITLE_LENGTH."""
    title = " ".join(content.split())
    if len(title) > TITLE_LENGTH:
        title = title[: TITLE_LENGTH - 1] + "…"
    return title


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
    """Return the owner's conversations, newest first (none for a session-less visitor)."""
    if owner.user_id is not None:
        return Conversation.objects.filter(owner_id=owner.user_id)
    if not owner.guest_key:
        return Conversation.objects.none()
    return Conversation.objects.filter(owner__isnull=True, guest_key=owner.guest_key)


def conversation_get(*, owner: Owner, conversation_id: int) -> Conversation | None:
    """Return the conversation if ``owner`` owns it, else None."""
    return conversations_for_owner(owner=owner).filter(pk=conversation_id).first()


def conversation_get_or_create_empty(*, owner: Owner) -> Conversation:
    """Return the owner's newest conversation if it has no messages yet, else a new one."""
    latest = conversations_for_owner(owner=owner).first()
    if latest is not None and not latest.messages.exists():
        return latest
    return Conversation.objects.create(
        owner_id=owner.user_id, guest_key=owner.guest_key, strategy=settings.AGENT_STRATEGY
    )


def conversations_adopt(*, guest_key: str, user_id: int) -> int:
    """Give a guest's conversations to the user who just logged in; return how many."""
    if not guest_key:
        return 0
    return Conversation.objects.filter(owner__isnull=True, guest_key=guest_key).update(
        owner_id=user_id, guest_key=""
    )


def conversation_history(*, conversation_id: int, before_message_id: int) -> list[tuple[str, str]]:
    """Return ``(role, content)`` of the conversation's messages before the given one."""
    return list(
        Message.objects.filter(conversation_id=conversation_id, id__lt=before_message_id)
        .order_by("created_at", "id")
        .values_list("role", "content")
    )


def conversation_started(*, conversation_id: int) -> bool:
    """Return True once the conversation has a message (its strategy is then fixed)."""
    return Message.objects.filter(conversation_id=conversation_id).exists()


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
) -> Conversation | None:
    """Set how a conversation's runs ask for tools; return it, or None if not the owner's.

    Only a conversation with no messages yet can change, so every run of a conversation
    uses one strategy (compare strategies with a new chat each). ``model_key`` (None:
    unchanged) picks one of the configured models. Values are stored as given: the
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
        conversation.save(update_fields=changed)
        return conversation


def conversation_replace_model(
    *, owner: Owner, conversation_id: int, old_key: str, model_key: str
) -> Conversation | None:
    """Move a started conversation off a model that is no longer configured; return it.

    The only change a conversation with messages allows: its model ``old_key`` is gone
    from the configuration (the caller checks that), so it could not answer any more.
    Returns None if it is not the owner's, or the conversation unchanged if its model is
    no longer ``old_key`` (another tab switched it first) or a run is going.
    """
    with transaction.atomic():
        conversation = conversation_get(owner=owner, conversation_id=conversation_id)
        if conversation is None:
            return None
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        going = conversation.runs.filter(status=RunStatus.RUNNING).exists()
        if conversation.model_key != old_key or going:
            return conversation
        conversation.model_key = model_key
        conversation.save(update_fields=["model_key", "updated_at"])
        return conversation
