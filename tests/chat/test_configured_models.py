"""Several configured models: the checks, the picker, runs of the picked model, a model
that is no longer configured, ``ask --model``, and the host a run stores and exports."""

from __future__ import annotations

import csv
import io
import json
from io import StringIO

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from agents.configured_models import ConfiguredModel
from agents.providers import ModelConfig
from chat.catalog import chat_model_for, model_choices
from chat.checks import check_agent_model
from chat.export import COLUMNS, trace_rows
from chat.models import AgentRun, Conversation
from chat.runs import create_run
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import ask_over_socket, connect, make_conversation, receive_until
from tests.chat.test_strategies import picker_post

# A base URL with credentials in it: they must never reach the page, the run or the CSV.
LOCAL_URL = "http://user:sk-in-url@127.0.0.1:8001/v1?api-key=sk-query"
LOCAL = ConfiguredModel(
    key="local",
    label="",
    config=ModelConfig(provider="openai", model="qwen2.5", base_url=LOCAL_URL, api_key="sk-l"),
    source="AGENT_MODELS_FILE (models.toml) [[models]] #1 (local)",
    setting_names={"api_key": "LOCAL_API_KEY"},
)


@pytest.fixture
def models(settings):
    """Configure three models: an OpenAI primary, a local server, and the offered demo."""
    settings.AGENT_MODEL = ModelConfig(provider="openai", model="gpt-4o-mini", api_key="sk-p")
    settings.AGENT_EXTRA_MODELS = [LOCAL]
    settings.AGENT_OFFER_DEMO = True
    return settings


# The checks


def test_every_configured_model_is_checked_and_named_by_its_key_and_source(models):
    unknown = ConfiguredModel(
        key="typo", config=ModelConfig(provider="olama", model="m"), source="models.toml #2"
    )
    keyless = ConfiguredModel(
        key="deepseek",
        config=ModelConfig(provider="openai", model="deepseek-chat"),
        source="models.toml #3",
        setting_names={"api_key": "DEEPSEEK_API_KEY"},
    )
    models.AGENT_EXTRA_MODELS = [LOCAL, unknown, keyless]
    first, second = check_agent_model()

    assert first.id == "chat.E001"
    assert first.msg.startswith("Model 'typo' (models.toml #2) has an unknown provider 'olama'")
    assert "openai (OpenAI-compatible endpoint)" in first.msg
    assert "[[models]]" in first.hint
    assert second.id == "chat.E002"
    assert "Model 'deepseek' (models.toml #3)" in second.msg
    assert "needs DEEPSEEK_API_KEY, which is not set" in second.msg


def test_the_primary_model_keeps_its_messages_beside_the_files_models(models):
    models.AGENT_MODEL = ModelConfig(provider="openai", model="gpt-4o-mini")
    [error] = check_agent_model()
    assert error.id == "chat.E002"
    assert error.msg.startswith("The openai provider") and "needs OPENAI_API_KEY" in error.msg
    assert "AGENT_PROVIDER" in error.hint


def test_a_complete_set_of_models_passes(models):
    assert check_agent_model() == []


# The picker


def test_the_picker_offers_every_configured_model_by_its_label(models, alice):
    client, conversation = alice
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="model-select"' in html
    assert '<option value="default" selected>gpt-4o-mini via api.openai.com</option>' in html
    assert '<option value="local">qwen2.5 via 127.0.0.1:8001</option>' in html
    assert '<option value="demo">Offline demo model (scripted, not an LLM)</option>' in html
    assert "Model: gpt-4o-mini via api.openai.com · OpenAI-compatible endpoint" in html
    assert "sk-in-url" not in html and "sk-query" not in html


def test_with_one_model_the_picker_has_no_model_menu(alice, settings):
    settings.AGENT_OFFER_DEMO = False
    client, conversation = alice
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="strategy-select"' in html
    assert 'id="model-select"' not in html
    response = picker_post(client, conversation, strategy="react")
    assert response.status_code == 200
    conversation.refresh_from_db()
    assert (conversation.model_key, conversation.strategy) == ("default", "react")


