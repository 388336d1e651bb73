"""Retry, regenerate and edit over the chat socket, and the switch and fork views: every
tab is sent the branch now shown; refusals (bad frames, another chat's run, a run going,
a retry of a success, a model the agent does not allow) change nothing and the next
message works."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from django.test import Client
from django.utils.html import escape

from chat.consumers import BRANCH_WHILE_GOING, RUN_WAITING
from chat.fragments import MESSAGE_ACCEPTED
from chat.frames import NOT_A_BRANCHED_RUN
from chat.models import AgentRun, BranchKind, Conversation, Message, RunStatus
from chat.runs import create_run
from chat.store.branches import NOT_A_RUN, NOT_RETRYABLE
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import (
    ask_over_socket,
    connect,
    make_conversation,
    receive_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

BRANCH_SHOWN = 'hx-swap-oob="innerHTML:#messages"'


def frame(kind: str, run_id: object, **fields) -> str:
    return json.dumps({"type": kind, "run": run_id, **fields})


def ended_status(run_id: int) -> re.Pattern[str]:
    return re.compile(rf'id="run-{run_id}-status" data-status="(?!running)')


@database_sync_to_async
def runs_of(conversation: Conversation) -> list[AgentRun]:
    return list(AgentRun.objects.filter(conversation=conversation).order_by("pk"))


async def connected(conversation, user):
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.receive_from()  # the latest run, sent to a page that just connected
    return tab


async def refusal(tab) -> str:
    """Receive the notice of a refused take: said, and not as a refused message, which
    would make the page forget the message its composer sent (an adversarial pass)."""
    html = await tab.receive_from()
    assert 'id="chat-error"' in html and "data-outcome" not in html, html
    return html


@pytest.mark.parametrize("kind", ["regenerate", "edit"])
async def test_a_regenerate_or_edit_shows_the_new_branch_in_every_tab_and_runs(kind):
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Weather in Suzhou?")
    (old,) = await runs_of(conversation)
    first, second = await connected(conversation, user), await connected(conversation, user)

    fields = {"content": "Weather in Hangzhou?"} if kind == "edit" else {}
    await first.send_to(text_data=frame(kind, old.pk, **fields))
    shown = await receive_until(first, lambda html: BRANCH_SHOWN in html)
    (_, new) = await runs_of(conversation)
    await receive_until(first, lambda html: bool(ended_status(new.pk).search(html)))
    other_tab = await receive_until(second, lambda html: BRANCH_SHOWN in html)
    await wait_for_runs()

    assert (new.branched_from_id, new.branch_kind) == (old.pk, BranchKind(kind))
    assert f'id="run-{new.pk}"' in shown[-1] and f'id="run-{old.pk}"' not in shown[-1]
    assert 'aria-label="Takes of this question"' in shown[-1]
    assert "1 / 2" not in shown[-1] and "2 / 2" in shown[-1]
    assert other_tab[-1] == shown[-1]
    expected = "Weather in Hangzhou?" if kind == "edit" else "Weather in Suzhou?"
    question = await database_sync_to_async(Message.objects.get)(pk=new.user_message_id)
    assert question.content == expected
    for tab in (first, second):
        await tab.disconnect()


async def test_a_retry_of_a_failed_run_runs_its_question_again():
    user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="Hi")
    await database_sync_to_async(AgentRun.objects.filter(pk=run.pk).update)(
        status=RunStatus.FAILED, error="The model is not reachable."
    )
    tab = await connected(conversation, user)

    await tab.send_to(text_data=frame("retry", run.pk))
    await receive_until(tab, lambda html: BRANCH_SHOWN in html)
    (_, retried) = await runs_of(conversation)
    await receive_until(tab, lambda html: bool(ended_status(retried.pk).search(html)))
    await wait_for_runs()
    await tab.disconnect()

    retried = await database_sync_to_async(AgentRun.objects.get)(pk=retried.pk)
    assert (retried.branched_from_id, retried.branch_kind) == (run.pk, BranchKind.RETRY)
    assert retried.status == RunStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("sent", "says"),
    [
        (frame("regenerate", "abc"), "A regenerate needs 'run'"),
        (frame("regenerate", 2**70), NOT_A_BRANCHED_RUN),
        (frame("edit", 1), "the edited question"),
        (frame("edit", 1, content="   "), "empty"),
        (frame("regenerate", 1, model=["x"]), "A regenerate needs 'run'"),
    ],
)
async def test_malformed_branch_frames_are_refused_and_change_nothing(sent, says):
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Hi")
    tab = await connected(conversation, user)

    await tab.send_to(text_data=sent)
    html = await refusal(tab)
    await tab.disconnect()

    assert escape(says) in html or says in html, html
    assert len(await runs_of(conversation)) == 1


async def test_refused_branches_say_why_and_the_next_message_still_works():
    user, conversation = await make_conversation()
    bob, other = await make_conversation("bob")
    await ask_over_socket(other, bob, "Theirs")
    await ask_over_socket(conversation, user, "Hi")
    (mine,) = await runs_of(conversation)
    (theirs,) = await runs_of(other)
    tab = await connected(conversation, user)

    refusals = []
    for sent in (
        frame("retry", mine.pk),  # it succeeded: regenerate it instead
        frame("regenerate", theirs.pk),  # another chat's run
        frame("regenerate", mine.pk, model="gpt-9"),  # not a model the agent may use
        frame("regenerate", mine.pk, strategy="telepathy"),
    ):
        await tab.send_to(text_data=sent)
        refusals.append(await refusal(tab))
    await tab.send_to(text_data=json.dumps({"content": "Still there?"}))
    await receive_until(tab, lambda html: MESSAGE_ACCEPTED in html)
    await wait_for_runs()
    await tab.disconnect()

    assert escape(NOT_RETRYABLE) in refusals[0]
    assert escape(NOT_A_RUN) in refusals[1]
    assert "cannot use the model" in refusals[2] and "cannot use the strategy" in refusals[3]
    runs = await runs_of(conversation)
    assert len(runs) == 2 and not any(run.branched_from_id for run in runs)


async def test_a_branch_while_a_run_waits_for_a_decision_is_refused_clearly():
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Hi")
    (old,) = await runs_of(conversation)
    waiting = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                        content="Book it")  # fmt: skip
    await database_sync_to_async(AgentRun.objects.filter(pk=waiting.pk).update)(
        status=RunStatus.WAITING
    )
    tab = await connected(conversation, user)

    await tab.send_to(text_data=frame("edit", old.pk, content="Hello"))
    html = await refusal(tab)
    await tab.disconnect()

    assert escape(RUN_WAITING) in html
    assert len(await runs_of(conversation)) == 2


async def test_a_branch_while_a_run_goes_is_refused_clearly():
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Hi")
    (old,) = await runs_of(conversation)
    going = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                      content="Next")  # fmt: skip
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await receive_until(tab, lambda html: f'id="run-{going.pk}"' in html)

    await tab.send_to(text_data=frame("regenerate", old.pk))
    html = await refusal(tab)
    await tab.disconnect()

    assert escape(BRANCH_WHILE_GOING) in html
    assert len(await runs_of(conversation)) == 2


# The switch and fork views


def htmx_post(client: Client, url: str, data: dict) -> object:
    return client.post(url, data, HTTP_HX_REQUEST="true")


def two_takes(conversation: Conversation) -> tuple[AgentRun, AgentRun]:
    from tests.chat.test_branches import asked, ended, regenerate

    old = asked(conversation, "Weather in Suzhou?", "Sunny.")
    new = ended(regenerate(conversation, old), "Rain later.")
    return old, new


@pytest.fixture
def owned(client) -> tuple[Client, Conversation]:
    from django.contrib.auth.models import User

    user = User.objects.create_user("alice")
    client.force_login(user)
    return client, Conversation.objects.create(owner=user)


def test_the_switcher_shows_the_other_take_and_a_reload_shows_the_same(owned):
    client, conversation = owned
    old, new = two_takes(conversation)

    page = client.get(f"/c/{conversation.pk}/").content.decode()
    switched = htmx_post(client, f"/c/{conversation.pk}/branch/",
                         {"question": old.user_message_id})  # fmt: skip
    reloaded = client.get(f"/c/{conversation.pk}/").content.decode()

    assert f'id="run-{new.pk}"' in page and f'id="run-{old.pk}"' not in page
    assert "2 / 2" in page
    body = switched.content.decode()
    assert switched.status_code == 200
    assert f'id="run-{old.pk}"' in body and f'id="run-{new.pk}"' not in body and "1 / 2" in body
    assert f'id="run-{old.pk}"' in reloaded and "1 / 2" in reloaded


def test_the_switch_refuses_bad_questions_runs_going_and_other_owners(owned):
    client, conversation = owned
    old, _ = two_takes(conversation)

    bad = htmx_post(client, f"/c/{conversation.pk}/branch/", {"question": "²"})
    create_run(conversation_id=conversation.pk, content="Going")
    going = htmx_post(client, f"/c/{conversation.pk}/branch/", {"question": old.user_message_id})
    stranger = Client()
    theirs = stranger.post(f"/c/{conversation.pk}/branch/", {"question": old.user_message_id})

    assert bad.status_code == 400 and "No such question" in bad.content.decode()
    assert going.status_code == 409 and "still working" in going.content.decode()
    assert theirs.status_code == 404


def test_a_fork_opens_a_new_chat_showing_the_source_exchange_read_only(owned):
    client, conversation = owned
    old, _ = two_takes(conversation)

    response = htmx_post(client, f"/c/{conversation.pk}/fork/",
                         {"question": old.user_message_id})  # fmt: skip
    fork = Conversation.objects.exclude(pk=conversation.pk).get()
    page = client.get(response["HX-Redirect"]).content.decode()

    assert response["HX-Redirect"] == f"/c/{fork.pk}/"
    assert fork.forked_from_id == old.user_message_id
    assert f'id="run-{old.pk}"' in page and "forked from (read only)" in page
    assert 'name="type" value="regenerate"' not in page  # no controls on inherited runs
    assert f'id="run-{old.pk}-feedback"' not in page  # nor thumbs: the answer is the source's
    assert 'id="strategy-select"' not in page  # its settings are fixed
    # Its own runs are none yet: its menu offers no download and says why (a new-user walk).
    menu = client.get(f"/c/{fork.pk}/menu/").content.decode()
    assert "no runs of its own" in menu and "Download…" not in menu
    assert "Download…" in client.get(f"/c/{conversation.pk}/menu/").content.decode()


def test_a_fork_of_an_exchange_still_going_is_refused_until_it_ends(owned):
    client, conversation = owned
    going = create_run(conversation_id=conversation.pk, content="Still thinking?")

    response = htmx_post(client, f"/c/{conversation.pk}/fork/",
                         {"question": going.user_message_id})  # fmt: skip

    assert response.status_code == 409 and "has not ended yet" in response.content.decode()
    assert Conversation.objects.count() == 1


def test_a_fork_of_someone_elses_question_is_404(owned):
    _, conversation = owned
    old, _ = two_takes(conversation)

    response = Client().post(f"/c/{conversation.pk}/fork/", {"question": old.user_message_id})

    assert response.status_code == 404
    assert Conversation.objects.count() == 1


def test_every_branch_control_renders_without_a_query(owned, django_assert_num_queries):
    from chat import store

    _, conversation = owned
    two_takes(conversation)
    window = store.runs_window(conversation_id=conversation.pk, exchanges=5)
    with django_assert_num_queries(0):
        html = render_to_string(
            "chat/_earlier.html",
            {"conversation": conversation, "runs": window.runs, "earlier": None},
        )
    assert 'value="regenerate"' in html and "Fork" in html and "Edit" in html
