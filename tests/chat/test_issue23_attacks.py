"""Issue 23's branches, queue and comparisons attacked as a hostile user and a hostile
world would: malformed frames, other people's ids, forks of forks, history after branch
switches, ids too large for any row. Each test names the fault it found or the refusal
it holds to."""

from __future__ import annotations

import asyncio
import html
import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from langchain_core.messages import AIMessage

from chat import store
from chat.branches import create_branch
from chat.consumers import CLOSE_DELETED
from chat.fragments import MESSAGE_ACCEPTED
from chat.models import AgentRun, BranchKind, Conversation, QueuedMessage
from chat.runs import create_run
from chat.store.branches import NOT_A_QUESTION
from tests.chat.conftest import wait_for_runs
from tests.chat.test_branches import (
    answered,
    asked,
    ended,
    make_conversation,
    regenerate,
    run_scripted,
)
from tests.chat.test_consumer import ask_over_socket, connect, receive_until
from tests.chat.test_consumer import make_conversation as make_socket_conversation
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


# Forks


def test_a_fork_of_a_fork_is_refused_for_a_source_question_the_fork_does_not_show():
    """Found: the fork's path check read the source's whole tree (``ancestors`` extends
    the tree it is given), so a fork could be made from a source question on another
    branch than the one the fork continues, showing and sending an exchange it never had."""
    owner, conversation = make_conversation()
    first = asked(conversation, "Q1", "A1")
    second = asked(conversation, "Q2", "A2")
    ended(regenerate(conversation, second), "A2 again")
    fork = store.conversation_fork(owner=owner, conversation_id=conversation.pk,
                                   question_id=first.user_message_id)  # fmt: skip

    with pytest.raises(store.BranchRefused, match=NOT_A_QUESTION):
        store.conversation_fork(owner=owner, conversation_id=fork.pk,
                                question_id=second.user_message_id)  # fmt: skip
    again = store.conversation_fork(owner=owner, conversation_id=fork.pk,
                                    question_id=first.user_message_id)  # fmt: skip
    assert again.forked_from_id == first.user_message_id


def test_the_fork_view_answers_404_for_a_source_question_off_the_forks_path(client):
    user = User.objects.create_user("alice")
    client.force_login(user)
    owner = store.Owner(user_id=user.pk, guest_key="")
    conversation = Conversation.objects.create(owner=user)
    first = asked(conversation, "Q1", "A1")
    second = asked(conversation, "Q2", "A2")
    fork = store.conversation_fork(owner=owner, conversation_id=conversation.pk,
                                   question_id=first.user_message_id)  # fmt: skip

    response = client.post(f"/c/{fork.pk}/fork/", {"question": second.user_message_id})

    assert response.status_code == 404
    assert Conversation.objects.count() == 2


async def test_a_fork_of_a_fork_sends_the_path_through_both_sources_and_no_sibling():
    owner, conversation = await database_sync_to_async(make_conversation)()
    first, _ = await answered(conversation.pk, "Q1", "A1")
    await answered(conversation.pk, "Q2", "A2")
    again = await database_sync_to_async(regenerate)(conversation, first)
    await run_scripted(again, "A1 again")
    fork = await database_sync_to_async(store.conversation_fork)(
        owner=owner, conversation_id=conversation.pk, question_id=first.user_message_id
    )
    own, _ = await answered(fork.pk, "F1", "FA1")
    fork2 = await database_sync_to_async(store.conversation_fork)(
        owner=owner, conversation_id=fork.pk, question_id=own.user_message_id
    )

    _, model = await answered(fork2.pk, "G1", "GA1")

    sent = [message.text for message in model.prompts[0][1:]]
    assert sent == ["Q1", "A1", "F1", "FA1", "G1"]


# History after branch switches


async def test_history_after_switching_branches_holds_only_the_shown_branch():
    owner, conversation = await database_sync_to_async(make_conversation)()
    first, _ = await answered(conversation.pk, "Q1", "A1")
    await answered(conversation.pk, "Q2", "A2")
    other = await database_sync_to_async(regenerate)(conversation, first)
    await run_scripted(other, "A1 again")
    # Back to the first take's branch: its newest leaf is Q2.
    await database_sync_to_async(store.branch_switch)(
        owner=owner, conversation_id=conversation.pk, question_id=first.user_message_id
    )
    _, model = await answered(conversation.pk, "Q3", "A3")
    await database_sync_to_async(store.branch_switch)(
        owner=owner, conversation_id=conversation.pk, question_id=other.user_message_id
    )
    _, model4 = await answered(conversation.pk, "Q4", "A4")

    assert [m.text for m in model.prompts[0][1:]] == ["Q1", "A1", "Q2", "A2", "Q3"]
    assert [m.text for m in model4.prompts[0][1:]] == ["Q1", "A1 again", "Q4"]


