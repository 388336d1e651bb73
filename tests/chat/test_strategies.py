"""Strategies through the real entry points: the websocket, the picker, the page, ``ask``."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone
from langchain_core.messages import AIMessage

from chat.models import AgentRun, AgentStep, Conversation, Message
from tests.chat.test_consumer import ask_over_socket, make_conversation
from tests.fakes import tool_call

TEXT = {
    "react": (
        "Thought: check the weather\nAction: weather_forecast",
        'Thought: check the weather\nAction: weather_forecast\nAction Input: {"town": "苏州"}',
        "Thought: I now know the final answer\nFinal Answer: 苏州**晴**。",
    ),
    "structured_chat": (
        '```json\n{"action": "weather_forecast", "action_input": {"town": "苏州",}}\n```',
        '```json\n{"action": "weather_forecast", "action_input": {"town": "苏州"}}\n```',
        '```json\n{"action": "Final Answer", "action_input": "苏州**晴**。"}\n```',
    ),
    "xml": (
        "<tool>weather_forecast</tool>",
        '<tool>weather_forecast</tool><tool_input>{"town": "苏州"}',
        "<final_answer>苏州**晴**。</final_answer>",
    ),
}
TRAVEL_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"


@database_sync_to_async
def set_strategy(conversation: Conversation, strategy: str) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(strategy=strategy)


@database_sync_to_async
def run_steps() -> tuple[AgentRun, list[AgentStep]]:
    run = AgentRun.objects.get()
    return run, list(run.steps.order_by("ordinal"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", sorted(TEXT))
async def test_a_parse_error_card_is_followed_by_a_successful_retry(strategy, scripted_model):
    malformed, call, answer = TEXT[strategy]
    scripted_model.script = [AIMessage(malformed), AIMessage(call), AIMessage(answer)]
    user, conversation = await make_conversation()
    await set_strategy(conversation, strategy)
    frames = await ask_over_socket(conversation, user, "苏州天气？")
    html = "\n".join(frames)

    assert 'parse-error" id="step-' in html and ">format error<" in html
    assert 'data-tool="weather_forecast" data-status="success"' in html
    assert "status-succeeded" in frames[-1]
    run, steps = await run_steps()
    assert run.strategy == strategy and run.tool_choice == "" and run.parallel_tool_calls is None
    assert [(s.kind, s.status) for s in steps] == [
        ("model_turn", "success"), ("tool_call", "error"), ("model_turn", "success"), ("tool_call", "success"),
        ("model_turn", "success"),
    ]  # fmt: skip
    bad, good = steps[1], steps[3]
    assert bad.is_format_error and bad.error.startswith("OutputParserException: ")
    assert bad.text == malformed  # the log: what the model wrote
    assert good.arguments == {"town": "苏州"} and good.text.startswith(call)
    assert steps[0].text == malformed and steps[2].text == call
    assert steps[4].is_answer and steps[4].result == "苏州**晴**。" and steps[4].text == answer
    assert run.output == "苏州**晴**。"
    # The format error is not a tool call that ran and failed: counted on its own.
    assert (run.tool_call_count, run.tool_error_count, run.format_error_count) == (1, 0, 1)
    assert "1 format error" in frames[-1] and "tool error" not in frames[-1]
    reply = await database_sync_to_async(Message.objects.get)(role="assistant")
    assert reply.content == "苏州**晴**。"  # the answer, not the format around it


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["tool_calling", "react", "structured_chat", "xml"])
async def test_the_demo_model_answers_the_travel_question_in_every_strategy(strategy):
    user, conversation = await make_conversation()
    await set_strategy(conversation, strategy)
    frames = await ask_over_socket(conversation, user, TRAVEL_QUESTION)

    assert "status-succeeded" in frames[-1]
    run, steps = await run_steps()
    calls = [s for s in steps if s.kind == "tool_call"]
    assert {s.tool_name for s in calls} == {
        "search_travel_info", "weather_forecast", "check_bnb_availability",
    }  # fmt: skip
    assert all(s.status == "success" for s in calls)
    iterations = [s.iteration for s in calls]
    if strategy == "tool_calling":
        assert iterations == [1, 1, 1] and not any(s.text for s in calls)
    else:  # text formats make one call per turn, each keeping its log
        assert iterations == [1, 2, 3] and all(s.text for s in calls)
    assert "苏州" in run.output and "Final Answer" not in run.output
    assert "<final_answer>" not in run.output and '"action"' not in run.output


def picker_post(client: Client, conversation: Conversation, **data) -> object:
    return client.post(f"/c/{conversation.pk}/strategy/", data, HTTP_HX_REQUEST="true")


def test_an_empty_chat_shows_the_strategy_picker(alice):
    client, conversation = alice
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert '<details id="conversation-settings" class="settings-panel">' in html  # folded
    for value in ("tool_calling", "react", "structured_chat", "xml"):
        assert f'<option value="{value}"' in html
    assert '<option value="weather_forecast"' in html  # a named tool_choice
    assert 'name="parallel_tool_calls"' in html
    select = re.search(r'<select name="tool_choice"[^>]*>', html).group(0)
    assert "maxlength" not in select  # meaningless on a <select> (a walk's find)


def test_the_picker_sets_the_strategy_and_hides_native_options_for_text_ones(alice):
    client, conversation = alice
    response = picker_post(client, conversation, strategy="react")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<option value="react" selected>' in html and 'name="tool_choice"' not in html
    conversation.refresh_from_db()
    assert (conversation.strategy, conversation.tool_choice) == ("react", "auto")


def test_the_picker_stores_native_options(alice):
    client, conversation = alice
    response = picker_post(client, conversation, strategy="tool_calling",
                           tool_choice="weather_forecast")  # fmt: skip
    assert response.status_code == 200
    conversation.refresh_from_db()
    assert conversation.tool_choice == "weather_forecast"
    assert conversation.parallel_tool_calls is False  # an unticked box is not sent


def test_coming_back_to_native_calls_starts_from_their_defaults(alice):
    """The text strategies' picker has no native fields, so none can be read from it."""
    client, conversation = alice
    picker_post(client, conversation, strategy="tool_calling", tool_choice="required")
    picker_post(client, conversation, strategy="react")
    response = picker_post(client, conversation, strategy="tool_calling")
    assert 'name="tool_choice"' in response.content.decode()
    conversation.refresh_from_db()
    assert (conversation.tool_choice, conversation.parallel_tool_calls) == ("auto", True)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"strategy": "langgraph"}, "Select a valid choice"),
        ({"strategy": "tool_calling", "tool_choice": "rm_rf"}, "Select a valid choice"),
        ({}, "This field is required"),
    ],
)
def test_the_picker_refuses_values_it_does_not_offer(alice, data, message):
    client, conversation = alice
    response = picker_post(client, conversation, **data)
    assert response.status_code == 400
    assert message in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.strategy == "tool_calling"


