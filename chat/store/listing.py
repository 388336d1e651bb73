"""The conversation list: one query for the owner's chats, searched, grouped by date."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import NamedTuple

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.functions import Coalesce
from django.utils import dateformat, timezone

from chat.markdown import plain_text
from chat.models import AgentRun, Conversation, Message, RunStatus
from chat.store.conversations import Owner, clean_title, conversations_for_owner

LIST_LENGTH = 200
QUERY_CHARS = 200
SNIPPET_CHARS = 90
# The marker beside a conversation: its last run is going, or ended without an answer
# the person asked for (a stop is their own choice, so it gets no marker).
# (marker class, its text for screen readers and the tooltip).
MARKERS = {
    RunStatus.RUNNING: ("running", "a run is going"),
    RunStatus.FAILED: ("failed", "last run failed"),
    RunStatus.MAX_ITERATIONS: ("failed", "last run hit the model-turn limit"),
    RunStatus.INTERRUPTED: ("failed", "last run was interrupted"),
    RunStatus.TIME_LIMIT: ("failed", "last run reached its time limit"),
    RunStatus.REPEATED_FAILURE: ("failed", "last run was stopped: the same call kept failing"),
    RunStatus.BUDGET_EXCEEDED: ("failed", "last run used up its budget"),
    RunStatus.WAITING: ("running", "a tool call waits for your approval"),
}


def marker(status: str | None, answered: bool | None) -> tuple[str, str] | None:
    """Return the list's marker for a conversation whose latest run has ``status`` and
    (``answered``) an answer: none for a run that reached the model-turn limit with an
    answer generated there (``early_stopping_method="generate"``), it has the answer."""
    if status == RunStatus.MAX_ITERATIONS and answered:
        return None
    return MARKERS.get(status)


def clean_query(query: str) -> str:
    """Return a search as matched: spaces collapsed, at most ``QUERY_CHARS``."""
    return clean_title(query)[:QUERY_CHARS]


def conversations_listed(
    *, owner: Owner, query: str = "", conversation_id: int | None = None
) -> list[Conversation]:
    """Return the owner's conversations for the list, newest first, in one query.

    At most ``LIST_LENGTH``. Each is annotated with ``last_status`` (its latest run's
    status, None without runs), ``last_answered`` (whether it has an answer), ``marker``
    (a pair from :data:`MARKERS`, or None: :func:`marker`),
    ``run_count`` and, with a ``query``, ``match``: the text of its first message
    containing ``query`` (None when only the title matched) and ``snippet`` (a
    :class:`Snippet` of it, or None). A
    ``query`` keeps those whose title or any message (question or answer) contains it,
    ignoring case (ASCII case only on SQLite). ``conversation_id`` keeps that one only
    (a row re-rendered after a rename).
    """
    runs = AgentRun.objects.filter(conversation=OuterRef("pk"))
    last = runs.order_by("-started_at", "-id")
    answered = ExpressionWrapper(~Q(output=""), output_field=BooleanField())
    conversations = conversations_for_owner(owner=owner).annotate(
        last_status=Subquery(last.values("status")[:1]),
        last_answered=Subquery(last.annotate(answered=answered).values("answered")[:1]),
        run_count=Coalesce(
            Subquery(
                runs.order_by().values("conversation").annotate(n=Count("pk")).values("n"),
                output_field=IntegerField(),
            ),
            0,
        ),
    )
    if conversation_id is not None:
        conversations = conversations.filter(pk=conversation_id)
    query = clean_query(query)
    if query:
        conversations = _searched(conversations, query)
    listed = list(conversations[:LIST_LENGTH])
    for conversation in listed:
        conversation.marker = marker(conversation.last_status, conversation.last_answered)  # type: ignore[attr-defined]
        # A title that matches says enough; a message that does is shown around the match.
        match = getattr(conversation, "match", None)
        in_title = query.lower() in conversation.title.lower()
        conversation.snippet = message_snippet(match, query) if match and not in_title else None  # type: ignore[attr-defined]
    return listed


def _searched(conversations: QuerySet[Conversation], query: str) -> QuerySet[Conversation]:
    """Return ``conversations`` whose title or a message contains ``query``, annotated."""
    found = Message.objects.filter(conversation=OuterRef("pk"), content__icontains=query)
    first = found.order_by("created_at", "id").values("content")[:1]
    return conversations.annotate(match=Subquery(first)).filter(
        Q(title__icontains=query) | Q(match__isnull=False)
    )


class Snippet(NamedTuple):
    """A message cut around the first match of a search: text before, the match, after."""

    before: str
    match: str
    after: str


def snippet(text: str, query: str, *, chars: int = SNIPPET_CHARS) -> Snippet | None:
    """Return about ``chars`` characters of ``text`` around ``query``'s first match.

    One line (spaces collapsed), ``…`` where it was cut; None when ``query`` is not in
    ``text`` (matched by case-folding beyond what the database did, say).
    """
    text = clean_title(text)
    query = clean_query(query)
    at = text.lower().find(query.lower()) if query else -1
    if at < 0:
        return None
    end = at + len(query)
    start = max(0, at - (chars - len(query)) // 3)
    space = text.find(" ", start, at)
    if start and space != -1:
        start = space + 1  # from a word's start, not its middle
    stop = min(len(text), max(end, start + chars))
    before = ("…" if start else "") + text[start:at]
    after = text[end:stop] + ("…" if stop < len(text) else "")
    return Snippet(before, text[at:end], after)


def message_snippet(text: str, query: str, *, chars: int = SNIPPET_CHARS) -> Snippet | None:
    """Return :func:`snippet` of a message's words, its Markdown syntax dropped
    (:func:`chat.markdown.plain_text`): an answer's ``**Inn**`` reads "Inn".

    Only a window of ``text`` around the match is stripped (answers can be long, and the
    list has up to :data:`LIST_LENGTH` of them); ``…`` marks where the window cut it. A
    query found only with its syntax (``**Longjing``) gets the snippet of the text as
    written.
    """
    at = text.lower().find(query.lower())
    lo, hi = (0, len(text)) if at < 0 else (max(0, at - 4 * chars), at + len(query) + 4 * chars)
    window = text[lo:hi]
    found = snippet(plain_text(window), query, chars=chars) or snippet(window, query, chars=chars)
    if found is None:
        return None
    before, match, after = found
    if lo and not before.startswith("…"):
        before = "…" + before
    if hi < len(text) and not after.endswith("…"):
        after += "…"
    return Snippet(before, match, after)


@dataclass(frozen=True)
class Group:
    """A heading of the list ("Today", "November 2026") and its conversations."""

    label: str
    conversations: list[Conversation]


def date_label(day: date, *, today: date) -> str:
    """Return the list heading of a conversation last active on ``day``.

    Today, Yesterday, Previous 7 days, Previous 30 days, then the month ("November
    2026"). A day after ``today`` (clocks apart) counts as today.
    """
    age = (today - day).days
    if age <= 0:
        return "Today"
    if age == 1:
        return "Yesterday"
    if age <= 7:
        return "Previous 7 days"
    if age <= 30:
        return "Previous 30 days"
    return dateformat.format(day, "F Y")


def grouped_by_date(conversations: list[Conversation], *, today: date) -> list[Group]:
    """Return ``conversations`` (newest first) under their date headings, in order.

    A conversation's day is its ``updated_at`` (its last message or run) in the server's
    time zone (``TIME_ZONE``); ``today`` is that zone's date.
    """
    groups: list[Group] = []
    for conversation in conversations:
        label = date_label(timezone.localdate(conversation.updated_at), today=today)
        if not groups or groups[-1].label != label:
            groups.append(Group(label, []))
        groups[-1].conversations.append(conversation)
    return groups
