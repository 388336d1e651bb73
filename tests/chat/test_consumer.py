"""The chat websocket through Channels' WebsocketCommunicator: fragments out, rows stored."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from django.contrib.auth.models import AnonymousUser, User
from langchain_core.messages import AIMessage, ToolMessage

from chat.fragments import MESSAGE_ACCEPTED
from chat.models import AgentRun, AgentStep, Conversation, Message
from chat.recorder import TEXT_SYNC_INTERVAL_S
from chat.routing import websocket_urlpatterns
from tests.chat.conftest import Communicator, wait_for_runs
from tests.fakes import tool_call

RUN_SECTION = re.compile(r'<section class="run" id="run-(\d+)"')

pytestmark = pytest.mark.django_db(transaction=True)

TRAVEL_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"


@database_sync_to_async
def make_conversation(username: str = "alice") -> tuple[User, Conversation]:
    user = User.objects.create_user(username, password="pw")
    return user, Conversation.objects.create(owner=user)


async def connect(conversation_id: int, user) -> Communicator:
    communicator = Communicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation_id}/")
    communicator.scope["user"] = user
    communicator.scope["session"] = None
    return communicator


async def ask_over_socket(conversation, user, content: str) -> list[str]:
    """Connect, send one message, collect the frames until its run ends, disconnect.

    The run is the one the accepted message started: a conversation's earlier run, which
    the socket is sent again as it connects, has a final status line too.
    """
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": content}))
    frames = await receive_until(communicator, lambda frame: MESSAGE_ACCEPTED in frame)
    run_id = RUN_SECTION.search(frames[-1]).group(1)
    ended = re.compile(rf'id="run-{run_id}-status" data-status="(?!running)')
    frames += await receive_until(communicator, lambda frame: bool(ended.search(frame)))
    await wait_for_runs()
    await communicator.disconnect()
    return frames


async def receive_until(communicator, last: Callable[[str], bool]) -> list[str]:
    """Collect frames up to and including the first one for which ``last`` is true."""
    frames: list[str] = []
    while True:
        frames.append(await communicator.receive_from())
        if last(frames[-1]):
            return frames


async def receive_until_finished(communicator) -> list[str]:
    """Collect frames until the run's final status line arrives."""
    return await receive_until(
        communicator, lambda frame: bool(re.search(r'class="run-status status-(?!running)', frame))
    )


async def test_a_message_streams_fragments_with_tool_cards_and_stores_every_step():
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    connected, _ = await communicator.connect()
    assert connected

    await communicator.send_to(text_data=json.dumps({"content": TRAVEL_QUESTION, "HEADERS": {}}))
    frames = await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()
    html = "\n".join(frames)

    assert "beforeend:#messages" in frames[0]
    assert TRAVEL_QUESTION in frames[0]
    for name in ("search_travel_info", "weather_forecast", "check_bnb_availability"):
        assert f'data-tool="{name}"' in html
    assert 'data-status="success"' in html
    assert "status-succeeded" in frames[-1]

    run = await database_sync_to_async(AgentRun.objects.get)()
    steps = await database_sync_to_async(list)(run.steps.order_by("ordinal"))
    assert run.status == "succeeded"
    assert run.output
    assert [s.kind for s in steps] == [
        "model_turn", "tool_call", "tool_call", "tool_call", "model_turn",
    ]  # fmt: skip
    calls = [s for s in steps if s.kind == "tool_call"]
    assert {s.tool_name for s in calls} == {
        "search_travel_info",
        "weather_forecast",
        "check_bnb_availability",
    }
    assert all(s.status == "success" and s.result and s.tool_call_id for s in calls)
    assert len({s.tool_call_id for s in calls}) == 3
    assert all(s.iteration == 1 for s in calls)
    weather = next(s for s in calls if s.tool_name == "weather_forecast")
    assert weather.arguments["town"] == "Suzhou"
    messages = await database_sync_to_async(list)(
        Message.objects.filter(conversation=conversation).values_list("role", flat=True)
    )
    assert messages == ["user", "assistant"]


async def test_the_model_sees_tool_errors_and_the_page_shows_an_error_card(scripted_model):
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("calculator", {"expression": "1/0"}, "call_a")]),
        AIMessage("Division by zero is undefined."),
    ]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "what is 1/0?")

    html = "\n".join(frames)
    assert 'data-tool="calculator" data-status="error"' in html
    step = await database_sync_to_async(AgentStep.objects.get)(kind="tool_call")
    assert step.status == "error"
    assert "division by zero" in step.error.lower()
    fed_back = scripted_model.prompts[1][-1]
    assert isinstance(fed_back, ToolMessage)
    assert fed_back.status == "error"
    assert fed_back.tool_call_id == "call_a"


