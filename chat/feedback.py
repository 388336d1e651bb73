"""Feedback on answers on the Django side: one change checked and stored, rendered for
every tab of the conversation.

The page's thumbs and comment box send ``{"type": "feedback", ...}`` frames
(:class:`chat.frames.FeedbackFrame`); :func:`give` checks one with
:class:`chat.forms.FeedbackForm`, stores it (:func:`chat.store.feedback_give`, or
:func:`chat.store.feedback_remove` for the pressed thumb pressed again) and renders the
answer's feedback as it now stands, which the consumer sends to every socket of the
conversation: the last change wins in every tab.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.events import utcnow
from chat import fragments, store
from chat.forms import RATING_NONE, FeedbackForm


def give(*, run_id: int, data: Mapping[str, Any], conversation_id: int, user: Any) -> str:
    """Check and store a change to the feedback on run ``run_id``'s answer (sync); return
    the answer's feedback fragment for every tab.

    ``data`` is :class:`chat.forms.FeedbackForm`'s (``rating`` and/or ``comment``; a
    field left out stays as stored). The socket's user is the conversation's owner (only
    the owner's sockets join it); a guest's feedback is stored as ``(guest)``. Raises
    :class:`chat.store.FeedbackRefused` for what the form or the store refuses, and
    :class:`chat.store.ConversationGone` for a conversation its owner deleted; nothing is
    saved then.
    """
    form = FeedbackForm(data)
    if not form.is_valid():
        raise store.FeedbackRefused(form.refusal())
    rating, comment = form.cleaned_data["rating"], form.cleaned_data["comment"]
    if rating == RATING_NONE:
        run = store.feedback_remove(conversation_id=conversation_id, run_id=run_id)
    else:
        run = store.feedback_give(
            conversation_id=conversation_id, run_id=run_id, by=user, at=utcnow(),
            rating=rating, comment=comment,
        )  # fmt: skip
    return fragments.feedback_replaced(run)
