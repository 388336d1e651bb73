"""Admin for the owners' feedback on answers: read-only, like the runs it belongs to.

- :class:`FeedbackFilter` and :func:`feedback_cell`: the run list's filter (up, down,
  none) and column;
- :func:`feedback_details`: the rating, comment, who and when on a run's page;
- :class:`FeedbackAdmin`: every feedback row, newest change first. Nobody adds, edits or
  deletes one here: it is the owner's, given in the chat, and goes with its run.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from chat.admin_base import PRE, ReadOnlyAdmin, when
from chat.models import AgentRun, Feedback, FeedbackRating
from chat.store.feedback import feedback_of
from chat.templatetags.chat_tags import reveal_hidden
from chat.traces.viewing import shown_queryset

NONE = "none"
COMMENT_PREVIEW_CHARS = 60
# The run list's column: the rating as a word, the comment (and who, when) on hover.
RATINGS_SHOWN = {FeedbackRating.UP: "up", FeedbackRating.DOWN: "down"}
COMMENT_MARK = mark_safe('<br><span class="trace-quiet">+ comment</span>')  # no data in it


class FeedbackFilter(admin.SimpleListFilter):
    """Runs by their owner's feedback: thumbs up, thumbs down, or none given."""

    title = "feedback"
    parameter_name = "feedback"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(FeedbackRating.UP.value, "Thumbs up"), (FeedbackRating.DOWN.value, "Thumbs down"),
                (NONE, "None given")]  # fmt: skip

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() in (FeedbackRating.UP, FeedbackRating.DOWN):
            return queryset.filter(feedback__rating=self.value())
        if self.value() == NONE:
            return queryset.filter(feedback__isnull=True)
        return queryset


def _given(feedback: Feedback) -> str:
    rating, by = feedback.get_rating_display(), feedback.given_by_name
    return f"{rating} by {by} at {when(feedback.updated_at)}"


def feedback_cell(run: AgentRun) -> SafeString | str:
    """Return the run list's feedback cell: "up" or "down" ("+ comment" when there is one),
    who and when and the comment's start on hover; "–" for none (the run is loaded with
    its feedback: ``list_select_related``)."""
    feedback = feedback_of(run)
    if feedback is None:
        return "–"
    title = _given(feedback)
    if feedback.comment:
        title += ": " + truncatechars(feedback.comment, 300)
    return format_html(
        '<span class="trace-feedback rating-{}" title="{}">{}{}</span>', feedback.rating, title,
        RATINGS_SHOWN.get(feedback.rating, feedback.rating),
        COMMENT_MARK if feedback.comment else "",
    )  # fmt: skip


def feedback_details(run: AgentRun) -> SafeString | str:
    """Return the feedback on a run's page: rating, who, when it was first given and last
    changed, and the comment as written; "No feedback given." for none."""
    feedback = feedback_of(run)
    if feedback is None:
        return "No feedback given."
    first = ""
    if feedback.created_at != feedback.updated_at:
        first = format_html(" (first given at {})", when(feedback.created_at))
    comment = format_html(PRE, reveal_hidden(feedback.comment)) if feedback.comment else ""
    return format_html(
        '<span class="trace-feedback rating-{}">{}</span>{}{}', feedback.rating,
        _given(feedback), first, comment,
    )  # fmt: skip


@admin.register(Feedback)
class FeedbackAdmin(ReadOnlyAdmin):
    """Every answer's feedback, newest change first: the owner's, read-only."""

    list_display = ("updated", "rating", "comment_preview", "given_by_name", "run_link",
                    "created")  # fmt: skip
    list_display_links = ("updated",)
    list_filter = ("rating",)
    list_select_related = ("run",)
    search_fields = ("comment", "given_by_name")
    search_help_text = "The comment, and who gave it."
    date_hierarchy = "updated_at"
    fields = ("run_link", "rating", "comment_full", ("given_by_name", "given_by"),
              ("created_full", "updated_full"))  # fmt: skip
    readonly_fields = ("run_link", "comment_full", "created_full", "updated_full")

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Feedback]:
        """Return the feedback with its run, the comments redacted for staff who may not
        read the stored text (list and page alike; search runs on the stored text)."""
        return shown_queryset(request.user, super().get_queryset(request))

    @admin.display(description="last changed", ordering="updated_at")
    def updated(self, feedback: Feedback) -> str:
        return when(feedback.updated_at, "Y-m-d H:i")

    @admin.display(description="first given", ordering="created_at")
    def created(self, feedback: Feedback) -> str:
        return when(feedback.created_at, "Y-m-d H:i")

    @admin.display(description="first given")
    def created_full(self, feedback: Feedback) -> str:
        return when(feedback.created_at)

    @admin.display(description="last changed")
    def updated_full(self, feedback: Feedback) -> str:
        return when(feedback.updated_at)

    @admin.display(description="comment")
    def comment_preview(self, feedback: Feedback) -> SafeString:
        return reveal_hidden(truncatechars(feedback.comment, COMMENT_PREVIEW_CHARS))

    @admin.display(description="comment")
    def comment_full(self, feedback: Feedback) -> SafeString | str:
        return format_html(PRE, reveal_hidden(feedback.comment)) if feedback.comment else "–"

    @admin.display(description="run", ordering="run_id")
    def run_link(self, feedback: Feedback) -> SafeString:
        url = reverse("admin:chat_agentrun_change", args=[feedback.run_id])
        return format_html('<a href="{}">#{}</a> {}', url, feedback.run_id,
                           feedback.run.get_status_display())  # fmt: skip
