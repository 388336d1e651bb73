"""A run's usage when it ends: its token counts, what they cost, its conversation's sum."""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import Count, Sum

from chat.models import AgentRun, ModelPrice, StepKind
from chat.pricing import ConversationUsage, cost_of, price_for, summarise

TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens")


def usage_settle(run: AgentRun, usage: Mapping[str, int] | None = None) -> None:
    """Set an ending run's token counts and cost (not saved).

    The counts are ``usage`` (the loop's sum of its model turns); when it has none (a run
    stopped, interrupted or crashed outside the loop, whose end event carries no usage)
    they are the sums of the counts stored on its finished model turns, so a stopped run
    keeps what its finished turns used. A turn cut off mid-stream has no counts and adds
    nothing. Counts no turn reported stay None ("tokens unknown", never 0); a run that
    has no model turn (stopped before its first) called no model and used none: 0. The
    cost is :func:`chat.pricing.cost_of` at the price that applies now, or None.
    """
    counts = {name: (usage or {}).get(name) for name in TOKEN_FIELDS}
    if all(value is None for value in counts.values()):
        turns = run.steps.filter(kind=StepKind.MODEL_TURN)
        sums = {name: Sum(name) for name in TOKEN_FIELDS}
        counts = turns.aggregate(turns=Count("id"), **sums)
        if counts.pop("turns") == 0:
            counts = dict.fromkeys(TOKEN_FIELDS, 0)
    for name, value in counts.items():
        setattr(run, name, value)
    price = price_for(ModelPrice.objects.all(), provider=run.provider, model_name=run.model_name)
    run.cost = cost_of(run.input_tokens, run.output_tokens, price)
    run.cost_currency = price.currency if run.cost is not None and price else ""


def run_price(*, provider: str, model_name: str) -> ModelPrice | None:
    """Return the price that applies to a run of ``model_name`` now (one query)."""
    return price_for(ModelPrice.objects.all(), provider=provider, model_name=model_name)


def conversation_usage(*, conversation_id: int) -> ConversationUsage:
    """Return the summed usage of a conversation's finished runs (one query)."""
    runs = AgentRun.objects.filter(conversation_id=conversation_id).only(
        "status",
        "provider",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cost",
        "cost_currency",
    )
    return summarise(runs)