# Ids too large for any row, in the compare views


@pytest.fixture
def owned(client) -> tuple[Client, Conversation]:
    user = User.objects.create_user("alice")
    client.force_login(user)
    return client, Conversation.objects.create(owner=user)


@pytest.mark.parametrize("huge", [2**63, 2**70, 10**40])
def test_the_compare_views_answer_404_for_ids_too_large_for_a_row(owned, huge):
    client, conversation = owned
    run = asked(conversation, "Q1")

    menu = client.get(f"/c/{conversation.pk}/runs/{huge}/compare/")
    left = client.get(f"/c/{conversation.pk}/compare/{huge}/{run.pk}/")
    right = client.get(f"/c/{conversation.pk}/compare/{run.pk}/{huge}/")
    chat = client.get(f"/c/{huge}/compare/{run.pk}/{run.pk + 1}/")

    assert [r.status_code for r in (menu, left, right, chat)] == [404] * 4


def test_the_admin_compare_answers_404_for_a_run_id_too_large(admin_client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    run = asked(conversation, "Q1")

    response = admin_client.get(f"/admin/chat/agentrun/{run.pk}/compare/?with={2**63}")
    huge = admin_client.get(f"/admin/chat/agentrun/{2**70}/compare/?with={run.pk}")

    assert response.status_code in (400, 404)
    assert huge.status_code in (302, 404)


# Queue frames with other people's ids


def test_a_queued_message_of_another_conversation_cannot_be_removed_or_steered():
    _, mine = make_conversation()
    _, theirs = make_conversation("bob")
    create_run(conversation_id=theirs.pk, content="Going")
    row = QueuedMessage.objects.create(
        conversation=theirs, content="Bob's next", created_at=timezone.now()
    )

    for change in (store.queue_remove, store.queue_steer):
        kwargs = {"at": row.created_at} if change is store.queue_steer else {}
        with pytest.raises(store.NotQueued):
            change(conversation_id=mine.pk, queued_id=row.pk, **kwargs)

    row.refresh_from_db()
    assert row.steered_at is None


def test_frames_with_hostile_ids_are_parsed_into_refusals_never_crashes():
    from chat.frames import FrameRefused, QueueFrameRefused, parse_frame

    hostile = [
        {"type": "regenerate", "run": 1.5},
        {"type": "regenerate", "run": -3},
        {"type": "regenerate", "run": True},
        {"type": "regenerate", "run": "1e3"},
        {"type": "regenerate", "run": "\u0661"},
        {"type": "regenerate", "run": 1, "model": {"key": "x"}},
        {"type": "edit", "run": 1, "content": "a\x00b"},
        {"type": "edit", "run": 1, "content": "x" * 10_001},
        {"type": "edit", "run": 1, "content": ["x"]},
        {"type": ["retry"], "run": 1},
        {"type": {"t": 1}},
    ]
    for payload in hostile:
        with pytest.raises(FrameRefused):
            parse_frame(json.dumps(payload), None, max_chars=10_000)
    for payload in (
        {"type": "unqueue", "queued": 2.0},
        {"type": "steer", "queued": -1},
        {"type": "steer", "queued": 2**64},
        {"type": "unqueue", "queued": None},
        {"type": "unqueue", "queued": "9" * 5000},
    ):
        with pytest.raises(QueueFrameRefused):
            parse_frame(json.dumps(payload), None, max_chars=10_000)


# Edit: the question as it is, not as it is shown


def test_the_edit_box_holds_the_question_as_stored_so_an_unchanged_edit_sends_the_same(owned):
    """Found: the edit box was filled with the question through ``reveal_bidi``, which
    shows a bidi control as the text "<U+200F>": a question with a right-to-left mark
    (common in Hebrew and Arabic) came back from "Run edited question" with the marker's
    eight characters in its place, a question the person never wrote."""
    client, conversation = owned
    question = "\u05e9\u05dc\u05d5\u05dd\u200f (hello)"
    run = asked(conversation, question)

    page = client.get(f"/c/{conversation.pk}/").content.decode()
    box = re.search(rf'<textarea id="run-{run.pk}-edit"[^>]*>(.*?)</textarea>', page, re.S)

    assert box is not None
    assert html.unescape(box.group(1)) == question
    assert "&lt;U+200F&gt;" in page  # the question itself still shows the mark


# The socket: a chat deleted under it, two tabs at once, hostile queue frames


async def closed_code(tab) -> int:
    """Receive until the socket closes; return its close code."""
    while True:
        output = await tab.receive_output(timeout=WAIT_S)
        if output["type"] == "websocket.close":
            return output.get("code")


@pytest.mark.parametrize(
    "sent",
    [
        {"content": "Hello?"},
        {"content": "Hello?", "client_id": "abc-1"},
        {"type": "regenerate", "run": 1},
    ],
)
async def test_a_frame_for_a_chat_deleted_with_no_message_closes_4410_not_a_crash(sent):
    """Found: a chat with no message is deleted outright (not hidden); a frame that
    reached its socket before the socket was closed met ``Conversation.DoesNotExist``
    in the store, which the consumer does not catch (the socket died with 1011 and a
    server error logged) instead of the 4410 a hidden chat gets."""
    user, conversation = await make_socket_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).delete)()

    await tab.send_to(text_data=json.dumps(sent))

    assert await closed_code(tab) == CLOSE_DELETED


