"""Template filters for a user's message in the chat: whether it is long enough to fold."""

from __future__ import annotations

from django import template

register = template.Library()

# A message longer than either is folded to its first lines with "Show more" (the chat's
# peers fold pasted text the same way, so the run below it stays in reach).
FOLD_LINES = 12
FOLD_CHARS = 1200


@register.filter
def folds(text: str) -> bool:
    """Return whether a user's message is folded on the page: more than
    :data:`FOLD_LINES` lines or :data:`FOLD_CHARS` characters."""
    return len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