def test_the_picker_is_locked_once_the_chat_has_a_message(alice):
    client, conversation = alice
    Message.objects.create(conversation=conversation, role="user", content="hi")
    response = picker_post(client, conversation, strategy="xml")
    assert response.status_code == 409
    assert 'class="strategy-badge"' in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.strategy == "tool_calling"
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'name="strategy"' not in page and "Strategy: Native tool calling" in page


def test_someone_elses_chat_cannot_be_reconfigured(alice, django_user_model):
    _, conversation = alice
    mallory = Client()
    mallory.force_login(django_user_model.objects.create_user("mallory", password="pw"))
    assert picker_post(mallory, conversation, strategy="xml").status_code == 404
    conversation.refresh_from_db()
    assert conversation.strategy == "tool_calling"


def test_the_picker_needs_a_csrf_token(alice):
    _, conversation = alice
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(conversation.owner)
    assert picker_post(strict, conversation, strategy="xml").status_code == 403
    page = strict.get(f"/c/{conversation.pk}/").content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    response = picker_post(strict, conversation, strategy="xml", csrfmiddlewaretoken=token)
    assert response.status_code == 200


def test_a_plain_form_post_redirects_back_to_the_chat(alice):
    client, conversation = alice
    response = client.post(f"/c/{conversation.pk}/strategy/", {"strategy": "xml"})
    assert response.status_code == 302 and response.url == f"/c/{conversation.pk}/"


def stored_text_run(conversation: Conversation) -> AgentRun:
    now = timezone.now()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    run = AgentRun.objects.create(
        conversation=conversation, user_message=question, strategy="react", provider="demo",
        model_name="demo-scripted", status="succeeded", started_at=now, finished_at=now,
        duration_ms=10, iterations=2, output="It is **sunny**.",
    )  # fmt: skip
    call = 'Thought: weather\nAction: weather_forecast\nAction Input: {"town": "Suzhou"}'
    AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="model_turn", status="success",
                             started_at=now, text=call)  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=2, iteration=1, kind="tool_call", status="success", started_at=now,
        tool_name="weather_forecast", tool_call_id="call_1", arguments={"town": "Suzhou"},
        result='{"ok": true}', text=call,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=3, iteration=2, kind="model_turn", status="success", started_at=now,
        text="Thought: done\nFinal Answer: It is **sunny**.", result="It is **sunny**.",
    )  # fmt: skip
    return run