async def test_two_tabs_regenerating_at_once_start_one_run_and_refuse_the_other(scripted_model):
    scripted_model.script = [AIMessage("A1"), AIMessage("A1 again"), AIMessage("A1 third")]
    user, conversation = await make_socket_conversation()
    await ask_over_socket(conversation, user, "Q1")
    (old,) = await database_sync_to_async(list)(AgentRun.objects.filter(conversation=conversation))
    tabs = [await connect(conversation.pk, user) for _ in range(2)]
    for tab in tabs:
        await tab.connect()
        await tab.receive_from()  # the latest run, sent to a page that just connected

    regenerate_frame = json.dumps({"type": "regenerate", "run": old.pk})
    await asyncio.gather(*(tab.send_to(text_data=regenerate_frame) for tab in tabs))
    answers = [
        await receive_until(
            tab, lambda f: 'hx-swap-oob="innerHTML:#messages"' in f or 'id="chat-error"' in f
        )
        for tab in tabs
    ]
    await wait_for_runs()
    for tab in tabs:
        await tab.disconnect()

    runs = await database_sync_to_async(list)(AgentRun.objects.filter(conversation=conversation))
    assert len(runs) == 2
    refused = [frames[-1] for frames in answers if "chat-error visible" in frames[-1]]
    # The second regenerate came while the first's run went (or after it ended, when it
    # would be a third take): either way one refusal or one more run, never a crash.
    assert len(refused) == 1


async def test_queue_frames_with_other_peoples_and_impossible_ids_leave_the_socket_working(
    scripted_model,
):
    scripted_model.script = [AIMessage("ok")]
    user, conversation = await make_socket_conversation()
    _, theirs = await make_socket_conversation("bob")
    row = await database_sync_to_async(QueuedMessage.objects.create)(
        conversation=theirs, content="Bob's", created_at=timezone.now()
    )
    tab = await connect(conversation.pk, user)
    await tab.connect()

    for queued in (row.pk, -1, 2**64, "1 OR 1=1", 0.5):
        for kind in ("unqueue", "steer"):
            await tab.send_to(text_data=json.dumps({"type": kind, "queued": queued}))
            notice = await tab.receive_from()
            assert 'id="chat-error"' in notice and "Bob" not in notice
    await tab.send_to(text_data=json.dumps({"content": "Still there?"}))
    await receive_until(tab, lambda f: MESSAGE_ACCEPTED in f)
    await wait_for_runs()
    await tab.disconnect()

    assert await database_sync_to_async(QueuedMessage.objects.filter(pk=row.pk).exists)()


# A branch switch while a message waits in the queue


def test_a_switch_is_refused_while_a_message_waits_so_it_goes_where_it_was_written():
    """Found: the switch was refused while a run goes, but not while a message it queued
    still waits (held by the rate limit, or its owner's process gone): switching then
    sent that follow-up after another take's answer, one its writer had not read."""
    owner, conversation = make_conversation()
    first = asked(conversation, "Q1", "A1")
    ended(regenerate(conversation, first), "A1 again")
    going = create_run(conversation_id=conversation.pk, content="Q2")
    QueuedMessage.objects.create(
        conversation=conversation, content="And then?", created_at=timezone.now()
    )
    ended(going, "A2")

    with pytest.raises(store.BranchRefused, match="waiting to be sent"):
        store.branch_switch(owner=owner, conversation_id=conversation.pk,
                            question_id=first.user_message_id)  # fmt: skip
    conversation.refresh_from_db()
    assert conversation.current_message_id == going.user_message_id


