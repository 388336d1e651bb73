"""Earlier exchanges as messages: tool work kept, strict role order whatever the ending."""

from __future__ import annotations

import dataclasses
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agents.approvals import edited_note
from agents.events import RunStatus, StepStatus
from agents.history import (
    NO_ANSWER_NOTE,
    QUESTION_ID_PREFIX,
    UNFINISHED_CALL,
    CallRecord,
    Exchange,
    RoleOrderError,
    TurnRecord,
    check_role_order,
    describe,
    history_messages,
    role_order_problems,
)
from agents.strategies import STRATEGIES, get_strategy
from agents.strategies.react import format_react, format_react_final, format_react_malformed
from agents.strategies.structured_chat import (
    format_structured,
    format_structured_final,
    format_structured_malformed,
)
from agents.strategies.xml import format_xml, format_xml_final, format_xml_malformed
from agents.tool_calls import clip

WRITERS = {
    "react": (format_react, format_react_final, format_react_malformed),
    "structured_chat": (format_structured, format_structured_final, format_structured_malformed),
    "xml": (format_xml, lambda answer: format_xml_final(answer), format_xml_malformed),
}
ROOMS = json.dumps({"rooms": [{"name": "Garden Inn", "price": 380},
                              {"name": "Canal House", "price": 260}]})  # fmt: skip
ANSWER = "Two rooms: Garden Inn (380 yuan) and Canal House (260 yuan)."


class Builder:
    """Records of one earlier run in ``strategy``'s form, turn by turn."""

    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.turns: list[TurnRecord] = []
        self.calls: list[CallRecord] = []

    @property
    def native(self) -> bool:
        return self.strategy == "tool_calling"

    def call(self, *, status=StepStatus.SUCCESS, result=ROOMS, error_type="", town="Suzhou"):
        iteration = len(self.turns) + 1
        call_id = f"call_{self.strategy}_{iteration}"
        args = {"town": town}
        if self.native:
            text, calls = "", ({"name": "bnb_rooms", "args": args, "id": call_id},)
        else:
            text, calls = WRITERS[self.strategy][0]("bnb_rooms", args, "look for rooms"), ()
        self.turns.append(TurnRecord(iteration=iteration, text=text, tool_calls=calls))
        self.calls.append(CallRecord(
            iteration=iteration, tool_call_id=call_id, name="bnb_rooms", args=args,
            status=status, result=result, error_type=error_type, log="" if self.native else text,
        ))  # fmt: skip
        return self

    def format_error(self):
        iteration = len(self.turns) + 1
        call_id = f"bad_{iteration}"
        if self.native:
            self.turns.append(TurnRecord(iteration=iteration, text=""))
            error_type, log, args = "InvalidToolCall", "", '{"town": '
        else:
            log = WRITERS[self.strategy][2]("bnb_rooms", {"town": "Suzhou"}, "rooms")
            self.turns.append(TurnRecord(iteration=iteration, text=log))
            error_type, args = "OutputParserException", ""
        self.calls.append(CallRecord(
            iteration=iteration, tool_call_id=call_id, name="bnb_rooms", args=args,
            status=StepStatus.ERROR, result="Your reply broke the format.",
            error_type=error_type, log=log,
        ))  # fmt: skip
        return self

    def nameless(self, name="", error_type="InvalidToolName", call_id="call_nameless"):
        """A call whose name a strict server refuses ("" or "functions.bnb_rooms"): stored
        as the model sent it (rows from before it was a format error say UnknownTool)."""
        iteration = len(self.turns) + 1
        args = {"town": "Suzhou"}
        if self.native:
            text, calls = "", ({"name": name, "args": args, "id": call_id},)
        else:
            text, calls = WRITERS[self.strategy][0](name, args, "look for rooms"), ()
        self.turns.append(TurnRecord(iteration=iteration, text=text, tool_calls=calls))
        self.calls.append(CallRecord(
            iteration=iteration, tool_call_id=call_id, name=name, args=args,
            status=StepStatus.ERROR, result=f"Error: there is no tool named {name!r}.",
            error_type=error_type, log="" if self.native else text,
        ))  # fmt: skip
        return self

    def idless(self):
        """A native call stored with no id (a server that sent none, an old row)."""
        iteration = len(self.turns) + 1
        args = {"town": "Suzhou"}
        calls = ({"name": "bnb_rooms", "args": args, "id": None},) if self.native else ()
        text = "" if self.native else WRITERS[self.strategy][0]("bnb_rooms", args, "rooms")
        self.turns.append(TurnRecord(iteration=iteration, text=text, tool_calls=calls))
        self.calls.append(CallRecord(
            iteration=iteration, tool_call_id="", name="bnb_rooms", args=args, result=ROOMS,
            log="" if self.native else text,
        ))  # fmt: skip
        return self

    def broken_turn(self, text="The rooms I found are"):
        self.turns.append(TurnRecord(iteration=len(self.turns) + 1, text=text, finished=False))
        return self

    def answer(self, answer=ANSWER):
        text = answer if self.native else WRITERS[self.strategy][1](answer)
        self.turns.append(TurnRecord(iteration=len(self.turns) + 1, text=text, answer=answer))
        return self

    def ended(self, status, answer="", question="Any B&B rooms in Suzhou?") -> Exchange:
        return Exchange(
            question=question, strategy=self.strategy, status=status, answer=answer,
            turns=tuple(self.turns), calls=tuple(self.calls),
        )  # fmt: skip


