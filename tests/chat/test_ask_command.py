"""``manage.py ask``: the same runtime from a terminal, stored like the browser's runs."""

from __future__ import annotations

import asyncio
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from langchain_core.messages import AIMessage

from chat.management.commands.ask import TracePrinter
from chat.models import AgentRun, AgentStep, Conversation
from chat.runs import create_run, execute_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_prints_the_trace_and_the_answer_and_stores_the_run():
    out = StringIO()
    call_command("ask", "What's the weather in Hangzhou, and what is 17*23?", stdout=out)
    text = out.getvalue()

    assert "→ weather_forecast(" in text
    assert "→ calculator(" in text
    assert "← calculator success" in text
    assert "391" in text
    run = AgentRun.objects.get()
    # "model turn", the word the chat, the admin and the docs use (not "turn", not "iteration")
    assert f"Run {run.pk} succeeded in " in text
    assert f" ms, {run.iterations} model turn(s)\n" in text
    assert run.status == "succeeded"
    assert AgentStep.objects.filter(run=run, kind="tool_call", status="success").count() == 2


def test_it_continues_a_conversation(scripted_model):
    scripted_model.script = [AIMessage("one"), AIMessage("two")]
    call_command("ask", "first", stdout=StringIO())
    conversation = Conversation.objects.get()
    call_command("ask", "second", "--conversation", str(conversation.pk), stdout=StringIO())
    assert conversation.runs.count() == 2
    assert [m.content for m in scripted_model.prompts[1][1:]] == ["first", "one", "second"]


def test_a_failed_run_exits_non_zero(scripted_model):
    scripted_model.script = [TimeoutError("model timed out")]
    with pytest.raises(CommandError, match="ended as failed"):
        call_command("ask", "hello", stdout=StringIO())
    assert AgentRun.objects.get().status == "failed"


def test_an_unknown_conversation_is_an_error():
    with pytest.raises(CommandError, match="No conversation with id 999"):
        call_command("ask", "hello", "--conversation", "999", stdout=StringIO())


class ClosedPipe(StringIO):
    def write(self, text):
        raise BrokenPipeError


def test_a_closed_pipe_stops_the_printing_but_not_the_run(scripted_model):
    scripted_model.script = [AIMessage("an answer nobody reads")]
    printer = TracePrinter(ClosedPipe())
    conversation = Conversation.objects.create()
    run = create_run(conversation_id=conversation.pk, content="hello")

    finished = asyncio.run(execute_run(run.pk, listeners=[printer]))

    assert printer.closed
    assert finished.status == "succeeded"
    assert finished.output == "an answer nobody reads"


def test_a_question_over_the_message_limit_is_refused(settings):
    settings.CHAT_MAX_MESSAGE_CHARS = 100
    with pytest.raises(CommandError, match="limit"):
        call_command("ask", "x" * 101, stdout=StringIO())
    assert not AgentRun.objects.exists()


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("   ", "empty message"),
        ("\u200b\u200b", "empty message"),
        ("\u202e\u00ad\u3164", "empty message"),
        ("\udcff\udcfe gardens", "unpaired surrogate"),  # undecodable bytes in argv
    ],
)
def test_ask_refuses_what_the_chat_refuses(question, reason):
    with pytest.raises(CommandError, match=reason):
        call_command("ask", question, stdout=StringIO())
    assert not Conversation.objects.exists()


def test_a_run_that_waits_for_approval_says_where_to_decide_and_exits_3(settings):
    settings.AGENT_TOOL_POLICIES = {"check_bnb_availability": "ask"}
    out = StringIO()
    with pytest.raises(CommandError, match="waiting for approval") as raised:
        call_command("ask", "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。",
                     stdout=out)  # fmt: skip
    assert raised.value.returncode == 3
    printed = out.getvalue()
    assert "⏸ check_bnb_availability(" in printed and "waits for a person's approval" in printed
    assert "in the admin (Approvals)" in printed and "exits with status 3" in printed
    run = AgentRun.objects.get()
    assert run.status == "waiting"


def test_ask_stopped_from_a_page_says_so_and_exits_without_a_traceback(monkeypatch):
    """A Stop pressed in a page as ask's run starts: the run ends cancelled and ask says
    so (it failed an assertion: its owner returns no row for a stopped run)."""
    from django.utils import timezone

    import chat.management.commands.ask as ask
    from chat import store

    def create_then_stop(**kwargs):
        run = create_run(**kwargs)
        store.run_request_cancel(conversation_id=run.conversation_id, at=timezone.now())
        return run

    monkeypatch.setattr(ask, "create_run", create_then_stop)
    with pytest.raises(CommandError, match="ended as cancelled"):
        call_command("ask", "What's the weather in Hangzhou?", "--no-stream", stdout=StringIO())
