"""The admin of people in the loop: the list of held calls and its two actions, the
tool policies, the decisions on the run page and the always-allowed tools on the
conversation page."""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.forms import MAX_REASON_CHARS, REASON_TOO_LONG
from chat.models import (
    AgentRun,
    AgentStep,
    Approval,
    Conversation,
    Message,
    ToolApprovalPolicy,
    ToolGrant,
)

pytestmark = pytest.mark.django_db

APPROVALS = "/admin/chat/approval/"
POLICIES = "/admin/chat/toolapprovalpolicy/"
BOOKING = {"town": "苏州", "nights": 2}


def held_call(
    conversation: Conversation,
    *,
    tool: str = "check_bnb_availability",
    arguments: dict | None = None,
    requested_at=None,
    outcome: str = "pending",
) -> Approval:
    """Store a run waiting for a decision on one tool call, as the loop leaves it: the
    run ``waiting``, its model turn, the held call's step ``pending`` and its approval."""
    at = requested_at or timezone.now()
    message = Message.objects.create(conversation=conversation, role="user", content="Book it")
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider="demo", model_name="demo-scripted", status="waiting", started_at=at,
        paused_at=at, iterations=1, tool_call_count=1,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=1, iteration=1, kind="model_turn", status="success", started_at=at,
        raw={"tool_calls": [{"name": tool, "id": f"call_{run.pk}"}]},
    )  # fmt: skip
    step = AgentStep.objects.create(
        run=run, ordinal=2, iteration=1, kind="tool_call", status="pending", started_at=at,
        tool_name=tool, tool_call_id=f"call_{run.pk}", arguments=arguments or BOOKING,
    )  # fmt: skip
    return Approval.objects.create(
        run=run, step=step, tool_name=tool, tool_call_id=step.tool_call_id,
        arguments=step.arguments, requested_at=at, expires_at=at + timedelta(hours=1),
        outcome=outcome,
    )  # fmt: skip


def staff(client: Client, *codenames: str, username: str = "reviewer") -> User:
    """Log ``client`` in as a staff user with ``codenames`` (view approvals by default)."""
    user = User.objects.create_user(username, is_staff=True)
    wanted = codenames or ("view_approval",)
    user.user_permissions.add(*Permission.objects.filter(codename__in=wanted))
    client.force_login(user)
    return user


def act(client: Client, action: str, *approvals: Approval, **form: str):
    """Run an admin action on ``approvals``; a denial is confirmed (with ``reason``)."""
    if action == "deny_selected":
        form = {"confirm": "deny", **form}
    data = {"action": action, "_selected_action": [a.pk for a in approvals], **form}
    return client.post(APPROVALS, data, follow=True)


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# The list


def test_the_list_shows_each_held_call_with_its_run_and_owner_and_its_page_the_chat(alice):
    _, conversation = alice
    conversation.title = "Trip to Suzhou"
    conversation.save()
    approval = held_call(conversation)
    client = Client()
    staff(client)

    response = client.get(APPROVALS)

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [approval]
    html = response.content.decode()
    assert "check_bnb_availability" in html
    assert "苏州" in html  # the arguments' preview, Chinese kept readable
    assert f'href="/admin/chat/agentrun/{approval.run_id}/change/"' in html
    assert ">alice<" in html
    assert "<strong>Waiting</strong>" in html
    # The list reaches the conversation through the run; the approval's page names it.
    page = client.get(f"{APPROVALS}{approval.pk}/change/").content.decode()
    assert f'href="/admin/chat/conversation/{conversation.pk}/change/"' in page
    assert "Trip to Suzhou" in page


def test_the_list_previews_long_arguments_with_all_of_them_on_hover(alice):
    _, conversation = alice
    note = "a quiet room near the Humble Administrator's Garden, " * 3
    held_call(conversation, arguments={"town": "苏州", "note": note})
    client = Client()
    staff(client)

    response = client.get(APPROVALS)

    html = response.content.decode()
    title = html.split('class="arguments-preview" title="')[1].split('"')[0]
    assert title.count("Humble Administrator&#x27;s Garden") == 3  # all of it, on hover
    # The start of it in the cell, each word kept whole across lines.
    assert '<span class="word">quiet</span> <span class="word">room</span>' in html
    headers = [header["text"] for header in response.context["result_headers"]]
    assert "decided by" in headers and "decided by name" not in headers


