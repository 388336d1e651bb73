"""The run timeline's template tag: ``{% run_timeline run steps as timeline %}``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template
from django.utils import timezone

from chat.timeline import Timeline, timeline_of

register = template.Library()


@register.simple_tag
def run_timeline(run: Any, steps: Iterable[Any]) -> Timeline:
    """Return the timeline of ``run`` from ``steps`` as of now (:func:`chat.timeline.timeline_of`).

    ``steps`` should be loaded already (a prefetched ``run.steps.all``): the tag reads no
    row itself.
    """
    return timeline_of(run, steps, now=timezone.now())