async def test_streamed_text_is_escaped(scripted_model):
    scripted_model.script = [AIMessage("<script>alert(1)</script> done")]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "<b>hi</b>")

    html = "\n".join(frames)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html
    assert "<b>hi</b>" not in html


async def test_two_sockets_on_one_conversation_both_see_the_run(scripted_model):
    scripted_model.script = [AIMessage("shared answer")]
    user, conversation = await make_conversation()
    first = await connect(conversation.pk, user)
    second = await connect(conversation.pk, user)
    await first.connect()
    await second.connect()
    await first.send_to(text_data=json.dumps({"content": "hello"}))
    for communicator in (first, second):
        frames = await receive_until_finished(communicator)
        assert "shared answer" in "\n".join(frames)
    await wait_for_runs()
    await first.disconnect()
    await second.disconnect()


async def test_the_run_goes_on_after_the_socket_closes(scripted_model):
    scripted_model.script = [AIMessage("finished without anyone watching")]
    scripted_model.delay_s = 0.02
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "hello"}))
    await communicator.receive_from()
    await communicator.disconnect()
    await wait_for_runs()

    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == "succeeded"
    assert run.output == "finished without anyone watching"


async def test_a_multi_turn_conversation_sends_earlier_turns_to_the_model(scripted_model):
    scripted_model.script = [AIMessage("first answer"), AIMessage("second answer")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    for question in ("first question", "follow-up"):
        await communicator.send_to(text_data=json.dumps({"content": question}))
        await receive_until_finished(communicator)
        await wait_for_runs()
    await communicator.disconnect()

    contents = [m.content for m in scripted_model.prompts[1]]
    assert contents[1:] == ["first question", "first answer", "follow-up"]


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "Expected a JSON object"),
        ('{"type": "dance"}', "Unknown message type"),
        ('{"content": 42}', "needs a text"),
        ('{"content": "   "}', "empty message"),
        (json.dumps({"content": "x" * 9000}), "the limit is 8,000"),
        ('{"content": "\\u200b\\u200b "}', "empty message"),
        ('{"content": "a\\u0000b"}', "a NUL character"),
        ('{"content": "\\ud800"}', "an unpaired surrogate"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
async def test_bad_frames_get_a_clear_error_and_the_socket_stays_usable(
    frame, expected, scripted_model
):
    scripted_model.script = [AIMessage("still works")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()

    await communicator.send_to(text_data=frame)
    error = await communicator.receive_from()
    assert 'id="chat-error"' in error
    assert expected in error
    assert await database_sync_to_async(Message.objects.count)() == 0

    await communicator.send_to(text_data=json.dumps({"content": "hello"}))
    frames = await receive_until_finished(communicator)
    assert "still works" in "\n".join(frames)
    await wait_for_runs()
    await communicator.disconnect()


async def test_the_page_is_told_whether_its_message_was_accepted_or_refused(scripted_model):
    """The page keeps the composer's text until the server says what became of it, in
    the data-outcome of the notice it swaps in (static/js/chat.js reads it, no substring
    of the HTML)."""
    from chat.consumers import NOTHING_TO_STOP

    scripted_model.script = [AIMessage("Hello.")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()

    await communicator.send_to(text_data=json.dumps({"content": "   "}))
    refused = await communicator.receive_from()
    assert 'data-outcome="message-refused"' in refused and "empty message" in refused

    await communicator.send_to(text_data=json.dumps({"type": "cancel"}))
    nothing = await communicator.receive_from()  # a notice, not what became of a message
    assert NOTHING_TO_STOP in nothing and "data-outcome" not in nothing

    await communicator.send_to(text_data=json.dumps({"content": "hello"}))
    frames = await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()
    assert 'data-outcome="message-accepted"' in frames[0] and "hello" in frames[0]
    assert "data-message-accepted" not in "\n".join(frames)


async def test_a_binary_frame_is_refused():
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(bytes_data=b"\x00\x01")
    assert "Binary frames are not supported" in await communicator.receive_from()
    await communicator.disconnect()


async def test_someone_elses_conversation_closes_the_socket():
    _, conversation = await make_conversation("owner")
    intruder = await database_sync_to_async(User.objects.create_user)("intruder")
    for user in (intruder, AnonymousUser()):
        communicator = await connect(conversation.pk, user)
        await communicator.connect()
        assert await communicator.receive_output() == {"type": "websocket.close", "code": 4404}
        await communicator.disconnect()  # the server would; ends the app


async def test_with_no_queue_a_second_message_while_a_run_is_going_is_refused(
    scripted_model, settings
):
    from chat.consumers import RUN_GOING

    settings.CHAT_MAX_QUEUED = 0  # the queue off: refused as before it (docs/queue.md)

    go_on = asyncio.Event()
    scripted_model.script = [AIMessage("a long answer " * 20)]
    scripted_model.gates = {3: go_on}  # the first run is going until the test says so
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "first"}))
    await communicator.send_to(text_data=json.dumps({"content": "second"}))
    await receive_until(communicator, lambda frame: RUN_GOING in frame)
    go_on.set()
    frames = await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()

    assert "status-succeeded" in frames[-1]
    assert await database_sync_to_async(AgentRun.objects.count)() == 1


