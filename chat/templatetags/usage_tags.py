"""Template tags of usage and cost (``{% load usage_tags %}``)."""

from __future__ import annotations

from collections.abc import Iterable

from django import template

from chat.pricing import ConversationUsage, RunUsage, summarise

register = template.Library()


@register.simple_tag
def summed_usage(
    usage: ConversationUsage | None, runs: Iterable[RunUsage] | None
) -> ConversationUsage:
    """Return ``usage`` when given (sent as a run ends), else the sum of the loaded ``runs``.

    The page passes the runs it renders anyway, so its header costs no query.
    """
    if isinstance(usage, ConversationUsage):
        return usage
    return summarise(runs or [])
