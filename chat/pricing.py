"""What a run cost: a price per model, the cost of its tokens, and a conversation's sum.

Prices are rows of :class:`chat.models.ModelPrice`, edited in the admin: a provider (blank
for any) and a model name or glob pattern, with prices per million input and output
tokens in a currency. A run's cost is worked out once, when the run ends, from its stored
token counts and the price then in force, and stored on the run (``AgentRun.cost``), the
way a bill fixes the price of what was used: changing a price later changes the cost of
later runs only. Money is :class:`~decimal.Decimal` throughout, never float.

No ORM queries here: callers pass the price rows (:mod:`chat.store.usage`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import Protocol

MILLION = Decimal(1_000_000)
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "CNY": "¥", "JPY": "¥"}
NO_PRICE = "no price"
COST_UNKNOWN = "cost unknown"
TOKENS_UNKNOWN = "tokens unknown"
ESTIMATED_TITLE = "estimated: this model estimates its token counts, it does not count them"


class PriceRow(Protocol):
    """What a price needs to be matched and applied (a ``ModelPrice`` row has it)."""

    provider: str
    model_pattern: str
    input_per_million: Decimal
    output_per_million: Decimal
    currency: str


class RunUsage(Protocol):
    """What a finished run's usage reads (an ``AgentRun`` has it)."""

    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    cost: Decimal | None
    cost_currency: str
    usage_estimated: bool


def _specificity(row: PriceRow) -> tuple[bool, bool, int]:
    """Rank a matching price: a named provider, then an exact name, then a longer pattern."""
    is_pattern = any(char in row.model_pattern for char in "*?[")
    return (bool(row.provider), not is_pattern, len(row.model_pattern))


def price_for(prices: Iterable[PriceRow], *, provider: str, model_name: str) -> PriceRow | None:
    """Return the price that applies to ``model_name`` of ``provider``, or None.

    A row matches when its provider is blank or ``provider``, and its ``model_pattern``
    is ``model_name`` or a glob that matches it (``gpt-4o-mini*``; case-sensitive, as
    model names are). The most specific row wins: one naming the provider over one for
    any provider, an exact name over a pattern, then the longer pattern.
    """
    matching = [
        row
        for row in prices
        if row.provider in ("", provider) and fnmatchcase(model_name, row.model_pattern)
    ]
    return max(matching, key=_specificity, default=None)


def cost_of(
    input_tokens: int | None, output_tokens: int | None, price: PriceRow | None
) -> Decimal | None:
    """Return what the tokens cost at ``price`` (its currency), or None if unknown.

    Unknown when there is no price, or either count is missing: a total alone cannot be
    split between the input and output prices.
    """
    if price is None or input_tokens is None or output_tokens is None:
        return None
    amount = input_tokens * price.input_per_million + output_tokens * price.output_per_million
    return amount / MILLION


def format_cost(amount: Decimal, currency: str) -> str:
    """Return an amount for people: ``$1,234.50``, ``$0.0123``, ``$0.0000618``, ``CHF 0.50``.

    Two decimals from 1 up; below, three significant digits, so a small run's cost is
    not shown as 0.00. A currency without a symbol here is written as its code.
    """
    cents = Decimal("0.01")
    if amount >= 1 or amount == 0:
        amount = amount.quantize(cents)
    else:
        amount = amount.quantize(Decimal(1).scaleb(amount.adjusted() - 2)).normalize()
        if amount.as_tuple().exponent > -2:  # 0.5 is written 0.50, as money is
            amount = amount.quantize(cents)
    shown = f"{amount:,f}"
    symbol = CURRENCY_SYMBOLS.get(currency)
    return f"{symbol}{shown}" if symbol else f"{currency} {shown}".strip()


def cost_label(run: RunUsage) -> str:
    """Return a finished run's cost as its status line and the admin show it.

    ``"$0.0123"``; ``"≈$0.0123"`` for estimated tokens; ``"no price"`` when
    its tokens are known but its model has no price (never 0); ``"cost unknown"`` when
    only a total was reported (it cannot be split between the input and output prices);
    ``""`` when its tokens are unknown (the token figure says so).
    """
    if run.total_tokens is None:
        return ""
    if run.cost is None:
        split = run.input_tokens is not None and run.output_tokens is not None
        return NO_PRICE if split else COST_UNKNOWN
    shown = format_cost(run.cost, run.cost_currency)
    return f"≈{shown}" if run.usage_estimated else shown


@dataclass
class ConversationUsage:
    """A conversation's finished runs summed: tokens, and cost per currency.

    ``unpriced`` counts runs with tokens but no cost (their model has no price) and
    ``unknown`` runs with no token counts; neither adds to the sums. ``estimated`` is
    True when any run summed had estimated tokens.
    """

    runs: int = 0
    tokens: int = 0
    costs: dict[str, Decimal] = field(default_factory=dict)
    estimated: bool = False
    unpriced: int = 0
    unknown: int = 0

    @property
    def tokens_label(self) -> str:
        """Return ``"1,234 tokens"`` (``≈`` in front when estimated), or ``""``."""
        if self.runs == self.unknown:
            return TOKENS_UNKNOWN if self.runs else ""
        return f"{'≈' if self.estimated else ''}{self.tokens:,} tokens"

    @property
    def cost_label(self) -> str:
        """Return the summed cost (``"$0.0123"``, ``"$0.01 + €0.02"``), or ``"no price"``.

        ``≈`` in front when estimated, ``+ no price for 2 runs`` after when some runs
        could not be priced; ``""`` when no run has tokens.
        """
        if self.runs == self.unknown:
            return ""
        shown = " + ".join(format_cost(amount, cur) for cur, amount in sorted(self.costs.items()))
        if not shown:
            return NO_PRICE
        if self.estimated:
            shown = f"≈{shown}"
        if self.unpriced:
            shown += f" + no price for {self.unpriced} run{'s' if self.unpriced > 1 else ''}"
        return shown

    @property
    def title(self) -> str:
        """Return the longer explanation a tooltip gives."""
        parts = [f"Summed over this conversation's {self.runs} finished run"
                 f"{'s' if self.runs != 1 else ''}"]  # fmt: skip
        if self.unknown:
            parts.append(f"{self.unknown} with tokens unknown")
        if self.estimated:
            parts.append(ESTIMATED_TITLE)
        return "; ".join(parts)


def summarise(runs: Sequence[RunUsage] | Iterable[RunUsage]) -> ConversationUsage:
    """Return the usage of ``runs`` summed (those still running are left out)."""
    usage = ConversationUsage()
    for run in runs:
        if getattr(run, "is_running", False):
            continue
        usage.runs += 1
        if run.total_tokens is None:
            usage.unknown += 1
            continue
        usage.tokens += run.total_tokens
        usage.estimated = usage.estimated or run.usage_estimated
        if run.cost is None:
            usage.unpriced += 1
        else:
            currency = run.cost_currency
            usage.costs[currency] = usage.costs.get(currency, Decimal(0)) + run.cost
    return usage
