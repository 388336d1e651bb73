"""The queue's steps, shared by the socket and the run owner (each sync: one ORM call).

A message sent while its conversation's run goes is queued (:mod:`chat.store.queue`);
the run owner sends the first when the run ends (:meth:`chat.owner.RunOwner.send_next`).
Each step returns the fragments every tab of the conversation needs, rendered from the
rows in the same call, so the live page shows what a reload does.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.events import utcnow
from chat import fragments, store
from chat.runs import create_run
from chat.store.queue import Start

HELD = (
    "Your queued message is waiting: you have started {limit} runs in the last minute, the "
    "most allowed. It will be sent in {seconds} s."
)


def start_for(conversation_id: int) -> Start:
    """Return how a message of the conversation starts its run: as a socket's does, with
    the owner's rate limit (:func:`chat.runs.create_run`)."""
    return lambda text: create_run(conversation_id=conversation_id, content=text,
                                   rate_limited=True)  # fmt: skip


@dataclass(frozen=True)
class Taken:
    """A queued message sent: its run to start, and what every tab shows (the message and
    its run, the queue without it)."""

    conversation_id: int
    run_id: int
    html: str


def take_next(*, conversation_id: int | None = None, run_id: int | None = None) -> Taken | None:
    """Send the first queued message of the conversation (or of run ``run_id``'s) if no
    run of it is going; return it, or None.

    Raises :class:`chat.store.RateLimited`: the message stays first in the queue.
    """
    if conversation_id is None:
        assert run_id is not None
        conversation_id = store.run_conversation_id(run_id=run_id)
        if conversation_id is None:
            return None
    run = store.queue_take(conversation_id=conversation_id, start=start_for(conversation_id))
    if run is None:
        return None
    html = fragments.run_started(run) + queue_fragment(conversation_id)
    return Taken(conversation_id, run.pk, html)


def queue_fragment(conversation_id: int) -> str:
    """Return the conversation's queue as every tab shows it (``#queued-messages``)."""
    return fragments.queue_replaced(store.queue_list(conversation_id=conversation_id))


def remove(*, conversation_id: int, queued_id: int) -> str:
    """Remove queued message ``queued_id``; return the queue without it.

    Raises :class:`chat.store.NotQueued` if it is not in this conversation's queue.
    """
    store.queue_remove(conversation_id=conversation_id, queued_id=queued_id)
    return queue_fragment(conversation_id)


def steer(*, conversation_id: int, queued_id: int) -> str:
    """Put queued message ``queued_id`` first; return the queue in its new order.

    Raises :class:`chat.store.NotQueued` if it is not in this conversation's queue.
    """
    store.queue_steer(conversation_id=conversation_id, queued_id=queued_id, at=utcnow())
    return queue_fragment(conversation_id)
