"""Admin for conversations and the audit trail of runs. Runs are evidence: nothing can be
added or edited, and only a superuser may delete (whole runs or conversations; steps go
with their run and have no admin of their own).

Staff filter and search run history, open a run to read its steps in order, open the
conversation as its user saw it, and download runs in each format of
:data:`chat.traces.formats.FORMATS` (CSV, JSONL, OTLP JSON): the selected runs (an action
per format), everything the list shows (``export/`` with the list's querystring) or one
run (``<pk>/export/``); ``?format=jsonl`` or ``otlp-json`` picks the format (CSV without
one), ``?bom=1`` adds a byte-order mark to the CSV for Excel. Every export checks
:func:`chat.export.can_export` and answers 403 otherwise. Staff without
``chat.view_unredacted_trace`` read runs, steps, messages and titles redacted by the export
policy (:mod:`chat.traces.viewing`); the exports are redacted for everyone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ERROR_FLAG, PAGE_VAR
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import render
from django.template.defaultfilters import truncatechars
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from agents.providers import providers
from chat import store
from chat.admin_agents import snapshot_html
from chat.admin_approvals import ToolGrantInline, registered_tools
from chat.admin_base import PRE, ReadOnlyAdmin, ReadOnlyInline, when
from chat.admin_compare import RunCompareMixin
from chat.admin_feedback import FeedbackFilter, feedback_cell, feedback_details
from chat.admin_search import SEARCH_HELP, search_runs
from chat.catalog import model_badge
from chat.export import can_export, owner_label
from chat.markdown import render_markdown
from chat.models import (
    AgentRun,
    AgentStep,
    Conversation,
    Message,
    ModelPrice,
    StepKind,
)
from chat.presenters import RunPresenter
from chat.store.comparisons import run_other_takes
from chat.store.rows import count_tool_calls_so_far
from chat.templatetags.chat_tags import duration, reveal_hidden
from chat.traces.formats import (
    CSV,
    CSV_EXCEL,
    DEFAULT,
    JSONL,
    OTLP_JSON,
    Format,
    UnknownFormat,
    download_response,
    find_format,
)
from chat.traces.viewing import redact_loaded, redactor_for, shown_queryset

BOM_PARAM = "bom"
FORMAT_PARAM = "format"
DOWNLOAD_TITLES = {
    "CSV": "One row per step (docs/csv-format.md)",
    "CSV for Excel": "The CSV in UTF-8 with a byte-order mark, for Excel",
    "JSONL": "One run per line with its steps, approvals and feedback (docs/jsonl-format.md)",
    "OTLP JSON": "OpenTelemetry GenAI spans, for Phoenix, Langfuse, Jaeger or MLflow",
}
# A run's counts are stored when it ends; its page counts a run still going from its steps.
CALLS_WAITING = "calls_waiting_for_approval"
NOT_COUNTED_YET = "counted when the run ends; its page counts the calls so far"


def _requested_format(request: HttpRequest) -> Format:
    """Return the download format the querystring names (``format``, ``bom=1`` for the
    CSV's Excel variant); raise :class:`UnknownFormat` for one not in the table."""
    return find_format(
        request.GET.get(FORMAT_PARAM, DEFAULT), bom=request.GET.get(BOM_PARAM) == "1"
    )


def _export_links(url: str, params: QueryDict) -> list[tuple[str, str, str]]:
    """Return ``(label, href, title)`` of a download link per format (CSV's Excel variant
    too) for ``url`` with ``params``; CSV keeps the URL without ``format`` it always had."""
    links = []
    for fmt in (CSV, CSV_EXCEL, JSONL, OTLP_JSON):
        query = params.copy()
        if fmt.name != DEFAULT:
            query[FORMAT_PARAM] = fmt.name
        if fmt.bom:
            query[BOM_PARAM] = "1"
        href = f"{url}?{query.urlencode()}" if query else url
        links.append((fmt.label, href, DOWNLOAD_TITLES[fmt.label]))
    return links


def _tokens(value: int | None) -> str:
    return "–" if value is None else str(value)


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ("created_at", "role", "content", "run")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        """Return the messages with their run: the ``run`` column read it lazily, one query
        per answer (500 for a conversation of 1,000 messages); redacted for staff who may
        not read the stored text."""
        return shown_queryset(request.user, super().get_queryset(request).select_related("run"))


class AgentStepInline(ReadOnlyInline):
    """The run's steps in order, drawn as cards by a template: no form fields at all."""

    model = AgentStep
    template = "admin/chat/agentrun/steps.html"
    fields = ("ordinal",)
    readonly_fields = fields
    ordering = ("ordinal",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentStep]:
        """Return the steps with their run (a card's labels read it) and the decision on
        each call held for approval (a held call's card shows it): no query per step;
        redacted for staff who may not read the stored text."""
        steps = super().get_queryset(request).select_related("run", "approval")
        return shown_queryset(request.user, steps)


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    # Fits 1366 px (tests/browser/test_admin_layout.py): owners and times as the run list
    # writes them, so "(guest)" and "2026-12-01 04:19" read the same on both pages.
    list_display = ("id", "title", "user", "strategy", "model_key", "created", "updated",
                    "deleted")  # fmt: skip
    list_display_links = ("id", "title")
    list_filter = ("strategy", "model_key")
    list_select_related = ("owner",)
    search_fields = ("title",)
    inlines = (ToolGrantInline, MessageInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        """Return the conversations, their titles redacted for staff who may not read them."""
        return shown_queryset(request.user, super().get_queryset(request))

    @admin.display(description="user", ordering="owner__username")
    def user(self, conversation: Conversation) -> str:
        return owner_label(conversation)

    @admin.display(description="created", ordering="created_at")
    def created(self, conversation: Conversation) -> str:
        return when(conversation.created_at, "Y-m-d H:i")

    @admin.display(description="last active", ordering="updated_at")
    def updated(self, conversation: Conversation) -> str:
        return when(conversation.updated_at, "Y-m-d H:i")

    @admin.display(description="deleted by its owner", ordering="hidden_at")
    def deleted(self, conversation: Conversation) -> str:
        return "" if conversation.hidden_at is None else when(conversation.hidden_at, "Y-m-d H:i")


class HasToolErrorsFilter(admin.SimpleListFilter):
    """Runs where a tool call failed, or the model's output did not parse (stored counts)."""

    title = "has tool errors"
    parameter_name = "has_tool_errors"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No"), ("format", "Format errors (output did not parse)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if self.value() == "yes":
            return queryset.filter(tool_error_count__gt=0)
        if self.value() == "no":
            return queryset.filter(tool_error_count=0)
        if self.value() == "format":
            return queryset.filter(format_error_count__gt=0)
        return queryset


class ToolNameFilter(admin.SimpleListFilter):
    """Runs that called a registered tool, by name, or ``other``: a name no tool has.

    The choices are every agent's tools from code (:func:`chat.agents.tool_names`) and the
    MCP tools recent runs were given, not every name stored: models invent names, and
    listing those gave thousands of links. ``other``
    covers every tool call to a name not registered, or to no name at all (a call whose
    output did not parse). A name that is no longer offered still filters exactly, so an
    old link keeps working. Each test is an EXISTS subquery, so a run is listed once.
    """

    title = "tool name"
    parameter_name = "tool"
    OTHER = "other"

    @staticmethod
    def registered() -> list[str]:
        """Return the tool names: every agent's tools from code in their order, then the
        MCP tools recent runs were given (:func:`chat.store.snapshot_mcp_tool_names`)."""
        return registered_tools()

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = [(name, name) for name in self.registered()]
        return [*names, (self.OTHER, "other (a name no tool has)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
        if not self.value():
            return queryset
        calls = AgentStep.objects.filter(run=OuterRef("pk"), kind=StepKind.TOOL_CALL)
        if self.value() == self.OTHER:
            calls = calls.exclude(tool_name__in=self.registered())
        else:
            calls = calls.filter(tool_name=self.value())
        return queryset.filter(Exists(calls))


def _export_action(fmt: Format, name: str) -> Callable[..., HttpResponse]:
    """Return the admin action that downloads the selected runs in ``fmt``."""

    def action(
        modeladmin: AgentRunAdmin, request: HttpRequest, queryset: QuerySet[AgentRun]
    ) -> HttpResponse:
        return download_response(queryset, fmt, request=request, prefix="agent-runs")

    action.__name__ = name
    description = f"Export selected runs as {fmt.label}"
    if fmt.bom:
        description = "Export selected runs as CSV (UTF-8 with BOM, for Excel)"
    return admin.action(description=description, permissions=["export"])(action)


export_selected = _export_action(CSV, "export_selected")
export_selected_bom = _export_action(CSV_EXCEL, "export_selected_bom")
export_selected_jsonl = _export_action(JSONL, "export_selected_jsonl")
export_selected_otlp_json = _export_action(OTLP_JSON, "export_selected_otlp_json")


@admin.register(AgentRun)
class AgentRunAdmin(RunCompareMixin, ReadOnlyAdmin):
    # Fits 1366 px beside the filters (tests/browser/test_admin_layout.py): model and
    # strategy share a column, and change_list.html fixes each column's width.
    list_display = (
        "started", "user", "conversation_link", "question", "model_strategy",
        "status_shown", "model_turns", "tool_calls", "errors", "run_duration", "tokens",
        "cost_shown", "feedback_shown",
    )  # fmt: skip
    list_display_links = ("started", "question")
    list_filter = (
        "status", "agent_key", "strategy", "model_name", HasToolErrorsFilter, ToolNameFilter,
        FeedbackFilter, "branch_kind",
    )  # fmt: skip
    list_select_related = ("conversation__owner", "user_message", "feedback")
    # What the search box reads; chat.admin_search.search_runs asks it table by table,
    # through the indexes of migration 0024, not Django's OR of icontains over a join.
    search_fields = (
        "user_message__content", "output", "steps__tool_name", "steps__arguments",
        "steps__result", "steps__tool_call_id",
    )  # fmt: skip
    search_help_text = SEARCH_HELP
    date_hierarchy = "started_at"
    show_full_result_count = False  # one COUNT(*) fewer on a filtered list of 100,000 runs
    actions = (export_selected, export_selected_bom, export_selected_jsonl,
               export_selected_otlp_json)  # fmt: skip
    readonly_fields = (
        "conversation_link", "user", "question_text", "started_time", "finished_time",
        "heartbeat_time", "run_duration", "model_turns", "tool_calls", "errors", "token_counts",
        "cost_shown", "answer", "waited_shown",
        "provider_shown", "endpoint_shown", "status_shown",
        "tool_choice_shown", "parallel_shown",
        "run_error", "snapshot_shown", "feedback_given", "branch_shown",
    )  # fmt: skip
    fieldsets = (
        (None, {"fields": ("conversation_link", "user", "question_text")}),
        ("Run", {"fields": (
            ("status_shown", "strategy"),
            ("tool_choice_shown", "parallel_shown"),
            ("provider_shown", "model_name", "endpoint_shown"),
            ("started_time", "finished_time"),
            ("heartbeat_time", "run_duration"),
            ("waited_shown",),
            ("model_turns", "tool_calls", "errors"),
            ("token_counts", "cost_shown"),
            ("branch_shown",),
        )}),
        ("Outcome", {"fields": ("answer", "run_error")}),
        ("Feedback from the chat's owner", {"fields": ("feedback_given",)}),
        ("What the agent gave the model", {"fields": ("snapshot_shown",)}),
    )  # fmt: skip
    inlines = (AgentStepInline,)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AgentRun], search_term: str
    ) -> tuple[QuerySet[AgentRun], bool]:
        """Return the runs every term finds (:func:`chat.admin_search.search_runs`), each
        once: an ``IN`` per term, never a join that repeats a run per matching step."""
        return search_runs(queryset, search_term), False

    # The list and the run page

    @admin.display(description="started", ordering="started_at")
    def started(self, run: AgentRun) -> str:
        return when(run.started_at, "Y-m-d H:i")

    @admin.display(description="started at")
    def started_time(self, run: AgentRun) -> str:
        return when(run.started_at)

    @admin.display(description="finished at")
    def finished_time(self, run: AgentRun) -> str:
        return when(run.finished_at)

    @admin.display(description="last heartbeat")
    def heartbeat_time(self, run: AgentRun) -> str:
        return when(run.heartbeat_at)

    @admin.display(description="waited for approval")
    def waited_shown(self, run: AgentRun) -> str:
        """Return the time the run waited for people (not counted in its time limit), and
        since when it waits now: "waiting since …" for its first wait, "2.5 s before;
        waiting again since …" after an earlier one."""
        waited = duration(run.waited_ms) if run.waited_ms else ""
        if run.paused_at is None:
            return waited or "–"
        if not waited:
            return f"waiting since {when(run.paused_at)}"
        return f"{waited} before; waiting again since {when(run.paused_at)}"

    @admin.display(description="user", ordering="conversation__owner__username")
    def user(self, run: AgentRun) -> str:
        return owner_label(run.conversation)

    @admin.display(description="conversation", ordering="conversation_id")
    def conversation_link(self, run: AgentRun) -> SafeString:
        url = reverse("admin:chat_conversation_change", args=[run.conversation_id])
        title = truncatechars(run.conversation.title, 32) or "(untitled)"
        return format_html('<a href="{}">#{} {}</a>', url, run.conversation_id, title)

    @admin.display(description="question")
    def question(self, run: AgentRun) -> SafeString:
        shown = reveal_hidden(truncatechars(run.user_message.content, 80))
        branched = RunPresenter(run).branch_label
        if not branched:
            return shown
        return format_html('{}<br><span class="trace-quiet">{}</span>', shown, branched)

    @admin.display(description="another take of")
    def branch_shown(self, run: AgentRun) -> SafeString | str:
        """Return the run this one branched from (linked) and the runs that branched from
        it: which run is another take of which (docs/branches.md)."""
        lines = []
        if run.branched_from_id is not None:
            url = reverse("admin:chat_agentrun_change", args=[run.branched_from_id])
            lines.append(format_html('<a href="{}">{}</a>', url, RunPresenter(run).branch_label))
        for take in run.branches.order_by("pk").only("pk", "branch_kind", "branched_from"):
            url = reverse("admin:chat_agentrun_change", args=[take.pk])
            lines.append(format_html('Taken again in <a href="{}">run {}</a> ({})', url, take.pk,
                                     take.get_branch_kind_display().lower()))  # fmt: skip
        if not lines:
            return "–"
        return format_html_join(mark_safe("<br>"), "{}", ((line,) for line in lines))

    @admin.display(description="model · strategy · agent", ordering="model_name")
    def model_strategy(self, run: AgentRun) -> SafeString:
        return format_html('{}<br><span class="trace-quiet">{} · {}</span>', run.model_name,
                           run.get_strategy_display(), run.agent_key or "–")  # fmt: skip

    @admin.display(description="model turns", ordering="iterations")
    def model_turns(self, run: AgentRun) -> int:
        return run.iterations

    @admin.display(description="tool calls", ordering="tool_call_count")
    def tool_calls(self, run: AgentRun) -> int | SafeString | str:
        """Return the stored count; on the page of a run not ended, the calls so far
        (counted by :meth:`get_object`) and how many of them wait for approval; in the
        list, for a run not ended, a mark that says so (not the 0 stored until its end)."""
        waiting = getattr(run, CALLS_WAITING, None)
        if waiting is None:
            if run.is_running or run.is_waiting:
                return format_html('<span title="{}">…</span>', NOT_COUNTED_YET)
            return run.tool_call_count
        if waiting:
            return f"{run.tool_call_count} so far ({waiting} waiting for approval)"
        return f"{run.tool_call_count} so far"

    @admin.display(description="errors", ordering="tool_error_count")
    def errors(self, run: AgentRun) -> SafeString:
        """Return the tool errors, and the format errors (calls that never ran) if any."""
        shown = format_html("{}", 0)
        if run.tool_error_count:
            shown = format_html('<strong class="trace-errors">{}</strong>', run.tool_error_count)
        if run.format_error_count:
            return format_html(
                '{} <span class="trace-errors" title="model output that did not parse">'
                "+ {} format</span>",
                shown,
                run.format_error_count,
            )
        return shown

    @admin.display(description="tool choice")
    def tool_choice_shown(self, run: AgentRun) -> str:
        return run.tool_choice or "– (text strategy)"

    @admin.display(description="parallel tool calls")
    def parallel_shown(self, run: AgentRun) -> str:
        if run.parallel_tool_calls is None:
            return "– (text strategy: one call per turn)"
        return "yes" if run.parallel_tool_calls else "no: one call per turn"

    @admin.display(description="duration", ordering="duration_ms")
    def run_duration(self, run: AgentRun) -> str:
        return duration(run.duration_ms) or "–"

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, run: AgentRun) -> str:
        if run.is_running:
            return "–"
        if run.total_tokens is None:
            return "unknown"
        return f"≈{run.total_tokens}" if run.usage_estimated else str(run.total_tokens)

    @admin.display(description="cost", ordering="cost")
    def cost_shown(self, run: AgentRun) -> str:
        """Return the run's cost, "no price" for a model without one, "unknown" without
        token counts (see chat.pricing)."""
        if run.is_running:
            return "–"
        return RunPresenter(run).cost_label or "unknown"

    @admin.display(description="status", ordering="status")
    def status_shown(self, run: AgentRun) -> SafeString | str:
        """Return the status; a success whose tool calls partly failed is marked amber."""
        if run.has_tool_errors:
            return format_html(
                '<span class="trace-warn" style="background: var(--message-warning-bg); '
                'padding: 0 4px; border-radius: 3px">{}</span>',
                RunPresenter(run).status_label,
            )
        return run.get_status_display()

    @admin.display(description="tokens")
    def token_counts(self, run: AgentRun) -> str:
        counts = (
            f"{_tokens(run.input_tokens)} in · {_tokens(run.output_tokens)} out · "
            f"{_tokens(run.total_tokens)} total"
        )
        return f"{counts} (estimated, not counted)" if run.usage_estimated else counts

    @admin.display(description="provider")
    def provider_shown(self, run: AgentRun) -> str:
        entry = run.provider_entry
        return f"{entry.label} ({entry.name})" if entry else run.provider_label

    @admin.display(description="endpoint")
    def endpoint_shown(self, run: AgentRun) -> str:
        return run.endpoint or "– (no network, or not recorded)"

    @admin.display(description="question")
    def question_text(self, run: AgentRun) -> SafeString:
        return format_html(PRE, reveal_hidden(run.user_message.content))

    @admin.display(description="answer")
    def answer(self, run: AgentRun) -> SafeString:
        # Sanitized by nh3 inside render_markdown, like the chat page.
        return format_html(
            '<div class="trace-answer">{}</div>', SafeString(render_markdown(run.output))
        )

    @admin.display(description="feedback")
    def feedback_shown(self, run: AgentRun) -> SafeString | str:
        return feedback_cell(run)

    @admin.display(description="feedback")
    def feedback_given(self, run: AgentRun) -> SafeString | str:
        return feedback_details(run)

    @admin.display(description="agent")
    def snapshot_shown(self, run: AgentRun) -> SafeString | str:
        return snapshot_html(run.snapshot)

    @admin.display(description="error")
    def run_error(self, run: AgentRun) -> SafeString | str:
        return format_html(PRE, reveal_hidden(run.error)) if run.error else "–"

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentRun]:
        """Return the runs with the conversation, owner and question their pages read
        (loaded with them, so redacted with them for staff who may not read the stored
        text; the list then adds no ``list_select_related`` of its own)."""
        runs = super().get_queryset(request).select_related(*self.list_select_related)
        return shown_queryset(request.user, runs)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> AgentRun | None:
        """Return the run; one not ended (running, or waiting for approval) with its tool
        call and error counts so far, from its steps in one query.

        Those counts are stored when the run ends (:func:`chat.store.rows.count_tool_calls`
        with the same rules), so a run still going read "Tool calls: 0" while its
        calls had finished. Sets ``CALLS_WAITING``: the calls held for a decision.
        """
        run = super().get_object(request, object_id, from_field)
        if run is not None and (run.is_running or run.is_waiting):
            setattr(run, CALLS_WAITING, count_tool_calls_so_far(run))
        return run

    # Search

    def delete_model(self, request: HttpRequest, obj: AgentRun) -> None:
        """Delete the run with its question and answer, like purge_runs (store.runs_delete)."""
        store.runs_delete(run_ids=[obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[AgentRun]) -> None:
        store.runs_delete(run_ids=list(queryset.values_list("pk", flat=True)))

    # Exports and the conversation page

    def has_export_permission(self, request: HttpRequest) -> bool:
        return can_export(request.user)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("export/", view(self.export_matching_view), name=f"{name}_export"),
            path(
                "<path:object_id>/export/",
                view(self.export_run_view),
                name=f"{name}_export_run",
            ),
            path(
                "<path:object_id>/conversation/",
                view(self.conversation_view),
                name=f"{name}_conversation",
            ),
            path("<path:object_id>/compare/", view(self.compare_view), name=f"{name}_compare"),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = dict(extra_context or {})
        if can_export(request.user):
            params = request.GET.copy()
            for name in (PAGE_VAR, ERROR_FLAG, BOM_PARAM, FORMAT_PARAM):
                params.pop(name, None)
            url = reverse("admin:chat_agentrun_export")
            context["export_links"] = _export_links(url, params)
        return super().changelist_view(request, context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        if can_export(request.user):
            url = reverse("admin:chat_agentrun_export_run", args=[object_id])
            context["export_links"] = _export_links(url, QueryDict(mutable=True))
        run = self.get_object(request, unquote(object_id))
        if run is not None:
            context["compare_takes"] = run_other_takes(run=run)
        return super().change_view(request, object_id, form_url, context)

    def export_matching_view(self, request: HttpRequest) -> HttpResponse:
        """Export every run the list shows with this querystring's filters and search, in
        the format ``format`` names (CSV by default; 400 for an unknown one)."""
        if not can_export(request.user):
            raise PermissionDenied
        try:
            fmt = _requested_format(request)
        except UnknownFormat as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
        request.GET = request.GET.copy()  # the changelist would take these for filters
        request.GET.pop(BOM_PARAM, None)
        request.GET.pop(FORMAT_PARAM, None)
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("Unknown filter in the querystring.")
        return download_response(
            changelist.get_queryset(request), fmt, request=request, prefix="agent-runs"
        )

    def export_run_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Export one run in the format ``format`` names (CSV by default)."""
        if not can_export(request.user):
            raise PermissionDenied
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404("No such run.")
        try:
            fmt = _requested_format(request)
        except UnknownFormat as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
        return download_response(
            AgentRun.objects.filter(pk=run.pk), fmt, request=request, prefix=f"agent-run-{run.pk}"
        )

    def conversation_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Render the run's conversation with the user's own page, read-only and not live.

        Nothing is written (unlike the user's page, stale runs are not marked interrupted).
        """
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404("No such run.")
        conversation = run.conversation
        runs = store.conversation_runs(conversation_id=conversation.pk)
        redact_loaded(redactor_for(request.user), conversation, *runs)
        context = {
            "read_only": True,
            "opened_run": run,
            "run_url": reverse("admin:chat_agentrun_change", args=[run.pk]),
            "owner_name": owner_label(conversation),
            "conversation": conversation,
            "conversations": [],
            "runs": runs,
            "model_badge": model_badge(run),
        }
        return render(request, "chat/page.html", context)


class ModelPriceForm(forms.ModelForm):
    """A price's provider is picked from the registered ones (or any), so none is misspelt."""

    provider = forms.ChoiceField(required=False, help_text="Blank: any provider.")

    class Meta:
        model = ModelPrice
        fields = ("provider", "model_pattern", "input_per_million", "output_per_million",
                  "currency")  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "any provider")]
        choices += [(name, f"{entry.label} ({name})") for name, entry in providers().items()]
        current = self.instance.provider
        if current and current not in dict(choices):  # a provider since removed
            choices.append((current, f"{current}, no longer registered"))
        self.fields["provider"].choices = choices


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices per model, editable by staff with the permissions (chat.pricing)."""

    form = ModelPriceForm
    list_display = (
        "provider_shown", "model_pattern", "input_per_million", "output_per_million",
        "currency", "updated_at",
    )  # fmt: skip
    list_display_links = ("provider_shown", "model_pattern")
    search_fields = ("provider", "model_pattern")
    fieldsets = (
        (None, {
            "description": (
                "Prices per million tokens. A run's cost is worked out when it ends, at "
                "the price that applies then: a change here applies to later runs. When "
                "several prices match a model, the one naming its provider wins, then an "
                "exact name over a pattern, then the longer pattern."
            ),
            "fields": ("provider", "model_pattern", ("input_per_million", "output_per_million"),
                       "currency"),
        }),
    )  # fmt: skip

    @admin.display(description="provider", ordering="provider")
    def provider_shown(self, price: ModelPrice) -> str:
        return price.provider or "(any)"
