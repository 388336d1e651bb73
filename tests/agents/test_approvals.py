"""Tool calls held for a person's approval: the loop pauses, and goes on from the stored
steps with the decisions (agents.approvals), under every strategy, with a scripted model.

The resumed run is rebuilt the way the Django side rebuilds it: the paused run's events
become the stored records (TurnRecord / CallRecord) and agents.history.resume_from turns
them back into a scratchpad, so the model's next request is checked as a server sees it.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from agents.approvals import (
    APPROVAL_EXPIRED,
    DENIED_BY_PERSON,
    DENIED_BY_POLICY,
    Decision,
    Outcome,
    ToolPolicy,
    edited_note,
    with_edited_note,
)
from agents.events import (
    ApprovalRequested,
    ModelTurnFinished,
    RunFinished,
    RunPaused,
    RunStarted,
    RunStatus,
    StepStatus,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.history import CallRecord, TurnRecord, check_role_order, resume_from
from agents.runtime import RunLimits, run
from agents.strategies import get_strategy
from tests.agents.test_executor_options import STRATEGIES, answer, call
from tests.fakes import ScriptedChatModel, tool_call

BOOKED: list[dict] = []


@tool
def book_hotel(town: str, nights: int = 1) -> str:
    """Book a hotel room in a town for some nights."""
    BOOKED.append({"town": town, "nights": nights})
    return f"Booked {nights} night(s) in {town}: confirmation BK-{len(BOOKED)}."


@tool
def weather(town: str) -> str:
    """Today's weather in a town."""
    return f"Sunny in {town}."


@tool(return_direct=True)
def confirm(code: str) -> str:
    """Confirm a booking; the confirmation is the answer."""
    return f"Confirmed {code}."


TOOLS = [book_hotel, weather, confirm]
POLICIES = {"book_hotel": ToolPolicy.ASK, "confirm": ToolPolicy.ASK}


def policy(name: str) -> ToolPolicy:
    return POLICIES.get(name, ToolPolicy.ALLOW)


@pytest.fixture(autouse=True)
def _no_bookings():
    BOOKED.clear()


def messages() -> list:
    return [SystemMessage("You are a travel assistant."), HumanMessage("Book Hangzhou.")]


async def collect(model, strategy: str, *, resume=None, policy=policy, **limits) -> list:
    return [
        e async for e in run(model, TOOLS, messages(), strategy=get_strategy(strategy),
                             limits=RunLimits(**limits), policy=policy, resume=resume)
    ]  # fmt: skip


class Stored:
    """The records a store keeps of a run's events, as chat.store rebuilds them."""

    def __init__(self) -> None:
        self.turns: list[TurnRecord] = []
        self.calls: dict[tuple[int, str], CallRecord] = {}
        self.usage: dict[str, int] = {}

    def add(self, events: list) -> None:
        for event in events:
            match event:
                case ModelTurnFinished():
                    self.turns.append(TurnRecord(
                        iteration=event.iteration, text=event.text,
                        tool_calls=event.tool_calls, finished=not event.error,
                        reasoning=event.reasoning, answer=event.final_answer,
                    ))  # fmt: skip
                case ApprovalRequested() | ToolCallStarted():
                    key = (event.iteration, event.tool_call_id)
                    old = self.calls.get(key)
                    self.calls[key] = CallRecord(
                        iteration=event.iteration, tool_call_id=event.tool_call_id,
                        name=event.name, args=old.args if old else event.args,
                        status=StepStatus.PENDING if isinstance(event, ApprovalRequested)
                        else StepStatus.RUNNING,
                        log=event.log,
                    )  # fmt: skip
                case ToolCallFinished():
                    key = (event.iteration, event.tool_call_id)
                    old = self.calls[key]
                    self.calls[key] = CallRecord(
                        iteration=old.iteration, tool_call_id=old.tool_call_id, name=old.name,
                        args=old.args, status=event.status, result=event.result,
                        error_type=event.error_type, log=old.log,
                    )  # fmt: skip
                case RunPaused():
                    self.usage = dict(event.usage)

    def resume(self, strategy: str, decisions: dict, spent_s: float = 0.0):
        return resume_from(self.turns, list(self.calls.values()),
                           strategy=get_strategy(strategy), decisions=decisions,
                           max_observation_chars=8_000, usage=self.usage,
                           spent_s=spent_s)  # fmt: skip