async def test_the_full_asgi_stack_serves_an_anonymous_visitors_session(client):
    response = await asyncio.to_thread(client.get, "/", follow=True)
    assert response.status_code == 200
    conversation = response.context["conversation"]
    session_id = client.cookies["sessionid"].value

    from project.asgi import application

    communicator = Communicator(
        application,
        f"/ws/chat/{conversation.pk}/",
        headers=[
            (b"cookie", f"sessionid={session_id}".encode()),
            (b"origin", b"http://127.0.0.1:8000"),
            (b"host", b"127.0.0.1:8000"),
        ],
    )
    connected, _ = await communicator.connect()
    assert connected
    await communicator.disconnect()

    stranger = Communicator(
        application,
        f"/ws/chat/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")],
    )
    await stranger.connect()
    assert await stranger.receive_output() == {"type": "websocket.close", "code": 4404}
    await stranger.disconnect()  # the server would; ends the app


def asgi_communicator(path: str, origin: bytes, host: bytes = b"127.0.0.1:8000"):
    from project.asgi import application

    return Communicator(application, path, headers=[(b"origin", origin), (b"host", host)])


async def test_an_origin_listed_in_csrf_trusted_origins_is_let_through(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.com"]
    communicator = asgi_communicator("/ws/nowhere/", b"https://chat.example.com")
    connected, _ = await communicator.connect()
    assert connected  # past the origin check; the unknown path then closes it
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4404}
    await communicator.disconnect()  # the server would; ends the app


@pytest.mark.parametrize("path", ["/ws/chat/abc/", "/ws/other/", "/nothing"])
async def test_an_unknown_websocket_path_closes_cleanly(path):
    communicator = asgi_communicator(path, b"http://127.0.0.1:8000")
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4404}
    await communicator.disconnect()  # the server would; ends the app


async def test_streamed_text_is_saved_and_resent_whole_so_late_joiners_catch_up(
    scripted_model, monkeypatch
):
    monkeypatch.setattr("chat.recorder.TEXT_SYNC_INTERVAL_S", 0.0)
    scripted_model.script = [AIMessage("one two three four")]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "count")

    snapshots = [f for f in frames if 'class="turn-text streaming"' in f and "-text" in f]
    assert any("one two three" in f and 'hx-swap-oob="true"' in f for f in snapshots)
    assert not any("beforeend:#step-" in f for f in frames)  # every delta was a snapshot


async def test_a_page_opened_mid_stream_shows_the_text_so_far(scripted_model, client):
    go_on = asyncio.Event()
    scripted_model.script = [AIMessage("early words and more words " * 12)]
    scripted_model.delay_s = 0.05
    # The turn stops talking until the page is loaded: it is mid-stream by construction.
    # The sleeps before the gate add up to more than TEXT_SYNC_INTERVAL_S, so the text
    # has been saved (and a snapshot sent) at least once before it.
    gate = int(TEXT_SYNC_INTERVAL_S / scripted_model.delay_s) + 5
    scripted_model.gates = {gate: go_on}
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "stream please"}))
    # The text's own snapshot, not any frame that replaces something by id (the
    # timeline's, sent with the turn's start).
    await receive_until(communicator, lambda frame: '-text" hx-swap-oob="true">' in frame)
    # sync_to_async (thread-sensitive) runs the view on the ORM's thread, as Daphne does.
    await sync_to_async(client.force_login)(user)
    response = await sync_to_async(client.get)(f"/c/{conversation.pk}/")
    go_on.set()
    await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()

    html = response.content.decode()
    assert 'class="turn-text streaming"' in html
    assert "early words" in html
    assert 'data-status="running"' in html


