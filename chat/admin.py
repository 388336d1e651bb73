"""Admin for conversations and runs. Runs are evidence: nothing can be added or edited.

Staff open a run and read its steps in order, with pretty-printed arguments and results.
Only a superuser may delete, and only whole runs or conversations (steps go with their
run), so no run loses a step. The full audit admin and CSV export come with issue 3.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.utils.html import format_html
from django.utils.safestring import SafeString

from chat.markdown import render_markdown
from chat.models import AgentRun, AgentStep, Conversation, Message
from chat.templatetags.chat_tags import reveal_hidden

PRE = (
    '<pre style="white-space:pre-wrap;overflow-wrap:anywhere;max-height:18em;overflow:auto;'
    'max-width:48em;margin:0">{}</pre>'
)


class ReadOnlyInline(admin.TabularInline):
    """An inline that shows rows and allows no change."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ("created_at", "role", "content", "run")
    readonly_fields = fields


class AgentStepInline(ReadOnlyInline):
    model = AgentStep
    fields = (
        "ordinal", "iteration", "kind", "call", "status", "arguments_pretty", "outcome",
        "duration_ms", "total_tokens",
    )  # fmt: skip
    readonly_fields = fields
    ordering = ("ordinal",)

    @admin.display(description="tool call")
    def call(self, step: AgentStep) -> SafeString:
        if step.kind != "tool_call":
            return format_html("{}", "model turn")
        return format_html("<b>{}</b><br><code>{}</code>", step.tool_name, step.tool_call_id)

    @admin.display(description="arguments")
    def arguments_pretty(self, step: AgentStep) -> SafeString:
        if step.kind != "tool_call":
            return format_html("{}", "")
        return format_html(PRE, reveal_hidden(step.arguments_json))

    @admin.display(description="result / text / error")
    def outcome(self, step: AgentStep) -> SafeString:
        body = step.result_display if step.kind == "tool_call" else step.text
        if step.error:
            body = f"{body}\n\n{step.error}" if body else step.error
        return format_html(PRE, reveal_hidden(body))


class ReadOnlyAdmin(admin.ModelAdmin):
    """No adding or editing; deleting is for superusers only."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_active and request.user.is_superuser


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
        "id", "started_at", "question", "status", "iterations", "duration_ms", "total_tokens",
        "model_name", "strategy",
    )  # fmt: skip
    list_display_links = ("id", "question")
    list_filter = ("status", "strategy", "model_name")
    list_select_related = ("user_message",)
    search_fields = ("user_message__content", "output", "steps__tool_name")
    date_hierarchy = "started_at"
    readonly_fields = ("conversation", "question_text", "answer", "error")
    fields = (
        "conversation", "question_text", "status", "strategy", "provider", "model_name",
        "started_at", "finished_at", "duration_ms", "iterations", "input_tokens",
        "output_tokens", "total_tokens", "answer", "error",
    )  # fmt: skip
    inlines = (AgentStepInline,)

    @admin.display(description="question")
    def question(self, run: AgentRun) -> str:
        return truncatechars(run.user_message.content, 80)

    @admin.display(description="question")
    def question_text(self, run: AgentRun) -> SafeString:
        return format_html(PRE, run.user_message.content)

    @admin.display(description="answer")
    def answer(self, run: AgentRun) -> SafeString:
        # Sanitized by nh3 inside render_markdown, like the chat page.
        return format_html(
            '<div style="max-width:48em">{}</div>', SafeString(render_markdown(run.output))
        )
