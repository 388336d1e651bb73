"""The admin's view of agents: what each run was given, and the agents defined now.

- **Agent snapshots** (``/admin/chat/agentsnapshot/``): each distinct thing an agent gave
  the model (system prompt as sent, tools and their schemas, MCP servers, limits), with
  the runs that were given it. Evidence: nobody adds or edits them, and a snapshot a run
  refers to cannot be deleted (``PROTECT``).
- **Agents defined now** (``/admin/chat/agentsnapshot/defined/``): ``AGENTS_FILE``'s
  agents, read-only, with their tools from code (schemas included) and their MCP
  servers' tools as listed less than a minute ago, or why a server is unavailable (listed
  in a thread of their own: :func:`agents.mcp.cached_or_listing`).

A run's page shows its snapshot with :func:`snapshot_html`.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.definitions import AgentDefinition
from chat.admin_base import ReadOnlyAdmin, when
from chat.agents import agents_file, code_tool_sources, code_tools
from chat.models import AgentSnapshot


def snapshot_html(snapshot: AgentSnapshot | None, *, runs_sharing: int = 0) -> SafeString | str:
    """Return what a snapshot says, for a run's page and the snapshot's own (or "–")."""
    if snapshot is None:
        return "– (not recorded: the run is from before agents were definitions, or it failed "\
            "before it had tools)"  # fmt: skip
    url = reverse("admin:chat_agentsnapshot_change", args=[snapshot.pk])
    context = {"content": snapshot.content, "digest": snapshot.digest, "snapshot_url": url,
               "runs_sharing": runs_sharing}  # fmt: skip
    return SafeString(render_to_string("admin/chat/_snapshot.html", context))


@admin.register(AgentSnapshot)
class AgentSnapshotAdmin(ReadOnlyAdmin):
    """Each distinct snapshot, newest first, with how many runs were given it."""

    change_list_template = "admin/chat/agentsnapshot/change_list.html"
    list_display = ("digest_short", "agent", "tool_count", "runs_given", "created")
    list_display_links = ("digest_short",)
    search_fields = ("digest",)
    readonly_fields = ("shown", "runs_link")
    fields = ("runs_link", "shown")

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # PROTECTed by the runs anyway; evidence

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentSnapshot]:
        return super().get_queryset(request).annotate(run_count=Count("runs"))

    @admin.display(description="snapshot", ordering="digest")
    def digest_short(self, snapshot: AgentSnapshot) -> str:
        return snapshot.digest[:12]

    @admin.display(description="agent")
    def agent(self, snapshot: AgentSnapshot) -> str:
        agent = snapshot.content.get("agent", {})
        return f"{agent.get('label', '?')} ({agent.get('name', '?')})"

    @admin.display(description="tools")
    def tool_count(self, snapshot: AgentSnapshot) -> int:
        return len(snapshot.content.get("tools", []))

    @admin.display(description="runs", ordering="run_count")
    def runs_given(self, snapshot: AgentSnapshot) -> int:
        return snapshot.run_count  # type: ignore[attr-defined]

    @admin.display(description="first recorded", ordering="created_at")
    def created(self, snapshot: AgentSnapshot) -> str:
        return when(snapshot.created_at, "Y-m-d H:i")

    @admin.display(description="what the agent gave the model")
    def shown(self, snapshot: AgentSnapshot) -> SafeString | str:
        return snapshot_html(snapshot, runs_sharing=getattr(snapshot, "run_count", 0))

    @admin.display(description="runs")
    def runs_link(self, snapshot: AgentSnapshot) -> SafeString:
        url = reverse("admin:chat_agentrun_changelist")
        count = snapshot.run_count  # type: ignore[attr-defined]  (get_queryset counts them)
        return format_html('<a href="{}?snapshot__id__exact={}">{} run{}</a>', url,
                           snapshot.pk, count, "" if count == 1 else "s")  # fmt: skip

    def get_urls(self) -> list[URLPattern]:
        defined = self.admin_site.admin_view(self.defined_view)
        return [path("defined/", defined, name="chat_agentsnapshot_defined"), *super().get_urls()]

    def defined_view(self, request: HttpRequest) -> HttpResponse:
        """Render the agents of ``AGENTS_FILE``, read-only (staff who may view runs)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Agents defined now",
            "agents": [_described(agent) for agent in agents_file().agents],
            "opts": self.model._meta,
        }
        return render(request, "admin/chat/agentsnapshot/defined.html", context)


def _described(agent: AgentDefinition) -> dict[str, Any]:
    """Return an agent with its tools' schemas and its MCP servers' tools, for the page.

    A server's tools are those listed less than a minute ago, or None while a thread of
    their own lists them (:func:`agents.mcp.cached_or_listing`): this page is served in
    the thread all the app's database work shares, and must never wait on a server (one
    that hung froze every chat until its connect time-out).
    """
    tools, error = [], ""
    try:
        sources = code_tool_sources(agent)
        for tool in code_tools(agent):
            function = convert_to_openai_tool(tool)["function"]
            tools.append({"name": tool.name, "source": sources.get(tool.name, ""),
                          "description": function.get("description", ""),
                          "parameters": function.get("parameters", {})})  # fmt: skip
    except ValueError as exc:  # a tool path the start-up checks refuse
        error = str(exc)
    servers = []
    for config in agents_file().servers_of(agent):
        from agents.mcp import cached_or_listing

        servers.append({"audit": config.audit(), "listed": cached_or_listing(config)})
    return {"agent": agent, "tools": tools, "error": error, "servers": servers}