def test_a_text_strategy_run_renders_format_text_once_and_the_parsed_answer(alice):
    client, conversation = alice
    stored_text_run(conversation)
    html = client.get(f"/c/{conversation.pk}/").content.decode()

    assert '<pre class="turn-text format-text">Thought: weather' in html
    assert html.count('<pre class="turn-text format-text">') == 1  # not again on the card
    assert "parsed from (log)" not in html
    assert "Result (observation)" in html
    assert "It is <strong>sunny</strong>." in html  # the answer as Markdown
    assert "Show the reply as the model wrote it" in html
    assert "ReAct (text)</span>" in html  # on the run's status line


def test_the_admin_run_page_shows_the_options_the_log_and_the_parsed_answer(alice, admin_client):
    _, conversation = alice
    run = stored_text_run(conversation)
    html = admin_client.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()
    assert "Log: the model text this call was parsed from" in html
    assert "Final answer, as parsed" in html
    assert "– (text strategy: one call per turn)" in html


def test_the_admin_filters_runs_with_format_errors(alice, admin_client):
    _, conversation = alice
    run = stored_text_run(conversation)
    AgentRun.objects.filter(pk=run.pk).update(format_error_count=2)
    listed = admin_client.get("/admin/chat/agentrun/?has_tool_errors=format").content.decode()
    assert "+ 2 format" in listed and f"/admin/chat/agentrun/{run.pk}/change/" in listed
    AgentRun.objects.filter(pk=run.pk).update(format_error_count=0)
    listed = admin_client.get("/admin/chat/agentrun/?has_tool_errors=format").content.decode()
    assert f"/admin/chat/agentrun/{run.pk}/change/" not in listed


def test_migration_backfills_answers_and_native_options(alice):
    from importlib import import_module

    backfill = import_module("chat.migrations.0002_strategies").backfill
    _, conversation = alice
    now = timezone.now()
    question = Message.objects.create(conversation=conversation, role="user", content="q")
    run = AgentRun.objects.create(conversation=conversation, user_message=question,
                                  strategy="tool_calling", provider="demo", model_name="m",
                                  started_at=now)  # fmt: skip
    asked = AgentStep.objects.create(run=run, ordinal=1, iteration=1, kind="model_turn",
                                     status="ok", started_at=now, text="Checking.",
                                     raw={"tool_calls": [{"name": "x"}]})  # fmt: skip
    answer = AgentStep.objects.create(run=run, ordinal=2, iteration=2, kind="model_turn",
                                      status="ok", started_at=now, text="Sunny.",
                                      raw={"tool_calls": []})  # fmt: skip
    backfill(apps, None)
    asked.refresh_from_db(), answer.refresh_from_db(), run.refresh_from_db()
    assert (asked.result, answer.result) == ("", "Sunny.")
    assert (run.tool_choice, run.parallel_tool_calls) == ("auto", True)
    import_module("chat.migrations.0004_step_outcomes").ok_to_success(apps, None)
    asked.refresh_from_db(), answer.refresh_from_db()
    assert answer.is_answer and not asked.is_answer


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["react", "structured_chat", "xml"])
def test_ask_runs_a_text_strategy_and_prints_the_parsed_answer(strategy, capsys):
    call_command("ask", "What is 17*23? #malformed", strategy=strategy)
    out = capsys.readouterr().out
    assert f"strategy {strategy}" in out
    assert "← format error, sent back to the model: " in out
    assert "→ calculator(" in out and "\nAnswer:\n" in out and "391" in out
    run = AgentRun.objects.get()
    assert run.strategy == strategy and run.status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_ask_passes_native_options_and_checks_them(capsys):
    call_command("ask", "What is 17*23?", tool_choice="calculator", no_parallel_tool_calls=True)
    run = AgentRun.objects.get()
    assert (run.strategy, run.tool_choice, run.parallel_tool_calls) == (
        "tool_calling", "calculator", False,
    )  # fmt: skip
    with pytest.raises(CommandError, match="Select a valid choice"):
        call_command("ask", "hi", tool_choice="rm_rf")
    with pytest.raises(CommandError, match="uses the tool_calling strategy"):
        call_command("ask", "hi", conversation=run.conversation_id, strategy="xml")


@pytest.mark.django_db(transaction=True)
async def test_the_first_message_locks_the_picker_in_every_open_tab(scripted_model):
    scripted_model.script = [AIMessage("Hello.")]
    user, conversation = await make_conversation()
    frames = await ask_over_socket(conversation, user, "hi")
    assert 'id="conversation-settings" class="strategy-badge" hx-swap-oob="true"' in frames[0]