def test_waiting_calls_come_first_oldest_first_then_the_decided_newest_first(alice):
    _, conversation = alice
    now = timezone.now()
    decided_old = held_call(conversation, requested_at=now - timedelta(hours=3),
                            outcome="approved")  # fmt: skip
    decided_new = held_call(conversation, requested_at=now, outcome="denied")
    waiting_new = held_call(conversation, requested_at=now - timedelta(minutes=1))
    waiting_old = held_call(conversation, requested_at=now - timedelta(minutes=30))
    client = Client()
    staff(client)

    listed = list(client.get(APPROVALS).context["cl"].result_list)

    assert listed == [waiting_old, waiting_new, decided_new, decided_old]


def test_the_list_filters_on_the_outcome(alice):
    _, conversation = alice
    waiting = held_call(conversation)
    held_call(conversation, outcome="denied")
    client = Client()
    staff(client)

    listed = list(client.get(APPROVALS, {"outcome__exact": "pending"}).context["cl"].result_list)

    assert listed == [waiting]


def test_decisions_are_evidence_nobody_edits_or_deletes_them_in_the_admin(alice):
    _, conversation = alice
    approval = held_call(conversation, outcome="approved")
    client = Client()
    User.objects.create_superuser("root")
    client.force_login(User.objects.get(username="root"))

    page = client.get(f"{APPROVALS}{approval.pk}/change/")
    assert page.status_code == 200
    assert 'type="submit"' not in page.content.decode().split('id="content-main"')[1]
    assert client.get(f"{APPROVALS}{approval.pk}/delete/").status_code == 403
    assert client.get(f"{APPROVALS}add/").status_code == 403


# The actions


def test_approving_from_the_admin_stores_who_and_when_through_the_store(alice):
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    reviewer = staff(client, "view_approval", "decide_approval")

    response = act(client, "approve_selected", approval)

    approval.refresh_from_db()
    assert approval.outcome == "approved"
    assert approval.decided_by == reviewer
    assert approval.decided_by_name == "reviewer"
    assert approval.decided_at is not None
    assert approval.edited_arguments is None and approval.reason == ""
    assert any("Approved 1 call" in message for message in said(response))


def test_a_decision_is_kept_and_said_when_the_pages_cannot_be_told(alice, monkeypatch):
    """The channel layer down (Redis) as staff decide: the decision is stored already, so
    the admin says the pages were not told instead of answering 500."""
    from chat import live

    def layer_down(*args, **kwargs):
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(live, "publish_each_sync", layer_down)
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")

    response = act(client, "approve_selected", approval)

    approval.refresh_from_db()
    assert response.status_code == 200 and approval.outcome == "approved"
    assert any("could not be told" in message for message in said(response))


def test_denying_from_the_admin_says_so_in_the_reason(alice):
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")

    act(client, "deny_selected", approval)

    approval.refresh_from_db()
    assert approval.outcome == "denied"
    assert approval.reason == "denied from the admin by reviewer"


def test_denying_asks_for_a_reason_the_model_will_read(alice):
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")
    data = {"action": "deny_selected", "_selected_action": [approval.pk]}

    page = client.post(APPROVALS, data)  # the first post asks
    assert page.status_code == 200 and 'name="reason"' in page.content.decode()
    approval.refresh_from_db()
    assert approval.outcome == "pending"

    refused = act(client, "deny_selected", approval, reason="bad\x00reason")
    approval.refresh_from_db()
    assert approval.outcome == "pending"
    # Asked again, with the form's error (the chat's card says the same).
    assert "cannot be stored" in refused.content.decode()

    act(client, "deny_selected", approval, reason="  The budget is   spent.  ")
    approval.refresh_from_db()
    assert approval.outcome == "denied"
    assert approval.reason == "The budget is spent. (denied from the admin by reviewer)"


def test_a_reason_over_the_limit_is_refused_with_the_cards_message_not_cut(alice):
    """The chat's card refuses a reason over MAX_REASON_CHARS; the admin cut it silently
    and denied with what was left. Both check it with one form now: the admin asks again,
    saying why, and denies nothing."""
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")

    refused = act(client, "deny_selected", approval, reason="x" * (MAX_REASON_CHARS + 1))

    approval.refresh_from_db()
    assert approval.outcome == "pending" and approval.reason == ""
    html = refused.content.decode()
    assert REASON_TOO_LONG.format(limit=MAX_REASON_CHARS) in html
    assert 'name="reason"' in html and "x" * (MAX_REASON_CHARS + 1) in html  # kept to edit

    act(client, "deny_selected", approval, reason="x" * MAX_REASON_CHARS)
    approval.refresh_from_db()
    assert approval.outcome == "denied" and approval.reason.startswith("x" * MAX_REASON_CHARS)


