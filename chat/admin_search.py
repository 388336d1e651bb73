"""The run list's search: each term through an index on PostgreSQL, the same runs as before.

Django's admin search ORs ``icontains`` over every search field, the steps' fields through a
join, and wraps the lot in a correlated ``EXISTS`` per run: ``UPPER(col::text) LIKE``
matches no index, so PostgreSQL reads every run and its steps for every term (25-35 s at
600,000 runs and 3,000,000 steps; docs/benchmarks.md, "The admin's run search").
:func:`search_runs` asks the same questions one table at a time instead, and takes the
union of the runs they name, so each part can use its own index:

- words and substrings in the question, the answer, tool names, arguments and results:
  ``ILIKE '%term%'``, which pg_trgm's GIN indexes (migration 0024) answer; the same
  case-insensitive substring match as before (ILIKE for UPPER … LIKE);
- a ``tool_call_id``: the whole id, or its beginning (case-sensitive on PostgreSQL), through
  the column's b-tree (the ``varchar_pattern_ops`` one Django adds for the prefix); a part
  from the middle of an id no longer matches;
- a term of digits: also the run with that id.

Terms are split as the admin splits them (quotes keep a phrase); a run must match every
term. SQLite (no ILIKE, no pg_trgm) runs the same query with ``icontains``: slow at size,
right at any. pg_trgm needs three characters to narrow a search: a shorter term, or one of
characters the database's locale does not count as letters (Chinese under the C locale),
is still answered right, by reading every row.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import F, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.lookups import IContains
from django.utils.text import smart_split, unescape_string_literal

from chat.models import AgentRun, AgentStep, Message

SEARCH_HELP = (
    "Words or parts of words in the question, answer, tool names, arguments and results; "
    "a tool_call_id whole or its beginning; a run's number. Quotes keep a phrase; a run "
    "must match every term."
)

# Runs a term may find and still be looked up once per page (its ids sent back as one
# array); past that, each of the page's queries searches again.
KEEP_IDS_UP_TO = 50_000


class TextContains(IContains):
    """Case-insensitive substring test: ``icontains``, spelt ``col::text ILIKE '%term%'`` on
    PostgreSQL so that a pg_trgm GIN index on the column (or on ``col::text``) answers it.

    Used as an expression (``filter(TextContains(F("result"), term))``); the term's ``%``,
    ``_`` and ``\\`` are escaped as ``icontains`` escapes them.
    """

    def as_postgresql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs_sql, lhs_params = compiler.compile(self.lhs)
        rhs_sql, rhs_params = self.process_rhs(compiler, connection)
        return f"({lhs_sql})::text ILIKE {rhs_sql}", [*lhs_params, *rhs_params]


def search_terms(search_term: str) -> list[str]:
    """Return the terms of a search box's text as the admin splits them: on spaces, a
    quoted phrase one term without its quotes; empty terms dropped."""
    terms = []
    for bit in smart_split(search_term):
        if bit.startswith(('"', "'")) and bit[0] == bit[-1]:
            bit = unescape_string_literal(bit)
        if bit:
            terms.append(bit)
    return terms


def runs_matching(term: str) -> QuerySet[AgentRun]:
    """Return the ids (``values_list("pk")``) of the runs that ``term`` finds, one table
    at a time: a union, each part able to use its index."""
    steps = (
        AgentStep.objects.filter(
            TextContains(F("result"), term)
            | TextContains(F("arguments"), term)
            | TextContains(F("tool_name"), term)
            | Q(tool_call_id__startswith=term)
        )
        .values_list("run_id")
        .order_by()
    )
    questions = (
        AgentRun.objects.filter(
            user_message__in=Message.objects.filter(TextContains(F("content"), term)).values("pk")
        )
        .values_list("pk")
        .order_by()
    )
    answers = AgentRun.objects.filter(TextContains(F("output"), term)).values_list("pk").order_by()
    parts = [questions, answers]
    if term.isascii() and term.isdigit() and len(term) < 19:  # fits a bigint
        parts.append(AgentRun.objects.filter(pk=int(term)).values_list("pk").order_by())
    return steps.union(*parts)


def search_runs(queryset: QuerySet[AgentRun], search_term: str) -> QuerySet[AgentRun]:
    """Return the runs of ``queryset`` that every term of ``search_term`` finds
    (:func:`runs_matching`); each run once, whatever matched it how often.

    On PostgreSQL a term's runs are looked up once, here, when there are at most
    :data:`KEEP_IDS_UP_TO`: the list page evaluates its queryset three times (the count,
    the page, the date drill-down's dates), and each would search again. A term found in
    more runs stays a subquery.
    """
    for term in search_terms(search_term):
        matching = runs_matching(term)
        if connections[queryset.db].vendor == "postgresql":
            ids = [row[0] for row in matching.using(queryset.db)[: KEEP_IDS_UP_TO + 1]]
            if len(ids) <= KEEP_IDS_UP_TO:
                queryset = queryset.filter(pk__in=RawSQL("SELECT unnest(%s::bigint[])", (ids,)))
                continue
        queryset = queryset.filter(pk__in=matching)
    return queryset
