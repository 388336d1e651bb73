"""Admin for conversations, runs and steps: runs are evidence, so everything is read-only.

The full audit admin (filters, search, CSV export) is issue 3; this lets staff open a run
and read its steps in order.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from chat.models import AgentRun, AgentStep, Conversation, Message


class ReadOnlyInline(admin.TabularInline):
    """An inline that shows rows and allows no change."""

    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ("created_at", "role", "content", "run")
    readonly_fields = fields


class AgentStepInline(ReadOnlyInline):
    model = AgentStep
    fields = (
        "ordinal", "iteration", "kind", "tool_name", "tool_call_id", "status", "arguments",
        "result", "error", "text", "duration_ms", "total_tokens",
    )  # fmt: skip
    readonly_fields = fields
    ordering = ("ordinal",)


class ReadOnlyAdmin(admin.ModelAdmin):
    """No adding or editing through the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "owner", "strategy", "created_at", "updated_at")
    list_filter = ("strategy",)
    list_select_related = ("owner",)
    search_fields = ("title",)
    inlines = (MessageInline,)


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdmin):
    list_display = (
        "id", "started_at", "conversation", "strategy", "model_name", "status", "iterations",
        "duration_ms", "total_tokens",
    )  # fmt: skip
    list_filter = ("status", "strategy", "model_name")
    list_select_related = ("conversation",)
    search_fields = ("user_message__content", "output", "steps__tool_name")
    date_hierarchy = "started_at"
    inlines = (AgentStepInline,)


@admin.register(AgentStep)
class AgentStepAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "ordinal", "kind", "tool_name", "status", "duration_ms")
    list_filter = ("kind", "status", "tool_name")
    list_select_related = ("run",)
    search_fields = ("tool_name", "tool_call_id")
