"""An answer's feedback in templates: ``run|feedback_of`` and ``run|offers_feedback``."""

from __future__ import annotations

from django import template

from chat.models import AgentRun, Feedback
from chat.store.feedback import feedback_of as stored_feedback
from chat.store.feedback import feedback_offered

register = template.Library()


@register.filter
def feedback_of(run: AgentRun) -> Feedback | None:
    """Return the run's feedback, or None (no query when loaded with the run)."""
    return stored_feedback(run)


@register.filter
def offers_feedback(run: AgentRun) -> bool:
    """Return True when the run's answer takes thumbs and a comment
    (:func:`chat.store.feedback_offered`: ended, with an answer or a partial reply)."""
    return feedback_offered(run)
