"""What staff read of runs in the admin: the stored truth for those with
``chat.view_unredacted_trace`` (superusers have it), the redacted text for the others.

The choice is made here and nowhere else: :func:`redactor_for` takes the user,
:func:`shown_queryset` wraps an admin queryset so its rows (and the rows loaded with them
by ``select_related``) come out redacted, and :func:`redact_loaded` redacts rows a view
loaded itself (the staff's read-only conversation page), their loaded relations and
prefetched children included. Rows are redacted in memory, never saved: a redacted row
that something tries to save raises (:func:`refuse_saving_redacted`, connected by
``chat.signals``). Every template, presenter and admin column then reads the redacted
fields as it reads stored ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db.models import Model, QuerySet
from django.db.models.query import ModelIterable

from chat.models import AgentRun, AgentStep, Approval, Conversation, Feedback, Message
from chat.traces.redaction import Redactor, active

PERMISSION = "chat.view_unredacted_trace"
REDACTED_FLAG = "_redacted_for_display"

# The fields people wrote or a model or tool produced, per model: text, then JSON.
# Usernames, ids, names of tools and times are not redacted in the admin (staff manage
# the accounts; docs/redaction.md). A step's result_blocks (images, files) are shown as
# stored: their text is in its result, and their data would be corrupted by a mark.
TEXT_FIELDS: dict[type[Model], tuple[str, ...]] = {
    Conversation: ("title",),
    Message: ("content",),
    AgentRun: ("output", "error"),
    AgentStep: ("result", "observation", "error", "text", "reasoning"),
    Approval: ("reason",),
    Feedback: ("comment",),
}
JSON_FIELDS: dict[type[Model], tuple[str, ...]] = {
    AgentStep: ("arguments", "artifact", "raw"),
    Approval: ("arguments", "edited_arguments"),
}


def redactor_for(user: Any) -> Redactor | None:
    """Return the redactor for what ``user`` reads, or None when they see the stored text:
    they have ``chat.view_unredacted_trace``, or the policy redacts nothing."""
    if user.has_perm(PERMISSION):
        return None
    redactor = active()
    return redactor if redactor.enabled else None


def redact_loaded(redactor: Redactor | None, *rows: Model) -> None:
    """Redact ``rows`` in place, with every row already loaded with them (``select_related``
    and ``prefetch_related`` caches), and mark each so it cannot be saved.

    Nothing is read from the database: a relation not loaded yet is left alone, so a
    caller loads what its page shows first. ``redactor`` None does nothing.
    """
    if redactor is None:
        return
    seen: set[int] = set()
    stack = list(rows)
    while stack:
        row = stack.pop()
        if id(row) in seen or getattr(row, REDACTED_FLAG, False):
            continue
        seen.add(id(row))
        kind = type(row)
        if kind in TEXT_FIELDS:
            for name in TEXT_FIELDS[kind]:
                value = getattr(row, name)
                if isinstance(value, str):
                    setattr(row, name, redactor.text(value))
            for name in JSON_FIELDS.get(kind, ()):
                setattr(row, name, redactor.value(getattr(row, name)))
            setattr(row, REDACTED_FLAG, True)
        stack.extend(_loaded_relations(row))


def _loaded_relations(row: Model) -> Iterator[Model]:
    for related in row._state.fields_cache.values():
        if isinstance(related, Model):
            yield related
    for children in getattr(row, "_prefetched_objects_cache", {}).values():
        yield from (child for child in children if isinstance(child, Model))


class _RedactedIterable(ModelIterable):
    """Django's model iterable, each row redacted with what ``select_related`` loaded
    (``prefetch_related`` fills its caches after this: redact those with
    :func:`redact_loaded`)."""

    def __iter__(self) -> Iterator[Model]:
        redactor = active()
        for row in super().__iter__():
            redact_loaded(redactor, row)
            yield row


def shown_queryset(user: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """Return ``queryset`` as ``user`` may read it: unchanged for those who see the stored
    text, else one whose rows come out redacted (filters, ordering and search still run
    on the stored text in the database). ``values()`` and ``values_list()`` of it are
    not redacted: they serve ids and counts."""
    if redactor_for(user) is None:
        return queryset
    shown = queryset.all()
    shown._iterable_class = _RedactedIterable
    return shown


def refuse_saving_redacted(sender: type[Model], instance: Model, **kwargs: Any) -> None:
    """Raise before a row redacted for display is saved: it would write the marks over
    the stored truth (a ``pre_save`` receiver)."""
    if getattr(instance, REDACTED_FLAG, False):
        raise RuntimeError(
            f"{sender.__name__} {instance.pk} was redacted for display and cannot be saved"
        )
