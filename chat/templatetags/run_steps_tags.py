"""The steps a run shows on the chat page: ``{% run_steps_shown run steps as shown %}``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django import template
from django.conf import settings

register = template.Library()


@dataclass(frozen=True)
class StepsShown:
    """The steps a run's card list renders: ``steps`` (in order), and the ``hidden`` ones
    before them (a count) with ``before``, the first shown step's ordinal, for the
    "Show the N earlier steps" control (``chat.views.run_steps``)."""

    steps: list[Any]
    hidden: int
    before: int | None


@register.simple_tag(takes_context=True)
def run_steps_shown(context: template.Context, run: Any, steps: Iterable[Any]) -> StepsShown:
    """Return the steps of ``run`` to render: all of a running run (its live steps are
    appended to them) and of the staff's read-only copy (``read_only``: no control there
    loads more), the last ``CHAT_RUN_STEPS_SHOWN`` of an ended one.

    A long run rendered whole is heavy, and its answer and last turns are what a reader
    comes back for. ``steps`` are loaded already (a prefetched
    ``run.steps.all``): the tag reads no row itself.
    """
    steps = list(steps)
    limit = settings.CHAT_RUN_STEPS_SHOWN
    if run.is_running or context.get("read_only") or len(steps) <= limit:
        return StepsShown(steps=steps, hidden=0, before=None)
    shown = steps[-limit:]
    return StepsShown(steps=shown, hidden=len(steps) - limit, before=shown[0].ordinal)
