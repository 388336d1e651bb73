"""The conversation list: date groups, search, rename, delete, markers, and its cost."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from io import StringIO

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from chat import store
from chat.markdown import plain_text
from chat.models import AgentRun, AgentStep, Conversation, Message
from chat.routing import websocket_urlpatterns
from chat.store.listing import date_label, grouped_by_date, message_snippet, snippet
from tests.chat.conftest import Communicator

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def add_run(conversation: Conversation, question: str, *, answer: str = "ok", status="succeeded",
            at: datetime | None = None, steps: int = 1) -> AgentRun:  # fmt: skip
    """Store a question, its run (with ``steps`` tool calls) and its answer."""
    at = at or timezone.now()
    # Linked to the question before it, as run_start links a question to its branch's leaf.
    before = conversation.messages.filter(role="user").order_by("-id").values_list("id").first()
    message = Message.objects.create(conversation=conversation, role="user", content=question,
                                     parent_id=before[0] if before else None)  # fmt: skip
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider="demo", model_name="demo-scripted", status=status, started_at=at,
        finished_at=at, duration_ms=10, iterations=1, output=answer,
    )  # fmt: skip
    AgentStep.objects.bulk_create(
        AgentStep(run=run, ordinal=i + 1, iteration=1, kind="tool_call", status="success",
                  started_at=at, tool_name="calculator", tool_call_id=f"c{i}",
                  arguments={"expression": "1+1"}, result="2")
        for i in range(steps)
    )  # fmt: skip
    if answer:
        Message.objects.create(conversation=conversation, role="assistant", content=answer, run=run)
    return run


def chat(owner: User, title: str, *, updated: datetime | None = None) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title)
    if updated is not None:  # auto_now: set it past save()
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=updated)
        conversation.refresh_from_db()
    return conversation


@pytest.fixture
def alice_client() -> tuple[Client, User]:
    user = User.objects.create_user("alice")
    client = Client()
    client.force_login(user)
    return client, user


# Date groups


@pytest.mark.parametrize(
    ("day", "label"),
    [
        (date(2026, 12, 1), "Today"),
        (date(2026, 12, 2), "Today"),  # a clock ahead of ours
        (date(2026, 11, 30), "Yesterday"),
        (date(2026, 11, 29), "Previous 7 days"),
        (date(2026, 11, 24), "Previous 7 days"),
        (date(2026, 11, 23), "Previous 30 days"),
        (date(2026, 11, 1), "Previous 30 days"),
        (date(2026, 10, 31), "October 2026"),
        (date(2025, 12, 25), "December 2025"),
    ],
)
def test_a_conversation_is_headed_by_how_long_ago_it_was_active(day, label):
    assert date_label(day, today=date(2026, 12, 1)) == label


def test_conversations_are_grouped_in_order_under_their_headings(alice_client):
    _, alice = alice_client
    noon = datetime(2026, 12, 1, 12, tzinfo=UTC)
    for title, days in [("a", 0), ("b", 0), ("c", 1), ("d", 3), ("e", 20), ("f", 40), ("g", 75)]:
        chat(alice, title, updated=noon - timedelta(days=days))
    listed = store.conversations_listed(owner=store.Owner(alice.pk, ""))
    groups = grouped_by_date(listed, today=date(2026, 12, 1))
    assert [(g.label, [c.title for c in g.conversations]) for g in groups] == [
        ("Today", ["b", "a"]), ("Yesterday", ["c"]), ("Previous 7 days", ["d"]),
        ("Previous 30 days", ["e"]), ("October 2026", ["f"]), ("September 2026", ["g"]),
    ]  # fmt: skip


def test_the_page_shows_the_date_headings(alice_client):
    client, alice = alice_client
    chat(alice, "Old trip", updated=timezone.now() - timedelta(days=3))
    current = chat(alice, "Today's trip")
    html = client.get(f"/c/{current.pk}/").content.decode()
    headings = [html.index(f">{label}</h2>") for label in ("Today", "Previous 7 days")]
    assert headings[0] < html.index(">Today&#x27;s trip</a>") < headings[1]
    assert headings[1] < html.index(">Old trip</a>")


# Search


def test_search_finds_titles_questions_and_answers_ignoring_case(alice_client):
    client, alice = alice_client
    add_run(chat(alice, "Suzhou gardens"), "Which garden first?")
    add_run(chat(alice, "Numbers"), "What is 17*23?", answer="It is 391.")
    add_run(chat(alice, "Weather"), "Rain in HANGZHOU tomorrow?")
    chat(alice, "Unrelated")

    def found(query):
        html = client.get("/c/list/", {"q": query}, **HX).content.decode()
        return sorted(c.title for c in Conversation.objects.all() if f">{c.title}</a>" in html)

    assert found("suzhou") == ["Suzhou gardens"]
    assert found("391") == ["Numbers"]
    assert found("hangzhou") == ["Weather"]
    assert found("  ") == ["Numbers", "Suzhou gardens", "Unrelated", "Weather"]


def test_a_message_match_shows_a_snippet_with_the_match_marked(alice_client):
    client, alice = alice_client
    add_run(chat(alice, "Trip"), "Is there a B&B near the <Humble> Administrator's Garden?")
    html = client.get("/c/list/", {"q": "humble"}, **HX).content.decode()
    assert "<mark>Humble</mark>" in html
    assert "&lt;" in html  # escaped, not markup


def test_a_snippet_of_a_markdown_answer_shows_its_text_not_its_syntax(alice_client):
    client, alice = alice_client
    add_run(chat(alice, "Trip"), "Where to stay near the tea fields?",
            answer="## Stay\n- **Longjing Tea Terrace Inn**, see [the map](https://x.test/m)"
                   " and `room 3`")  # fmt: skip
    html = client.get("/c/list/", {"q": "longjing"}, **HX).content.decode()
    snippet_html = html.split('class="match-snippet">')[1].split("</div>")[0]
    assert snippet_html == "Stay <mark>Longjing</mark> Tea Terrace Inn, see the map and room 3"


def test_a_title_that_matches_needs_no_snippet(alice_client):
    client, alice = alice_client
    add_run(chat(alice, "Humble garden"), "Humble Administrator's Garden?")
    html = client.get("/c/list/", {"q": "humble"}, **HX).content.decode()
    assert ">Humble garden</a>" in html and "<mark>" not in html


def test_a_search_that_matches_nothing_says_so(alice_client):
    client, alice = alice_client
    chat(alice, "Trip")
    html = client.get("/c/list/", {"q": "zebra"}, **HX).content.decode()
    assert "No conversation has “zebra” in its title or messages." in html


def test_search_never_lists_another_owners_conversations(alice_client):
    client, _ = alice_client
    bob = User.objects.create_user("bob")
    add_run(chat(bob, "Bob's trip"), "secret plans")
    add_run(Conversation.objects.create(guest_key="k", title="Guest trip"), "secret plans")
    html = client.get("/c/list/", {"q": "secret"}, **HX).content.decode()
    assert "trip" not in html


def test_a_visitor_without_a_session_gets_an_empty_list(client):
    add_run(Conversation.objects.create(guest_key="k", title="Guest trip"), "hello")
    html = client.get("/c/list/", {"q": "hello"}).content.decode()
    assert "Guest trip" not in html and "No conversation has" in html


def test_the_page_searches_without_javascript(alice_client):
    client, alice = alice_client
    add_run(chat(alice, "Suzhou"), "gardens")
    current = chat(alice, "Other")
    html = client.get(f"/c/{current.pk}/", {"q": "garden"}).content.decode()
    assert ">Suzhou</a>" in html and ">Other</a>" not in html
    assert 'value="garden"' in html


@pytest.mark.parametrize(
    ("text", "query", "expected"),
    [
        ("Weather in Suzhou", "suzhou", ("Weather in ", "Suzhou", "")),
        ("a  b\n c", "B C", ("a ", "b c", "")),
        ("x" * 200 + "needle" + "y" * 200, "needle", ("…" + "x" * 28, "needle", "y" * 56 + "…")),
        ("nothing here", "needle", None),
        (
            "one two three four five six seven eight nine ten eleven twelve " * 2 + "needle",
            "needle",
            ("…nine ten eleven twelve ", "needle", ""),
        ),
    ],
)
def test_a_snippet_is_one_line_cut_around_the_first_match(text, query, expected):
    assert snippet(text, query) == (expected and tuple(expected))


@pytest.mark.parametrize(
    ("markdown", "text"),
    [
        (
            "**Longjing Tea Terrace Inn** is *near* ~~far~~ __here__",
            "Longjing Tea Terrace Inn is near far here",
        ),
        ("***both***, _one_ and `**code stays**`", "both, one and **code stays**"),
        ("[the map](https://x.test/a_b) and ![a photo](p.png)", "the map and a photo"),
        (
            "# Title\n> quoted\n- item\n* star\n2. second\n---",
            "Title\nquoted\nitem\nstar\nsecond\n",
        ),
        ("```python\nx = 2*3*4\n```", "\nx = 2*3*4\n"),
        ("snake_case_name and 2*3*4 and a * b * c", "snake_case_name and 2*3*4 and a * b * c"),
        ("`__init__` and ``a `tick` b``", "__init__ and a `tick` b"),
    ],
)
def test_plain_text_drops_markdown_syntax_and_keeps_the_words(markdown, text):
    assert plain_text(markdown) == text


def test_unclosed_markdown_delimiters_stay_as_written_at_any_length():
    text = "_a *b **c ~~d [e ![f " * 5_000  # one line of openers that never close
    assert plain_text(text) == text


def test_a_snippet_of_a_long_markdown_answer_is_cut_around_the_match():
    text = "**filler** words " * 200 + "the **Longjing** inn " + "more *words* " * 200
    before, match, after = message_snippet(text, "longjing")
    assert before.startswith("…") and "*" not in before + after and after.endswith("…")
    assert (match, after[:4]) == ("Longjing", " inn")


# Rename


def test_renaming_updates_the_list_and_the_header_but_not_the_order(alice_client):
    client, alice = alice_client
    older = chat(alice, "Older", updated=timezone.now() - timedelta(days=2))
    newer = chat(alice, "Newer")
    response = client.post(
        f"/c/{older.pk}/rename/", {"title": "  Suzhou\n gardens ", "active": older.pk}, **HX
    )
    html = response.content.decode()
    assert response.status_code == 200
    older.refresh_from_db()
    assert older.title == "Suzhou gardens"
    assert ">Suzhou gardens</a>" in html
    assert '<h1 id="conversation-title" hx-swap-oob="true">Suzhou gardens</h1>' in html
    assert html.index("Newer") < html.index("Suzhou gardens")  # still the older one
    assert Conversation.objects.get(pk=newer.pk).title == "Newer"


def test_renaming_another_conversation_than_the_open_one_leaves_the_header(alice_client):
    client, alice = alice_client
    other, current = chat(alice, "Other"), chat(alice, "Current")
    html = client.post(
        f"/c/{other.pk}/rename/", {"title": "Renamed", "active": current.pk}, **HX
    ).content.decode()
    assert "conversation-title" not in html
    assert ">Renamed</a>" in html


@pytest.mark.parametrize(
    ("title", "error"),
    [
        ("", "A title needs at least one character."),
        ("   \n ", "A title needs at least one character."),
        ("x" * 201, "A title has at most 200 characters (this has 201)."),
    ],
)
def test_a_title_that_is_empty_or_too_long_is_refused_with_the_reason(alice_client, title, error):
    client, alice = alice_client
    conversation = chat(alice, "Kept")
    response = client.post(f"/c/{conversation.pk}/rename/", {"title": title}, **HX)
    assert response.status_code == 400
    html = response.content.decode()
    assert error in html
    assert 'aria-invalid="true"' in html and " open>" in html  # the menu stays open
    conversation.refresh_from_db()
    assert conversation.title == "Kept"


def test_rename_without_htmx_redirects_or_answers_the_error_as_text(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "Kept")
    response = client.post(f"/c/{conversation.pk}/rename/", {"title": "New"})
    assert response.status_code == 302 and response.url == f"/c/{conversation.pk}/"
    response = client.post(f"/c/{conversation.pk}/rename/", {"title": ""})
    assert response.status_code == 400
    assert response.content.decode() == "A title needs at least one character."


def test_only_the_owner_can_rename_or_delete_anything_else_is_a_404(alice_client):
    client, _ = alice_client
    bob = User.objects.create_user("bob")
    theirs = [
        chat(bob, "Bob's"),
        Conversation.objects.create(guest_key="another-browser", title="Guest's"),
    ]
    for conversation in theirs:
        add_run(conversation, "hello")
        assert client.post(f"/c/{conversation.pk}/rename/", {"title": "Mine"}).status_code == 404
        assert client.post(f"/c/{conversation.pk}/delete/").status_code == 404
        assert client.get(f"/c/{conversation.pk}/menu/").status_code == 404
    assert client.post("/c/999999/rename/", {"title": "x"}).status_code == 404
    assert [c.title for c in Conversation.objects.order_by("pk")] == ["Bob's", "Guest's"]
    assert not Conversation.objects.filter(hidden_at__isnull=False).exists()


def test_a_guest_renames_and_deletes_the_conversations_of_their_browser(client):
    conversation = client.get("/", follow=True).context["conversation"]
    add_run(conversation, "hello")
    assert client.post(f"/c/{conversation.pk}/rename/", {"title": "Guest trip"}).status_code == 302
    assert Conversation.objects.get(pk=conversation.pk).title == "Guest trip"
    other_browser = Client()
    other_browser.get("/", follow=True)
    assert other_browser.post(f"/c/{conversation.pk}/delete/").status_code == 404
    assert client.post(f"/c/{conversation.pk}/delete/").status_code == 302
    assert Conversation.objects.get(pk=conversation.pk).hidden_at is not None


def test_rename_and_delete_refuse_get_and_need_the_csrf_token(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "Kept")
    assert client.get(f"/c/{conversation.pk}/rename/").status_code == 405
    assert client.get(f"/c/{conversation.pk}/delete/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(f"/c/{conversation.pk}/rename/", {"title": "x"}).status_code == 403
    assert strict.post(f"/c/{conversation.pk}/delete/").status_code == 403


# Delete: hidden from its owner, its runs kept for audit until the retention purge


def test_deleting_hides_the_conversation_and_keeps_its_runs_for_audit(alice_client):
    client, alice = alice_client
    deleted, current = chat(alice, "Secret trip"), chat(alice, "Current")
    run = add_run(deleted, "Where to?", answer="Suzhou.")
    menu = client.get(f"/c/{deleted.pk}/menu/", {"active": current.pk}).content.decode()
    assert "Its 1 run (questions, answers and every step) stays in the audit trail" in menu
    assert f'name="active" value="{current.pk}"' in menu

    response = client.post(f"/c/{deleted.pk}/delete/", {"active": current.pk}, **HX)
    assert response.status_code == 200
    assert "Secret trip" not in response.content.decode()
    assert client.get(f"/c/{deleted.pk}/").status_code == 404
    assert "Secret trip" not in client.get(f"/c/{current.pk}/").content.decode()
    assert "Secret trip" not in client.get("/c/list/", {"q": "Suzhou"}).content.decode()
    # Still there for staff: the run, its steps and both messages.
    assert AgentRun.objects.filter(pk=run.pk).exists()
    assert AgentStep.objects.filter(run=run).count() == 1
    assert Message.objects.filter(conversation=deleted).count() == 2


def test_the_retention_purge_removes_a_deleted_conversation_with_its_runs(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "Old trip")
    add_run(conversation, "Where to?", at=timezone.now() - timedelta(days=100))
    client.post(f"/c/{conversation.pk}/delete/")
    call_command("purge_runs", "--older-than", "90d", stdout=StringIO())
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not AgentRun.objects.exists() and not Message.objects.exists()


def test_deleting_a_conversation_with_no_messages_deletes_it_for_good(alice_client):
    client, alice = alice_client
    empty, current = chat(alice, ""), chat(alice, "Current")
    menu = client.get(f"/c/{empty.pk}/menu/").content.decode()
    assert "It has no messages: it is deleted for good." in menu
    client.post(f"/c/{empty.pk}/delete/", {"active": current.pk}, **HX)
    assert not Conversation.objects.filter(pk=empty.pk).exists()


def test_the_menu_states_how_many_runs_stay(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "Trip")
    for _ in range(3):
        add_run(conversation, "q")
    menu = client.get(f"/c/{conversation.pk}/menu/").content.decode()
    assert "Its 3 runs (questions, answers and every step) stay in the audit trail" in menu
    assert "until the retention purge deletes them." in menu


def test_the_list_does_not_carry_a_form_per_conversation(alice_client):
    client, alice = alice_client
    for i in range(20):
        add_run(chat(alice, f"Trip {i}"), "q")
    html = client.get("/c/list/").content.decode()
    assert "<form" not in html and html.count("data-menu-url=") == 20


def test_deleting_the_open_conversation_goes_to_a_new_chat(alice_client):
    client, alice = alice_client
    current = chat(alice, "Current")
    add_run(current, "hello")
    response = client.post(f"/c/{current.pk}/delete/", {"active": current.pk}, **HX)
    assert response.status_code == 200  # django-htmx's HttpResponseClientRedirect
    assert response["HX-Redirect"] == "/"
    response = client.post(f"/c/{current.pk}/delete/", {"active": current.pk})
    assert response.status_code == 404  # gone already
    response = client.get("/", follow=True)
    assert response.context["conversation"].pk != current.pk


def test_a_deleted_conversation_is_not_reused_as_the_empty_one():
    owner = store.Owner(user_id=None, guest_key="k")
    conversation = Conversation.objects.create(guest_key="k")
    add_run(conversation, "hello")
    store.conversation_delete(owner=owner, conversation_id=conversation.pk, at=timezone.now())
    assert store.conversation_get(owner=owner, conversation_id=conversation.pk) is None
    assert store.conversation_get_or_create_empty(owner=owner).pk != conversation.pk


def empty_chats(user: User) -> list[int]:
    empty = Conversation.objects.filter(owner=user, messages__isnull=True, forked_from=None)
    return list(empty.values_list("pk", flat=True))


@pytest.mark.parametrize("then", ["write in another chat", "fork another chat"])
def test_new_chat_and_home_reopen_the_empty_chat_after_another_one_moved_above_it(
    alice_client, then
):
    client, alice = alice_client
    older = chat(alice, "Older", updated=timezone.now() - timedelta(hours=1))
    question = add_run(older, "hello").user_message
    empty = int(client.post("/c/new/")["Location"].strip("/").split("/")[-1])
    if then == "write in another chat":
        add_run(older, "and again")
        # as the run's end does: the list now has it above the empty chat
        Conversation.objects.filter(pk=older.pk).update(updated_at=timezone.now())
    else:
        client.post(f"/c/{older.pk}/fork/", {"question": question.pk})

    assert client.post("/c/new/")["Location"] == f"/c/{empty}/"
    assert client.get("/")["Location"] == f"/c/{empty}/"
    assert empty_chats(alice) == [empty]
    assert Conversation.objects.filter(owner=alice).first().pk == empty  # top of the list


@pytest.mark.django_db(transaction=True)
async def test_a_deleted_conversation_closes_its_socket():
    @database_sync_to_async
    def deleted_conversation():
        user = User.objects.create_user("alice")
        conversation = chat(user, "Gone")
        add_run(conversation, "hello")
        owner = store.Owner(user.pk, "")
        store.conversation_delete(owner=owner, conversation_id=conversation.pk, at=timezone.now())
        return user, conversation

    user, conversation = await deleted_conversation()
    communicator = Communicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation.pk}/")
    communicator.scope["user"] = user
    communicator.scope["session"] = None
    await communicator.connect()
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4404}
    await communicator.disconnect()


# Markers


def test_a_conversation_whose_last_run_failed_or_is_running_is_marked(alice_client):
    client, alice = alice_client
    earlier = timezone.now() - timedelta(minutes=5)
    failed, running, fixed, stopped, limited, generated = (
        chat(alice, t) for t in ("F", "R", "X", "S", "L", "G")
    )
    add_run(failed, "q", status="failed")
    add_run(limited, "q", status="max_iterations", answer="")
    add_run(generated, "q", status="max_iterations", answer="From what was found: ...")
    add_run(running, "q", status="running", answer="")
    add_run(fixed, "q", status="failed", at=earlier)
    add_run(fixed, "q again")
    add_run(stopped, "q", status="cancelled")
    html = client.get(f"/c/{fixed.pk}/").content.decode()

    def marker(conversation):
        start = html.index(f'id="conversation-marker-{conversation.pk}"')
        return html[html.rindex("<span", 0, start) : html.index("</li>", start)]

    assert "marker-failed" in marker(failed)
    assert '<span class="visually-hidden">last run failed</span>' in marker(failed)
    assert "marker-running" in marker(running) and "a run is going" in marker(running)
    assert marker(fixed).startswith('<span class="marker" id=')
    assert marker(stopped).startswith('<span class="marker" id=')
    assert "marker-failed" in marker(limited) and "model-turn limit" in marker(limited)
    # Answered at the limit (early_stopping_method="generate"): it has its answer.
    assert marker(generated).startswith('<span class="marker" id=')


# Conversations of manage.py ask


@pytest.mark.django_db(transaction=True)
def test_a_conversation_asked_from_the_terminal_is_in_its_users_list():
    alice = User.objects.create_user("alice")
    call_command("ask", "What is 17*23?", "--user", "alice", "--no-stream", stdout=StringIO())
    asked = Conversation.objects.get(owner=alice)
    client = Client()
    client.force_login(alice)
    html = client.get("/", follow=True).content.decode()
    assert f'id="conversation-link-{asked.pk}"' in html
    assert asked.title and f">{asked.title}</a>" in html
    found = client.get("/c/list/", {"q": "391"}).content.decode()
    assert f'id="conversation-link-{asked.pk}"' in found
    bob = Client()
    bob.force_login(User.objects.create_user("bob"))
    assert f'id="conversation-link-{asked.pk}"' not in bob.get("/", follow=True).content.decode()


# What it costs


def test_the_list_is_one_query_however_many_conversations(alice_client, django_assert_num_queries):
    _, alice = alice_client
    for i in range(30):
        add_run(chat(alice, f"Trip {i}"), f"question {i}", status="failed" if i % 3 else "running")
    owner = store.Owner(alice.pk, "")
    with django_assert_num_queries(1):
        listed = store.conversations_listed(owner=owner)
        grouped_by_date(listed, today=timezone.localdate())
    assert len(listed) == 30
    with django_assert_num_queries(1):
        assert len(store.conversations_listed(owner=owner, query="question")) == 30


def test_the_list_shows_at_most_its_length_and_says_so(alice_client):
    client, alice = alice_client
    Conversation.objects.bulk_create(
        Conversation(owner=alice, title=f"Trip {i}") for i in range(store.LIST_LENGTH + 5)
    )
    html = client.get("/c/list/").content.decode()
    assert html.count('class="conversation-item') == store.LIST_LENGTH
    assert f"The {store.LIST_LENGTH} most recent are shown; search to find older ones." in html


def test_a_conversation_of_200_runs_opens_in_a_bounded_number_of_queries(
    alice_client, django_assert_max_num_queries, settings
):
    settings.CHAT_PAGE_EXCHANGES = 20
    client, alice = alice_client
    conversation = chat(alice, "Long")
    for i in range(200):
        add_run(conversation, f"question {i}", steps=2)
    for i in range(20):
        add_run(chat(alice, f"Other {i}"), "q")
    with django_assert_max_num_queries(15):
        response = client.get(f"/c/{conversation.pk}/")
    assert response.status_code == 200
    # The newest 20; the rest behind "Show earlier messages" (tests/chat/test_growth.py).
    assert response.content.decode().count('class="run"') == 20
    assert "Show earlier messages" in response.content.decode()


# Open tabs follow a delete and a rename


async def _socket_of(conversation: Conversation, user: User) -> Communicator:
    communicator = Communicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation.pk}/")
    communicator.scope["user"] = user
    communicator.scope["session"] = None
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _until_close(communicator: Communicator) -> tuple[list[str], int]:
    """Return the frames a socket is sent up to its close, and the close's code."""
    frames = []
    while True:
        output = await communicator.receive_output()
        if output["type"] == "websocket.close":
            return frames, output["code"]
        frames.append(output.get("text", ""))


