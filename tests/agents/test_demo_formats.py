"""Tests for the demo model speaking the four strategy formats, turn by turn, offline."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agents.events import RunFinished, RunStatus, StepStatus, ToolCallFinished
from agents.models.demo import DemoChatModel
from agents.models.demo_formats import cut_at_stop, detect_format, prompt_tools, strip_tag
from agents.prompts import SYSTEM_PROMPT
from agents.runtime import run
from agents.strategies import ParseError, StrategyOptions, get_strategy
from agents.strategies.react import parse_react
from agents.strategies.structured_chat import parse_structured
from agents.strategies.tool_calling import ToolCallingStrategy
from agents.strategies.xml import parse_xml
from agents.tools import default_tools
from tests.agents.demo_support import (
    BNB_RESULT,
    SEARCH_RESULT,
    TOOLS,
    WEATHER_RESULT,
    merged,
    without_ids,
)

GARDENS = "Which city is best for classical gardens, and what's the weather there this week?"
SUZHOU_ZH = "苏州明天天气怎么样？有民宿吗？"
SUZHOU_EN = "Weather in Suzhou and a B&B room there, please"
QUESTIONS = [GARDENS, SUZHOU_ZH, SUZHOU_EN]
TEXT_FORMATS = ["react", "structured_chat", "xml"]
PARSERS = {"react": parse_react, "structured_chat": parse_structured, "xml": parse_xml}
RESULTS = {
    "search_travel_info": json.dumps(SEARCH_RESULT, ensure_ascii=False),
    "weather_forecast": json.dumps(WEATHER_RESULT),
    "check_bnb_availability": json.dumps(BNB_RESULT),
}
ROUND_LIMIT = 6


def prompt(fmt: str, question: str) -> list:
    """Return the prompt strategy ``fmt`` builds for ``question`` with the stand-in tools."""
    messages = [SystemMessage(SYSTEM_PROMPT), HumanMessage(question)]
    return get_strategy(fmt).build_prompt(messages, TOOLS)


def text_model(fmt: str):
    """Return the demo model bound as text strategy ``fmt`` binds it (stop sequences only)."""
    return get_strategy(fmt).bind(DemoChatModel(), TOOLS, iteration=1)


def observed(fmt: str, reply: str, observation: str) -> list:
    """Return the scratchpad messages for one step: the reply, then its observation."""
    if fmt == "xml":
        if "<tool_input>" in reply and "</tool_input>" not in reply:
            reply += "</tool_input>"  # as XmlStrategy.format_log puts back what stop cut
        return [AIMessage(reply), HumanMessage(f"<observation>{observation}</observation>")]
    return [AIMessage(reply), HumanMessage(f"Observation: {observation}")]


def run_text(fmt: str, question: str) -> tuple[list[tuple[str, dict]], str, list[str]]:
    """Run ``question`` in text format ``fmt`` to its final answer.

    Return the calls made, the final answer and each reply's raw text. A reply that does
    not parse gets its parse error as the observation, as the runtime sends it.
    """
    model, messages = text_model(fmt), prompt(fmt, question)
    calls: list[tuple[str, dict]] = []
    replies: list[str] = []
    for _ in range(ROUND_LIMIT):
        reply = model.invoke(messages)
        assert reply.tool_calls == [] and reply.invalid_tool_calls == []
        replies.append(reply.text)
        try:
            parsed = PARSERS[fmt](reply.text)
        except ParseError as exc:
            messages += observed(fmt, reply.text, exc.observation)
            continue
        if isinstance(parsed, str):
            return calls, parsed, replies
        name, args = parsed
        calls.append((name, args))
        messages += observed(fmt, reply.text, RESULTS.get(name, "{}"))
    raise AssertionError(f"no final answer in {ROUND_LIMIT} turns: {replies}")


def native_plan(question: str) -> tuple[list[tuple[str, dict]], str]:
    """Return the native parallel calls for ``question`` and the answer from their results."""
    model = DemoChatModel().bind_tools(TOOLS)
    request = model.invoke([HumanMessage(question)])
    results = [
        ToolMessage(RESULTS[c["name"]], tool_call_id=c["id"], name=c["name"])
        for c in request.tool_calls
    ]
    answer = model.invoke([HumanMessage(question), request, *results])
    return [(c["name"], c["args"]) for c in request.tool_calls], answer.text


# --- Reading the prompt -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["tool_calling", *TEXT_FORMATS])
def test_it_detects_the_format_the_system_message_asks_for(fmt):
    assert detect_format(prompt(fmt, GARDENS)) == fmt


def test_without_a_system_message_the_format_is_native():
    assert detect_format([HumanMessage("Action Input: <tool_input>")]) == "tool_calling"


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_it_reads_the_tools_from_the_prompts_json_lines(fmt):
    tools = prompt_tools(prompt(fmt, GARDENS))

    assert [t["function"]["name"] for t in tools] == [t.name for t in TOOLS]
    assert all(t["type"] == "function" for t in tools)
    weather = tools[1]["function"]["parameters"]
    assert weather["required"] == ["town"] and "days" in weather["properties"]


def test_text_formats_bind_no_tools_yet_still_call_them():
    assert prompt_tools([SystemMessage(SYSTEM_PROMPT), HumanMessage(GARDENS)]) == []
    reply = text_model("react").invoke(prompt("react", SUZHOU_ZH))

    assert parse_react(reply.text) == ("weather_forecast", {"town": "Suzhou", "days": 3})


# --- One call per turn, then the answer -------------------------------------------------


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_text_format_makes_the_planned_calls_one_per_turn_then_answers(fmt, question):
    expected_calls, expected_answer = native_plan(question)

    calls, answer, replies = run_text(fmt, question)

    assert expected_calls and calls == expected_calls
    assert len(replies) == len(expected_calls) + 1
    assert answer == expected_answer.strip()


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_the_chinese_answer_is_in_chinese_and_uses_every_result(fmt):
    _, answer, _ = run_text(fmt, SUZHOU_ZH)

    assert "以下是工具返回的结果" in answer
    assert "light rain" in answer and "Pingjiang Lane Inn" in answer


@pytest.mark.parametrize(
    ("fmt", "starts"),
    [
        ("react", "Thought: Checking weather_forecast (Suzhou).\nAction: weather_forecast\n"),
        ("structured_chat", "Thought: Checking weather_forecast (Suzhou).\nAction:\n```json\n{"),
        ("xml", "Checking weather_forecast (Suzhou).\n<tool>weather_forecast</tool><tool_input>{"),
    ],
)
def test_a_call_reply_has_the_formats_shape(fmt, starts):
    reply = text_model(fmt).invoke(prompt(fmt, SUZHOU_EN)).text

    assert reply.startswith(starts)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("question", [SUZHOU_ZH, "tell me a joke"])
def test_a_text_format_streams_text_only_and_the_stream_equals_invoke(fmt, question):
    model, messages = text_model(fmt), prompt(fmt, question)

    invoked = model.invoke(messages)
    chunks = list(model.stream(messages))

    assert merged(chunks).text == invoked.text
    assert all(not chunk.tool_call_chunks for chunk in chunks)
    assert len(chunks) > 3


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("tell me a joke", "I can call these tools"),
        ("What's the weather like?", "Which town? I know:"),
        ("天气怎么样？", "哪个城市？我知道这些："),
    ],
)
def test_replies_that_call_nothing_are_final_answers_in_the_format(fmt, question, expected):
    reply = text_model(fmt).invoke(prompt(fmt, question)).text

    answer = PARSERS[fmt](reply)
    assert isinstance(answer, str) and expected in answer


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_step_that_did_not_parse_is_not_counted_as_a_call(fmt):
    messages = prompt(fmt, SUZHOU_EN) + observed(fmt, "Thought: hmm", "Invalid format.")

    reply = text_model(fmt).invoke(messages).text

    assert PARSERS[fmt](reply) == ("weather_forecast", {"town": "Suzhou", "days": 3})


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_a_planning_failure_is_still_a_final_answer_in_the_format(fmt, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("agents.models.demo.decide", fail)

    reply = text_model(fmt).invoke(prompt(fmt, SUZHOU_ZH)).text

    assert "could not handle that message" in PARSERS[fmt](reply)


# --- Stop sequences ---------------------------------------------------------------------


def test_the_xml_stop_sequence_cuts_the_closing_tag_as_a_real_model_stops():
    model, messages = text_model("xml"), prompt("xml", SUZHOU_EN)

    invoked = model.invoke(messages).text
    streamed = merged(list(model.stream(messages))).text

    assert invoked == streamed
    assert invoked.endswith('{"town": "Suzhou", "days": 3}')
    assert "</tool_input>" not in invoked


@pytest.mark.parametrize(
    ("fmt", "stop", "expected"),
    [
        (
            "react",
            ["\nAction Input"],
            "Thought: Checking weather_forecast (Suzhou).\nAction: weather_forecast",
        ),
        (
            "structured_chat",
            ["never", "```"],
            "Thought: Checking weather_forecast (Suzhou).\nAction:\n",
        ),
        ("xml", ["<tool>"], "Checking weather_forecast (Suzhou).\n"),
        ("tool_calling", [" (Suzhou)"], "Checking 2 things: weather_forecast"),
    ],
)
async def test_output_ends_before_the_first_stop_sequence(fmt, stop, expected):
    demo = DemoChatModel()
    model = demo.bind_tools(TOOLS, stop=stop) if fmt == "tool_calling" else demo.bind(stop=stop)
    messages = prompt(fmt, SUZHOU_EN)

    invoked = await model.ainvoke(messages)
    streamed = merged([chunk async for chunk in model.astream(messages)])

    assert invoked.text == expected
    assert streamed.text == expected


def test_cut_at_stop_takes_the_earliest_sequence():
    assert cut_at_stop("a1b2c3", ["c", "b"]) == "a1"
    assert cut_at_stop("abc", None) == "abc"
    assert cut_at_stop("abc", ["", "x"]) == "abc"


# --- The #malformed fault trigger -------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "marker"),
    [
        ("react", "Action: weather_forecast"),
        ("structured_chat", "},\n}"),
        ("xml", "<tool>weather_forecast</tool>"),
    ],
)
@pytest.mark.parametrize("question", [f"{SUZHOU_ZH} #malformed", f"#malformed {SUZHOU_EN}"])
def test_malformed_breaks_the_first_turn_then_the_run_goes_on(fmt, marker, question):
    first = text_model(fmt).invoke(prompt(fmt, question)).text
    with pytest.raises(ParseError):
        PARSERS[fmt](first)
    assert marker in first and "<tool_input>" not in first and "Action Input" not in first

    calls, answer, replies = run_text(fmt, question)

    expected_calls, expected_answer = native_plan(strip_tag(question)[0])
    assert replies[0] == first
    assert calls == expected_calls
    assert "malformed" not in json.dumps(calls)
    assert answer == expected_answer.strip()


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_malformed_breaks_the_first_turn_even_when_nothing_routes(fmt):
    calls, answer, replies = run_text(fmt, "hello #malformed")

    with pytest.raises(ParseError):
        PARSERS[fmt](replies[0])
    assert calls == [] and len(replies) == 2
    assert "I can call these tools" in answer and "malformed" not in answer


async def test_native_malformed_is_an_invalid_tool_call_then_real_calls_follow():
    model = DemoChatModel().bind_tools(TOOLS)
    messages = [HumanMessage(f"{SUZHOU_ZH} #malformed")]

    first = await model.ainvoke(messages)
    streamed = merged([chunk async for chunk in model.astream(messages)])

    assert first.tool_calls == [] and streamed.tool_calls == []
    assert without_ids(streamed.invalid_tool_calls) == without_ids(first.invalid_tool_calls)
    (broken,) = first.invalid_tool_calls
    assert broken["name"] == "weather_forecast"
    with pytest.raises(ValueError):
        json.loads(broken["args"])
    (action,) = ToolCallingStrategy().parse(first)
    assert action.error and action.error_type == "InvalidToolCall"

    error = ToolMessage(action.error, tool_call_id=broken["id"], status="error")
    second = await model.ainvoke([*messages, first, error])
    assert [c["name"] for c in second.tool_calls] == ["weather_forecast", "check_bnb_availability"]
    assert "malformed" not in json.dumps(second.tool_calls)


def test_native_malformed_with_nothing_routed_still_breaks_the_first_turn():
    message = DemoChatModel().bind_tools(TOOLS).invoke([HumanMessage("hello #MALFORMED")])

    assert message.tool_calls == [] and len(message.invalid_tool_calls) == 1


def test_a_bare_tag_breaks_the_first_turn_then_greets():
    model = DemoChatModel().bind_tools(TOOLS)
    first = model.invoke([HumanMessage("#malformed")])
    (broken,) = first.invalid_tool_calls
    error = ToolMessage("Error: bad", tool_call_id=broken["id"], status="error")

    second = model.invoke([HumanMessage("#malformed"), first, error])

    assert second.tool_calls == [] and second.text.startswith("Hello!")


def test_the_tag_is_stripped_from_the_question():
    assert strip_tag("苏州天气 #malformed") == ("苏州天气", True)
    assert strip_tag("a #Malformed b") == ("a b", True)
    assert strip_tag("issue#malformed stays") == ("issue#malformed stays", False)


# --- Native options ---------------------------------------------------------------------


def test_required_tool_choice_calls_a_tool_even_when_nothing_routes():
    question = "tell me a joke"
    forced = DemoChatModel().bind_tools(TOOLS, tool_choice="required")

    first = forced.invoke([HumanMessage(question)])
    result = ToolMessage(RESULTS["search_travel_info"], tool_call_id=first.tool_calls[0]["id"])
    answer = DemoChatModel().bind_tools(TOOLS).invoke([HumanMessage(question), first, result])

    assert [(c["name"], c["args"]) for c in first.tool_calls] == [
        ("search_travel_info", {"query": question})
    ]
    assert DemoChatModel().bind_tools(TOOLS).invoke(question).tool_calls == []
    assert answer.tool_calls == [] and "Suzhou" in answer.text


def test_required_tool_choice_keeps_routed_calls():
    forced = DemoChatModel().bind_tools(TOOLS, tool_choice="required")

    assert len(forced.invoke(SUZHOU_ZH).tool_calls) == 2


def test_a_named_tool_choice_calls_that_tool_even_when_nothing_routes():
    named = DemoChatModel().bind_tools(TOOLS, tool_choice="search_travel_info")

    message = named.invoke("tell me a joke")

    assert [c["name"] for c in message.tool_calls] == ["search_travel_info"]


@pytest.mark.parametrize("question", QUESTIONS)
def test_no_parallel_calls_makes_one_call_per_turn_and_answers_from_all(question):
    model = DemoChatModel().bind_tools(TOOLS, parallel_tool_calls=False)
    expected_calls, expected_answer = native_plan(question)
    messages: list = [HumanMessage(question)]
    calls: list[tuple[str, dict]] = []

    for _ in range(ROUND_LIMIT):
        reply = model.invoke(messages)
        if not reply.tool_calls:
            break
        assert len(reply.tool_calls) == 1
        (call,) = reply.tool_calls
        calls.append((call["name"], call["args"]))
        messages += [reply, ToolMessage(RESULTS[call["name"]], tool_call_id=call["id"])]

    assert calls == expected_calls
    assert reply.text == expected_answer


# --- Through the agent loop -------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["tool_calling", *TEXT_FORMATS])
async def test_every_strategy_runs_the_demo_to_an_answer_through_a_malformed_turn(fmt):
    messages = [SystemMessage(SYSTEM_PROMPT), HumanMessage(f"{SUZHOU_ZH} #malformed")]

    events = [
        e async for e in run(DemoChatModel(), default_tools(), messages, strategy=get_strategy(fmt))
    ]

    finished = [(e.name, e.status) for e in events if isinstance(e, ToolCallFinished)]
    assert finished == [
        ("weather_forecast", StepStatus.ERROR),
        ("weather_forecast", StepStatus.SUCCESS),
        ("check_bnb_availability", StepStatus.SUCCESS),
    ]
    final = events[-1]
    assert isinstance(final, RunFinished) and final.status is RunStatus.SUCCEEDED
    assert "以下是工具返回的结果" in final.output and "malformed" not in final.output


async def test_after_a_turn_forced_to_another_tool_the_demo_makes_its_planned_call():
    """tool_choice applies to the first turn; the demo must then do what it planned."""
    strategy = get_strategy("tool_calling", StrategyOptions(tool_choice="calculator"))
    messages = [SystemMessage(SYSTEM_PROMPT), HumanMessage("What's the weather in Hangzhou?")]
    events = [e async for e in run(DemoChatModel(), default_tools(), messages, strategy=strategy)]

    calls = [e.name for e in events if isinstance(e, ToolCallFinished)]
    assert calls == ["calculator", "weather_forecast"]
    end = events[-1]
    assert isinstance(end, RunFinished) and end.status is RunStatus.SUCCEEDED
    assert "Hangzhou" in end.output
