"""Staff read runs redacted in the admin unless they hold ``chat.view_unredacted_trace``
(superusers do); the rows are never changed by it."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth.models import Permission, User

from chat.models import AgentRun, AgentStep, Approval, Conversation, Feedback
from chat.traces.viewing import redact_loaded, redactor_for
from tests.planted_secrets import DECIDER, TEXT, USERNAME, leaked

pytestmark = pytest.mark.django_db

VIEW = ("view_agentrun", "view_conversation", "view_approval", "view_feedback")


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)  # permissions are cached on the instance


def pages(run: AgentRun) -> list[str]:
    approval = Approval.objects.get(run=run)
    feedback = Feedback.objects.get(run=run)
    return [
        "/admin/chat/agentrun/",
        f"/admin/chat/agentrun/{run.pk}/change/",
        f"/admin/chat/agentrun/{run.pk}/conversation/",
        "/admin/chat/conversation/",
        f"/admin/chat/conversation/{run.conversation_id}/change/",
        "/admin/chat/approval/",
        f"/admin/chat/approval/{approval.pk}/change/",
        "/admin/chat/feedback/",
        f"/admin/chat/feedback/{feedback.pk}/change/",
    ]


def read(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return html.unescape(response.content.decode())


def secrets_in(text: str, planted) -> list[str]:
    # Usernames are shown as they are in the admin (staff manage the accounts).
    return [found for found in leaked(text, planted) if found not in (USERNAME, DECIDER)]


def test_staff_without_the_permission_read_every_run_page_redacted(client, planted_run):
    client.force_login(staff("auditor", *VIEW))

    for url in pages(planted_run.run):
        text = read(client, url)
        assert secrets_in(text, planted_run) == [], url
    run_page = read(client, f"/admin/chat/agentrun/{planted_run.run.pk}/change/")
    for mark in ("email", "phone", "card", "api_key", "bearer", "secret", "custom"):
        assert f"[REDACTED:{mark}]" in run_page


def test_staff_with_the_permission_read_the_stored_text(client, planted_run):
    client.force_login(staff("trusted", *VIEW, "view_unredacted_trace"))

    for url in pages(planted_run.run):
        assert "[REDACTED:" not in read(client, url), url
    run_page = read(client, f"/admin/chat/agentrun/{planted_run.run.pk}/change/")
    assert "4111 1111 1111 1111" in run_page
    assert "sk-proj-Pl4ntedOpenAIkey0123456789abcd" in run_page


def test_superusers_read_the_stored_text(client, planted_run):
    client.force_login(User.objects.create_superuser("root"))

    text = read(client, f"/admin/chat/agentrun/{planted_run.run.pk}/conversation/")
    assert "planted.person@example.com" in text
    assert "[REDACTED:" not in text


def test_reading_redacted_pages_changes_no_stored_row(client, planted_run):
    client.force_login(staff("auditor", *VIEW))
    for url in pages(planted_run.run):
        read(client, url)

    run = AgentRun.objects.get(pk=planted_run.run.pk)
    assert run.output == TEXT and run.user_message.content == TEXT
    assert Conversation.objects.get(pk=run.conversation_id).title == TEXT[:200]
    call = AgentStep.objects.get(run=run, ordinal=2)
    assert call.result == TEXT and call.arguments["note"] == TEXT
    assert Approval.objects.get(step=call).reason == TEXT


def test_a_row_redacted_for_display_cannot_be_saved(planted_run):
    run = AgentRun.objects.select_related("user_message").get(pk=planted_run.run.pk)
    redact_loaded(redactor_for(staff("auditor", *VIEW)), run)

    assert "[REDACTED:card]" in run.output
    with pytest.raises(RuntimeError, match="redacted for display"):
        run.save()
    with pytest.raises(RuntimeError, match="redacted for display"):
        run.user_message.save()
    assert AgentRun.objects.get(pk=run.pk).output == TEXT


def test_with_no_policy_nobody_reads_redacted_text(client, planted_run, settings):
    settings.TRACE_REDACT = ["none"]
    settings.TRACE_REDACT_PATTERNS = []
    client.force_login(staff("auditor", *VIEW))

    assert "[REDACTED:" not in read(client, f"/admin/chat/agentrun/{planted_run.run.pk}/change/")