def endings(strategy: str) -> dict[str, Exchange]:
    """Every way a run can end, as its records come out of the store."""
    b = lambda: Builder(strategy)  # noqa: E731
    closed = {"status": StepStatus.ERROR, "result": ""}
    return {
        "succeeded": b().call().answer().ended(RunStatus.SUCCEEDED, ANSWER),
        "failed": b().call().broken_turn("").ended(RunStatus.FAILED),
        "cancelled mid-model": b().broken_turn().ended(RunStatus.CANCELLED),
        "cancelled mid-tool": b().call(**closed).ended(RunStatus.CANCELLED),
        "still running tool": b().call(status=StepStatus.RUNNING, result="").ended(
            RunStatus.CANCELLED),
        "max_iterations": b().call().call(town="Hangzhou").ended(RunStatus.MAX_ITERATIONS),
        "interrupted": b().call().call(**closed).ended(RunStatus.INTERRUPTED),
        "config error": b().ended(RunStatus.FAILED),
        "format error at the end": b().call().format_error().format_error().ended(
            RunStatus.MAX_ITERATIONS),
        "format error then answer": b().format_error().call().answer().ended(
            RunStatus.SUCCEEDED, ANSWER),
        "nameless call then answer": b().nameless().call().answer().ended(
            RunStatus.SUCCEEDED, ANSWER),
        "old row of a nameless call": b().nameless(error_type="UnknownTool").answer().ended(
            RunStatus.SUCCEEDED, ANSWER),
        "old row of a dotted name": b().nameless("functions.bnb_rooms", "UnknownTool").call()
            .answer().ended(RunStatus.SUCCEEDED, ANSWER),
        "call without an id": b().idless().answer().ended(RunStatus.SUCCEEDED, ANSWER),
        "no run": Exchange(question="An orphan question", status=""),
    }  # fmt: skip


def prompt(strategy_name: str, exchanges, question="Which of those was the cheapest?"):
    strategy = get_strategy(strategy_name)
    history = history_messages(exchanges, strategy, max_observation_chars=8_000)
    return [SystemMessage("system"), *history, HumanMessage(question)]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("ending", sorted(endings("tool_calling")))
def test_every_ending_of_every_strategy_leaves_a_history_a_strict_server_takes(strategy, ending):
    exchange = endings(strategy)[ending]
    messages = prompt(strategy, [exchange, exchange])

    assert role_order_problems(messages) == [], describe(messages)
    assert messages[-1].text == "Which of those was the cheapest?"
    closing = messages[-2]
    assert isinstance(closing, AIMessage) and not closing.tool_calls
    if exchange.status != RunStatus.SUCCEEDED:
        assert closing.text.startswith("(No answer: ")


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_all_endings_in_a_row_still_alternate(strategy):
    exchanges = list(endings(strategy).values())
    messages = prompt(strategy, exchanges)

    check_role_order(messages)
    questions = [m for m in messages if str(m.id or "").startswith(QUESTION_ID_PREFIX)]
    assert [m.text for m in questions] == [e.question for e in exchanges]


def test_native_history_pairs_each_call_with_its_result_by_tool_call_id():
    builder = Builder("tool_calling").call().call(town="Hangzhou").answer()
    messages = prompt("tool_calling", [builder.ended(RunStatus.SUCCEEDED, ANSWER)])

    kinds = [type(m).__name__ for m in messages]
    assert kinds == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
                     "ToolMessage", "AIMessage", "HumanMessage"]  # fmt: skip
    first_call, first_result = messages[2], messages[3]
    assert first_call.tool_calls[0]["args"] == {"town": "Suzhou"}
    assert first_result.tool_call_id == first_call.tool_calls[0]["id"]
    assert first_result.content == ROOMS and first_result.status == "success"
    assert messages[6].text == ANSWER