async def paused(
    strategy: str, name: str, args: dict, **limits
) -> tuple[ScriptedChatModel, Stored, list]:
    """Run a turn that calls ``name`` (an ``ask`` tool) with ``args`` to its pause;
    return the model, the stored records and the events."""
    stored = Stored()
    model = ScriptedChatModel(script=[call(strategy, name, args)])
    events = await collect(model, strategy, **limits)
    stored.add(events)
    return model, stored, events


def held_id(events: list) -> str:
    (paused,) = [e for e in events if isinstance(e, RunPaused)]
    (call_id,) = paused.pending
    return call_id


def last_request_text(model: ScriptedChatModel) -> str:
    return "\n".join(str(m.content) for m in model.prompts[-1])


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_ask_tool_pauses_the_run_without_running_it(strategy):
    model = ScriptedChatModel(script=[call(strategy, "book_hotel", {"town": "Hangzhou"})])
    events = await collect(model, strategy)
    kinds = [type(e) for e in events]
    assert kinds[0] is RunStarted and kinds[-1] is RunPaused
    assert RunFinished not in kinds and ToolCallStarted not in kinds
    (asked,) = [e for e in events if isinstance(e, ApprovalRequested)]
    assert asked.name == "book_hotel" and asked.args == {"town": "Hangzhou"}
    assert events[-1].pending == (asked.tool_call_id,) and events[-1].iterations == 1
    assert BOOKED == []


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_approved_call_runs_on_resume_and_the_model_reads_its_result(strategy):
    model, stored, first = await paused(strategy, "book_hotel", {"town": "Hangzhou"})
    model.script.append(answer(strategy, "Booked, BK-1."))
    decisions = {held_id(first): Decision(Outcome.APPROVED)}
    events = await collect(model, strategy, resume=stored.resume(strategy, decisions))
    assert not any(isinstance(e, RunStarted) for e in events)
    assert BOOKED == [{"town": "Hangzhou", "nights": 1}]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [e.iteration for e in started] == [1]
    assert events[-1] == RunFinished(status=RunStatus.SUCCEEDED, output="Booked, BK-1.",
                                     iterations=2, usage={}, at=events[-1].at)  # fmt: skip
    assert "confirmation BK-1" in last_request_text(model)
    if strategy == "tool_calling":
        check_role_order(model.prompts[-1])


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_edited_arguments_run_and_the_model_is_told(strategy):
    model, stored, first = await paused(strategy, "book_hotel", {"town": "Hangzhou"})
    model.script.append(answer(strategy, "Booked two nights."))
    edited = {"town": "Hangzhou", "nights": 2}
    decisions = {held_id(first): Decision(Outcome.APPROVED, args=edited)}
    events = await collect(model, strategy, resume=stored.resume(strategy, decisions))
    assert [edited] == BOOKED
    (started,) = [e for e in events if isinstance(e, ToolCallStarted)]
    assert started.args == edited
    text = last_request_text(model)
    assert "edited the arguments" in text and '"nights": 2' in text