async def test_a_socket_that_connects_mid_run_is_sent_the_run_so_far():
    """The page was rendered before the socket joined: whatever happened between is resent."""
    user, conversation = await make_conversation()

    @database_sync_to_async
    def store_running_run():
        from django.utils import timezone

        message = Message.objects.create(conversation=conversation, role="user", content="q")
        run = AgentRun.objects.create(
            conversation=conversation, user_message=message, strategy="tool_calling",
            provider="demo", model_name="demo-scripted", started_at=timezone.now(),
            heartbeat_at=timezone.now(),
        )  # fmt: skip
        AgentStep.objects.create(
            run=run, ordinal=1, iteration=1, kind="tool_call", status="success",
            tool_name="weather_forecast", tool_call_id="call_missed", arguments={},
            result='{"town": "Suzhou"}', started_at=timezone.now(),
        )  # fmt: skip
        return run

    run = await store_running_run()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    frame = await communicator.receive_from()
    await communicator.disconnect()

    assert frame.startswith('<div hx-swap-oob="beforeend:#messages"><section class="run"')
    assert f'id="run-{run.pk}"' in frame
    assert "call_missed" in frame
    assert 'data-status="running"' in frame


async def test_each_text_delta_says_where_it_starts_in_utf16_units(scripted_model, settings):
    settings.CHAT_STREAM_FLUSH_MS = 0  # no window: deltas are joined only behind a send
    scripted_model.script = [AIMessage("a😀 b c")]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "emoji please")

    deltas = [
        (int(m.group(1)), m.group(2))
        for f in frames
        if (m := re.search(r'data-offset="(\d+)">(.*)</div>$', f, re.S))
    ]
    # The first goes at once; "b " and "c" may arrive joined when "b " waits behind a send
    # still in flight (a Redis round trip on a loaded machine). Whatever the split, each
    # starts where the text before it ends, counted in UTF-16 units (the emoji is two).
    assert deltas[0] == (0, "a😀 ")
    assert "".join(text for _, text in deltas) == "a😀 b c"
    assert [offset for offset, _ in deltas] == [
        len("".join(text for _, text in deltas[:i]).encode("utf-16-le")) // 2
        for i in range(len(deltas))
    ]


async def test_an_idle_socket_survives_the_redis_layers_blocking_read(scripted_model, redis_url):
    """channels-redis blocks 5 s per read; a 5 s socket timeout used to kill idle sockets."""
    scripted_model.script = [AIMessage("still here")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    assert await communicator.receive_nothing(timeout=6.5)  # idle past the 5 s read
    await communicator.send_to(text_data=json.dumps({"content": "hello"}))
    frames = await receive_until_finished(communicator)
    assert "still here" in "\n".join(frames)
    await wait_for_runs()
    await communicator.disconnect()


async def socket_of_a_session(client):
    """Open the page with ``client`` (its session, its conversation) and connect a socket
    with its session cookie; return the connected socket and the conversation."""
    await sync_to_async(client.get)("/", follow=True)
    conversation = await database_sync_to_async(Conversation.objects.get)()
    session_id = client.cookies["sessionid"].value
    communicator = asgi_communicator(f"/ws/chat/{conversation.pk}/", b"http://127.0.0.1:8000")
    communicator.scope["headers"].append((b"cookie", f"sessionid={session_id}".encode()))
    connected, _ = await communicator.connect()
    assert connected
    return communicator, conversation


async def test_a_socket_whose_session_ended_can_no_longer_send_or_listen(client, scripted_model):
    """Logging out (or in: the key changes) ends the old session; its open socket goes too."""
    scripted_model.script = [AIMessage("never sent")]
    communicator, _ = await socket_of_a_session(client)

    await sync_to_async(client.session.flush)()  # what logout does
    await communicator.send_to(text_data=json.dumps({"content": "after logout"}))

    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}

    await communicator.disconnect()  # the server would; ends the app
    assert not await database_sync_to_async(AgentRun.objects.exists)()