@pytest.mark.parametrize("strategy", ["react", "structured_chat", "xml"])
def test_text_history_is_in_the_strategy_s_own_scratchpad_form(strategy):
    builder = Builder(strategy).call().answer()
    messages = prompt(strategy, [builder.ended(RunStatus.SUCCEEDED, ANSWER)])
    text_strategy = get_strategy(strategy)

    action, observation, answer = messages[2:5]
    assert isinstance(action, AIMessage) and not action.tool_calls
    assert text_strategy.parse(action)[0].tool_input == {"town": "Suzhou"}
    assert isinstance(observation, HumanMessage)
    assert observation.text == text_strategy.format_observation(ROOMS)
    assert text_strategy.parse(answer).return_values["output"] == ANSWER


def test_observations_are_clipped_as_the_model_saw_them():
    long = "x" * 500
    builder = Builder("tool_calling").call(result=long).answer()
    history = history_messages([builder.ended(RunStatus.SUCCEEDED, ANSWER)],
                               get_strategy("tool_calling"), max_observation_chars=100)  # fmt: skip

    (result,) = [m for m in history if isinstance(m, ToolMessage)]
    assert result.content == clip(long, 100)
    assert "[clipped: showing the first 100 of 500 characters]" in result.content


def test_tool_errors_stay_and_format_errors_are_left_out():
    builder = Builder("tool_calling").format_error()
    builder.call(status=StepStatus.ERROR, result="Error: tool 'bnb_rooms' failed: site down")
    builder.answer("The B&B site is down.")
    exchange = builder.ended(RunStatus.SUCCEEDED, "The B&B site is down.")
    history = history_messages([exchange], get_strategy("tool_calling"), max_observation_chars=99)

    (result,) = [m for m in history if isinstance(m, ToolMessage)]
    assert result.status == "error" and "site down" in result.content
    assert all("broke the format" not in m.text for m in history)
    assert len([m for m in history if isinstance(m, AIMessage)]) == 2


def test_a_call_its_run_ended_is_closed_with_an_error_result():
    exchange = endings("tool_calling")["cancelled mid-tool"]
    history = history_messages([exchange], get_strategy("tool_calling"),
                               max_observation_chars=8_000)  # fmt: skip

    (result,) = [m for m in history if isinstance(m, ToolMessage)]
    assert (result.content, result.status) == (UNFINISHED_CALL, "error")
    assert history[-1].text == NO_ANSWER_NOTE.format(why="the run was stopped before it answered")


def test_reasoning_goes_back_on_the_turn_that_made_calls():
    turn = TurnRecord(iteration=1, text="", reasoning="The user wants rooms.",
                      tool_calls=({"name": "bnb_rooms", "args": {}, "id": "call_1"},))  # fmt: skip
    call = CallRecord(iteration=1, tool_call_id="call_1", name="bnb_rooms", result=ROOMS)
    exchange = Exchange(question="Rooms?", status=RunStatus.SUCCEEDED, answer=ANSWER,
                        turns=(turn, TurnRecord(iteration=2, text=ANSWER, answer=ANSWER)),
                        calls=(call,))  # fmt: skip
    history = history_messages([exchange], get_strategy("tool_calling"), max_observation_chars=99)

    assert history[1].additional_kwargs == {"reasoning_content": "The user wants rooms."}
    assert history[-1].additional_kwargs == {}


def test_calls_that_ran_are_sent_even_when_the_stored_message_has_none():
    # A native turn whose calls were read from markup in its text (a server with its tool
    # parser off) may keep none in its stored message; its recorded calls ran all the same.
    turn = TurnRecord(iteration=1, text="")
    call = CallRecord(iteration=1, tool_call_id="call_m", name="bnb_rooms",
                      args={"town": "Suzhou"}, result=ROOMS)  # fmt: skip
    exchange = Exchange(question="Rooms?", answer=ANSWER, turns=(turn,), calls=(call,))
    history = history_messages([exchange], get_strategy("tool_calling"), max_observation_chars=99)

    _, asked, result, _ = history
    assert asked.tool_calls[0]["id"] == result.tool_call_id == "call_m"
    assert asked.tool_calls[0]["args"] == {"town": "Suzhou"}