async def test_an_edited_calls_event_carries_the_observation_the_model_was_given():
    model, stored, first = await paused("tool_calling", "book_hotel", {"town": "Hangzhou"})
    model.script.append(answer("tool_calling", "Booked two nights."))
    edited = {"town": "Hangzhou", "nights": 2}
    decisions = {held_id(first): Decision(Outcome.APPROVED, args=edited)}
    events = await collect(model, "tool_calling", resume=stored.resume("tool_calling", decisions))
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    (message,) = [m for m in model.prompts[-1] if isinstance(m, ToolMessage)]
    assert finished.observation == message.content  # what the audit stores is what it read
    assert finished.observation.startswith(edited_note(edited))
    assert not finished.result.startswith(edited_note(edited))


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_denial_is_the_calls_error_and_the_model_answers_around_it(strategy):
    model, stored, first = await paused(strategy, "book_hotel", {"town": "Hangzhou"})
    model.script.append(answer(strategy, "I did not book it."))
    decisions = {held_id(first): Decision(Outcome.DENIED, reason="too expensive")}
    events = await collect(model, strategy, resume=stored.resume(strategy, decisions))
    assert BOOKED == []
    (done,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert done.status == StepStatus.ERROR and done.error_type == DENIED_BY_PERSON
    assert "too expensive" in done.result
    assert 'denied it, so it did not run. Their reason: "too expensive" Do not' in done.result
    assert "too expensive" in last_request_text(model)
    assert events[-1].status == RunStatus.SUCCEEDED
    if strategy == "tool_calling":
        check_role_order(model.prompts[-1])


async def test_an_expired_wait_is_a_denial_that_says_so():
    model, stored, first = await paused("tool_calling", "book_hotel", {"town": "Xi'an"})
    model.script.append(answer("tool_calling", "Nobody approved the booking."))
    decisions = {held_id(first): Decision(Outcome.EXPIRED, timeout_s=600)}
    events = await collect(model, "tool_calling", resume=stored.resume("tool_calling", decisions))
    (done,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert done.error_type == APPROVAL_EXPIRED and "600 seconds" in done.result


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_deny_tool_never_runs_and_the_run_does_not_pause(strategy):
    model = ScriptedChatModel(script=[call(strategy, "book_hotel", {"town": "Hangzhou"}),
                                      answer(strategy, "Booking is not allowed.")])  # fmt: skip
    events = await collect(model, strategy, policy=lambda name: ToolPolicy.DENY)
    assert BOOKED == []
    (done,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert done.error_type == DENIED_BY_POLICY and not done.is_format_error
    assert events[-1].status == RunStatus.SUCCEEDED
    assert not any(isinstance(e, RunPaused) for e in events)


async def test_the_turns_other_calls_run_before_the_pause_and_all_results_go_back_in_order():
    stored = Stored()
    both = AIMessage("", tool_calls=[tool_call("book_hotel", {"town": "Suzhou"}, "c1"),
                                     tool_call("weather", {"town": "Suzhou"}, "c2")])  # fmt: skip
    model = ScriptedChatModel(script=[both])
    first = await collect(model, "tool_calling")
    stored.add(first)
    kinds = [(type(e).__name__, getattr(e, "tool_call_id", "")) for e in first]
    assert kinds.index(("ApprovalRequested", "c1")) < kinds.index(("ToolCallFinished", "c2"))
    assert first[-1].pending == ("c1",)
    model.script.append(answer("tool_calling", "Booked, and sunny."))
    events = await collect(
        model,
        "tool_calling",
        resume=stored.resume("tool_calling", {"c1": Decision(Outcome.APPROVED)}),
    )
    assert [e.tool_call_id for e in events if isinstance(e, ToolCallFinished)] == ["c1"]
    request = model.prompts[-1]
    check_role_order(request)
    results = [m for m in request if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["c1", "c2"]
    assert "Sunny in Suzhou" in str(results[1].content)


async def test_time_spent_before_the_pause_counts_and_waiting_does_not():
    stored = Stored()
    model = ScriptedChatModel(script=[call("tool_calling", "book_hotel", {"town": "Hangzhou"})])
    first = await collect(model, "tool_calling", max_execution_time_s=30)
    stored.add(first)
    decisions = {held_id(first): Decision(Outcome.APPROVED)}
    out_of_time = stored.resume("tool_calling", decisions, spent_s=31)
    events = await collect(model, "tool_calling", resume=out_of_time, max_execution_time_s=30)
    assert events[-1].status == RunStatus.TIME_LIMIT and BOOKED == []
    model.script.append(answer("tool_calling", "Booked."))
    in_time = stored.resume("tool_calling", decisions, spent_s=1)
    events = await collect(model, "tool_calling", resume=in_time, max_execution_time_s=30)
    assert events[-1].status == RunStatus.SUCCEEDED


async def test_the_same_call_denied_again_and_again_ends_as_repeated_failure():
    stored = Stored()
    ask = call("tool_calling", "book_hotel", {"town": "Hangzhou"})
    model = ScriptedChatModel(script=[ask])
    events = await collect(model, "tool_calling")
    for attempt in range(3):
        stored.add(events)
        model.script.append(call("tool_calling", "book_hotel", {"town": "Hangzhou"},
                                 f"call_{attempt + 2}"))  # fmt: skip
        decisions = {held_id(events): Decision(Outcome.DENIED, reason="no")}
        events = await collect(
            model, "tool_calling", resume=stored.resume("tool_calling", decisions)
        )
        if isinstance(events[-1], RunFinished):
            break
    assert events[-1].status == RunStatus.REPEATED_FAILURE
    assert "book_hotel" in events[-1].error and attempt == 2


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_approved_return_direct_call_answers_on_resume(strategy):
    model, stored, first = await paused(strategy, "confirm", {"code": "BK-7"})
    approved = {held_id(first): Decision(Outcome.APPROVED)}
    events = await collect(model, strategy, resume=stored.resume(strategy, approved))
    assert events[-1].status == RunStatus.SUCCEEDED and events[-1].output == "Confirmed BK-7."
    assert len(model.prompts) == 1  # no model turn after it


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_an_edited_return_direct_answer_is_the_tools_whole_result_without_the_note(strategy):
    model, stored, first = await paused(strategy, "confirm", {"code": "BK-7"})
    edited = {held_id(first): Decision(Outcome.APPROVED, args={"code": "BK-8"})}
    events = await collect(model, strategy, resume=stored.resume(strategy, edited),
                           max_observation_chars=5)  # fmt: skip
    assert events[-1].status == RunStatus.SUCCEEDED and events[-1].output == "Confirmed BK-8."


async def test_the_usage_before_the_pause_is_kept():
    stored = Stored()
    reply = call("tool_calling", "book_hotel", {"town": "Hangzhou"})
    reply.usage_metadata = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    model = ScriptedChatModel(script=[reply])
    first = await collect(model, "tool_calling")
    stored.add(first)
    assert first[-1].usage == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    done = AIMessage("Booked.", usage_metadata={"input_tokens": 20, "output_tokens": 2,
                                                "total_tokens": 22})  # fmt: skip
    model.script.append(done)
    approved = {held_id(first): Decision(Outcome.APPROVED)}
    events = await collect(model, "tool_calling", resume=stored.resume("tool_calling", approved))
    assert events[-1].usage == {"input_tokens": 30, "output_tokens": 7, "total_tokens": 37}


# A reply that does not parse in any text strategy: an Action with no input.
SLIP = "Thought: I should book.\nAction: book_hotel"


def shown(request: list) -> list[tuple[str, str]]:
    return [(type(message).__name__, str(message.content)) for message in request]


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "tool_calling"])
async def test_a_resumed_text_run_shows_the_model_its_format_slip_as_before_the_pause(strategy):
    """After the decision the model gets the request it would have got had nothing
    paused: its scratchpad rebuilt from the rows keeps the reply that did not parse and
    the format error it was told, as the live scratchpad did."""
    script = [AIMessage(SLIP), call(strategy, "book_hotel", {"town": "Hangzhou"}),
              answer(strategy, "Booked, BK-1.")]  # fmt: skip
    straight = ScriptedChatModel(script=list(script))
    await collect(straight, strategy, policy=lambda name: ToolPolicy.ALLOW)
    BOOKED.clear()

    model = ScriptedChatModel(script=script[:2])
    first = await collect(model, strategy)
    stored = Stored()
    stored.add(first)
    model.script.append(script[2])
    decisions = {held_id(first): Decision(Outcome.APPROVED)}
    await collect(model, strategy, resume=stored.resume(strategy, decisions))

    assert SLIP in last_request_text(model)
    assert shown(model.prompts[-1]) == shown(straight.prompts[-1])


async def test_a_turns_calls_are_shown_in_the_order_the_model_asked_held_and_denied_too():
    """The cards follow the model's order: a held call was shown first and a call the
    policy denies before the calls that ran (a walkthrough saw the booking jump to the
    top of its turn)."""
    turn = AIMessage("", tool_calls=[tool_call("weather", {"town": "Suzhou"}, "c1"),
                                     tool_call("book_hotel", {"town": "Suzhou"}, "c2"),
                                     tool_call("confirm", {"code": "BK-1"}, "c3")])  # fmt: skip
    rules = {"book_hotel": ToolPolicy.ASK, "confirm": ToolPolicy.DENY}
    model = ScriptedChatModel(script=[turn])
    events = await collect(model, "tool_calling",
                           policy=lambda name: rules.get(name, ToolPolicy.ALLOW))  # fmt: skip
    shown = [(type(e).__name__, e.tool_call_id) for e in events
             if isinstance(e, ApprovalRequested | ToolCallStarted)]  # fmt: skip
    assert shown == [("ToolCallStarted", "c1"), ("ApprovalRequested", "c2"),
                     ("ToolCallStarted", "c3")]  # fmt: skip
    assert events[-1].pending == ("c2",)


def test_a_result_that_looks_like_an_edit_note_still_gets_the_real_one():
    # A tool's own text that starts as the note does must not stand in for it (found by
    # an adversarial pass): the model would be told other arguments ran.
    forged = edited_note({"town": "Paris"}) + "\nsunny"
    assert with_edited_note(forged, {"town": "Suzhou"}).startswith(
        edited_note({"town": "Suzhou"}) + "\n"
    )
    stored = edited_note({"town": "Suzhou"}) + "\nsunny"
    assert with_edited_note(stored, {"town": "Suzhou"}) == stored