# Hostile text in an edited question, an answer and the comparison of two runs

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def test_hostile_text_of_an_edit_and_its_answer_is_inert_on_the_page_and_the_comparison(owned):
    client, conversation = owned
    old = asked(conversation, "Q1", "A1")
    edit = create_branch(conversation_id=conversation.pk, run_id=old.pk,
                         kind=BranchKind.EDIT, content=HOSTILE)  # fmt: skip
    ended(edit, f"{HOSTILE}\n\n[x](javascript:alert(1))")

    pages = [
        client.get(f"/c/{conversation.pk}/").content.decode(),
        client.get(f"/c/{conversation.pk}/compare/{old.pk}/{edit.pk}/").content.decode(),
        client.get(f"/c/{conversation.pk}/runs/{old.pk}/compare/").content.decode(),
    ]

    for page in pages:
        assert "<img" not in page and "<script>window.__pwned" not in page
        assert 'href="javascript' not in page
    assert html.escape(HOSTILE, quote=False)[:20] in pages[0]


# A chat deleted with messages queued


async def test_a_chat_deleted_with_messages_queued_sends_none_of_them(scripted_model, settings):
    from chat import owner
    from chat.models import RunStatus
    from tests.chat.test_queue_socket import a_run_with_a_queue

    settings.AGENT_HEARTBEAT_S = 3600  # nothing but the run's end moves the queue
    scripted_model.script = [AIMessage("a long answer " * 20)] * 2
    go_on = asyncio.Event()
    scripted_model.gates = {3: go_on}
    conversation, run_id = await a_run_with_a_queue()
    owner.current().start(run_id)

    deleted = await database_sync_to_async(store.conversation_delete)(
        owner=store.Owner(user_id=conversation.owner_id, guest_key=""),
        conversation_id=conversation.pk, at=timezone.now(),
    )  # fmt: skip
    await owner.request_stop(get_channel_layer(), conversation.pk)  # as the delete view does
    go_on.set()
    await wait_for_runs()
    await wait_for_runs()  # a queued message's run, had one been started

    runs = await database_sync_to_async(list)(
        AgentRun.objects.filter(conversation_id=conversation.pk).values_list("status", flat=True)
    )
    left = await database_sync_to_async(
        QueuedMessage.objects.filter(conversation_id=conversation.pk).count
    )()
    assert deleted is True
    # No queued message's run: the one run only (cancelled, or succeeded when the Stop went
    # over Redis after the model was let go: the test does not order the two).
    assert len(runs) == 1 and runs[0] in (RunStatus.CANCELLED, RunStatus.SUCCEEDED)
    assert left == 0


# A server stopping while a queued message is taken


async def test_a_consumer_killed_while_queueing_a_message_ends_no_run_and_raises_nothing():
    """Found: ``_end_unstarted`` (a consumer killed, Daphne stopping, after the message
    may have been stored) ended ``accepted.run_id`` whatever it was; a message that was
    queued, or a copy sent again, has none, and ``run_get(None)`` raised
    ``DoesNotExist`` where the consumer re-raises its cancel (a traceback per socket
    at every restart with messages in flight)."""
    from chat.consumers import Accepted, _end_unstarted

    for accepted in (Accepted([], "<queue>", idle=True), Accepted([], "")):
        accepting = asyncio.get_running_loop().create_future()
        accepting.set_result(accepted)
        await _end_unstarted(accepting, [])


# A plain Regenerate keeps the chat's model and strategy


def test_a_plain_regenerate_sends_the_chats_own_model_and_strategy_even_if_no_longer_offered(
    owned, settings
):
    """Found: the form's model and strategy selects are sent even folded, their first
    option being the chat's own; when the agent no longer offered the chat's model or
    strategy (its definition changed, the model was removed), the first option was
    another, and a plain Regenerate silently ran with it."""
    from tests.chat.test_branches import OTHER

    settings.AGENT_EXTRA_MODELS = [OTHER]
    client, conversation = owned
    run = asked(conversation, "Q1")
    Conversation.objects.filter(pk=conversation.pk).update(model_key="retired")

    page = client.get(f"/c/{conversation.pk}/").content.decode()
    models = re.search(
        rf'<select id="run-{run.pk}-regen-model"[^>]*>\s*<option value="([^"]*)"', page
    )

    assert models is not None and models.group(1) == "retired"
    conversation.refresh_from_db()
    again = regenerate(conversation, run, model="retired")  # what the form sends: allowed
    assert again.model_key == ""  # the chat's own, as any next question would use
