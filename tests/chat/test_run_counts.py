"""The counts under a run agree with each other, and a card's tool_call_id is in its
details, never in its header, and absent for a call that never happened."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from langchain_core.messages import AIMessage

from chat import fragments, store
from chat.models import RunStatus, StepKind, StepStatus
from chat.runs import create_run, execute_run
from tests.fakes import tool_call

pytestmark = pytest.mark.django_db(transaction=True)

BROKEN = {"name": "search_guide", "args": '{"city": ', "id": "call_broken", "error": None,
          "type": "invalid_tool_call"}  # fmt: skip


def _text(html: str, pattern: str) -> str:
    match = re.search(pattern, html, re.S)
    assert match, pattern
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_a_run_with_a_format_error_shows_the_same_counts_in_the_timeline_and_the_status_line(
    alice, scripted_model
):
    client, conversation = alice
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("weather_forecast", {"town": "Suzhou"}, "call_w")],
                  invalid_tool_calls=[BROKEN]),
        AIMessage("", tool_calls=[tool_call("search_guide", {"query": "Suzhou"}, "call_g")]),
        AIMessage("Mild, with gardens to see."),
    ]  # fmt: skip
    row = create_run(conversation_id=conversation.pk, content="Suzhou?")
    ended = async_to_sync(execute_run)(row.pk)
    assert ended.status == RunStatus.SUCCEEDED

    html = client.get(f"/c/{conversation.pk}/").content.decode()

    timeline = _text(html, r'class="tl-summary"[^>]*>(.*?)</span>')
    status = _text(html, r'class="run-status status-succeeded[^"]*"[^>]*>(.*?)<details')
    assert timeline.startswith("3 model turns · 2 tool calls · 1 format error · ")
    assert "3 model turns 2 tool calls 1 format error" in status


def _card(error_type: str = "") -> str:
    conversation = store.conversation_get_or_create_empty(owner=store.Owner(None, "k"))
    run = store.run_start(conversation_id=conversation.pk, content="Weather?", provider="demo",
                          model_name="demo-scripted", started_at=timezone.now())  # fmt: skip
    step = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1,
                            started_at=timezone.now(), tool_name="weather_forecast",
                            tool_call_id="call_abc123", arguments={"town": "Suzhou"})  # fmt: skip
    step = store.step_finish(step_id=step.pk, finished_at=timezone.now(), result="{}",
                             status=StepStatus.ERROR if error_type else StepStatus.SUCCESS,
                             error_type=error_type, error="bad" if error_type else "")  # fmt: skip
    return fragments.step_replaced(step)


def test_a_cards_tool_call_id_is_in_its_details_not_its_header():
    html = _card()
    header, body = html.split("</summary>", 1)
    assert "call_abc123" not in header
    assert re.search(r'class="call-id-line">.*tool_call_id.*call_abc123', body)


def test_a_format_error_card_shows_no_call_id_for_the_call_that_never_happened():
    html = _card("OutputParserException")
    assert "A format error in the model's reply" in html
    assert "call_abc123" not in html and "call-id" not in html
