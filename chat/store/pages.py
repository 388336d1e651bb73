"""The conversation page's window: its last exchanges, the ones before a run, and the
earlier steps of a long run.

The page shows the newest ``CHAT_PAGE_EXCHANGES`` runs and loads earlier ones on
request, a window at a time, in the same three queries whatever the conversation's
length, so a long conversation opens as fast as a short one (docs/benchmarks.md, "Long
conversations and long runs"). An ended run shows its last
``CHAT_RUN_STEPS_SHOWN`` steps (``chat/templatetags/run_steps_tags.py``) and loads the
rest on request.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from chat.models import AgentRun, AgentStep
from chat.store.rows import runs_loaded


class RunNotInConversation(Exception):
    """Raised when ``before`` names no run of the conversation (gone, or another's)."""


@dataclass(frozen=True)
class RunWindow:
    """A window of a conversation's runs (an exchange: a question and its run each).

    ``runs``: oldest first, loaded for rendering (``chat.store.rows.runs_loaded``).
    ``earlier``: the id of the oldest run shown when older runs exist, ``None`` when the
    window reaches the conversation's start: the ``before`` of the next window.
    """

    runs: list[AgentRun]
    earlier: int | None


def runs_window(*, conversation_id: int, exchanges: int, before: int | None = None) -> RunWindow:
    """Return the newest ``exchanges`` runs of a conversation, or those just before
    run ``before``, in the order of the page (``started_at``, then id).

    Three queries whatever the conversation's length or its runs' steps: the run
    ``before`` (if given), the window plus one run (to know if there is more), and the
    window's steps. A running run is the newest of its conversation (one at a time), so
    the first window always holds it. Raises :class:`RunNotInConversation` if ``before``
    is not a run of this conversation, and ``ValueError`` if ``exchanges`` < 1.
    """
    if exchanges < 1:
        raise ValueError(f"a window holds at least one exchange, not {exchanges}")
    runs = AgentRun.objects.filter(conversation_id=conversation_id)
    if before is not None:
        anchor = runs.filter(pk=before).values_list("started_at", flat=True).first()
        if anchor is None:
            raise RunNotInConversation(before)
        runs = runs.filter(Q(started_at__lt=anchor) | Q(started_at=anchor, pk__lt=before))
    # The prefetch runs on the sliced list: the steps of these runs only.
    newest = list(runs_loaded(runs.order_by("-started_at", "-id"))[: exchanges + 1])
    more = len(newest) > exchanges
    shown = newest[:exchanges][::-1]
    return RunWindow(runs=shown, earlier=shown[0].pk if more else None)


def run_steps_before(*, conversation_id: int, run_id: int, before: int) -> list[AgentStep]:
    """Return a run's steps before ordinal ``before``, in order, each with its run set.

    What an ended run's "Show the N earlier steps" loads (the page shows its last
    ``CHAT_RUN_STEPS_SHOWN``). Two queries whatever the number of steps. Raises
    :class:`RunNotInConversation` if ``run_id`` is not a run of this conversation.
    """
    run = AgentRun.objects.filter(pk=run_id, conversation_id=conversation_id).first()
    if run is None:
        raise RunNotInConversation(run_id)
    earlier = run.steps.filter(ordinal__lt=before).select_related("approval")
    steps = list(earlier.order_by("ordinal"))
    for step in steps:
        step.run = run  # a card reads its run: no query per step
    return steps


def run_with_steps_of(*, conversation_id: int, run_id: int) -> AgentRun:
    """Return a run of the conversation with its steps, loaded for rendering (two queries).

    What an ended run's folded timeline loads when it opens. Raises
    :class:`RunNotInConversation` if ``run_id`` is not a run of this conversation.
    """
    runs = AgentRun.objects.filter(pk=run_id, conversation_id=conversation_id)
    run = runs_loaded(runs).first()
    if run is None:
        raise RunNotInConversation(run_id)
    return run
