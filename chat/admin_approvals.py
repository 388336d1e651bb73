"""Admin for people in the loop: held tool calls and their decisions, and tool policies.

- :class:`ApprovalAdmin`: one list of the calls held for a decision across conversations,
  the waiting ones first, and every decision taken since (evidence: read-only). Staff
  with ``chat.decide_approval`` approve or deny the selected calls with two actions,
  through :func:`chat.store.approval_decide` like the chat's own card, so a call decided
  already is refused with who and when, and nothing changes. Open pages of the chat show
  the decision at once, and a process's run owner resumes the run
  (:func:`chat.owner.decisions_taken`); with no server running, the sweep of the next
  to start (:mod:`chat.owner`) resumes it within ``AGENT_HEARTBEAT_S``.
- :class:`ToolApprovalPolicyAdmin`: a registered tool's policy (allow, ask, deny), which
  overrides ``AGENT_TOOL_POLICIES``; the list shows the policy each tool has in effect.
- :class:`ToolGrantInline`: a conversation's "always allow in this chat" grants.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Case, F, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import truncatechars
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.approvals import Outcome
from chat import fragments, live, owner, store
from chat.admin_base import PRE, ReadOnlyAdmin, ReadOnlyInline, when
from chat.agents import tool_names
from chat.approvals import policy_of
from chat.display import arguments_json
from chat.export import owner_label
from chat.forms import DecisionForm
from chat.models import (
    AgentStep,
    Approval,
    ApprovalOutcome,
    StepKind,
    ToolApprovalPolicy,
    ToolGrant,
)
from chat.templatetags.chat_tags import reveal_hidden
from chat.traces.viewing import redact_loaded, redactor_for, shown_queryset

logger = logging.getLogger(__name__)

ARGUMENTS_PREVIEW_CHARS = 80
# Words up to this long are never cut across lines in the preview (a date, a town).
ARGUMENTS_WORD_CHARS = 24
# A tool's arguments can be long (a search query, a note): the hover shows this much.
ARGUMENTS_TITLE_CHARS = 1000
REASON_PREVIEW_CHARS = 40
# The list's times, in the admin's time zone: month, day and time (the page shows the year).
LIST_TIME = "m-d H:i"
# Put where the model reads a denial's reason (agents.approvals.PERSON_DENIED), so the
# model, the chat's card and the audit all say where the decision came from.
ADMIN_DENIAL = "denied from the admin by {user}"
ADMIN_DENIAL_WHY = "{reason} (denied from the admin by {user})"
DECIDED = "{verb} {count} call(s)."
GOING_ON = " {count} run(s) go on now where the chat is open, else within about {heartbeat:g} s."
STILL_WAITING = " {count} run(s) still wait for a decision on another call."
NOT_TOLD = (
    "The chats' open pages could not be told (the channel layer failed): they show the "
    "decisions on a reload, and the runs go on within about {heartbeat:g} s."
)


def _decide(
    request: HttpRequest, queryset: QuerySet[Approval], outcome: Outcome, reason: str = ""
) -> None:
    """Decide each selected call through the store; report the taken and the refused,
    and show the taken in the chats' open pages; the run owners resume the runs now ready.

    A denial's reason (what the person typed, if anything) says it came from the admin
    and from whom: the model, the chat's card and the audit read it.
    """
    cards: list[tuple[int, str]] = []
    ready: list[int] = []
    runs: set[int] = set()  # the runs of the calls decided
    if outcome == Outcome.DENIED:
        user = request.user.get_username()
        why = ADMIN_DENIAL_WHY if reason else ADMIN_DENIAL
        reason = why.format(reason=reason, user=user)
    for approval in _ticked(request, queryset).select_related("run").order_by("requested_at", "pk"):
        try:
            conversation_id = approval.run.conversation_id
            decided = store.approval_decide(
                conversation_id=conversation_id, step_id=approval.step_id,
                outcome=outcome, by=request.user, at=timezone.now(),
                reason=reason,
            )  # fmt: skip
        except store.ApprovalRefused as refused:
            messages.warning(request, f"{approval.tool_name} in run #{approval.run_id}: {refused}")
            continue
        step = store.step_for_card(step_id=approval.step_id)
        cards.append((conversation_id, fragments.step_replaced(step)))
        runs.add(approval.run_id)
        if decided.run_ready:
            ready.append(approval.run_id)
    if cards:
        verb = "Approved" if outcome == Outcome.APPROVED else "Denied"
        note = DECIDED.format(verb=verb, count=len(cards))
        if ready:
            note += GOING_ON.format(count=len(ready), heartbeat=settings.AGENT_HEARTBEAT_S)
        if waiting := len(runs - set(ready)):
            note += STILL_WAITING.format(count=waiting)
        messages.success(request, note)
    try:
        live.publish_each_sync(cards)
        owner.decisions_taken_sync(ready)
    except Exception:  # stored already: the sweep resumes the runs
        logger.exception("telling the chats' pages of decisions taken in the admin failed")
        messages.warning(request, NOT_TOLD.format(heartbeat=settings.AGENT_HEARTBEAT_S))


def _ticked(request: HttpRequest, queryset: QuerySet[Approval]) -> QuerySet[Approval]:
    """Return the calls ticked, with those the list's filter no longer matches: Django
    hands an action only the ticked rows still in the filtered list, so a call decided
    in the chat while staff looked at the waiting ones (or typed a denial's reason) was
    left out with nothing said. Here the store refuses it with who decided and when."""
    if request.POST.get("select_across") == "1":
        return queryset  # "all N matching": the filter is what was chosen
    return Approval.objects.filter(pk__in=request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))


@admin.action(description="Approve selected calls", permissions=["decide"])
def approve_selected(
    modeladmin: ApprovalAdmin, request: HttpRequest, queryset: QuerySet[Approval]
) -> None:
    _decide(request, queryset, Outcome.APPROVED)


@admin.action(description="Deny selected calls…", permissions=["decide"])
def deny_selected(
    modeladmin: ApprovalAdmin, request: HttpRequest, queryset: QuerySet[Approval]
) -> TemplateResponse | None:
    """Ask for an optional reason (the model reads it), then deny the selected calls
    (Django's delete_selected confirms the same way: the form posts the action again).

    The reason is checked by :class:`chat.forms.DecisionForm`, as the chat's card's is: a
    reason it refuses (too long, characters no database stores) is asked for again with
    the form's error, and nothing is denied.
    """
    form = DecisionForm()
    if request.POST.get("confirm") == "deny":
        form = DecisionForm({"decision": "deny", "reason": request.POST.get("reason", "")})
        if form.is_valid():
            _decide(request, queryset, Outcome.DENIED, reason=form.cleaned_data["reason"])
            return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Deny the selected calls",
        "opts": modeladmin.model._meta,
        "approvals": _ticked(request, queryset).select_related("run"),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "form": form,
    }
    return TemplateResponse(request, "admin/chat/approval/deny_selected.html", context)


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    """Held tool calls across conversations, the waiting ones first (oldest first), then
    the decided ones (newest first). Rows are evidence: nobody edits or deletes them (they
    go with their run)."""

    # Fits 1280 px (tests/browser/test_admin_layout.py): the outcome beside the tool, a
    # waiting call's expiry under its outcome (only a waiting call's matters), the
    # conversation reached through its run; what is left goes to the arguments.
    list_display = (
        "tool", "outcome_shown", "arguments_preview", "run_link", "owner", "requested",
        "decided_by_shown", "decided", "reason_preview",
    )  # fmt: skip
    list_display_links = ("tool",)
    list_filter = ("outcome",)
    list_select_related = ("run__conversation__owner",)
    search_fields = ("tool_name", "tool_call_id", "decided_by_name", "reason",
                     "run__conversation__owner__username")  # fmt: skip
    search_help_text = "Tool name, tool_call_id, who decided, the reason, the chat's owner."
    actions = (approve_selected, deny_selected)
    # The waiting ones first, oldest first (the nearest to expiring), then the decided
    # ones, newest first.
    ordering = (
        Case(When(outcome=ApprovalOutcome.PENDING, then=Value(0)), default=Value(1)).asc(),
        Case(When(outcome=ApprovalOutcome.PENDING, then=F("requested_at"))).asc(),
        "-requested_at", "-pk",
    )  # fmt: skip
    fields = (
        ("tool", "tool_call_id"), ("run_link", "conversation_link", "owner"),
        "question", "model_said", ("requested_full", "expires_full"),
        ("outcome", "decided_by_shown", "decided_full"),
        "reason", "always_allowed", "arguments_full", "edited_arguments_full",
    )  # fmt: skip
    readonly_fields = (
        "tool", "tool_call_id", "run_link", "conversation_link", "owner", "question",
        "model_said", "requested_full",
        "expires_full", "outcome", "decided_by_shown", "decided_full", "reason",
        "always_allowed", "arguments_full", "edited_arguments_full",
    )  # fmt: skip

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Approval]:
        """Return the approvals with the run and conversation their pages read, redacted
        (arguments, reason, the conversation's title) for staff who may not read them."""
        approvals = (
            super()
            .get_queryset(request)
            .select_related("run__conversation__owner", "run__user_message", "step")
        )
        return shown_queryset(request.user, approvals)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Approval | None:
        """Return the approval with what its page shows around the call: the run's
        question (loaded with it) and the model turn that asked for the call
        (``turn_before``, one query), both redacted as the rest of the page is."""
        approval = super().get_object(request, object_id, from_field)
        if approval is not None:
            approval.turn_before = (
                AgentStep.objects.filter(run_id=approval.run_id, kind=StepKind.MODEL_TURN,
                                         iteration=approval.step.iteration)
                .order_by("ordinal").first()
            )  # fmt: skip
            if approval.turn_before is not None:
                redact_loaded(redactor_for(request.user), approval.turn_before)
        return approval

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("chat.decide_approval")

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], add: bool = False,
        change: bool = False, form_url: str = "", obj: Approval | None = None,
    ) -> HttpResponse:  # fmt: skip
        """Offer Approve and Deny on a waiting call's page to staff who may decide.

        Each is a form posting the list's action for this call (``decide_url``, with
        ``_selected_action`` its pk), so the page decides through :func:`approve_selected`
        and :func:`deny_selected` as the list does, and returns to the list with the
        message. A decided call, or staff without ``chat.decide_approval``, get none.
        """
        if obj is not None and obj.is_pending and self.has_decide_permission(request):
            context["decide_url"] = reverse("admin:chat_approval_changelist")
            context["action_checkbox_name"] = helpers.ACTION_CHECKBOX_NAME
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.display(description="tool", ordering="tool_name")
    def tool(self, approval: Approval) -> SafeString:
        return reveal_hidden(approval.tool_name or "(no name)")

    @admin.display(description="arguments")
    def arguments_preview(self, approval: Approval) -> SafeString:
        """Return the arguments it runs with, marked when a person edited them: the
        start on one line (change_list.html clamps it to the column), all of them (up to
        ``ARGUMENTS_TITLE_CHARS``) in its title, on hover."""
        edited = approval.edited_arguments is not None
        shown = arguments_json(approval.edited_arguments if edited else approval.arguments, None)
        # Lines break at the spaces JSON puts after its commas and colons: each shorter
        # word is kept whole (Chromium would break "2026-12-24" after a hyphen); a longer
        # one (a URL) may still break where it must.
        words = truncatechars(shown, ARGUMENTS_PREVIEW_CHARS).split(" ")
        text = format_html_join(" ", "{}", (
            (format_html('<span class="word">{}</span>', reveal_hidden(word))
             if len(word) <= ARGUMENTS_WORD_CHARS else reveal_hidden(word),)
            for word in words
        ))  # fmt: skip
        title = truncatechars(shown, ARGUMENTS_TITLE_CHARS)
        preview = format_html('<code class="arguments-preview" title="{}">{}</code>', title, text)
        if edited:
            return format_html('{} <span class="trace-quiet">(edited)</span>', preview)
        return preview

    @admin.display(description="run", ordering="run_id")
    def run_link(self, approval: Approval) -> SafeString:
        url = reverse("admin:chat_agentrun_change", args=[approval.run_id])
        return format_html(
            '<a href="{}">#{}</a> {}', url, approval.run_id, approval.run.get_status_display()
        )

    @admin.display(description="conversation", ordering="run__conversation_id")
    def conversation_link(self, approval: Approval) -> SafeString:
        conversation = approval.run.conversation
        url = reverse("admin:chat_conversation_change", args=[conversation.pk])
        title = truncatechars(conversation.title, 32) or "(untitled)"
        return format_html('<a href="{}">#{} {}</a>', url, conversation.pk, title)

    @admin.display(description="owner", ordering="run__conversation__owner__username")
    def owner(self, approval: Approval) -> str:
        return owner_label(approval.run.conversation)

    @admin.display(description="requested", ordering="requested_at")
    def requested(self, approval: Approval) -> str:
        return when(approval.requested_at, LIST_TIME)

    @admin.display(description="decided by", ordering="decided_by_name")
    def decided_by_shown(self, approval: Approval) -> str:
        """Return who decided, by the name kept should the user be deleted (the column
        would read "decided by name"); "–" for nobody yet, as the times read."""
        return approval.decided_by_name or "–"

    @admin.display(description="decided", ordering="decided_at")
    def decided(self, approval: Approval) -> str:
        return "" if approval.decided_at is None else when(approval.decided_at, LIST_TIME)

    @admin.display(description="reason")
    def reason_preview(self, approval: Approval) -> SafeString:
        return reveal_hidden(truncatechars(approval.reason, REASON_PREVIEW_CHARS))

    @admin.display(description="outcome", ordering="outcome")
    def outcome_shown(self, approval: Approval) -> SafeString:
        """The outcome, a waiting call's in bold (the rows someone must act on) with
        when it expires as denied: "Waiting until 12-01 23:48"."""
        label = approval.get_outcome_display()
        if not approval.is_pending:
            return format_html("{}", label)
        if approval.expires_at is None:
            return format_html("<strong>{}</strong>", label)
        return format_html(
            '<strong>{}</strong> <span class="trace-quiet">until <span class="expiry">{}</span>'
            "</span>",
            label, when(approval.expires_at, LIST_TIME),
        )  # fmt: skip

    @admin.display(description="the question")
    def question(self, approval: Approval) -> SafeString:
        """Return the question of the run that asked for the call."""
        return format_html(PRE, reveal_hidden(approval.run.user_message.content))

    @admin.display(description="what the model said before the call")
    def model_said(self, approval: Approval) -> SafeString | str:
        """Return the text of the model turn that asked for the call (a text strategy's
        reply the call was read from), or a dash when it wrote none."""
        turn = getattr(approval, "turn_before", None)
        text = (turn.text if turn is not None else "") or approval.step.text
        if not text.strip():
            return "– (nothing: the model only asked for tool calls)"
        return format_html(PRE, reveal_hidden(text))

    @admin.display(description="requested at")
    def requested_full(self, approval: Approval) -> str:
        return when(approval.requested_at)

    @admin.display(description="expires at")
    def expires_full(self, approval: Approval) -> str:
        return "never (AGENT_APPROVAL_TIMEOUT_S is 0)" if approval.expires_at is None else (
            when(approval.expires_at)
        )  # fmt: skip

    @admin.display(description="decided at")
    def decided_full(self, approval: Approval) -> str:
        return when(approval.decided_at)

    @admin.display(description="arguments, as the model asked")
    def arguments_full(self, approval: Approval) -> SafeString:
        return format_html(PRE, reveal_hidden(arguments_json(approval.arguments)))

    @admin.display(description="arguments, as a person edited them")
    def edited_arguments_full(self, approval: Approval) -> SafeString | str:
        if approval.edited_arguments is None:
            return "– (not edited)"
        return format_html(PRE, reveal_hidden(arguments_json(approval.edited_arguments)))


class ToolApprovalPolicyForm(forms.ModelForm):
    """A policy's tool is picked from the registered ones, so none is misspelt; each
    choice says what ``AGENT_TOOL_POLICIES`` sets for it, the policy this row overrides."""

    tool_name = forms.ChoiceField(label="tool")

    class Meta:
        model = ToolApprovalPolicy
        fields = ("tool_name", "policy")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(name, _tool_choice(name)) for name in registered_tools()]
        current = self.instance.tool_name
        if current and current not in dict(choices):  # a tool since removed
            choices.append((current, f"{current}, no longer registered"))
        self.fields["tool_name"].choices = choices