@database_sync_to_async
def _alice_with_a_chat(title: str = "Trip") -> tuple[User, Client, Conversation]:
    user = User.objects.create_user("alice")
    client = Client()
    client.force_login(user)
    conversation = chat(user, title)
    add_run(conversation, "hello")
    return user, client, conversation


@pytest.mark.django_db(transaction=True)
async def test_deleting_a_conversation_closes_the_sockets_already_open_on_it():
    user, client, conversation = await _alice_with_a_chat()
    socket = await _socket_of(conversation, user)
    response = await database_sync_to_async(client.post)(f"/c/{conversation.pk}/delete/", **HX)
    assert response.status_code == 200
    _, code = await _until_close(socket)
    assert code == 4410  # the page says it was deleted (it said "not yours in this session")
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_message_sent_to_a_deleted_conversation_is_refused_and_starts_no_run():
    user, _, conversation = await _alice_with_a_chat()
    socket = await _socket_of(conversation, user)
    await database_sync_to_async(store.conversation_delete)(
        owner=store.Owner(user.pk, ""), conversation_id=conversation.pk, at=timezone.now()
    )  # no close reached this socket (another process, a lost message): the send is checked
    await socket.send_json_to({"content": "What is 7*8?"})
    _, code = await _until_close(socket)
    assert code == 4410
    count = await database_sync_to_async(AgentRun.objects.filter(conversation=conversation).count)()
    assert count == 1  # only the run from before the delete
    await socket.disconnect()