def test_staff_without_the_permission_to_decide_are_not_offered_the_actions(alice):
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client)

    html = client.get(APPROVALS).content.decode()
    assert "Approve selected calls" not in html
    response = act(client, "approve_selected", approval)

    approval.refresh_from_db()
    assert approval.outcome == "pending"
    assert approval.decided_at is None
    assert response.status_code == 200  # the list again, "No action selected"


def test_a_second_decision_is_refused_with_who_decided_and_nothing_changes(alice):
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")
    act(client, "approve_selected", approval)
    approval.refresh_from_db()
    first = (approval.outcome, approval.decided_by_id, approval.decided_at, approval.reason)

    response = act(client, "deny_selected", approval)

    approval.refresh_from_db()
    assert (approval.outcome, approval.decided_by_id, approval.decided_at, approval.reason) == (
        first
    )
    messages = said(response)
    assert len(messages) == 1
    assert "already decided: approved by reviewer" in messages[0]
    assert "Nothing was changed" in messages[0]


def test_one_refusal_does_not_stop_the_other_selected_calls(alice):
    _, conversation = alice
    expired = held_call(conversation, outcome="expired")
    waiting = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")

    response = act(client, "deny_selected", expired, waiting)

    expired.refresh_from_db()
    waiting.refresh_from_db()
    assert (expired.outcome, waiting.outcome) == ("expired", "denied")
    assert any("already decided: expired" in m for m in said(response))
    assert any("Denied 1 call" in m for m in said(response))


def test_a_call_decided_meanwhile_is_refused_with_who_though_the_list_was_filtered(alice):
    """Staff on the list of waiting calls tick one, and it is decided in the chat before
    they press Go (or while they type a denial's reason): the list's filter no longer
    matches it, yet they are told who decided it, not sent back with nothing said."""
    _, conversation = alice
    approval = held_call(conversation)
    client = Client()
    staff(client, "view_approval", "decide_approval")
    Approval.objects.filter(pk=approval.pk).update(
        outcome="approved", decided_by_name="alice", decided_at=timezone.now()
    )

    for action, form in (("approve_selected", {}), ("deny_selected", {"confirm": "deny"})):
        data = {"action": action, "_selected_action": [approval.pk], **form}
        response = client.post(APPROVALS + "?outcome__exact=pending", data, follow=True)
        assert any("already decided: approved by alice" in m for m in said(response)), action
    approval.refresh_from_db()
    assert approval.outcome == "approved" and approval.decided_by_name == "alice"


def test_deciding_one_of_a_runs_two_held_calls_says_the_run_still_waits(alice):
    """The run goes on only once none of its calls waits: the admin's note must not say
    it goes on now when another of its calls still waits for a decision."""
    _, conversation = alice
    first = held_call(conversation)
    step = AgentStep.objects.create(
        run=first.run, ordinal=3, iteration=1, kind="tool_call", status="pending",
        started_at=first.requested_at, tool_name="weather_forecast", tool_call_id="call_b",
        arguments={"town": "Suzhou"},
    )  # fmt: skip
    second = Approval.objects.create(
        run=first.run, step=step, tool_name="weather_forecast", tool_call_id="call_b",
        arguments=step.arguments, requested_at=first.requested_at,
    )  # fmt: skip
    client = Client()
    staff(client, "view_approval", "decide_approval")

    notes = said(act(client, "deny_selected", first))
    assert any("still wait for a decision on another call" in m for m in notes), notes
    assert not any("go on now" in m for m in notes), notes
    notes = said(act(client, "approve_selected", second))
    assert any("go on now" in m for m in notes) and not any("still wait" in m for m in notes)