def _tool_choice(name: str) -> str:
    """Return a tool's label in the policy form: its name, and the setting's word for it."""
    setting = settings.AGENT_TOOL_POLICIES.get(name)
    return f"{name} (AGENT_TOOL_POLICIES: {setting})" if setting else name


def registered_tools() -> list[str]:
    """Return the tool names staff pick from: every agent's tools from code in their
    order, then the MCP tools recent runs were given (an MCP server's tools are known
    only to the runs that listed them: :func:`chat.store.snapshot_mcp_tool_names`)."""
    names = tool_names()
    return [*names, *(name for name in store.snapshot_mcp_tool_names() if name not in names)]


@dataclass(frozen=True)
class EffectivePolicy:
    """A registered tool's policy in effect, and where it comes from."""

    tool_name: str
    policy: str
    source: str
    setting: str  # AGENT_TOOL_POLICIES' word for it, "" when it names none


def effective_policies(admin_rows: dict[str, str]) -> list[EffectivePolicy]:
    """Return each registered tool's policy in effect and where it comes from, as runs
    read it (:func:`chat.approvals.policy_of`)."""
    shown = []
    for name in registered_tools():
        policy, source = policy_of(name, admin_rows)
        setting = settings.AGENT_TOOL_POLICIES.get(name, "")
        shown.append(EffectivePolicy(name, policy.value, source, setting))
    return shown


