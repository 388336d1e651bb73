"""What the page and the admin ask a provider's entry: the header's model, and token
counts estimated or reported, for runs of providers registered or gone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

import agents.providers
from agents.providers import Capabilities, ModelConfig, ProviderEntry, TokenUsage
from chat.models import AgentRun, Conversation, Message


def no_model(config: ModelConfig, entry: ProviderEntry):
    raise AssertionError("rendering a stored run builds no model")


def fake_entry(name: str, usage: TokenUsage) -> ProviderEntry:
    return ProviderEntry(
        name=name, label=f"{name.title()} provider", factory=no_model,
        capabilities=Capabilities(usage=usage, native_tool_calls=True, streaming_usage=True),
    )  # fmt: skip


@pytest.fixture
def fake_providers(monkeypatch):
    """Register two providers no code knows by name, beside the real ones."""
    registered = {
        **agents.providers.providers(),
        "guessing": fake_entry("guessing", TokenUsage.ESTIMATED),
        "counting": fake_entry("counting", TokenUsage.REPORTED),
    }
    monkeypatch.setattr(agents.providers, "providers", lambda: registered)


def stored_run(owner: User, *, provider: str, model_name: str = "some-model") -> AgentRun:
    conversation = Conversation.objects.create(owner=owner, title="Tokens")
    now = timezone.now()
    message = Message.objects.create(conversation=conversation, role="user", content="Hi?")
    return AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider=provider, model_name=model_name, status="succeeded", started_at=now,
        finished_at=now + timedelta(seconds=1), duration_ms=1000, iterations=1, output="Hello.",
        input_tokens=100, output_tokens=20, total_tokens=120,
    )  # fmt: skip


def staff(client) -> None:
    user = User.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename="view_agentrun"))
    client.force_login(user)


@pytest.mark.django_db
def test_the_page_header_names_the_configured_model_as_its_entry_describes_it(client, settings):
    owner = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=owner)
    client.force_login(owner)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'class="model-badge scripted"' in html
    assert "Model: Offline demo model (scripted, not an LLM)" in html

    settings.AGENT_MODEL = ModelConfig(provider="openai", model="gpt-x", api_key="sk-test")
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'class="model-badge"' in html
    assert "Model: gpt-x via api.openai.com" in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("provider", "shown", "admin_note"),
    [
        ("guessing", "≈120 tokens (estimated)", "120 total (estimated, not counted)"),
        ("counting", '">120 tokens · ', "120 total</div>"),
    ],
)
def test_token_counts_are_marked_estimated_when_the_runs_entry_says_so(
    client, fake_providers, provider, shown, admin_note
):
    owner = User.objects.create_user("alice")
    run = stored_run(owner, provider=provider)
    client.force_login(owner)
    html = client.get(f"/c/{run.conversation_id}/").content.decode()
    assert shown in html
    assert ("≈" in html) == (provider == "guessing")

    staff(client)
    html = client.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()
    assert admin_note in html
    assert f"{provider.title()} provider ({provider})" in html


@pytest.mark.django_db
def test_a_run_of_a_provider_no_longer_registered_still_renders(client):
    owner = User.objects.create_user("alice")
    run = stored_run(owner, provider="retired", model_name="old-model")
    assert run.provider_entry is None
    assert not run.usage_estimated
    client.force_login(owner)
    response = client.get(f"/c/{run.conversation_id}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert '">120 tokens · ' in html  # as stored, with no claim either way
    assert ">old-model</span>" in html and 'title="retired, no longer registered"' in html

    staff(client)
    response = client.get(f"/admin/chat/agentrun/{run.pk}/change/")
    assert response.status_code == 200
    assert "retired, no longer registered" in response.content.decode()
    response = client.get(f"/admin/chat/agentrun/{run.pk}/conversation/")
    assert response.status_code == 200
    assert "Model: old-model (retired, no longer registered)" in response.content.decode()


@pytest.mark.django_db
def test_the_staff_view_names_the_model_a_run_used_not_the_configured_one(client, settings):
    owner = User.objects.create_user("alice")
    same = stored_run(owner, provider="demo", model_name="demo-scripted")
    other = stored_run(owner, provider="openai", model_name="gpt-4o")
    staff(client)
    html = client.get(f"/admin/chat/agentrun/{same.pk}/conversation/").content.decode()
    assert "Model: Offline demo model (scripted, not an LLM)" in html
    assert 'class="model-badge scripted"' in html
    html = client.get(f"/admin/chat/agentrun/{other.pk}/conversation/").content.decode()
    assert "Model: gpt-4o (OpenAI-compatible endpoint)" in html
    assert 'class="model-badge"' in html
