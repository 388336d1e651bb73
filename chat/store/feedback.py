"""A conversation owner's thumbs up or down on an answer, with an optional comment.

One :class:`chat.models.Feedback` row per run, changed in place and saved through the ORM
(``Model.save``, ``Model.delete``) so ``post_save`` and ``post_delete`` reach whoever
listens (live telemetry sends the GenAI semantic conventions' ``gen_ai.evaluation.result``
event from them). Writes lock the run's row, so two tabs changing it at once are applied
one after the other: the last change wins, and both tabs are sent the result.

Which runs take feedback (:func:`feedback_offered`): a run that has ended (not running,
not waiting for a decision) with an answer (its ``output``, the assistant message) or a
partial reply (a model turn that wrote text before the run failed or was stopped). A run
that ended with nothing written has nothing to judge; its status already says why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef

from chat.models import AgentRun, AgentStep, Feedback, FeedbackRating, RunStatus, StepKind
from chat.store.rows import fitted
from chat.store.runs import ConversationGone

NOT_A_RUN = "That is not an answer in this conversation. No feedback was saved."
STILL_GOING = (
    "The agent is still working on that answer: rate it once it has ended. No feedback was saved."
)
NOTHING_TO_RATE = "That run ended without writing an answer to rate. No feedback was saved."
RATE_FIRST = (
    "Choose thumbs up or thumbs down before adding a comment. Your comment was not saved yet."
)
GUEST_NAME = "(guest)"
NOT_ENDED = (RunStatus.RUNNING, RunStatus.WAITING)


class FeedbackRefused(Exception):
    """Feedback that is not saved; the message says why, for the person."""


def feedback_of(run: AgentRun) -> Feedback | None:
    """Return the run's feedback, or None when none was given.

    No query when the run was loaded with it (:func:`chat.store.rows.runs_loaded`,
    ``select_related("feedback")``), which caches a missing row as None too.
    """
    try:
        return run.feedback
    except Feedback.DoesNotExist:
        return None


def feedback_get(*, feedback_id: int) -> Feedback | None:
    """Return feedback row ``feedback_id``, or None when it was taken back since."""
    return Feedback.objects.filter(pk=feedback_id).first()


def feedback_offered(run: AgentRun) -> bool:
    """Return True when ``run`` takes feedback: ended, with an answer or a partial reply.

    Reads the run's loaded steps (``run.model_turns``), no query when they were
    prefetched; :func:`feedback_give` checks the same rule with one query.
    """
    if run.status in NOT_ENDED:
        return False
    return bool(run.output) or any(turn.text for turn in run.model_turns)


def _offered_run(*, conversation_id: int, run_id: int) -> AgentRun:
    """Return the run, its row locked until the transaction ends; raise
    :class:`FeedbackRefused` unless it takes feedback in this conversation, and
    :class:`chat.store.ConversationGone` if its owner deleted the conversation."""
    turns = AgentStep.objects.filter(run=OuterRef("pk"), kind=StepKind.MODEL_TURN)
    replied = turns.exclude(text="")
    run = (
        AgentRun.objects.select_for_update(of=("self",))
        .select_related("conversation")
        .annotate(replied=Exists(replied))
        .filter(pk=run_id, conversation_id=conversation_id)
        .first()
    )
    if run is None:
        raise FeedbackRefused(NOT_A_RUN)
    if run.conversation.hidden_at is not None:
        raise ConversationGone(conversation_id)
    if run.status in NOT_ENDED:
        raise FeedbackRefused(STILL_GOING)
    if not (run.output or run.replied):
        raise FeedbackRefused(NOTHING_TO_RATE)
    return run


def feedback_give(
    *,
    conversation_id: int,
    run_id: int,
    by: Any,
    at: datetime,
    rating: FeedbackRating | str | None = None,
    comment: str | None = None,
) -> AgentRun:
    """Store the owner's rating and/or comment on run ``run_id``; return the run with its
    feedback loaded (``run.feedback``), as :func:`chat.fragments.feedback_replaced` reads it.

    ``rating`` is "up" or "down" (None keeps the stored one); ``comment`` the whole comment,
    already checked (:class:`chat.forms.FeedbackForm`; "" clears it, None keeps it). ``by``
    is the socket's user: ``given_by`` is a logged-in user or None for a guest, and
    ``given_by_name`` their username or ``(guest)``. ``created_at`` is set on the first
    save, ``updated_at`` on every one, both ``at`` (UTC).

    Who may give it is the caller's to check (only the owner's sockets join a conversation).
    Raises :class:`FeedbackRefused` for a run of another conversation, one still going,
    one with nothing to rate (:func:`feedback_offered`), and a comment on a run not rated
    yet; :class:`chat.store.ConversationGone` for a conversation its owner deleted.
    Nothing is saved then.
    """
    user = by if getattr(by, "is_authenticated", False) else None
    name = user.get_username() if user is not None else GUEST_NAME
    with transaction.atomic():
        run = _offered_run(conversation_id=conversation_id, run_id=run_id)
        feedback = Feedback.objects.filter(run=run).first()
        if feedback is None:
            if not rating:
                raise FeedbackRefused(RATE_FIRST)
            feedback = Feedback(run=run, created_at=at)
        if rating:
            feedback.rating = FeedbackRating(rating)
        if comment is not None:
            feedback.comment = fitted(Feedback, comment=comment)["comment"]
        feedback.given_by = user
        feedback.given_by_name = fitted(Feedback, given_by_name=name)["given_by_name"]
        feedback.updated_at = at
        feedback.save()  # post_save: telemetry's evaluation event
    run.feedback = feedback
    return run


def feedback_remove(*, conversation_id: int, run_id: int) -> AgentRun:
    """Delete run ``run_id``'s feedback, rating and comment (none given: nothing changes);
    return the run known to have none.

    Raises as :func:`feedback_give` does for a run that takes no feedback here.
    """
    with transaction.atomic():
        run = _offered_run(conversation_id=conversation_id, run_id=run_id)
        feedback = Feedback.objects.filter(run=run).first()
        if feedback is not None:
            feedback.delete()  # post_delete: the telemetry listener may say it was withdrawn
    AgentRun.feedback.related.set_cached_value(run, None)
    return run
