"""The chat page over HTTP: ownership, history rendering, escaping."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from chat.models import AgentRun, AgentStep, Conversation, Message

pytestmark = pytest.mark.django_db


def stored_run(conversation: Conversation, *, question: str, result: str, answer: str) -> AgentRun:
    now = timezone.now()
    # Linked to the question before it, as run_start links a question to its branch's leaf.
    before = conversation.messages.filter(role="user").order_by("-id").values_list("id").first()
    message = Message.objects.create(conversation=conversation, role="user", content=question,
                                     parent_id=before[0] if before else None)  # fmt: skip
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider="demo", model_name="demo-scripted", status="succeeded", started_at=now,
        finished_at=now, duration_ms=1200, iterations=2, output=answer,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=1, iteration=1, kind="model_turn", status="success", started_at=now,
        raw={"tool_calls": [{"name": "weather_forecast"}]},
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=2, iteration=1, kind="tool_call", status="success", started_at=now,
        tool_name="weather_forecast", tool_call_id="call_1", arguments={"town": "苏州"},
        result=result, duration_ms=12,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=3, iteration=2, kind="model_turn", status="success", started_at=now,
        text=answer, result=answer, raw={"tool_calls": []},
    )  # fmt: skip
    Message.objects.create(conversation=conversation, role="assistant", content=answer, run=run)
    return run


class _HeadText(HTMLParser):
    """Collects text found before ``<body>``: a browser ends the head at the first text,
    so every element after it (styles, scripts, the htmx config) lands in the body."""

    def __init__(self) -> None:
        super().__init__()
        self.in_body = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.in_body = self.in_body or tag == "body"

    def handle_data(self, data: str) -> None:
        if not self.in_body and data.strip() and self.lasttag not in ("title", "script", "style"):
            self.text.append(data.strip())


@pytest.mark.parametrize("url", ["/", "/accounts/login/", "/c/999999/"])
def test_each_page_has_its_head_whole_and_no_template_comment_shows(client, url):
    """A ``{# #}`` comment over several lines is not a comment to Django: printed in the
    head, its text pushed the page's styles, scripts and htmx config into the body and
    the page 38 px past the window (found by the timeline's browser test)."""
    html = client.get(url, follow=True).content.decode()
    parser = _HeadText()
    parser.feed(html)
    assert parser.text == [] and "{#" not in html and "#}" not in html


def test_home_gives_a_visitor_a_conversation_of_their_own(client):
    response = client.get("/", follow=True)
    assert response.status_code == 200
    conversation = response.context["conversation"]
    assert conversation.owner is None
    assert conversation.guest_key
    assert conversation.guest_key == client.session["chat_guest_key"]
    # Visiting again reuses the still-empty conversation.
    assert client.get("/").url == f"/c/{conversation.pk}/"


def test_a_client_without_cookies_gets_told_and_creates_no_conversation(client):
    first = client.get("/")
    assert first.status_code == 302
    assert first.url == "/?welcome=1"
    client.cookies.clear()  # a client that does not keep cookies
    second = client.get(first.url)
    assert second.status_code == 403
    assert "Cookies needed" in second.content.decode()
    assert not Conversation.objects.exists()


def test_new_chat_needs_a_post(client):
    assert client.get("/c/new/").status_code == 405
    assert client.post("/c/new/").status_code == 302


def test_the_page_renders_stored_tool_cards_and_the_answer(client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user, title="Suzhou")
    stored_run(conversation, question="苏州天气?", result='{"town": "Suzhou"}', answer="**Sunny**")
    client.force_login(user)

    response = client.get(f"/c/{conversation.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-tool="weather_forecast" data-status="success"' in html
    # Pretty JSON arguments, escaped and highlighted (chat_tags.highlight_json).
    assert '<span class="j-key">&quot;town&quot;</span>: <span class="j-str">&quot;苏州' in html
    assert "<strong>Sunny</strong>" in html  # the answer rendered as Markdown
    assert "Offline demo model" in html
    assert 'ws-connect="/ws/chat/' in html


def test_hostile_content_in_results_and_answers_is_shown_as_text(client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    stored_run(
        conversation,
        question="<script>alert('q')</script>",
        result='<img src=x onerror="alert(1)">',
        answer="[click](javascript:alert(1)) <img src=x onerror=alert(2)>",
    )
    client.force_login(user)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "<script>alert('q')</script>" not in html
    assert "<img src=x" not in html
    assert 'href="javascript:' not in html
    assert "&lt;img src=x onerror" in html


@pytest.mark.parametrize("who", ["stranger", "anonymous"])
def test_someone_elses_conversation_is_a_404(client, who):
    owner = User.objects.create_user("owner")
    conversation = Conversation.objects.create(owner=owner)
    if who == "stranger":
        client.force_login(User.objects.create_user("stranger"))
    assert client.get(f"/c/{conversation.pk}/").status_code == 404


def test_another_browser_sessions_conversation_is_a_404(client):
    conversation = Conversation.objects.create(guest_key="someone-elses-key")
    assert client.get(f"/c/{conversation.pk}/").status_code == 404


def test_the_sidebar_lists_only_your_conversations(client):
    user = User.objects.create_user("alice")
    Conversation.objects.create(owner=user, title="Mine")
    Conversation.objects.create(owner=User.objects.create_user("bob"), title="Bob's secret")
    client.force_login(user)
    html = client.get("/", follow=True).content.decode()
    assert "Mine" in html
    assert "Bob&#x27;s secret" not in html and "Bob's secret" not in html


def test_staff_can_open_a_run_and_see_its_steps_in_order(client):
    admin = User.objects.create_superuser("admin", password="pw")
    run = stored_run(Conversation.objects.create(owner=admin), question="q", result="r", answer="a")
    client.force_login(admin)
    response = client.get(f"/admin/chat/agentrun/{run.pk}/change/")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index("weather_forecast") < html.index("call_1")
    assert "&quot;town&quot;: &quot;苏州&quot;" in html  # pretty-printed arguments
    assert "<strong>Sunny</strong>" not in html  # answer "a" here; Markdown checked below
    listing = client.get("/admin/chat/agentrun/")
    assert listing.status_code == 200
    assert "q" in listing.content.decode()


def test_runs_cannot_be_edited_and_only_superusers_delete_whole_runs(client):
    superuser = User.objects.create_superuser("admin", password="pw")
    run = stored_run(
        Conversation.objects.create(owner=superuser), question="q", result="r", answer="a"
    )
    staff = User.objects.create_user("staff", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    client.force_login(staff)
    assert client.get(f"/admin/chat/agentrun/{run.pk}/change/").status_code == 200
    assert client.post(f"/admin/chat/agentrun/{run.pk}/change/", {}).status_code == 403
    assert client.get(f"/admin/chat/agentrun/{run.pk}/delete/").status_code == 403
    # Steps have no admin of their own: they cannot be deleted one by one.
    assert client.get("/admin/chat/agentstep/").status_code == 404

    client.force_login(superuser)
    response = client.post(f"/admin/chat/agentrun/{run.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not AgentRun.objects.exists()
    assert not AgentStep.objects.exists()


def test_non_staff_cannot_open_the_admin(client):
    client.force_login(User.objects.create_user("alice"))
    response = client.get("/admin/chat/agentrun/")
    assert response.status_code == 302
    assert "/admin/login/" in response.url


def test_a_guest_who_logs_in_keeps_their_chats(client):
    User.objects.create_user("alice", password="secret-pw-123")
    conversation = client.get("/", follow=True).context["conversation"]
    Message.objects.create(conversation=conversation, role="user", content="hi")

    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "secret-pw-123", "next": f"/c/{conversation.pk}/"},
        follow=True,
    )
    assert response.status_code == 200
    assert response.context["conversation"].pk == conversation.pk
    conversation.refresh_from_db()
    assert conversation.owner.username == "alice"
    assert conversation.guest_key == ""


def test_bidi_and_zero_width_characters_are_shown_not_obeyed(client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    stored_run(conversation, question="q", result="\u202eexe.txt\u202c <b>x</b>", answer="a")
    client.force_login(user)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "\u202e" not in html
    assert '<span class="ctl">&lt;U+202E&gt;</span>exe.txt' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html


def test_bidi_controls_in_questions_titles_and_answers_are_shown_as_markers(client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user, title="\u202egnp.exe")
    stored_run(conversation, question="see \u202eexe.txt", result="{}", answer="**\u202eok**")
    client.force_login(user)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "\u202e" not in html
    assert 'see <span class="ctl">&lt;U+202E&gt;</span>exe.txt' in html
    assert '<span class="ctl">&lt;U+202E&gt;</span>gnp.exe</h1>' in html
    assert "<strong>&lt;U+202E&gt;ok</strong>" in html
    # The edit box holds the question as stored (an edit sends it back so), by reference.
    assert "required>see &#x202E;exe.txt</textarea>" in html


def test_zero_width_joiners_in_chat_text_are_left_alone(client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    stored_run(conversation, question=f"a {family}", result="{}", answer=family)
    client.force_login(user)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert f"a {family}" in html


def test_the_page_shows_a_preview_of_a_huge_result_and_the_admin_all_of_it(client, settings):
    settings.CHAT_RESULT_PREVIEW_CHARS = 1_000
    user = User.objects.create_user("alice", password="pw")
    conversation = Conversation.objects.create(owner=user)
    run = stored_run(conversation, question="q", result="y" * 5_000, answer="a")
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "y" * 1_000 in page and "y" * 1_001 not in page
    assert "showing the first 1,000 of 5,000 characters" in page
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    trace = client.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()
    assert "y" * 5_000 in trace


def test_the_chat_page_is_never_served_from_a_cache(client):
    """Found by a new-user walk: Back from the compare page showed the page as first
    loaded ("New chat", the settings still open) because nothing forbade a cached copy."""
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user, title="Suzhou")
    client.force_login(user)

    response = client.get(f"/c/{conversation.pk}/")

    assert "no-store" in response["Cache-Control"] and "no-cache" in response["Cache-Control"]
