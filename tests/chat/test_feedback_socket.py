"""Feedback frames over the chat socket: every tab is sent each change (the last wins), and
bad frames are refused on the sending socket only, changing nothing."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from django.contrib.auth.models import AnonymousUser
from django.utils.html import escape

from chat import fragments
from chat.consumers import CLOSE_NOT_FOUND
from chat.fragments import FEEDBACK_REFUSED
from chat.frames import BAD_FEEDBACK
from chat.models import AgentRun, Conversation, Feedback, RunStatus
from chat.routing import websocket_urlpatterns
from chat.store import GUEST_KEY
from chat.store.feedback import NOT_A_RUN, STILL_GOING
from tests.chat.conftest import Communicator
from tests.chat.test_consumer import connect, make_conversation
from tests.chat.test_feedback import ended_run

pytestmark = pytest.mark.django_db(transaction=True)

PRESSED_UP = 'class="thumb thumb-up" aria-pressed="true"'
PRESSED_DOWN = 'class="thumb thumb-down" aria-pressed="true"'


def rate(run_id, **fields) -> str:
    return json.dumps({"type": "feedback", "run": run_id, **fields})


@database_sync_to_async
def stored(run_id: int) -> tuple[str, str, str] | None:
    row = Feedback.objects.filter(run_id=run_id).values_list(
        "rating", "comment", "given_by_name"
    ).first()  # fmt: skip
    return None if row is None else tuple(row)


async def feedback_shown(tab, run_id: int) -> str:
    """Return the next frame that redraws run ``run_id``'s feedback (the sender's own
    cleared notice comes first: it is sent straight, the redraw through the group)."""
    while True:
        html = await tab.receive_from()
        if f'id="run-{run_id}-feedback"' in html:
            return html
        assert html == fragments.error(""), html  # the sender's notice, cleared


async def two_tabs(user, conversation):
    """Open two sockets on the conversation; return them once each has caught up."""
    tabs = []
    for _ in range(2):
        tab = await connect(conversation.pk, user)
        await tab.connect()
        await tab.receive_from()  # the latest run, sent to a page that just connected
        tabs.append(tab)
    return tabs


async def test_feedback_from_one_tab_reaches_both_and_the_last_change_wins():
    user, conversation = await make_conversation()
    run = await database_sync_to_async(ended_run)(conversation)
    first, second = await two_tabs(user, conversation)

    await first.send_to(text_data=rate(run.pk, rating="up"))
    for tab in (first, second):
        assert PRESSED_UP in await feedback_shown(tab, run.pk)
    assert await second.receive_nothing()  # nobody else's notice is touched

    await second.send_to(text_data=rate(run.pk, rating="down", comment="Wrong town."))
    for tab in (first, second):
        await feedback_shown(tab, run.pk)
    await first.send_to(text_data=rate(run.pk, comment="Wrong town and day."))
    for tab in (first, second):
        html = await feedback_shown(tab, run.pk)
        assert PRESSED_DOWN in html and "Wrong town and day.</textarea>" in html
    assert await stored(run.pk) == ("down", "Wrong town and day.", "alice")

    await first.send_to(text_data=rate(run.pk, rating="none"))  # the pressed thumb again
    for tab in (first, second):
        html = await feedback_shown(tab, run.pk)
        assert 'aria-pressed="true"' not in html and "<textarea" not in html
    assert await stored(run.pk) is None
    for tab in (first, second):
        await tab.disconnect()


async def test_a_guests_socket_gives_feedback_as_guest():
    conversation = await database_sync_to_async(Conversation.objects.create)(guest_key="g1")
    run = await database_sync_to_async(ended_run)(conversation)
    tab = Communicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation.pk}/")
    tab.scope["user"], tab.scope["session"] = AnonymousUser(), {GUEST_KEY: "g1"}
    assert (await tab.connect())[0]
    await tab.receive_from()
    await tab.send_to(text_data=rate(str(run.pk), rating="up", comment="Thanks"))
    assert PRESSED_UP in await feedback_shown(tab, run.pk)
    assert await stored(run.pk) == ("up", "Thanks", "(guest)")
    await tab.disconnect()


@database_sync_to_async
def going_run(conversation: Conversation) -> AgentRun:
    run = ended_run(conversation)
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    return run


async def test_bad_feedback_frames_are_refused_on_that_socket_only_and_change_nothing():
    user, conversation = await make_conversation()
    run = await database_sync_to_async(ended_run)(conversation)
    mallory, theirs = await make_conversation("mallory")
    their_run = await database_sync_to_async(ended_run)(theirs)
    first, second = await two_tabs(user, conversation)
    await first.send_to(text_data=rate(run.pk, rating="up", comment="kept"))
    for tab in (first, second):
        await feedback_shown(tab, run.pk)
    still_going = await going_run(conversation)

    too_long = "x" * (Feedback.COMMENT_MAX_CHARS + 1)
    for frame, expected in (
        (rate(10**12, rating="up"), NOT_A_RUN),  # an unknown run
        (rate(their_run.pk, rating="down"), NOT_A_RUN),  # another conversation's run
        (rate(still_going.pk, rating="up"), STILL_GOING),  # a run still going
        (rate(run.pk, rating="sideways"), "A rating is 'up', 'down' or 'none'"),
        (rate(run.pk, comment=too_long), "Your comment is 2001 characters long"),
        (rate(run.pk, rating=5), BAD_FEEDBACK),  # not text
        (rate(run.pk), BAD_FEEDBACK),  # neither a rating nor a comment
        (json.dumps({"type": "feedback", "rating": "up"}), BAD_FEEDBACK),  # no run
        (rate("²", rating="up"), BAD_FEEDBACK),
        (rate(2**63, rating="up"), NOT_A_RUN),  # no database holds that id
    ):
        await first.send_to(text_data=frame)
        answer = await first.receive_from()
        assert "chat-error" in answer and escape(expected) in answer, (frame[:80], answer)
    assert await second.receive_nothing()  # told to the sender only
    assert await stored(run.pk) == ("up", "kept", "alice")
    assert await stored(their_run.pk) is None and await stored(still_going.pk) is None

    # A stranger's socket is closed at another's conversation, and their own
    # conversation's socket cannot reach another's run.
    stranger = await connect(conversation.pk, mallory)
    await stranger.connect()
    assert (await stranger.receive_output())["code"] == CLOSE_NOT_FOUND
    own = await connect(theirs.pk, mallory)
    await own.connect()
    await own.receive_from()
    await own.send_to(text_data=rate(run.pk, rating="down"))
    assert escape(NOT_A_RUN) in await own.receive_from()
    assert await stored(run.pk) == ("up", "kept", "alice")
    for tab in (first, second, own):
        await tab.disconnect()


async def test_a_refusal_beside_the_thumbs_leaves_the_comment_box_alone():
    """The refusal replaces only the line under the thumbs: the box keeps what was typed."""
    user, conversation = await make_conversation()
    run = await database_sync_to_async(ended_run)(conversation)
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.receive_from()
    await tab.send_to(text_data=rate(run.pk, rating="up"))
    await feedback_shown(tab, run.pk)
    await tab.send_to(text_data=rate(run.pk, comment="y" * (Feedback.COMMENT_MAX_CHARS + 5)))
    answer = await tab.receive_from()
    assert f'id="run-{run.pk}-feedback-error"' in answer
    assert f'data-outcome="{FEEDBACK_REFUSED}"' in answer
    assert f'id="run-{run.pk}-feedback"' not in answer and "<textarea" not in answer
    await tab.disconnect()