def test_an_exchange_of_another_strategy_is_sent_as_question_and_answer():
    exchange = endings("react")["succeeded"]
    history = history_messages([exchange], get_strategy("tool_calling"), max_observation_chars=99)

    assert [(type(m), m.text) for m in history] == [(HumanMessage, exchange.question),
                                                   (AIMessage, ANSWER)]  # fmt: skip


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([SystemMessage("s"), HumanMessage("a"), HumanMessage("b")], "roles must alternate"),
        ([HumanMessage("a"), SystemMessage("s"), HumanMessage("b")], "a system message after"),
        ([SystemMessage("s"), AIMessage("hi"), HumanMessage("a")], "roles must alternate"),
        ([HumanMessage("a"), AIMessage(""), HumanMessage("b")], "an empty assistant message"),
        ([HumanMessage("a"), ToolMessage("r", tool_call_id="x")], "answers no call"),
        ([HumanMessage("a"), AIMessage("", tool_calls=[
            {"name": "t", "args": {}, "id": "c1"}]), HumanMessage("b")], "have no tool message"),
        ([HumanMessage("a"), AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
          ToolMessage("r", tool_call_id="c1"), ToolMessage("r", tool_call_id="c1")],
         "answered twice"),
        ([HumanMessage("a"), AIMessage("answer")], "must end with a user message"),
        ([HumanMessage("a"), AIMessage("", tool_calls=[{"name": "", "args": {}, "id": "c1"}]),
          ToolMessage("r", tool_call_id="c1")], "tool call names not"),
        ([HumanMessage("a"), AIMessage("", tool_calls=[
            {"name": "functions.t", "args": {}, "id": "c1"}]),
          ToolMessage("r", tool_call_id="c1")], "tool call names not"),
        ([HumanMessage("a"), AIMessage("", invalid_tool_calls=[
            {"name": None, "args": "{", "id": "c1", "error": None}]),
          ToolMessage("r", tool_call_id="c1")], "tool call names not"),
        ([HumanMessage("a"), AIMessage("", tool_calls=[{"name": "t" * 65, "args": {},
                                                        "id": "c1"}]),
          ToolMessage("r", tool_call_id="c1")], "tool call names not"),
    ],
)  # fmt: skip
def test_the_checker_refuses_what_strict_servers_refuse(messages, problem):
    with pytest.raises(RoleOrderError, match=problem):
        check_role_order(messages)


def test_the_checker_takes_a_request_that_ends_with_tool_results():
    call = {"name": "t", "args": {}, "id": "c1"}
    check_role_order([SystemMessage("s"), HumanMessage("a"), AIMessage("", tool_calls=[call]),
                      ToolMessage("r", tool_call_id="c1")])  # fmt: skip


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_call_without_a_usable_name_or_id_is_never_sent_back(strategy):
    exchanges = [endings(strategy)[name] for name in (
        "nameless call then answer", "old row of a nameless call", "old row of a dotted name",
        "call without an id")]  # fmt: skip
    messages = prompt(strategy, exchanges)

    assert role_order_problems(messages) == [], describe(messages)
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert all(c["name"] == "bnb_rooms" and c["id"] for c in calls)
    if strategy == "tool_calling":  # only the two calls that ran with a name and an id
        assert len(calls) == 2
        assert not any("no tool named" in str(m.content) for m in messages)


def test_a_turn_whose_stored_calls_all_lack_a_usable_name_sends_none():
    # The fallback that rebuilds a turn's calls from its call records (a markup turn)
    # sent name "" when every stored call of the turn was nameless.
    turn = TurnRecord(iteration=1, text="", tool_calls=({"name": "", "args": {}, "id": "c1"},))
    call = CallRecord(
        iteration=1,
        tool_call_id="c1",
        name="",
        status=StepStatus.ERROR,
        result="Error: there is no tool named ''.",
        error_type="UnknownTool",
    )
    exchange = Exchange(question="Rooms?", answer=ANSWER, turns=(turn,), calls=(call,))
    history = history_messages([exchange], get_strategy("tool_calling"), max_observation_chars=99)

    assert [(type(m), m.text) for m in history] == [(HumanMessage, "Rooms?"), (AIMessage, ANSWER)]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_an_edited_call_its_run_ended_says_a_person_edited_it_and_that_it_has_no_result(strategy):
    builder = Builder(strategy).call(status=StepStatus.RUNNING, result="")
    edited = dataclasses.replace(builder.calls[0], args={"town": "Hangzhou"},
                                 edited_args={"town": "Hangzhou"},
                                 asked_args={"town": "Suzhou"})  # fmt: skip
    builder.calls[0] = edited
    messages = prompt(strategy, [builder.ended(RunStatus.CANCELLED)])

    check_role_order(messages)
    result = messages[3].text
    assert result.count(edited_note({"town": "Hangzhou"})) == 1
    assert UNFINISHED_CALL in result
    assert "Suzhou" in str(messages[2].tool_calls or messages[2].text)  # as it asked