async def test_a_listening_socket_whose_session_ended_is_closed_without_holding_fragments(
    client, monkeypatch, consumer_clock
):
    """The re-check runs beside the relay: a fragment never waits for the session query."""
    from channels.layers import get_channel_layer

    from chat.live import GroupPublisher

    # The periodic re-check sleeps a real minute; the frozen clock makes the fragment's due.
    monkeypatch.setattr("chat.consumers.SESSION_RECHECK_S", 60.0)
    communicator, conversation = await socket_of_a_session(client)

    await sync_to_async(client.session.flush)()  # what logout does
    consumer_clock.advance(61.0)
    await GroupPublisher(get_channel_layer(), conversation.pk).publish("<div id='x'></div>")

    assert await communicator.receive_from() == "<div id='x'></div>"
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}
    await communicator.disconnect()


async def test_a_socket_that_only_listens_is_closed_soon_after_its_session_ends(
    client, monkeypatch
):
    """No frame in, no fragment out: the socket still re-checks its session on its own
    every SESSION_RECHECK_S and closes with 4401 once it has ended."""
    monkeypatch.setattr("chat.consumers.SESSION_RECHECK_S", 0.05)
    communicator, _ = await socket_of_a_session(client)
    assert await communicator.receive_nothing(timeout=0.2)  # a live session stays open

    await sync_to_async(client.session.flush)()  # what logout does

    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}
    await communicator.disconnect()


async def test_a_flood_of_frames_is_dropped_with_a_notice_then_closed(
    scripted_model, consumer_clock
):
    from chat.consumers import CLOSE_FLOOD, FLOOD_CLOSE_AFTER, FLOODED, FRAME_BURST

    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    for _ in range(FRAME_BURST):  # a burst is fine: each gets its answer
        await communicator.send_to(text_data="not json")
    for _ in range(FRAME_BURST):
        assert "not valid JSON" in await communicator.receive_from()
    await communicator.send_to(text_data="not json")
    assert FLOODED in await communicator.receive_from()  # one notice, then silence
    for _ in range(FLOOD_CLOSE_AFTER):
        await communicator.send_to(text_data="not json")
    output = await communicator.receive_output()
    assert output == {"type": "websocket.close", "code": CLOSE_FLOOD}
    assert not await database_sync_to_async(AgentRun.objects.exists)()
    await communicator.disconnect()


async def test_after_a_short_flood_the_socket_is_usable_again(scripted_model, consumer_clock):
    from chat.consumers import FLOODED, FRAME_BURST, FRAME_RATE

    scripted_model.script = [AIMessage("still here")]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    for _ in range(FRAME_BURST + 1):
        await communicator.send_to(text_data="{}")
    # The burst is answered, the frame after it dropped with a notice. (Frames dropped
    # silently after it would leave the test no way to tell they were read before the
    # clock moves on: then they, not the message, would take the tokens that come back.)
    answers = await receive_until(communicator, lambda frame: FLOODED in frame)
    assert len(answers) == FRAME_BURST + 1
    consumer_clock.advance(2 / FRAME_RATE)  # tokens come back
    await communicator.send_to(text_data=json.dumps({"content": "hello"}))
    frames = await receive_until_finished(communicator)
    assert "still here" in "\n".join(frames)
    await wait_for_runs()
    await communicator.disconnect()


async def test_streamed_text_is_coalesced_into_fewer_fragments_in_order(
    scripted_model, settings, monkeypatch
):
    """A token every few ms would otherwise be a channel-layer message per token per tab."""
    # The model sends three bursts of 20 tokens, each once the page has the one before;
    # a burst takes far less than the 500 ms window, however loaded the machine.
    settings.CHAT_STREAM_FLUSH_MS = 500
    # No snapshot (on a slow machine one came mid-stream): the deltas must add up alone.
    monkeypatch.setattr("chat.recorder.TEXT_SYNC_INTERVAL_S", 3600.0)
    words = [f"w{i} " for i in range(60)]
    bursts = {20: asyncio.Event(), 40: asyncio.Event()}
    scripted_model.script = [AIMessage("".join(words))]
    scripted_model.gates = bursts
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "talk"}))
    frames: list[str] = []
    for index, go_on in bursts.items():
        frames += await receive_until(communicator, lambda f, w=words[index - 1]: w in f)
        go_on.set()
    frames += await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()

    deltas = [
        (int(m.group(1)), m.group(2))
        for f in frames
        if (m := re.search(r'data-offset="(\d+)">(.*)</div>$', f, re.S))
    ]
    assert 3 <= len(deltas) < 30  # fewer fragments than the 60 deltas, one burst each
    text = ""
    for offset, piece in deltas:  # each starts where the text so far ends: nothing lost
        assert offset == len(text)
        text += piece
    assert text == "".join(words)