def test_picking_a_model_stores_it_and_updates_the_header(models, alice):
    client, conversation = alice
    response = picker_post(client, conversation, model="local", strategy="tool_calling")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<option value="local" selected>' in html
    assert 'id="model-badge" hx-swap-oob="true">Model: qwen2.5 via 127.0.0.1:8001' in html
    conversation.refresh_from_db()
    assert conversation.model_key == "local"
    # Another setting posted later keeps the model picked.
    picker_post(client, conversation, model="local", strategy="xml")
    conversation.refresh_from_db()
    assert (conversation.model_key, conversation.strategy) == ("local", "xml")


def test_a_model_that_is_not_configured_is_refused(models, alice):
    client, conversation = alice
    response = picker_post(client, conversation, model="gpt-9", strategy="tool_calling")
    assert response.status_code == 400
    assert "gpt-9 is not one of the available choices" in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.model_key == "default"


def test_the_model_is_fixed_at_the_first_message(models, alice):
    client, conversation = alice
    create_run(conversation_id=conversation.pk, content="Hi")
    response = picker_post(client, conversation, model="local", strategy="tool_calling")
    assert response.status_code == 409
    conversation.refresh_from_db()
    assert conversation.model_key == "default"


# Runs of the picked model


def test_a_run_records_the_provider_model_and_host_of_its_conversations_model(models, alice):
    _, conversation = alice
    Conversation.objects.filter(pk=conversation.pk).update(model_key="local")
    run = create_run(conversation_id=conversation.pk, content="Hi")

    assert (run.provider, run.model_name, run.endpoint) == ("openai", "qwen2.5", "127.0.0.1:8001")
    model = chat_model_for(AgentRun.objects.select_related("conversation").get(pk=run.pk))
    assert model.model_name == "qwen2.5"
    assert str(model.openai_api_base) == LOCAL_URL
    assert model.openai_api_key.get_secret_value() == "sk-l"


def test_a_run_of_the_primary_model_records_the_providers_default_host(models, alice):
    _, conversation = alice
    run = create_run(conversation_id=conversation.pk, content="Hi")
    assert (run.provider, run.model_name, run.endpoint) == (
        "openai",
        "gpt-4o-mini",
        "api.openai.com",
    )


@pytest.mark.django_db(transaction=True)
async def test_a_conversation_that_picked_the_demo_runs_the_demo_beside_a_real_model(models):
    user, conversation = await make_conversation()
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        model_key="demo"
    )
    frames = await ask_over_socket(conversation, user, "What is 17*23?")

    assert "status-succeeded" in frames[-1]
    run = await database_sync_to_async(AgentRun.objects.get)()
    assert (run.provider, run.model_name, run.endpoint) == ("demo", "demo-scripted", "")
    assert "391" in run.output


# A model that is no longer configured


@pytest.mark.django_db(transaction=True)
async def test_a_model_no_longer_configured_fails_saying_so_and_the_next_run_works_after_switching(
    models,
):
    user, conversation = await make_conversation()
    await database_sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        model_key="retired"
    )
    frames = await ask_over_socket(conversation, user, "What is 17*23?")

    assert "status-failed" in frames[-1]
    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == "failed"
    assert "model 'retired' is no longer configured" in run.error
    assert "default, local, demo" in run.error and "Pick another" in run.error
    assert (run.provider, run.model_name, run.endpoint) == ("", "retired", "")
    assert run.provider_label == "no configured model"

    client = Client()
    await database_sync_to_async(client.force_login)(user)
    page = await database_sync_to_async(client.get)(f"/c/{conversation.pk}/")
    html = page.content.decode()
    assert 'id="model-select"' in html
    assert '<option value="" selected>retired (no longer configured)</option>' in html
    assert "Model: retired (no longer configured)" in html
    response = await database_sync_to_async(picker_post)(client, conversation, model="demo")
    assert response.status_code == 200
    assert "Model: Offline demo model" in response.content.decode()

    # The socket is sent the failed run on connect: wait for the new run's end.
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "What is 2+2?"}))
    frames = await receive_until(
        communicator,
        lambda frame: (
            'class="run-status status-' in frame
            and "status-running" not in frame
            and f'id="run-{run.pk}-status"' not in frame
        ),
    )
    await wait_for_runs()
    await communicator.disconnect()
    assert "status-succeeded" in frames[-1]
    runs = await database_sync_to_async(list)(AgentRun.objects.order_by("pk"))
    assert [(r.provider, r.status) for r in runs] == [("", "failed"), ("demo", "succeeded")]