def decide_forms(client: Client, approval: Approval) -> dict[str, dict[str, list[str]]]:
    """Return the decision forms on the approval's page, by their action: each form's
    target and fields (name -> values), as a browser would post them."""

    class Forms(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.forms: list[dict] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            attrs = dict(attrs)
            if tag == "form":
                self.forms.append({"target": attrs.get("action"), "fields": {}})
            elif tag == "input" and self.forms and attrs.get("name"):
                fields = self.forms[-1]["fields"]
                fields.setdefault(attrs["name"], []).append(attrs.get("value", ""))

    page = client.get(f"{APPROVALS}{approval.pk}/change/")
    assert page.status_code == 200
    parser = Forms()
    parser.feed(page.content.decode())
    return {f["fields"]["action"][0]: f for f in parser.forms if "action" in f["fields"]}


def test_a_waiting_calls_page_approves_it_through_the_lists_action(alice):
    _, conversation = alice
    approval = held_call(conversation)
    other = held_call(conversation)
    client = Client(enforce_csrf_checks=True)
    reviewer = staff(client, "view_approval", "decide_approval")

    forms = decide_forms(client, approval)
    assert set(forms) == {"approve_selected", "deny_selected"}
    approve = forms["approve_selected"]
    assert approve["target"] == APPROVALS
    assert approve["fields"]["_selected_action"] == [str(approval.pk)]
    assert approve["fields"]["csrfmiddlewaretoken"][0]
    response = client.post(approve["target"], approve["fields"], follow=True)

    approval.refresh_from_db()
    other.refresh_from_db()
    assert (approval.outcome, approval.decided_by) == ("approved", reviewer)
    assert other.outcome == "pending"  # only the page's own call
    assert response.request["PATH_INFO"] == APPROVALS
    assert any("Approved 1 call" in message for message in said(response))


def test_a_waiting_calls_page_denies_it_after_asking_for_the_reason(alice):
    _, conversation = alice
    approval = held_call(conversation)
    client = Client(enforce_csrf_checks=True)
    staff(client, "view_approval", "decide_approval")

    deny = decide_forms(client, approval)["deny_selected"]
    asked = client.post(deny["target"], deny["fields"])
    approval.refresh_from_db()
    assert approval.outcome == "pending"  # the first post asks for the reason
    assert asked.status_code == 200 and 'name="reason"' in asked.content.decode()
    confirm = {**deny["fields"], "confirm": "deny", "reason": "Too dear."}  # as its form posts
    response = client.post(APPROVALS, confirm, follow=True)

    approval.refresh_from_db()
    assert approval.outcome == "denied"
    assert approval.reason == "Too dear. (denied from the admin by reviewer)"
    assert any("Denied 1 call" in message for message in said(response))


def test_a_calls_page_offers_no_decision_without_the_permission_or_once_decided(alice):
    _, conversation = alice
    waiting = held_call(conversation)
    decided = held_call(conversation, outcome="approved")
    viewer, decider = Client(), Client()
    staff(viewer)
    staff(decider, "view_approval", "decide_approval", username="decider")

    assert decide_forms(viewer, waiting) == {}
    assert decide_forms(decider, decided) == {}
    assert set(decide_forms(decider, waiting)) == {"approve_selected", "deny_selected"}


# The run and conversation pages


def test_the_run_page_shows_each_decision_on_its_call(alice):
    _, conversation = alice
    approval = held_call(conversation)
    Approval.objects.filter(pk=approval.pk).update(
        outcome="approved", decided_by_name="alice", decided_at=timezone.now(),
        edited_arguments={"town": "杭州", "nights": 2}, reason="cheaper there",
        always_allowed=True,
    )  # fmt: skip
    client = Client()
    staff(client, "view_agentrun")

    html = client.get(f"/admin/chat/agentrun/{approval.run_id}/change/").content.decode()

    assert "Held for approval: Approved" in html
    assert "Decided by <strong>alice</strong>" in html
    assert "always allowed in this chat" in html
    assert "cheaper there" in html
    assert "Arguments, as the model asked" in html and "苏州" in html
    assert "Arguments, as a person edited them" in html and "杭州" in html


def test_the_run_page_of_a_waiting_run_costs_the_same_queries_with_more_held_calls(
    alice, django_assert_max_num_queries
):
    _, conversation = alice
    run = held_call(conversation).run
    client = Client()
    staff(client, "view_agentrun")
    with CaptureQueriesContext(connection) as one:
        client.get(f"/admin/chat/agentrun/{run.pk}/change/")
    for ordinal in range(3, 8):
        step = AgentStep.objects.create(
            run=run, ordinal=ordinal, iteration=1, kind="tool_call", status="pending",
            started_at=run.started_at, tool_name="calculator", tool_call_id=f"c{ordinal}",
        )  # fmt: skip
        Approval.objects.create(run=run, step=step, tool_name="calculator",
                                requested_at=run.started_at)  # fmt: skip
    with django_assert_max_num_queries(len(one)):
        client.get(f"/admin/chat/agentrun/{run.pk}/change/")


def readonly(html: str, field: str) -> str:
    """Return the text of a run page's read-only field (``tool_calls``, ...)."""
    after = html.split(f'field-{field}">', 1)[1]  # its own box, not its row's classes
    shown = after.split('<div class="readonly">', 1)[1].split("</div>", 1)[0]
    return re.sub(r"<[^>]+>", "", shown).strip()


def test_the_page_of_a_waiting_run_counts_its_tool_calls_so_far(alice):
    _, conversation = alice
    approval = held_call(conversation)
    run = approval.run
    AgentRun.objects.filter(pk=run.pk).update(tool_call_count=0)  # stored at the run's end
    for ordinal, status, result in ((3, "success", "2 rooms"), (4, "error", "timed out")):
        AgentStep.objects.create(
            run=run, ordinal=ordinal, iteration=1, kind="tool_call", status=status,
            started_at=run.started_at, tool_name="calculator", tool_call_id=f"c{ordinal}",
            result=result,
        )  # fmt: skip
    client = Client()
    staff(client, "view_agentrun")
    page = f"/admin/chat/agentrun/{run.pk}/change/"

    html = client.get(page).content.decode()
    assert readonly(html, "tool_calls") == "3 so far (1 waiting for approval)"
    assert readonly(html, "errors") == "1"  # the call that timed out

    # Decided, not yet resumed: its step is still pending, but nothing waits any more.
    Approval.objects.filter(pk=approval.pk).update(outcome="approved")
    assert readonly(client.get(page).content.decode(), "tool_calls") == "3 so far"


def test_a_waiting_runs_page_says_since_when_it_waits_and_how_long_it_waited_before(alice):
    _, conversation = alice
    run = held_call(conversation).run
    client = Client()
    staff(client, "view_agentrun")
    page = f"/admin/chat/agentrun/{run.pk}/change/"

    first = readonly(client.get(page).content.decode(), "waited_shown")
    assert first.startswith("waiting since ") and "before" not in first

    AgentRun.objects.filter(pk=run.pk).update(waited_ms=2500)
    again = readonly(client.get(page).content.decode(), "waited_shown")
    assert again.startswith("2.5 s before; waiting again since "), again


def test_the_run_list_filters_runs_waiting_for_approval(alice):
    _, conversation = alice
    waiting = held_call(conversation).run
    client = Client()
    staff(client, "view_agentrun")

    response = client.get("/admin/chat/agentrun/", {"status__exact": "waiting"})

    assert "Waiting for approval" in response.content.decode()
    assert list(response.context["cl"].result_list) == [waiting]


def test_the_conversation_page_shows_its_always_allowed_tools(alice):
    _, conversation = alice
    ToolGrant.objects.create(conversation=conversation, tool_name="weather_forecast",
                             granted_by=conversation.owner, granted_at=timezone.now())  # fmt: skip
    client = Client()
    staff(client, "view_conversation")

    html = client.get(f"/admin/chat/conversation/{conversation.pk}/change/").content.decode()

    assert "tools always allowed in this chat" in html.lower()
    assert "weather_forecast" in html
    assert "alice" in html


# Tool policies


def test_a_policy_saved_in_the_admin_records_who_set_it(client, settings):
    settings.AGENT_TOOL_POLICIES = {"calculator": "deny"}
    editor = staff(client, "view_toolapprovalpolicy", "add_toolapprovalpolicy",
                   "change_toolapprovalpolicy", username="editor")  # fmt: skip

    response = client.post(f"{POLICIES}add/", {"tool_name": "check_bnb_availability",
                                                 "policy": "ask"})  # fmt: skip

    assert response.status_code == 302
    row = ToolApprovalPolicy.objects.get()
    assert (row.tool_name, row.policy, row.updated_by) == ("check_bnb_availability", "ask", editor)


def test_the_policy_form_says_what_the_setting_sets_for_each_tool(client, settings):
    """The hint follows the tool picked: it is in each choice (a new row's read-only
    "AGENT_TOOL_POLICIES says" could only say the default, whatever tool was picked)."""
    settings.AGENT_TOOL_POLICIES = {"check_bnb_availability": "ask"}
    staff(client, "view_toolapprovalpolicy", "add_toolapprovalpolicy",
          "change_toolapprovalpolicy")  # fmt: skip

    added = client.get(f"{POLICIES}add/")
    choices = dict(added.context["adminform"].form.fields["tool_name"].choices)
    assert choices["check_bnb_availability"] == "check_bnb_availability (AGENT_TOOL_POLICIES: ask)"
    assert choices["calculator"] == "calculator"
    assert "AGENT_TOOL_POLICIES says" not in added.content.decode()

    row = ToolApprovalPolicy.objects.create(tool_name="check_bnb_availability", policy="allow")
    changed = client.get(f"{POLICIES}{row.pk}/change/").content.decode()
    assert "AGENT_TOOL_POLICIES says" in changed and ">ask<" in changed


def test_a_policy_for_a_tool_that_is_not_registered_is_refused(client):
    staff(client, "view_toolapprovalpolicy", "add_toolapprovalpolicy")

    response = client.post(f"{POLICIES}add/", {"tool_name": "rm_rf", "policy": "allow"})

    assert response.status_code == 200
    assert "tool_name" in response.context["adminform"].form.errors
    assert not ToolApprovalPolicy.objects.exists()


def test_the_policy_list_shows_each_registered_tools_policy_in_effect(client, settings):
    settings.AGENT_TOOL_POLICIES = {"calculator": "deny", "weather_forecast": "ask"}
    ToolApprovalPolicy.objects.create(tool_name="weather_forecast", policy="allow")
    staff(client, "view_toolapprovalpolicy")

    response = client.get(POLICIES)

    effective = {row.tool_name: (row.policy, row.source)
                 for row in response.context["effective_policies"]}  # fmt: skip
    assert effective["weather_forecast"] == ("allow", "set in this admin")
    assert effective["calculator"] == ("deny", "AGENT_TOOL_POLICIES")
    assert effective["current_time"] == ("allow", "default")
    assert 'id="effective-policies"' in response.content.decode()


def test_staff_without_the_change_permission_cannot_edit_a_policy(client):
    row = ToolApprovalPolicy.objects.create(tool_name="calculator", policy="ask")
    staff(client, "view_toolapprovalpolicy")

    client.post(f"{POLICIES}{row.pk}/change/", {"tool_name": "calculator", "policy": "allow"})

    row.refresh_from_db()
    assert row.policy == "ask"


def test_deleting_a_chat_stops_its_waiting_run_so_nobody_can_resume_it(alice):
    client, conversation = alice
    approval = held_call(conversation)

    assert client.post(f"/c/{conversation.pk}/delete/").status_code == 302

    run = AgentRun.objects.get(pk=approval.run_id)
    approval.refresh_from_db()
    step = AgentStep.objects.get(pk=approval.step_id)
    assert run.status == "cancelled" and run.iterations == 1
    assert approval.outcome == "cancelled" and step.error_type == "ApprovalCancelled"
    from chat.store import runs_ready

    assert runs_ready() == []  # the sweep finds nothing to resume


def test_a_waiting_runs_vanished_model_is_not_replaced_under_it(alice):
    from chat import store

    _, conversation = alice
    Conversation.objects.filter(pk=conversation.pk).update(model_key="retired")
    held_call(conversation)
    owner = store.Owner.of(conversation.owner, None)

    kept = store.conversation_replace_model(owner=owner, conversation_id=conversation.pk,
                                            old_key="retired", model_key="demo")  # fmt: skip

    assert kept.model_key == "retired"  # the run resumes with the model it began with


def test_an_approvals_page_shows_the_question_and_what_the_model_said_before_the_call(alice):
    _, conversation = alice
    approval = held_call(conversation)
    AgentStep.objects.filter(run=approval.run, kind="model_turn").update(
        text="I will check the B&B in Suzhou for you."
    )
    client = Client()
    staff(client)

    html = client.get(f"/admin/chat/approval/{approval.pk}/change/").content.decode()

    assert "the question" in html.lower() and "Book it" in html
    assert "what the model said before the call" in html.lower()
    assert "I will check the B&amp;B in Suzhou for you." in html


def test_an_approvals_page_says_when_the_model_wrote_nothing_before_the_call(alice):
    _, conversation = alice
    client = Client()
    staff(client)
    html = client.get(f"/admin/chat/approval/{held_call(conversation).pk}/change/").content.decode()
    assert "nothing: the model only asked for tool calls" in html
