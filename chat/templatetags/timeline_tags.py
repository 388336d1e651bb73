"""The run timeline's template tags: ``{% run_timeline run steps as timeline %}`` and
``{% timeline_body timeline %}`` (the bars)."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from django import template
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from chat.templatetags.chat_tags import duration, reveal_hidden
from chat.timeline import Row, Timeline, timeline_of

register = template.Library()

# A decision as the wait's note says it (ApprovalOutcome values; fixed text).
DECISION_WORDS = {"approved": "approved", "denied": "denied", "expired": "expired: nobody decided",
                  "cancelled": "the run was stopped"}  # fmt: skip


@register.simple_tag
def run_timeline(run: Any, steps: Iterable[Any]) -> Timeline:
    """Return the timeline of ``run`` from ``steps`` as of now (:func:`chat.timeline.timeline_of`).

    ``steps`` should be loaded already (a prefetched ``run.steps.all``): the tag reads no
    row itself.
    """
    return timeline_of(run, steps, now=timezone.now())


# A running model turn's flag until its time to first token is measured (at its end):
# whether the model has begun to answer, never a made-up "0 ms". static/js/timeline.js
# turns the first into the second when the turn's text or reasoning arrives.
WAITING_FOR_FIRST_TOKEN = "waiting for the first token"
STREAMING = "streaming"


def _flag(row: Row) -> str:
    if row.running and row.is_model_turn:
        return STREAMING if row.streaming else WAITING_FOR_FIRST_TOKEN
    if row.running:
        return "running"
    if row.format_error:
        return "format error"
    if row.unfinished:
        return "did not finish"
    return "error" if row.status == "error" else ""


def _row_html(row: Row) -> str:
    """Return one bar's ``<li>`` (see :func:`timeline_body`)."""
    classes = f"tl-row kind-{escape(row.kind)} status-{escape(row.status)}"
    if row.running:
        classes += " running"
    if row.format_error:
        classes += " format-error"
    took, start, end = duration(row.duration_ms), duration(row.start_ms), duration(row.end_ms)
    title = escape(f"{row.name}: {took}, from {start} to {end}")
    flag = _flag(row)
    meta = [f'<span class="tl-duration" data-tl-duration>{took}</span>']
    if row.status == "pending":
        meta = []  # a held call that has not run has no time of its own: only its wait
    if flag == WAITING_FOR_FIRST_TOKEN:
        meta.append(f'<span class="tl-flag" data-tl-first-token-wait>{flag}</span>')
    elif flag:
        meta.append(f'<span class="tl-flag">{flag}</span>')
    if row.first_token_ms is not None:
        first = duration(row.first_token_ms)
        meta.append(f'<span class="tl-first-token">first token {first}</span>')
    decision = ""
    if row.wait_start_ms is not None:
        if row.waiting:
            classes += " waiting"
            said = "waiting for a decision"
        else:
            said = f"waited {duration(row.waited_ms)} for a decision"
            if row.decision in DECISION_WORDS:
                said += f" ({DECISION_WORDS[row.decision]})"
        meta.append(f'<span class="tl-decision-note" data-tl-waited>{said}</span>')
        title = escape(f"{row.name}: {said}; ran {took}, from {start} to {end}")
        decision = (
            f'<span class="tl-decision" style="{row.wait_style}"'
            f' data-start-ms="{int(row.wait_start_ms)}" data-end-ms="{int(row.wait_end_ms or 0)}">'
            "</span>\n"
        )
    meta.append(f'<span class="tl-sr">, from {start} to {end}</span>')
    wait = f'<span class="tl-wait" style="{row.first_token_style}"></span>'
    return (
        f'<li class="{classes}">\n'
        f'<a class="tl-link" href="#step-{int(row.step_id)}" data-step="{int(row.step_id)}"'
        f' title="{title}">\n'
        f'<span class="tl-label">\n<span class="tl-name">{reveal_hidden(row.name)}</span>\n'
        f'<span class="tl-meta">\n' + "\n".join(meta) + "\n</span>\n</span>\n"
        f'<span class="tl-track" aria-hidden="true">\n{decision}'
        f'<span class="tl-bar" style="{row.style}" data-start-ms="{int(row.start_ms)}"'
        f' data-end-ms="{int(row.end_ms)}">{wait if row.first_token_style else ""}</span>\n'
        "</span>\n</a>\n</li>"
    )


@register.simple_tag
def timeline_body(timeline: Timeline, oob: bool = False) -> SafeString:
    """Return a run's bars: the ``.tl-body`` element with its time axis and one link per
    step (its name, duration, flag and bar), replacing its element by id with ``oob``.

    Written in Python, not a template: the live page redraws it several times a run. The
    page, the live redraw (:func:`chat.fragments.timeline_replaced`) and the bars loaded
    on opening (``chat/_timeline_body.html``) all draw them here. Names are escaped with
    their hidden characters shown (``reveal_hidden``); the rest is numbers and fixed text.
    """
    attributes = f' id="run-{int(timeline.run_id)}-timeline-body"'
    attributes += f' data-span-ms="{int(timeline.span_ms)}"'
    if timeline.running:
        attributes += " data-running"
    if oob:
        attributes += ' hx-swap-oob="true"'
    if not timeline.rows:
        return mark_safe(f'<div class="tl-body"{attributes}>\n</div>')
    ticks = "\n".join(
        f'<span class="tl-tick" style="{tick.style}">{duration(tick.at_ms)}</span>'
        for tick in timeline.ticks
    )
    rows = "\n".join(_row_html(row) for row in timeline.rows)
    # Safe: every text from a row (the step's name) is escaped above; the rest is
    # numbers, CSS made of numbers and fixed text.
    return mark_safe(
        f'<div class="tl-body"{attributes}>\n'
        f'<div class="tl-axis" aria-hidden="true">\n<span></span>\n'
        f'<span class="tl-ticks">\n{ticks}\n</span>\n</div>\n'
        f'<ol class="tl-rows" aria-label="Steps on a time axis from the question">\n'
        f"{rows}\n</ol>\n</div>"
    )