async def test_a_channel_message_of_an_unknown_type_leaves_the_socket_working(scripted_model):
    """A newer process beside this one (a rolling deploy) may send a type this consumer
    does not know (as ``run.resume`` was new): dropped, not a closed socket."""
    from channels.layers import get_channel_layer

    from chat.live import group_name

    scripted_model.script = [AIMessage("still here")]
    user, conversation = await make_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await get_channel_layer().group_send(
        group_name(conversation.pk), {"type": "run.from_the_future"}
    )
    await tab.send_to(text_data=json.dumps({"content": "hello"}))
    assert "still here" in "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    await tab.disconnect()


async def test_no_handler_waits_for_channels_hop_to_the_database_thread(
    scripted_model, monkeypatch
):
    """Channels' ``dispatch`` closes old connections in the database thread before every
    handler; ours reach the database through ``database_sync_to_async``, which does so
    itself, so a connect, a message and each relayed fragment skip that wait in the queue
    of every run's writes (issue 25: 0.5 s at p50 with 200 conversations)."""
    import channels.consumer

    hops: list[None] = []

    async def counted() -> None:
        hops.append(None)

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    scripted_model.script = [AIMessage("answered")]
    user, conversation = await make_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(text_data=json.dumps({"content": "hello"}))
    assert "answered" in "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    await tab.disconnect()
    assert hops == []


async def test_a_socket_opens_with_one_call_to_the_database_thread(monkeypatch):
    """The conversation's check and the page's catch-up are one ``database_sync_to_async``
    call: each call waits in the queue of every run's writes (issue 25)."""
    import chat.consumers

    calls: list[str] = []
    counted = chat.consumers.database_sync_to_async

    def counting(func):  # type: ignore[no-untyped-def]
        calls.append(getattr(func, "__name__", repr(func)))
        return counted(func)

    user, conversation = await make_conversation()
    monkeypatch.setattr(chat.consumers, "database_sync_to_async", counting)
    tab = await connect(conversation.pk, user)
    connected, _ = await tab.connect()
    assert connected
    assert calls == ["_open"]
    await tab.disconnect()


async def test_a_message_waits_once_for_the_database_thread_its_session_checked_there(
    client, scripted_model, monkeypatch
):
    """The session's check and the message's acceptance are one ``database_sync_to_async``
    call (issue 25: each waits in the queue of every run's writes)."""
    import chat.consumers

    scripted_model.script = [AIMessage("answered")]
    tab, _ = await socket_of_a_session(client)
    calls: list[str] = []
    counted = chat.consumers.database_sync_to_async

    def counting(func):  # type: ignore[no-untyped-def]
        calls.append(getattr(func, "__name__", repr(func)))
        return counted(func)

    monkeypatch.setattr(chat.consumers, "database_sync_to_async", counting)
    await tab.send_to(text_data=json.dumps({"content": "hello"}))
    assert "answered" in "\n".join(await receive_until_finished(tab))
    await wait_for_runs()
    assert calls == ["checked"]
    await tab.disconnect()


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "regenerate", "run": "the first"},  # a take: checked with its acceptance
        {"type": "stop"},
        {"type": "unqueue"},  # refused as it is read (no 'queued'): after the check
        "not json",
    ],
)
async def test_after_the_session_ended_no_frame_is_acted_on(client, scripted_model, frame):
    """A take is checked in the call that accepts it, any other frame (a malformed one
    too) before it is read: each closes the socket with 4401 and changes nothing."""
    scripted_model.script = [AIMessage("first"), AIMessage("never sent")]
    tab, _ = await socket_of_a_session(client)
    await tab.send_to(text_data=json.dumps({"content": "hello"}))
    await receive_until_finished(tab)
    await wait_for_runs()
    [run] = await database_sync_to_async(list)(AgentRun.objects.all())
    if isinstance(frame, dict) and frame.get("run"):
        frame = {**frame, "run": run.pk}

    await sync_to_async(client.session.flush)()  # what logout does
    await tab.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))

    while (output := await tab.receive_output())["type"] != "websocket.close":
        pass
    assert output == {"type": "websocket.close", "code": 4401}
    await tab.disconnect()
    assert await database_sync_to_async(AgentRun.objects.count)() == 1