def test_deleting_a_conversation_stops_its_running_run(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "Going")
    run = add_run(conversation, "hello", status="running", answer="")
    assert client.post(f"/c/{conversation.pk}/delete/", **HX).status_code == 200
    run.refresh_from_db()
    assert run.cancel_requested_at is not None  # its process cancels it; the row stays


@pytest.mark.django_db(transaction=True)
async def test_a_rename_reaches_every_open_tab_of_the_conversation():
    user, client, conversation = await _alice_with_a_chat("Old name")
    socket = await _socket_of(conversation, user)
    while await socket.receive_nothing(timeout=0.3) is False:  # the catch-up frames
        await socket.receive_output()
    response = await database_sync_to_async(client.post)(
        f"/c/{conversation.pk}/rename/", {"title": "Hangzhou <b>trip</b>"}, **HX
    )
    assert response.status_code == 200
    frame = await socket.receive_from()
    assert 'id="conversation-title" hx-swap-oob="true"' in frame
    assert "Hangzhou &lt;b&gt;trip&lt;/b&gt;" in frame and "<b>" not in frame
    assert f'id="conversation-link-{conversation.pk}"' in frame
    await socket.disconnect()


def test_a_crafted_active_id_is_ignored_not_a_server_error(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "Mine")
    add_run(conversation, "hello")
    assert client.get("/c/list/?active=%C2%B2", **HX).status_code == 200
    assert client.get(f"/c/{conversation.pk}/menu/?active=%C2%B2", **HX).status_code == 200
    response = client.post(f"/c/{conversation.pk}/delete/", {"active": "²"}, **HX)
    assert response.status_code == 200


def test_the_rename_box_holds_the_title_as_stored_not_its_bidi_markers(alice_client):
    client, alice = alice_client
    conversation = chat(alice, "\u202eexe.txt")
    add_run(conversation, "hello")
    html = client.get(f"/c/{conversation.pk}/menu/", **HX).content.decode()
    assert 'value="\u202eexe.txt"' in html
