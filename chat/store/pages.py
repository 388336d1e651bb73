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

from django.db.models import Q, QuerySet

from chat.models import AgentRun, AgentStep, Conversation
from chat.store.branches import conversation_path
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
    """Return the newest ``exchanges`` runs of the branch a conversation shows, or those
    just before run ``before`` on it, in the branch's order.

    The branch is :func:`chat.store.branches.conversation_path`: the questions from the
    root to the conversation's ``current_message``, a fork's inherited ones (of another
    conversation, shown read only: ``inherited`` set on them) first. Each run is given
    ``takes`` (a :class:`Takes`, or None when its question has no other take here).
    Five queries whatever the conversation's length or its runs' steps (the conversation,
    its question tree, the path's run ids, the window, the window's steps; one more per
    conversation it was forked from). Raises :class:`RunNotInConversation` if ``before``
    is not a run of the branch shown, and ``ValueError`` if ``exchanges`` < 1.
    """
    if exchanges < 1:
        raise ValueError(f"a window holds at least one exchange, not {exchanges}")
    conversation = Conversation.objects.get(pk=conversation_id)
    path = conversation_path(conversation=conversation)
    runs_of = dict(
        AgentRun.objects.filter(user_message_id__in=path.questions).values_list(
            "user_message_id", "id"
        )
    )
    ordered = [(q, runs_of[q]) for q in path.questions if q in runs_of]
    end = len(ordered)
    if before is not None:
        end = next((n for n, (_, run) in enumerate(ordered) if run == before), -1)
        if end < 0:
            raise RunNotInConversation(before)
    start = max(0, end - exchanges)
    shown = ordered[start:end]
    loaded = {run.pk: run for run in runs_loaded(AgentRun.objects.filter(
        pk__in=[run for _, run in shown]))}  # fmt: skip
    runs = []
    for question, run_id in shown:
        run = loaded[run_id]
        run.takes = Takes.of(question, path.siblings.get(question, []))
        run.inherited = run.conversation_id != conversation_id  # a fork's source's
        runs.append(run)
    return RunWindow(runs=runs, earlier=shown[0][1] if start > 0 and shown else None)


@dataclass(frozen=True)
class Takes:
    """A question's place among the takes of it (retries, regenerations, edits): the
    switcher's "< 2 / 3 >", the questions its arrows show, and all of them (``questions``,
    by which the page finds the switcher again after the list is replaced)."""

    index: int
    count: int
    previous: int | None
    next: int | None
    questions: tuple[int, ...] = ()

    @classmethod
    def of(cls, question: int, takes: list[int]) -> Takes | None:
        """Return ``question``'s place among ``takes`` (None when it is the only one)."""
        if len(takes) < 2 or question not in takes:
            return None
        n = takes.index(question)
        return cls(index=n + 1, count=len(takes), previous=takes[n - 1] if n else None,
                   next=takes[n + 1] if n + 1 < len(takes) else None,
                   questions=tuple(takes))  # fmt: skip


def run_steps_before(*, conversation_id: int, run_id: int, before: int) -> list[AgentStep]:
    """Return a run's steps before ordinal ``before``, in order, each with its run set.

    What an ended run's "Show the N earlier steps" loads (the page shows its last
    ``CHAT_RUN_STEPS_SHOWN``). Two queries whatever the number of steps. Raises
    :class:`RunNotInConversation` if ``run_id`` is not a run it shows (a fork shows its source's).
    """
    run = _run_shown(AgentRun.objects.filter(pk=run_id), conversation_id).first()
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
    :class:`RunNotInConversation` if ``run_id`` is not a run it shows (a fork shows its source's).
    """
    runs = _run_shown(AgentRun.objects.filter(pk=run_id), conversation_id)
    run = runs_loaded(runs).first()
    if run is None:
        raise RunNotInConversation(run_id)
    return run


def _run_shown(runs: QuerySet[AgentRun], conversation_id: int) -> QuerySet[AgentRun]:
    """Return ``runs`` of the conversation, or inherited by it: of a question its page
    shows from the conversation it was forked from (one query more for a fork only)."""
    forked = Conversation.objects.filter(pk=conversation_id, forked_from__isnull=False)
    conversation = forked.first()
    if conversation is None:
        return runs.filter(conversation_id=conversation_id)
    shown = conversation_path(conversation=conversation).questions
    return runs.filter(Q(conversation_id=conversation_id) | Q(user_message_id__in=shown))