def test_only_a_model_that_is_gone_can_be_replaced_once_the_chat_has_messages(models, alice):
    client, conversation = alice
    create_run(conversation_id=conversation.pk, content="Hi")
    AgentRun.objects.update(status="failed")
    Conversation.objects.filter(pk=conversation.pk).update(model_key="retired")

    response = picker_post(client, conversation, model="nonsense")
    assert response.status_code == 400
    assert "Pick one of the configured models" in response.content.decode()
    response = picker_post(client, conversation, model="local", strategy="xml")
    assert response.status_code == 200
    conversation.refresh_from_db()
    # Only the model: the strategy stays what the first message fixed.
    assert (conversation.model_key, conversation.strategy) == ("local", "tool_calling")
    response = picker_post(client, conversation, model="demo")
    assert response.status_code == 409
    conversation.refresh_from_db()
    assert conversation.model_key == "local"


# ask --model


@pytest.mark.django_db(transaction=True)
def test_ask_runs_the_model_it_is_given(models):
    out = StringIO()
    call_command("ask", "What is 17*23?", "--model", "demo", stdout=out)
    assert out.getvalue().startswith("Model: Offline demo model (scripted, not an LLM) ·")
    conversation = Conversation.objects.get()
    assert conversation.model_key == "demo"
    assert AgentRun.objects.get().provider == "demo"


@pytest.mark.django_db(transaction=True)
def test_ask_refuses_a_model_that_is_not_configured_listing_the_keys(models):
    with pytest.raises(CommandError, match="No configured model is called 'gpt-9'") as caught:
        call_command("ask", "Hi", "--model", "gpt-9", stdout=StringIO())
    assert "default (gpt-4o-mini via api.openai.com), local (qwen2.5 via" in str(caught.value)
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_ask_keeps_a_conversations_model_but_replaces_one_that_is_gone(models):
    call_command("ask", "What is 17*23?", "--model", "demo", stdout=StringIO())
    conversation = Conversation.objects.get()
    with pytest.raises(CommandError, match="uses the model 'demo'"):
        call_command("ask", "Hi", "--conversation", str(conversation.pk), "--model", "local",
                     stdout=StringIO())  # fmt: skip

    Conversation.objects.filter(pk=conversation.pk).update(model_key="retired")
    with pytest.raises(CommandError, match="No configured model is called 'nope'"):
        call_command("ask", "Hi", "--conversation", str(conversation.pk), "--model", "nope",
                     stdout=StringIO())  # fmt: skip
    call_command("ask", "What is 2+2?", "--conversation", str(conversation.pk), "--model", "demo",
                 stdout=StringIO())  # fmt: skip
    conversation.refresh_from_db()
    assert conversation.model_key == "demo"
    assert AgentRun.objects.filter(status="succeeded").count() == 2


# The host, stored and shown


def test_the_host_is_exported_and_shown_on_the_admins_run_page(models, alice, admin_client):
    _, conversation = alice
    Conversation.objects.filter(pk=conversation.pk).update(model_key="local")
    run = create_run(conversation_id=conversation.pk, content="Hi")

    [row] = trace_rows(AgentRun.objects.all())
    cells = dict(zip(COLUMNS, row, strict=True))
    assert (cells["provider"], cells["model"], cells["endpoint"]) == (
        "openai", "qwen2.5", "127.0.0.1:8001",
    )  # fmt: skip
    assert COLUMNS.index("endpoint") == 33  # column 34 of docs/csv-format.md
    assert not any("sk-" in cell for cell in row)

    html = admin_client.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()
    assert "127.0.0.1:8001" in html and "sk-in-url" not in html
    download = admin_client.get(f"/admin/chat/agentrun/{run.pk}/export/")
    text = b"".join(download.streaming_content).decode()
    [header, line] = list(csv.reader(io.StringIO(text)))
    assert header[33] == "endpoint" and line[33] == "127.0.0.1:8001"


def test_the_run_status_line_names_the_provider_and_host_it_used(models, alice):
    client, conversation = alice
    Conversation.objects.filter(pk=conversation.pk).update(model_key="local")
    create_run(conversation_id=conversation.pk, content="Hi")
    AgentRun.objects.update(status="failed")
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'title="OpenAI-compatible endpoint at 127.0.0.1:8001">qwen2.5</span>' in html


def test_the_choices_are_keys_and_labels_in_order(models):
    assert [key for key, _ in model_choices()] == ["default", "local", "demo"]
