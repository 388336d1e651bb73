"""Filters and tags for the decisions on held tool calls, as the card and the admin show them."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from chat.display import arguments_json

register = template.Library()
register.filter("arguments_json", arguments_json)

SERVER_TIME = "D j M, H:i T"  # the title until the page's script gives the reader's own


def until_words(seconds: float) -> str:
    """Return how long until a moment, as a card says it: "in 4 min", "in 1 h 5 min",
    "in less than a minute", "now" (static/js/times.js says it the same way)."""
    if seconds <= 0:
        return "now"
    if seconds < 60:
        return "in less than a minute"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"in {minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"in {hours} h {minutes} min" if minutes else f"in {hours} h"


@register.simple_tag
def time_until(moment: datetime, now: datetime | None = None) -> SafeString:
    """Return a ``<time>`` that says how long until ``moment`` ("in 4 min"), its exact
    time in its title and ``datetime``; static/js/times.js keeps the words current and
    puts the reader's local time in the title."""
    now = now or timezone.now()
    exact = date_format(timezone.localtime(moment), SERVER_TIME)
    return format_html(
        '<time datetime="{}" data-until title="{}">{}</time>',
        moment.isoformat(), exact, until_words((moment - now).total_seconds()),
    )  # fmt: skip


@register.simple_tag
def local_time(moment: datetime) -> SafeString:
    """Return a ``<time>`` of a past moment, in the server's time zone until
    static/js/times.js writes it in the reader's ("22:41:03", with the date when it is
    not today)."""
    shown = date_format(timezone.localtime(moment), "Y-m-d H:i:s T")
    return format_html(
        '<time datetime="{}" data-local title="{}">{}</time>', moment.isoformat(), shown, shown
    )