def test_the_stored_strategy_choices_match_the_runtimes_strategies():
    from agents.strategies import STRATEGIES
    from chat.models import Strategy

    assert Strategy.choices == [(name, cls.label) for name, cls in STRATEGIES.items()]


def test_new_chats_start_with_the_configured_strategy(db, client, settings):
    settings.AGENT_STRATEGY = "xml"
    response = client.get("/", follow=True)
    response = client.get("/", follow=True)  # past the cookie check
    assert response.context["conversation"].strategy == "xml"


@pytest.mark.django_db(transaction=True)
def test_ask_refuses_native_options_for_a_text_strategy():
    with pytest.raises(CommandError, match="apply to the tool_calling strategy only"):
        call_command("ask", "hi", strategy="react", tool_choice="required")
    assert not AgentRun.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("strategy", "reply"),
    [
        ("react", AIMessage('Action: calculator\nAction Input: {"expression": NaN}')),
        ("react", AIMessage('Action: calculator\nAction Input: {"expression": 1e999}')),
        # ASCII model text whose JSON escape decodes to an unpaired surrogate.
        ("react", AIMessage('Action: calculator\nAction Input: {"expression": "\\ud83d"}')),
        ("tool_calling", AIMessage("", tool_calls=[tool_call("calculator", {"expression": "\ud83d"}, "c1")])),
        ("tool_calling", AIMessage("", tool_calls=[tool_call("calculator", {"expression": float("nan")}, "c1")])),
        ("tool_calling", AIMessage("Sorry \ud83d, checking.", tool_calls=[tool_call("calculator", {"expression": "1"}, "c1")])),
    ],
    ids=["react-NaN", "react-1e999", "react-surrogate-escape", "native-surrogate", "native-NaN", "native-text-surrogate"],
)  # fmt: skip
async def test_arguments_no_database_can_store_are_a_format_error_not_a_dead_run(
    strategy, reply, scripted_model
):
    """Found by review: NaN and unpaired surrogates made the step's write fail."""
    final = AIMessage("Final Answer: ok") if strategy == "react" else AIMessage("ok")
    scripted_model.script = [reply, final]
    user, conversation = await make_conversation()
    await set_strategy(conversation, strategy)
    frames = await ask_over_socket(conversation, user, "q")

    assert "status-succeeded" in frames[-1]
    _, steps = await run_steps()
    (call,) = [s for s in steps if s.kind == "tool_call"]
    assert "\ud83d" not in json.dumps(call.arguments, ensure_ascii=False)
    assert "\ud83d" not in steps[0].text


@pytest.mark.django_db(transaction=True)
async def test_a_tool_name_with_bidi_controls_is_shown_with_markers(scripted_model, client):
    scripted_model.script = [AIMessage("Action: \u202eroluclac\nAction Input: {}"),
                             AIMessage("Final Answer: ok")]  # fmt: skip
    user, conversation = await make_conversation()
    await set_strategy(conversation, "react")
    frames = await ask_over_socket(conversation, user, "q")
    card = next(f for f in frames if 'class="tool-name"' in f and 'data-status="error"' in f)
    start = card.index('class="tool-name"')
    assert "\u202e" not in card[start : start + 100] and "&lt;U+202E&gt;" in card


def test_an_invalid_post_after_the_first_message_gets_the_badge_not_the_picker(alice):
    client, conversation = alice
    Message.objects.create(conversation=conversation, role="user", content="hi")
    response = picker_post(client, conversation, strategy="bogus")
    assert response.status_code == 409 and "<select" not in response.content.decode()
    plain = client.post(f"/c/{conversation.pk}/strategy/", {"strategy": "xml"})
    assert plain.status_code == 302


def test_native_options_posted_with_a_text_strategy_are_ignored_not_refused(alice):
    client, conversation = alice
    response = picker_post(client, conversation, strategy="react", tool_choice="bogus")
    assert response.status_code == 200
    conversation.refresh_from_db()
    assert (conversation.strategy, conversation.tool_choice) == ("react", "auto")


@pytest.mark.django_db(transaction=True)
def test_ask_refuses_native_options_for_a_continued_conversation():
    conversation = Conversation.objects.create(strategy="tool_calling", tool_choice="calculator")
    with pytest.raises(CommandError, match="keeps the options it started with"):
        call_command("ask", "hi", conversation=conversation.pk, tool_choice="weather_forecast")
    assert not AgentRun.objects.exists()


def test_a_change_answers_with_the_settings_open_and_what_each_does(alice):
    client, conversation = alice
    html = picker_post(client, conversation, strategy="react").content.decode()
    assert '<details id="conversation-settings" class="settings-panel" open>' in html
    assert "How the model asks for tools" in html
    assert "Fixed at the first message." in html
