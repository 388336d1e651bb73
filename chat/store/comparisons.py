"""Runs to compare: the other takes of a run's question, and two runs loaded whole.

Another take of a question is a run of the same conversation that is linked to it
(``AgentRun.branched_from`` either way: a retry, a regenerate, an edit), whose question is
a sibling of its own (the same ``Message.parent``: another branch from the same place),
or whose question has the same text. A question with no parent is the first of its
conversation, or one stored before questions were linked: for those only the links and
the text count, so every unlinked question is not taken for a sibling.
"""

from __future__ import annotations

from django.db.models import Q

from chat.models import AgentRun, AgentStep

OTHER_TAKES_SHOWN = 20
# Row ids are 64-bit signed integers (an URL's <int:> takes any number of digits).
MAX_ROW_ID = 2**63


def run_other_takes(*, run: AgentRun, limit: int = OTHER_TAKES_SHOWN) -> list[AgentRun]:
    """Return up to ``limit`` other runs of ``run``'s question in its conversation, the
    newest first, with their questions (one query; ``run.user_message`` loaded)."""
    question = run.user_message
    same = Q(user_message__content=question.content) | Q(branched_from_id=run.pk)
    if run.branched_from_id is not None:
        same |= Q(pk=run.branched_from_id)
    if question.parent_id is not None:
        same |= Q(user_message__parent_id=question.parent_id)
    takes = (
        AgentRun.objects.filter(same, conversation_id=run.conversation_id)
        .exclude(pk=run.pk)
        .select_related("user_message")
        .order_by("-started_at", "-id")
    )
    return list(takes[:limit])


def runs_for_comparison(
    *, run_ids: tuple[int, int], conversation_id: int | None = None
) -> list[AgentRun]:
    """Return two runs (of the conversation, when ``conversation_id`` is given) in the order
    asked, each with its conversation and question loaded and ``compared_steps`` set: its
    steps in order, each with its run and approval (two queries). Raises
    ``AgentRun.DoesNotExist`` if either is not there."""
    if not all(0 < run_id < MAX_ROW_ID for run_id in run_ids):
        # An ``__in`` lookup sends the number as it is: past 64 bits the driver raises.
        raise AgentRun.DoesNotExist(f"runs {run_ids} are not both there")
    runs = AgentRun.objects.filter(pk__in=run_ids)
    if conversation_id is not None:
        runs = runs.filter(conversation_id=conversation_id)
    loaded = {run.pk: run for run in runs.select_related("conversation", "user_message")}
    if any(run_id not in loaded for run_id in run_ids):
        raise AgentRun.DoesNotExist(f"runs {run_ids} are not both there")
    for run in loaded.values():
        run.compared_steps = []
    steps = AgentStep.objects.filter(run_id__in=run_ids).select_related("approval")
    for step in steps.order_by("run_id", "ordinal"):
        step.run = loaded[step.run_id]  # a step's words read its run: no query
        loaded[step.run_id].compared_steps.append(step)
    return [loaded[run_id] for run_id in run_ids]
