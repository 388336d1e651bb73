"""Queued messages: sent while a run goes, kept in the database until the run ends.

A message that comes while its conversation has a run going (running, or waiting for a
decision on a tool call) waits as a :class:`chat.models.QueuedMessage`; the run owner
takes the first when the run ends (:func:`queue_take`), with one conditional DELETE
under the conversation's lock, so two processes never send it twice. Every message
carries the sending page's ``client_id``: a copy sent again (a page that reconnected)
is recognised here, whether its first copy was queued or sent, and stored once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F

from chat.models import AgentRun, Conversation, Message, QueuedMessage, RunStatus
from chat.store.runs import ConversationGone, RunAlreadyGoing

# The latest "send now" first, then in the order they came.
QUEUE_ORDER = (F("steered_at").desc(nulls_last=True), "created_at", "id")
GOING = (RunStatus.RUNNING, RunStatus.WAITING)

QUEUE_FULL = (
    "{cap} messages are waiting to be sent already, the most a chat may queue. Remove one, "
    "or wait for the agent to finish."
)
NOT_QUEUED = "That message is no longer waiting: it was sent or removed already."

Start = Callable[[str], AgentRun]
"""Store a user message of the given text and its running run (``chat.runs.create_run``);
raises like :func:`chat.store.run_start`."""


class QueueFull(Exception):
    """The conversation holds ``cap`` queued messages already; nothing is stored."""

    def __init__(self, cap: int) -> None:
        super().__init__(QUEUE_FULL.format(cap=cap))
        self.cap = cap


class NotQueued(Exception):
    """The queued message is not (or no longer) in this conversation's queue."""

    def __init__(self) -> None:
        super().__init__(NOT_QUEUED)


@dataclass(frozen=True)
class Sent:
    """What :func:`message_send` did: started ``run``; or ``queued`` the message
    (``idle``: no run is going, the queue's first message is held); or nothing, the
    frame being a ``duplicate`` of one stored already."""

    run: AgentRun | None = None
    queued: bool = False
    idle: bool = False
    duplicate: bool = False


def _seen(conversation_id: int, client_id: str) -> bool:
    """Return whether a message of the conversation was stored with ``client_id``."""
    if not client_id:
        return False
    return (
        Message.objects.filter(conversation_id=conversation_id, client_id=client_id).exists()
        or QueuedMessage.objects.filter(
            conversation_id=conversation_id, client_id=client_id
        ).exists()
    )


def _lock(conversation_id: int) -> Conversation:
    """Return the conversation, locked for the transaction (every message of a
    conversation is stored under this lock); raise :class:`ConversationGone` if deleted
    (hidden, or removed outright: a chat with no message, while a tab of it still sends)."""
    conversation = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
    if conversation is None or conversation.hidden_at is not None:
        raise ConversationGone(conversation_id)
    return conversation


def _mark_sent(run: AgentRun, client_id: str) -> None:
    """Record on the run's user message the client id it was sent with."""
    if client_id:
        Message.objects.filter(pk=run.user_message_id).update(client_id=client_id)
        run.user_message.client_id = client_id


def message_send(
    *, conversation_id: int, content: str, client_id: str, at: datetime, cap: int, start: Start
) -> Sent:
    """Start a run for the message, or queue it behind the run going; return what was done.

    With nothing queued, ``start(content)`` stores the message and its run; if a run is
    going (running or waiting for a decision) the message is queued instead, and it is
    queued too behind messages waiting already (their order is kept). A ``client_id``
    already stored in the conversation is a copy: nothing is stored. Raises
    :class:`QueueFull` at ``cap`` queued messages (with ``cap`` 0, what ``start``
    raises: :class:`chat.store.RunAlreadyGoing`), and what ``start`` raises otherwise
    (:class:`chat.store.RateLimited`, :class:`chat.store.ConversationGone`).
    """
    with transaction.atomic():
        _lock(conversation_id)
        if _seen(conversation_id, client_id):
            return Sent(duplicate=True)
        queue = QueuedMessage.objects.filter(conversation_id=conversation_id)
        waiting = queue.count()
        if not waiting:
            try:
                run = start(content)
            except RunAlreadyGoing:
                if cap == 0:
                    raise
            else:
                _mark_sent(run, client_id)
                return Sent(run=run)
        if waiting >= cap:
            raise QueueFull(cap)
        QueuedMessage.objects.create(
            conversation_id=conversation_id, content=content, created_at=at, client_id=client_id
        )
        going = AgentRun.objects.filter(conversation_id=conversation_id, status__in=GOING)
        return Sent(queued=True, idle=not going.exists())


def queue_take(*, conversation_id: int, start: Start) -> AgentRun | None:
    """Send the conversation's first queued message if no run of it is going: return the
    run ``start`` stored for it, or None (nothing queued, a run going, or another
    process took it).

    One transaction under the conversation's lock; the message leaves the queue by a
    conditional DELETE, so a second taker finds nothing, and one removed meanwhile
    leaves the next to be sent. What ``start`` raises
    (:class:`chat.store.RateLimited`) rolls it all back: the message stays first. A
    deleted conversation's queue is emptied (nothing of it can be sent any more).
    """
    with transaction.atomic():
        try:
            _lock(conversation_id)
        except ConversationGone:
            QueuedMessage.objects.filter(conversation_id=conversation_id).delete()
            return None
        waiting = queue_list(conversation_id=conversation_id)
        if not waiting:
            return None
        if AgentRun.objects.filter(conversation_id=conversation_id, status__in=GOING).exists():
            return None
        for first in waiting:  # one removed since the read (Remove takes no lock) is passed
            deleted, _ = QueuedMessage.objects.filter(pk=first.pk).delete()
            if deleted:
                run = start(first.content)
                _mark_sent(run, first.client_id)
                return run
        return None


def queue_list(*, conversation_id: int) -> list[QueuedMessage]:
    """Return the conversation's queued messages, in the order they will be sent."""
    queue = QueuedMessage.objects.filter(conversation_id=conversation_id)
    return list(queue.order_by(*QUEUE_ORDER))


def queue_remove(*, conversation_id: int, queued_id: int) -> None:
    """Delete queued message ``queued_id`` of the conversation (it is not evidence yet).

    Raises :class:`NotQueued` if it is another conversation's, or was sent or removed.
    """
    deleted, _ = QueuedMessage.objects.filter(
        pk=queued_id, conversation_id=conversation_id
    ).delete()
    if not deleted:
        raise NotQueued


def queue_steer(*, conversation_id: int, queued_id: int, at: datetime) -> None:
    """Put queued message ``queued_id`` first in the conversation's queue ("send now").

    Raises :class:`NotQueued` if it is another conversation's, or was sent or removed.
    """
    moved = QueuedMessage.objects.filter(pk=queued_id, conversation_id=conversation_id).update(
        steered_at=at
    )
    if not moved:
        raise NotQueued


def queues_ready() -> list[int]:
    """Return the conversations with queued messages and no run going (the sweep sends
    their first: a run's end whose owner died, a message held by the rate limit)."""
    ready = QueuedMessage.objects.exclude(conversation__runs__status__in=GOING)
    return sorted(set(ready.values_list("conversation_id", flat=True)))


def run_conversation_id(*, run_id: int) -> int | None:
    """Return the conversation of run ``run_id`` (None if it has none)."""
    return AgentRun.objects.filter(pk=run_id).values_list("conversation_id", flat=True).first()