@admin.register(ToolApprovalPolicy)
class ToolApprovalPolicyAdmin(admin.ModelAdmin):
    """Tool policies, editable by staff with the model's permissions; each save records
    who made it. Read when a run starts or resumes: a change applies to later calls."""

    form = ToolApprovalPolicyForm
    list_display = ("tool_name", "policy", "setting_says", "updated_at", "updated_by")
    list_select_related = ("updated_by",)
    readonly_fields = ("setting_says", "updated_at", "updated_by")
    fieldsets = (
        (None, {
            "description": (
                "A tool's policy here overrides AGENT_TOOL_POLICIES; a tool named in "
                "neither runs at once (allow). Ask: each call waits for a person's "
                "approval (the chat's owner, or staff with the permission to decide, in "
                "the Approvals list). Deny: it never runs and the model is told. "
                "\u201cAlways allow in this chat\u201d grants skip ask, never deny. A change "
                "applies to calls made after it."
            ),
            "fields": ("tool_name", "policy", "setting_says", ("updated_at", "updated_by")),
        }),
    )  # fmt: skip

    def get_fieldsets(self, request: HttpRequest, obj: ToolApprovalPolicy | None = None) -> Any:
        """A new row has no tool yet: the setting's word is in each tool's choice instead."""
        if obj is not None:
            return self.fieldsets
        ((name, options),) = self.fieldsets
        return ((name, {**options, "fields": ("tool_name", "policy")}),)

    @admin.display(description="AGENT_TOOL_POLICIES says")
    def setting_says(self, row: ToolApprovalPolicy) -> str:
        return settings.AGENT_TOOL_POLICIES.get(row.tool_name, "") or "– (allow)"

    def save_model(
        self, request: HttpRequest, obj: ToolApprovalPolicy, form: Any, change: bool
    ) -> None:
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        rows = store.tool_policies()
        context = {**(extra_context or {}), "effective_policies": effective_policies(rows)}
        return super().changelist_view(request, context)


class ToolGrantInline(ReadOnlyInline):
    """A conversation's "always allow in this chat" grants."""

    model = ToolGrant
    verbose_name = "tool always allowed in this chat"
    verbose_name_plural = "tools always allowed in this chat"
    fields = ("tool_name", "granted_by", "granted")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolGrant]:
        return super().get_queryset(request).select_related("granted_by")

    @admin.display(description="granted at")
    def granted(self, grant: ToolGrant) -> str:
        return when(grant.granted_at)
