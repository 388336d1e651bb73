"""Two runs compared through the real entry points: the chat's "Compare" menu and page
(owner only, 404 otherwise) and the admin's run page and comparison (view permission,
redacted for staff without ``chat.view_unredacted_trace``)."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.models import AgentRun, AgentStep, BranchKind, Conversation, Message
from tests.planted_secrets import leaked

pytestmark = pytest.mark.django_db

QUESTION = "What's the weather in Suzhou?"


def store_run(
    conversation: Conversation,
    *,
    question: str = QUESTION,
    town: str = "Suzhou",
    result: str = '{"high_c": 8}',
    call_status: str = "success",
    strategy: str = "tool_calling",
    branched_from: AgentRun | None = None,
    parent: Message | None = None,
    minutes: int = 0,
) -> AgentRun:
    """Store an ended run: a model turn, one weather call, the answer turn."""
    now = timezone.now() + timedelta(minutes=minutes)
    message = Message.objects.create(
        conversation=conversation, role="user", content=question, parent=parent
    )
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy=strategy, provider="demo",
        model_name="demo-scripted", status="succeeded", started_at=now,
        finished_at=now + timedelta(seconds=1), duration_ms=1000, iterations=2,
        output=f"It is 8 °C in {town}.", tool_call_count=1,
        tool_error_count=int(call_status == "error"), total_tokens=120,
        branched_from=branched_from,
        branch_kind=BranchKind.REGENERATE if branched_from else "",
    )  # fmt: skip
    AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="model_turn",
                             status="success", started_at=now, total_tokens=70)  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=2, iteration=1, kind="tool_call", status=call_status, started_at=now,
        tool_name="weather_forecast", tool_call_id="call_1", arguments={"town": town},
        result=result, duration_ms=20,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=3, iteration=2, kind="model_turn", status="success", started_at=now,
        text=run.output, result=run.output, total_tokens=50,
    )  # fmt: skip
    return run


@pytest.fixture
def alice_chat() -> tuple[Client, Conversation]:
    user = User.objects.create_user("alice")
    client = Client()
    client.force_login(user)
    return client, Conversation.objects.create(owner=user, title="Suzhou")


def compare_url(run: AgentRun, other: AgentRun) -> str:
    return f"/c/{run.conversation_id}/compare/{run.pk}/{other.pk}/"


def menu_url(run: AgentRun) -> str:
    return f"/c/{run.conversation_id}/runs/{run.pk}/compare/"


def text_of(response) -> str:
    return html.unescape(response.content.decode())


# The chat


def test_the_menu_lists_the_other_runs_of_the_question_by_text_branch_and_sibling(alice_chat):
    client, conversation = alice_chat
    first = store_run(conversation)
    again = store_run(conversation, minutes=1)  # the same text asked again
    regenerated = store_run(conversation, question="Weather, Suzhou?", branched_from=first,
                            minutes=2)  # fmt: skip
    before = store_run(conversation, question="Plan a day", minutes=-5)
    edited = store_run(conversation, question="Weather in Shanghai?", minutes=3,
                       parent=before.user_message)  # fmt: skip
    sibling = Message.objects.get(pk=first.user_message_id)
    sibling.parent = before.user_message
    sibling.save()
    unrelated = store_run(conversation, question="Something else", minutes=4)

    response = client.get(menu_url(first))

    assert response.status_code == 200
    listed = [run.pk for run in response.context["takes"]]
    assert listed == [edited.pk, regenerated.pk, again.pk]  # the newest first
    assert unrelated.pk not in listed and before.pk not in listed
    body = text_of(response)
    assert f"{compare_url(first, again)}" in body
    assert "Regenerated answer" in body and "question edited" in body
    # When each ran, in the reader's time zone as the chat's other times (static/js/times.js).
    assert f'<time datetime="{again.started_at.isoformat()}" data-local' in body


def test_a_run_with_no_other_take_says_so_in_its_menu(alice_chat):
    client, conversation = alice_chat
    run = store_run(conversation)
    response = client.get(menu_url(run))
    assert response.status_code == 200
    assert "No other run of this question in this chat yet" in text_of(response)


def test_every_ended_run_on_the_page_has_a_compare_menu(alice_chat):
    client, conversation = alice_chat
    run = store_run(conversation)
    body = text_of(client.get(f"/c/{conversation.pk}/"))
    assert f'id="run-{run.pk}-compare"' in body
    assert menu_url(run) in body


def test_the_compare_page_shows_both_runs_aligned_with_the_differences_named(alice_chat):
    client, conversation = alice_chat
    first = store_run(conversation)
    other = store_run(conversation, town="Shanghai", result='{"high_c": 11}', strategy="react",
                      minutes=1)  # fmt: skip

    response = client.get(compare_url(first, other))

    assert response.status_code == 200
    comparison = response.context["comparison"]
    assert [row.change for row in comparison.rows] == ["same", "differs", "differs"]
    assert comparison.rows[1].differs == {"arguments", "result"}
    body = text_of(response)
    assert f"Run {first.pk} and run {other.pk}, step by step" in body
    # In words beside the colour; the sign is hidden from screen readers ("not equal to").
    assert '<span aria-hidden="true">≠</span> differs: Arguments, Result' in body
    assert body.count("</span> differs") >= 5  # the row, both sides' fields, the totals
    assert "ReAct (text)" in body and "Native tool calling" in body
    assert '"town": "Shanghai"' in body


def test_a_run_compared_while_it_goes_is_compared_so_far(alice_chat):
    client, conversation = alice_chat
    first = store_run(conversation)
    going = store_run(conversation, minutes=1)
    AgentRun.objects.filter(pk=going.pk).update(status="running", finished_at=None,
                                                duration_ms=None, tool_call_count=0)  # fmt: skip
    going.steps.filter(ordinal=3).delete()
    going.steps.filter(ordinal=2).update(status="running", result="", duration_ms=None)

    response = client.get(compare_url(first, going))

    assert response.status_code == 200
    body = text_of(response)
    assert "A run is still going: compared as far as it has got." in body
    assert "1 so far" in body and "not finished yet" in body
    assert f"only in run {first.pk}" in body


def test_someone_elses_conversation_or_run_is_not_found(alice_chat):
    client, conversation = alice_chat
    first, other = store_run(conversation), store_run(conversation, minutes=1)
    bob = User.objects.create_user("bob")
    bobs = store_run(Conversation.objects.create(owner=bob))

    stranger = Client()
    stranger.force_login(bob)
    assert stranger.get(compare_url(first, other)).status_code == 404
    assert stranger.get(menu_url(first)).status_code == 404
    assert Client().get(compare_url(first, other)).status_code == 404  # a visitor
    # Alice's conversation, but a run of Bob's: not one of its runs.
    assert client.get(f"/c/{conversation.pk}/compare/{first.pk}/{bobs.pk}/").status_code == 404
    assert client.get(f"/c/{conversation.pk}/runs/{bobs.pk}/compare/").status_code == 404
    assert client.get(f"/c/{conversation.pk}/compare/{first.pk}/999999/").status_code == 404


def test_a_run_compared_with_itself_is_refused_clearly_and_the_next_request_works(alice_chat):
    client, conversation = alice_chat
    first, other = store_run(conversation), store_run(conversation, minutes=1)
    response = client.get(compare_url(first, first))
    assert response.status_code == 400
    assert "Pick two different runs" in response.content.decode()
    assert client.get(compare_url(first, other)).status_code == 200


def test_the_compare_pages_are_get_only(alice_chat):
    client, conversation = alice_chat
    first, other = store_run(conversation), store_run(conversation, minutes=1)
    assert client.post(compare_url(first, other)).status_code == 405
    assert client.post(menu_url(first)).status_code == 405


# The admin


VIEW = ("view_agentrun", "view_conversation")


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)


def admin_compare(run: AgentRun, with_id: object = None) -> str:
    url = f"/admin/chat/agentrun/{run.pk}/compare/"
    return url if with_id is None else f"{url}?with={with_id}"


def test_the_admin_run_page_links_to_each_other_run_of_its_question(client, alice_chat):
    _, conversation = alice_chat
    first, other = store_run(conversation), store_run(conversation, minutes=1)
    store_run(conversation, question="Unrelated", minutes=2)
    client.force_login(staff("auditor", *VIEW))

    body = text_of(client.get(f"/admin/chat/agentrun/{first.pk}/change/"))

    assert f'{admin_compare(first, other.pk)}"' in body
    assert body.count("Compare with run ") == 1
    assert 'name="with"' in body  # any run, by its id


def test_the_admin_compares_any_two_runs_by_id(client, alice_chat):
    _, conversation = alice_chat
    first = store_run(conversation)
    elsewhere = store_run(Conversation.objects.create(title="another"), town="Beijing")
    client.force_login(staff("auditor", *VIEW))

    response = client.get(admin_compare(first, elsewhere.pk))

    assert response.status_code == 200
    body = text_of(response)
    assert f"Run {first.pk} and run {elsewhere.pk} compared" in body
    assert "</span> differs: Arguments</span>" in body  # the same result, other arguments


def test_the_admin_comparison_refuses_bad_ids_clearly(client, alice_chat):
    _, conversation = alice_chat
    first = store_run(conversation)
    client.force_login(staff("auditor", *VIEW))

    chooser = client.get(admin_compare(first))
    assert chooser.status_code == 200 and "comparison" not in chooser.context
    bad = client.get(admin_compare(first, "abc"))
    assert bad.status_code == 400 and "A run's id is a number" in text_of(bad)
    itself = client.get(admin_compare(first, first.pk))
    assert itself.status_code == 400 and "That is this run" in text_of(itself)
    missing = client.get(admin_compare(first, 999999))
    assert missing.status_code == 404 and "There is no run 999999." in text_of(missing)
    assert client.get("/admin/chat/agentrun/999999/compare/?with=1").status_code == 404


def test_staff_without_the_run_view_permission_cannot_compare(client, alice_chat):
    _, conversation = alice_chat
    first, other = store_run(conversation), store_run(conversation, minutes=1)
    client.force_login(staff("nobody", "view_conversation"))
    assert client.get(admin_compare(first, other.pk)).status_code == 403
    client.force_login(User.objects.create_user("plain"))
    assert client.get(admin_compare(first, other.pk)).status_code == 302  # to the login


def test_the_admin_comparison_is_redacted_for_staff_without_the_permission(client, planted_run):
    run = planted_run.run
    other = store_run(run.conversation, question=run.user_message.content, minutes=1)

    client.force_login(staff("auditor", *VIEW))
    body = text_of(client.get(admin_compare(run, other.pk)))
    assert "[REDACTED:" in body
    owner = run.conversation.owner.username  # usernames are shown as they are to staff
    assert [found for found in leaked(body, planted_run) if found != owner] == []

    client.force_login(staff("trusted", *VIEW, "view_unredacted_trace"))
    body = text_of(client.get(admin_compare(run, other.pk)))
    assert "[REDACTED:" not in body
    assert "4111 1111 1111 1111" in body


def test_the_compare_page_makes_the_same_number_of_queries_for_short_and_long_runs(alice_chat):
    client, conversation = alice_chat

    def queries(extra_calls: int) -> int:
        first, other = store_run(conversation), store_run(conversation, minutes=1)
        now = timezone.now()
        for ordinal in range(4, 4 + extra_calls):
            AgentStep.objects.create(
                run=other, ordinal=ordinal, iteration=2, kind="tool_call", status="success",
                started_at=now, tool_name="calculator", arguments={"e": ordinal}, result="1",
            )  # fmt: skip
        with CaptureQueriesContext(connection) as captured:
            assert client.get(compare_url(first, other)).status_code == 200
        return len(captured)

    assert queries(0) == queries(60)
