"""The chat's cards as rows render them: folded once their run ends, a one-line preview,
JSON coloured and escaped, a raw view, the model's text once, format errors and partial
answers said for what they are; and a finished model turn replaced by what a reload shows."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from agents.events import ModelTurnFinished, ModelTurnStarted, TextDelta
from chat import fragments, store
from chat.display import ARGUMENTS_PREVIEW_CHARS
from chat.models import (
    AgentRun,
    AgentStep,
    Conversation,
    RunStatus,
    StepKind,
    StepStatus,
)
from chat.presenters import StepPresenter
from chat.recorder import RunRecorder
from chat.templatetags.chat_tags import highlight_json

MARKUP = '<tool_call>{"name": "weather_forecast", "arguments": {"town": "Suzhou"}}</tool_call>'


def _run(strategy: str = "tool_calling") -> AgentRun:
    conversation = Conversation.objects.create(strategy=strategy)
    return store.run_start(conversation_id=conversation.pk, content="Weather?", provider="demo",
                           model_name="demo-scripted", started_at=timezone.now())  # fmt: skip


def _call(run: AgentRun, *, arguments: object = None, result: str = '{"high_c": 8}',
          error_type: str = "", text: str = "") -> AgentStep:  # fmt: skip
    now = timezone.now()
    step = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1, started_at=now,
                            tool_name="weather_forecast", tool_call_id="call_1",
                            arguments=arguments if arguments is not None else {"town": "Suzhou"},
                            text=text)  # fmt: skip
    return store.step_finish(step_id=step.pk, finished_at=now,
                             status=StepStatus.ERROR if error_type else StepStatus.SUCCESS,
                             result=result, error_type=error_type,
                             error=f"{error_type}: bad" if error_type else "")  # fmt: skip


def _open(html: str) -> bool:
    """Return True when a rendered tool card is open."""
    first_tag = html[: html.index(">")]
    return " open" in first_tag


@pytest.mark.django_db
def test_a_tool_card_renders_open_while_its_run_goes_and_folded_once_it_has_ended():
    run = _run()
    step = _call(run)
    assert _open(fragments.step_replaced(step))
    store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED, output="Sunny.", error="",
                     iterations=1, usage={}, finished_at=timezone.now())  # fmt: skip
    step = AgentStep.objects.select_related("run").get(pk=step.pk)
    html = fragments.step_replaced(step)
    assert not _open(html)
    assert '<span class="chevron" aria-hidden="true"></span>' in html
    assert f'data-fold-id="{step.pk}"' in html


@pytest.mark.django_db
def test_a_run_has_expand_all_and_collapse_all_controls():
    html = fragments.run_started(_run())
    assert 'data-cards="expand"' in html and 'data-cards="collapse"' in html


@pytest.mark.parametrize(
    ("arguments", "preview"),
    [
        ({"city": "Hangzhou", "days": 3}, 'city="Hangzhou", days=3'),
        ({"town": "苏州"}, 'town="苏州"'),
        ("Action Input: Suzhou\n  and more", "Action Input: Suzhou and more"),
        ({}, ""),
        (None, ""),
        ([1, 2], "[1, 2]"),
    ],
)
def test_a_folded_card_previews_its_arguments_on_one_line(arguments, preview):
    step = AgentStep(kind=StepKind.TOOL_CALL, arguments=arguments)
    assert StepPresenter(step).arguments_preview == preview


def test_a_long_argument_preview_is_clipped_with_an_ellipsis():
    step = AgentStep(kind=StepKind.TOOL_CALL, arguments={"query": "x" * 500})
    preview = StepPresenter(step).arguments_preview
    assert len(preview) == ARGUMENTS_PREVIEW_CHARS and preview.endswith("…")
    assert preview.startswith('query="xxx')


def test_json_is_coloured_and_every_token_stays_escaped():
    html = highlight_json('{"<b>": "<img src=x onerror=alert(1)>\u202e", "n": [1.5, true, null]}')
    assert '<span class="j-key">&quot;&lt;b&gt;&quot;</span>:' in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert '<span class="ctl">&lt;U+202E&gt;</span>' in html and "\u202e" not in html
    assert '<span class="j-num">1.5</span>' in html
    assert '<span class="j-lit">true</span>' in html and '<span class="j-lit">null</span>' in html


@pytest.mark.parametrize(
    "text",
    ["town=<Suzhou>", '{"a": 1} [showing the first 100 <b>', '["unterminated', "Error: <x>"],
)
def test_text_that_is_not_json_is_shown_plain_and_escaped(text):
    html = highlight_json(text)
    assert '<span class="j-' not in html and "<b>" not in html and "<x>" not in html


@pytest.mark.django_db
def test_a_json_result_has_a_raw_view_as_the_model_was_sent_it():
    run = _run()
    html = fragments.step_replaced(_call(run, result='{"high_c":8,"town":"苏州"}'))
    assert "data-view-toggle" in html
    assert '<pre class="result-raw" data-view="raw" hidden>{&quot;high_c&quot;:8,' in html
    assert '<span class="j-key">&quot;high_c&quot;</span>: <span class="j-num">8</span>' in html
    assert html.count('class="copy"') == 2  # the arguments and the result

    plain = fragments.step_replaced(_call(run, result="It is sunny."))
    assert "data-view-toggle" not in plain and "result-raw" not in plain


@pytest.mark.django_db
def test_a_long_result_opens_clipped_with_show_all_not_in_a_scroll_box():
    run = _run()
    rows = ",\n".join(f'  "day{i}": {i}' for i in range(60))
    html = fragments.step_replaced(_call(run, result="{\n" + rows + "\n}"))
    assert 'class="result-box clipped"' in html and "data-show-all" in html
    short = fragments.step_replaced(_call(run))
    assert "clipped" not in short and "data-show-all" not in short


@pytest.mark.django_db
def test_a_text_strategy_shows_the_model_text_once_in_its_turn_not_again_in_the_card():
    run = _run("react")
    log = "Thought: weather\nAction: weather_forecast\nAction Input: {}"
    html = fragments.step_replaced(_call(run, text=log))
    assert "Thought: weather" not in html and "parsed from" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("strategy", ["react", "tool_calling"])
def test_a_format_error_card_says_the_reply_did_not_parse_not_that_the_tool_failed(strategy):
    run = _run(strategy)
    step = _call(run, arguments="Action: weather_forecast", error_type="OutputParserException",
                 result="Invalid format: missing 'Action Input:'")  # fmt: skip
    html = fragments.step_replaced(step)
    assert "A format error in the model's reply, not a failure of weather_forecast" in html
    assert "the model&#x27;s reply did not parse: the tool did not run" in html  # folded line
    assert "What the model was told of its format error" in html
    assert 'class="duration"' not in html  # nothing ran, nothing was timed


@pytest.mark.django_db
@pytest.mark.parametrize(("strategy", "partial"), [("tool_calling", True), ("react", False)])
def test_an_answer_cut_by_stop_keeps_the_answer_style_with_a_note(strategy, partial):
    run = _run(strategy)
    turn = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=1,
                            started_at=timezone.now())  # fmt: skip
    store.step_save_text(step_id=turn.pk, text="Suzhou is **mild** this")
    store.run_finish(run_id=run.pk, status=RunStatus.CANCELLED, output="", error="Stopped",
                     iterations=1, usage={}, finished_at=timezone.now())  # fmt: skip
    (html,) = [fragments.step_replaced(s) for s in store.conversation_runs(
        conversation_id=run.conversation_id)[0].steps.all()]  # fmt: skip
    assert ("stopped: the reply so far" in html) is partial
    assert ('class="turn status-error answer partial"' in html) is partial


@pytest.mark.django_db(transaction=True)
async def test_a_finished_turn_replaces_streamed_tool_call_markup_with_the_text_kept():
    # A native reply that was only tool-call markup, read as a call (llama.cpp's quirk):
    # the strategy kept no text, so the page's streamed markup goes with the turn's end.
    run = await database_sync_to_async(_run)()
    recorder = RunRecorder(run)
    await recorder.record(ModelTurnStarted(iteration=1))
    streamed = await recorder.record(TextDelta(iteration=1, text=MARKUP))
    assert "&lt;tool_call&gt;" in streamed.html
    finished = await recorder.record(ModelTurnFinished(
        iteration=1, text="", tool_calls=(), invalid_tool_calls=(), usage=None, duration_ms=5,
        raw={},
    ))  # fmt: skip
    step = await database_sync_to_async(AgentStep.objects.get)(kind=StepKind.MODEL_TURN)
    assert step.text == ""
    assert "&lt;tool_call&gt;" not in finished.html and 'hx-swap-oob="true"' in finished.html


@pytest.mark.django_db(transaction=True)
async def test_a_model_call_that_failed_keeps_what_streamed_before_it_failed():
    run = await database_sync_to_async(_run)()
    recorder = RunRecorder(run)
    await recorder.record(ModelTurnStarted(iteration=1))
    await recorder.record(TextDelta(iteration=1, text="Suzhou is"))
    await recorder.record(ModelTurnFinished(
        iteration=1, text="", tool_calls=(), invalid_tool_calls=(), usage=None, duration_ms=5,
        raw={}, error="The connection broke off", error_type="APIConnectionError",
    ))  # fmt: skip
    step = await database_sync_to_async(AgentStep.objects.get)(kind=StepKind.MODEL_TURN)
    assert step.text == "Suzhou is"


@pytest.mark.django_db
def test_a_text_strategys_model_text_folds_with_its_run_and_previews_its_first_words():
    run = _run("react")
    now = timezone.now()
    text = "Thought: I need the weather.\nAction: weather_forecast\nAction Input: Suzhou"
    turn = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=1,
                            started_at=now)  # fmt: skip
    turn = store.step_finish(step_id=turn.pk, finished_at=now, status=StepStatus.SUCCESS,
                             text=text)  # fmt: skip
    html = fragments.step_replaced(turn)
    log = html[html.index('<details class="turn-log"') :]
    assert f'data-fold-id="{turn.pk}"' in log and _open(log)  # open while the run goes
    assert '<span class="turn-log-preview">Thought: I need the weather. Action:' in log
    assert log.count("<pre") == 1

    store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED, output="Sunny.", error="",
                     iterations=2, usage={}, finished_at=timezone.now())  # fmt: skip
    turn = AgentStep.objects.select_related("run").get(pk=turn.pk)
    html = fragments.step_replaced(turn)
    assert not _open(html[html.index('<details class="turn-log"') :])


@pytest.mark.django_db
def test_a_result_nested_deeper_than_python_can_parse_is_shown_plain_everywhere(client):
    from tests.chat.test_admin import run_page, staff_user

    nested = "[" * 3000 + "]" * 3000  # json.loads raises RecursionError on it
    step = _call(_run(), result=nested)
    words = StepPresenter(step)
    assert words.result_display == nested and not words.result_has_pretty_form
    assert nested in fragments.step_replaced(step)  # what the live page is sent
    owner = User.objects.create_user("alice")
    Conversation.objects.filter(pk=step.run.conversation_id).update(owner=owner)
    client.force_login(owner)
    assert client.get(f"/c/{step.run.conversation_id}/").status_code == 200
    client.force_login(staff_user())
    assert client.get(run_page(step.run)).status_code == 200
    assert client.get(f"/admin/chat/agentrun/{step.run_id}/conversation/").status_code == 200


@pytest.mark.django_db
def test_a_long_result_on_one_line_opens_clipped_too():
    assert not StepPresenter(_call(_run(), result='{"a": "' + "x" * 200 + '"}')).result_is_long
    assert StepPresenter(_call(_run(), result='{"a": "' + "x" * 5000 + '"}')).result_is_long
