"""Tests for the offline scripted demo chat model (no network, no Django)."""

from __future__ import annotations

import html
import json
import operator
import subprocess
import sys
from datetime import date
from functools import reduce
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import StructuredTool
from markdown_it import MarkdownIt
from pydantic import BaseModel, Field

from agents.events import RunFinished, RunStatus, StepStatus, ToolCallFinished
from agents.models.demo import DemoChatModel, make_plan
from agents.models.demo_args import find_count, find_expression
from agents.models.demo_places import find_place_refs
from agents.models.demo_text import code_span, escape_markdown
from agents.runtime import run
from agents.tools import default_tools

GARDENS_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
MIXED_QUESTION = "What's the weather in Hangzhou, and what is 17*23?"


# Stand-ins for the app's tools: same names, argument names and description keywords.
def search_travel_info(query: str) -> dict:
    """Search the bundled travel knowledge base about Chinese cities: sights, food, culture,
    best season; use to recommend a city or look up facts. Keywords: travel 旅游 recommend 推荐
    city 城市 sights 景点 gardens 园林 food 美食 culture"""
    return {}


def weather_forecast(town: str, days: int = 3) -> dict:
    """Return the weather forecast 天气 预报 temperature 气温 rain 下雨 for a town."""
    return {}


def check_bnb_availability(
    town: str,
    rooms: int = 1,
    check_in: date | None = None,
    nights: int = 1,
    guests: int | None = None,
) -> dict:
    """Check B&B 民宿 room 房间 hotel 住宿 availability in a town."""
    return {}


def calculator(expression: str) -> dict:
    """Evaluate an arithmetic math 计算 expression."""
    return {}


def current_time(timezone: str = "UTC") -> dict:
    """Return the current time 时间 now in a timezone or city."""
    return {}


TOOLS = [
    StructuredTool.from_function(f)
    for f in (
        search_travel_info,
        weather_forecast,
        check_bnb_availability,
        calculator,
        current_time,
    )
]

SEARCH_RESULT = {
    "query": "江南园林",
    "results": [
        {
            "city": "Suzhou",
            "title": "Classical Gardens",
            "snippet": "Suzhou's classical gardens, such as the Humble Administrator's Garden, "
            "are UNESCO World Heritage sites.",
            "score": 3.5,
        },
        {
            "city": "Hangzhou",
            "title": "West Lake",
            "snippet": "A lake ringed by hills.",
            "score": 1,
        },
    ],
}
WEATHER_RESULT = {
    "town": "Suzhou",
    "forecast": [
        {"date": "2025-05-01", "condition": "light rain", "temp_min_c": 17, "temp_max_c": 24},
        {"date": "2025-05-02", "condition": "cloudy", "temp_min_c": 18, "temp_max_c": 26},
    ],
}
BNB_RESULT = {
    "town": "Suzhou",
    "listings": [
        {"name": "Lotus Courtyard", "available": False, "price_per_night_cny": 520},
        {"name": "Pingjiang Lane Inn", "available": True, "price_per_night_cny": 480},
    ],
}


@pytest.fixture
def model():
    return DemoChatModel().bind_tools(TOOLS)


def calls_of(message: AIMessage) -> list[tuple[str, dict]]:
    return [(call["name"], call["args"]) for call in message.tool_calls]


def without_ids(calls: list[dict]) -> list[dict]:
    """Return tool calls without their ids (random, as a provider's are)."""
    return [{k: v for k, v in call.items() if k != "id"} for call in calls]


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return reduce(operator.add, chunks)


def results_turn(question: str) -> list:
    """Return a conversation that ends with the results of the gardens question's calls."""
    request = DemoChatModel().bind_tools(TOOLS).invoke([HumanMessage(question)])
    contents = {
        "search_travel_info": json.dumps(SEARCH_RESULT, ensure_ascii=False),
        "weather_forecast": json.dumps(WEATHER_RESULT),
        "check_bnb_availability": json.dumps(BNB_RESULT),
        "calculator": json.dumps({"expression": "17*23", "result": 391}),
    }
    results = [
        ToolMessage(contents[c["name"]], tool_call_id=c["id"], name=c["name"])
        for c in request.tool_calls
    ]
    return [HumanMessage(question), request, *results]


def test_it_routes_the_gardens_question_to_three_parallel_calls(model):
    message = model.invoke([HumanMessage(GARDENS_QUESTION)])

    calls = calls_of(message)
    assert [name for name, _ in calls] == [
        "search_travel_info",
        "weather_forecast",
        "check_bnb_availability",
    ]
    assert "园林" in calls[0][1]["query"]
    assert calls[1][1]["town"] == "Suzhou"
    assert calls[2][1]["town"] == "Suzhou"
    assert calls[2][1]["rooms"] == 1


def test_it_routes_weather_and_arithmetic_in_one_english_question(model):
    message = model.invoke([HumanMessage(MIXED_QUESTION)])

    calls = calls_of(message)
    assert [name for name, _ in calls] == ["weather_forecast", "calculator"]
    assert calls[0][1]["town"] == "Hangzhou"
    assert calls[1][1] == {"expression": "17*23"}


def test_parallel_tool_call_ids_are_unique_and_openai_style(model):
    message = model.invoke([HumanMessage(GARDENS_QUESTION)])

    ids = [call["id"] for call in message.tool_calls]
    assert len(set(ids)) == len(ids) == 3
    assert all(i.startswith("call_") and len(i) > len("call_") for i in ids)


@pytest.mark.parametrize("question", [GARDENS_QUESTION, MIXED_QUESTION, "hello"])
def test_merged_stream_equals_generate(model, question):
    messages = [HumanMessage(question)]
    generated = model.invoke(messages)

    streamed = merged(list(model.stream(messages)))

    assert streamed.content == generated.content
    assert without_ids(streamed.tool_calls) == without_ids(generated.tool_calls)
    assert streamed.usage_metadata == generated.usage_metadata
    assert streamed.invalid_tool_calls == []


async def test_async_stream_matches_generate_and_splits_tool_call_args(model):
    messages = [HumanMessage(GARDENS_QUESTION)]
    generated = await model.ainvoke(messages)

    chunks = [chunk async for chunk in model.astream(messages)]

    assert without_ids(merged(chunks).tool_calls) == without_ids(generated.tool_calls)
    arg_pieces = [tc for chunk in chunks for tc in chunk.tool_call_chunks]
    assert len(arg_pieces) > len(generated.tool_calls)  # args arrive split across chunks
    assert {tc["index"] for tc in arg_pieces} == {0, 1, 2}


async def test_text_streams_in_small_pieces_with_a_delay():
    model = DemoChatModel(token_delay_s=0.001)

    chunks = [chunk async for chunk in model.astream([HumanMessage("hello there")])]

    texts = [c.content for c in chunks if c.content]
    assert len(texts) > 5
    assert max(len(t) for t in texts) < 30


def test_last_chunk_carries_usage_metadata(model):
    chunks = list(model.stream([HumanMessage(MIXED_QUESTION)]))

    usage = next(c.usage_metadata for c in reversed(chunks) if c.usage_metadata)
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert sum(1 for c in chunks if c.usage_metadata) == 1


@pytest.mark.parametrize("follow_up", ["And in Chengdu?", "那成都呢？"])
def test_a_follow_up_naming_a_city_repeats_the_place_bound_calls(model, follow_up):
    history = [*results_turn(MIXED_QUESTION), AIMessage("It is rainy; 17*23 = 391.")]

    message = model.invoke([*history, HumanMessage(follow_up)])

    assert calls_of(message) == [("weather_forecast", {"town": "Chengdu", "days": 3})]


def test_a_follow_up_repeats_several_place_bound_calls(model):
    history = [*results_turn(GARDENS_QUESTION), AIMessage("苏州很适合。")]

    message = model.invoke([*history, HumanMessage("那成都呢？")])

    assert [(n, a["town"]) for n, a in calls_of(message)] == [
        ("weather_forecast", "Chengdu"),
        ("check_bnb_availability", "Chengdu"),
    ]


def test_a_follow_up_works_when_history_keeps_only_texts(model):
    history = [HumanMessage(MIXED_QUESTION), AIMessage("Rainy in Hangzhou; 17*23 = 391.")]

    message = model.invoke([*history, HumanMessage("那成都呢？")])

    assert calls_of(message) == [("weather_forecast", {"town": "Chengdu", "days": 3})]


def test_a_tool_question_without_a_city_uses_the_city_from_earlier_messages(model):
    history = [*results_turn(GARDENS_QUESTION), AIMessage("苏州很适合。")]

    message = model.invoke([*history, HumanMessage("What time is it there?")])

    assert calls_of(message) == [("current_time", {"timezone": "Asia/Shanghai"})]


def test_the_answer_uses_the_tool_results(model):
    messages = results_turn("Weather in Suzhou and a B&B room there, and what is 17*23?")

    answer = model.invoke(messages)

    assert answer.tool_calls == []
    assert "light rain" in answer.content
    assert "17–24°C" in answer.content
    assert "Pingjiang Lane Inn" in answer.content
    assert "¥480" in answer.content
    assert "391" in answer.content
    assert "Here is what the tools returned" in answer.content


def test_the_answer_is_chinese_for_a_chinese_question(model):
    answer = model.invoke(results_turn(GARDENS_QUESTION))

    assert "以下是工具返回的结果" in answer.content
    assert "Suzhou" in answer.content and "Classical Gardens" in answer.content
    assert "气温 17–24°C" in answer.content
    assert answer.tool_calls == []


def test_a_failed_tool_is_reported_plainly(model):
    request = model.invoke([HumanMessage(MIXED_QUESTION)])
    weather, calc = request.tool_calls
    messages = [
        HumanMessage(MIXED_QUESTION),
        request,
        ToolMessage("Error: weather service timed out", tool_call_id=weather["id"], status="error"),
        ToolMessage('{"expression": "17*23", "result": 391}', tool_call_id=calc["id"]),
    ]

    answer = model.invoke(messages)

    assert (
        "**weather_forecast** (town=Hangzhou, days=3) failed: weather service timed out"
        in answer.content
    )
    assert answer.content.startswith(r"17\*23 = 391. (1 of 2 tool calls failed; see below.)")
    assert answer.tool_calls == []


def test_an_unmatched_message_lists_the_bound_tools_without_calling_any(model):
    message = model.invoke([HumanMessage("hello")])

    assert message.tool_calls == []
    for tool in TOOLS:
        assert tool.name in message.content


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What's the weather like?", "Which town? I know: Hangzhou, Suzhou, Xi'an, Beijing,"),
        ("天气怎么样？", "哪个城市？我知道这些：杭州、苏州、西安、北京"),
    ],
)
def test_a_missing_town_is_asked_for_by_listing_the_known_towns(model, question, expected):
    message = model.invoke([HumanMessage(question)])

    assert message.tool_calls == []
    assert message.content.startswith(expected)
    assert "bracket" not in message.content and "括号" not in message.content


def test_a_missing_argument_other_than_a_place_is_asked_for_by_its_description():
    class ConvertArgs(BaseModel):
        amount: int = Field(description="How much money. Whole units only.")
        currency: str = Field(description="Target currency as an ISO code, e.g. EUR. Not a name.")

    def convert_currency(amount: int, currency: str) -> dict:
        """Convert money 换算 between currencies."""
        return {}

    tool = StructuredTool.from_function(convert_currency, args_schema=ConvertArgs)
    model = DemoChatModel().bind_tools([tool])

    message = model.invoke([HumanMessage("Convert some money please")])

    assert message.tool_calls == []
    assert message.content == (
        "What amount (How much money) should I use for convert_currency? "
        "What currency (Target currency as an ISO code, e.g. EUR) should I use for "
        "convert_currency?"
    )


@pytest.mark.parametrize(
    "question", ["<img src=x onerror=alert(1)> **bold** hello", "calculator: x = 1"]
)
def test_a_message_without_arithmetic_gets_the_capabilities_reply_not_a_calculator_question(
    question,
):
    model = DemoChatModel().bind_tools(default_tools())  # whose calculator mentions "x"

    message = model.invoke([HumanMessage(question)])

    assert message.tool_calls == []
    assert message.content.startswith("I'm the offline demo model (a script, not an LLM) and")
    assert "couldn't match your message to a tool" in message.content


def test_the_calculator_is_called_for_numbers_with_an_operator_between_them():
    model = DemoChatModel().bind_tools(default_tools())

    message = model.invoke([HumanMessage("calculator: 2 + 3")])

    assert calls_of(message) == [("calculator", {"expression": "2+3"})]


TIME_TURN = [
    HumanMessage("What time is it?"),
    AIMessage(
        "",
        tool_calls=[{"name": "current_time", "args": {"timezone": "UTC"}, "id": "call_t"}],
    ),
    ToolMessage(
        '{"timezone": "Asia/Shanghai", "time": "10:00:00"}',
        tool_call_id="call_t",
        name="current_time",
    ),
    AIMessage("It is 10:00 in Asia/Shanghai."),
]


def test_places_in_assistant_or_tool_text_are_not_taken_as_the_users_place(model):
    message = model.invoke([*TIME_TURN, HumanMessage("What's the weather like?")])

    assert message.tool_calls == []
    assert message.content.startswith("Which town?")


def test_an_unknown_town_after_a_time_turn_is_passed_on_not_replaced_by_shanghai(model):
    message = model.invoke([*TIME_TURN, HumanMessage("What's the weather in Atlantis?")])

    assert calls_of(message) == [("weather_forecast", {"town": "Atlantis", "days": 3})]


@pytest.mark.parametrize(
    ("question", "town"),
    [
        ("What's the weather in Atlantis?", "Atlantis"),
        ("Weather for New York please", "New York"),
        ("天气 in 巴黎", "巴黎"),
        ("巴黎的天气怎么样？", "巴黎"),
        ("查一下明天东京天气", "东京"),
    ],
)
def test_a_town_the_gazetteer_does_not_know_is_passed_to_the_tool_as_written(model, question, town):
    message = model.invoke([HumanMessage(question)])

    assert calls_of(message) == [("weather_forecast", {"town": town, "days": 3})]


@pytest.mark.parametrize(
    "text",
    [
        "What time is it in Europe/London?",
        "weather for Monday",
        "未来三天的天气",
        "现在几点",
        "找一个民宿房间",
        GARDENS_QUESTION,
    ],
)
def test_words_that_are_not_places_are_not_taken_for_unknown_towns(text):
    assert all(not isinstance(ref, str) for ref in find_place_refs(text))


def test_a_user_named_unknown_town_is_the_fallback_for_a_later_question(model):
    history = [
        HumanMessage("Weather in Suzhou?"),
        AIMessage("Rainy."),
        HumanMessage("What's the weather in Atlantis?"),
        AIMessage("The tool failed."),
    ]

    message = model.invoke([*history, HumanMessage("Any B&B rooms there?")])

    assert calls_of(message) == [
        ("check_bnb_availability", {"town": "Atlantis", "rooms": 1, "nights": 1})
    ]


def test_the_plan_line_is_short_and_names_the_calls_without_markdown(model):
    english = model.invoke([HumanMessage(MIXED_QUESTION)]).content
    chinese = model.invoke([HumanMessage(GARDENS_QUESTION)]).content

    assert english == r"Checking 2 things: weather_forecast (Hangzhou), calculator (17\*23)."
    assert chinese.startswith("我来查 3 项：search_travel_info（")
    assert chinese.endswith("、weather_forecast（Suzhou）、check_bnb_availability（Suzhou）。")
    assert "`" not in english + chinese and "\n" not in english + chinese


def test_the_answer_leads_with_a_recommendation_and_the_first_days_weather(model):
    answer = model.invoke(results_turn(GARDENS_QUESTION)).content

    lead, rest = answer.split("\n\n", 1)
    assert lead.startswith("推荐去**Suzhou**：Suzhou's classical gardens, such as")
    assert "Suzhou 2025-05-01：light rain，17–24°C。" in lead
    assert rest.startswith("以下是工具返回的结果：")
    assert "Pingjiang Lane Inn" in rest
    assert answer.endswith("_（演示模型：根据工具结果按脚本生成，并非大模型。）_")


def test_the_english_answer_leads_with_the_weather_and_the_calculation(model):
    answer = model.invoke(results_turn(MIXED_QUESTION)).content

    lead, rest = answer.split("\n\n", 1)
    assert lead == r"Suzhou on 2025-05-01: light rain, 17–24°C. 17\*23 = 391."
    assert rest.startswith("Here is what the tools returned:")


def test_a_search_for_a_named_city_introduces_it_rather_than_recommending_it(model):
    answer = model.invoke(results_turn("Tell me about the gardens of Suzhou")).content

    assert answer.startswith("**Suzhou**: Suzhou's classical gardens")


async def test_with_the_bundled_tools_an_unknown_town_fails_in_the_tool_and_is_explained():
    question = "What's the weather in Atlantis?"

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("weather_forecast", StepStatus.ERROR)]
    final = events[-1]
    assert isinstance(final, RunFinished) and final.status is RunStatus.SUCCEEDED
    assert final.output.startswith("Sorry, I can't answer that from data: the tool call failed.")
    assert "failed: Unknown town 'Atlantis'. Known towns: Hangzhou 杭州" in final.output


async def test_with_the_bundled_tools_the_gardens_answer_recommends_suzhou_in_chinese():
    events = [
        e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(GARDENS_QUESTION)])
    ]

    final = events[-1]
    assert isinstance(final, RunFinished) and final.status is RunStatus.SUCCEEDED
    assert final.output.startswith("推荐去**苏州**：苏州古典园林")
    assert "苏州 20" in final.output.split("\n\n", 1)[0]  # the first day's weather


def test_without_tools_it_replies_in_text():
    message = DemoChatModel().invoke([HumanMessage(MIXED_QUESTION)])

    assert message.tool_calls == []
    assert "No tools are available" in message.content


def test_it_routes_using_only_the_bound_tools_descriptions():
    def museum_hours(city: str) -> dict:
        """Opening hours of museums 博物馆 in a city."""
        return {}

    model = DemoChatModel().bind_tools([StructuredTool.from_function(museum_hours)])

    message = model.invoke([HumanMessage("西安的博物馆几点开门？")])

    assert calls_of(message) == [("museum_hours", {"city": "Xi'an"})]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (GARDENS_QUESTION, ["search_travel_info", "weather_forecast", "check_bnb_availability"]),
        (MIXED_QUESTION, ["weather_forecast", "calculator"]),
    ],
)
def test_it_routes_the_bundled_tools_when_they_are_available(question, expected):
    default_tools = getattr(pytest.importorskip("agents.tools"), "default_tools", None)
    if default_tools is None:
        pytest.skip("the bundled tools are not built yet")
    model = DemoChatModel().bind_tools(default_tools())

    message = model.invoke([HumanMessage(question)])

    assert [name for name, _ in calls_of(message)] == expected


def test_tool_choice_none_and_no_parallel_calls_are_honoured():
    base = DemoChatModel()

    assert base.bind_tools(TOOLS, tool_choice="none").invoke(GARDENS_QUESTION).tool_calls == []
    single = base.bind_tools(TOOLS, parallel_tool_calls=False).invoke(GARDENS_QUESTION)
    assert len(single.tool_calls) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("17 × 23", "17*23"), ("计算 17乘以23", "17*23"), ("sqrt(16) + 2^3?", "sqrt(16)+2**3")],
)
def test_it_extracts_arithmetic_expressions(text, expected):
    assert find_expression(text) == expected


def test_it_ignores_dates_when_looking_for_arithmetic():
    assert find_expression("check in on 2025-05-01 for a 3-day trip") is None


@pytest.mark.parametrize(
    ("text", "param", "expected"),
    [("2 rooms", "rooms", 2), ("两个房间", "rooms", 2), ("一个民宿房间", "rooms", 1),
     ("住三晚", "nights", 3), ("for five days", "days", 5), ("查一下苏州天气", "days", None)],
)  # fmt: skip
def test_it_reads_counts_next_to_the_parameter_word(text, param, expected):
    assert find_count(text, param) == expected


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [SystemMessage("You are helpful.")],
        [HumanMessage("")],
        [HumanMessage(content=[{"type": "text", "text": "weather in Suzhou"}, {"x": 1}])],
        [AIMessage("I already answered.")],
        [ToolMessage("not json at all", tool_call_id="call_orphan")],
        [HumanMessage("1/0 ** 99999 ((("), ToolMessage("[1, {}, null]", tool_call_id="x")],
        [HumanMessage("😀" * 500)],
    ],
)
async def test_odd_input_gets_a_polite_text_reply_not_an_exception(model, messages):
    message = await model.ainvoke(messages)
    chunks = [chunk async for chunk in model.astream(messages)]

    assert isinstance(message.content, str) and message.content
    assert merged(chunks).content == message.content


def test_make_plan_tolerates_malformed_tool_specs():
    plan = make_plan([HumanMessage("weather in Suzhou")], [{"nonsense": True}, "x", None])

    assert plan.tool_calls == []
    assert plan.text


def test_the_agents_package_does_not_import_django():
    code = "import sys, agents.models.demo; assert 'django' not in sys.modules"
    root = Path(__file__).resolve().parents[2]

    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)


# --- Markdown: values from arguments, questions and results render as written ----------

# Configured as chat/markdown.py renders answers (tests/agents must not import chat/).
PAGE_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True})
PAGE_MARKDOWN.enable(["table", "strikethrough"])
NASTY_TEXTS = [
    "9**9**9**9",
    "10**1000/10**-1000",
    "[click](https://evil.example)",
    "![pixel](https://evil.example/p.png)",
    "<https://evil.example>",
    "<img src=x onerror=alert(1)>",
    "_a_ `code` ~~gone~~ a|b",
    "back\\slash\\* and \\\\",
    "&amp; &#60;b&#62; B&B",
    "# heading",
    "> quote",
    "1. one",
    "12) twelve",
    "- item",
    "+ item",
    "---",
    "===",
    "snake_case_name and __dunder__",
]


def page_html(markdown: str) -> str:
    return PAGE_MARKDOWN.render(markdown)


def as_paragraph(text: str) -> str:
    """Return the HTML markdown-it gives a paragraph of plain ``text``."""
    escaped = html.escape(text, quote=False).replace('"', "&quot;")
    return f"<p>{escaped}</p>\n"


@pytest.mark.parametrize("text", NASTY_TEXTS)
def test_escaped_markdown_renders_as_the_plain_text(text):
    assert page_html(escape_markdown(text)) == as_paragraph(text)


@pytest.mark.parametrize("text", ["9**9", "a`b", "`x`", "``"])
def test_a_code_span_shows_backticks_inside_it(text):
    assert page_html(code_span(text)) == f"<p><code>{html.escape(text)}</code></p>\n"


@pytest.mark.parametrize("expression", ["9**9**9**9", "10**1000/10**-1000"])
async def test_an_expression_is_shown_as_written_in_the_plan_and_the_answer(expression):
    question = f"calculate {expression}"
    plan = DemoChatModel().bind_tools(default_tools()).invoke([HumanMessage(question)])

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    assert plan.tool_calls[0]["args"] == {"expression": expression}
    assert page_html(plan.content) == as_paragraph(f"Checking calculator ({expression}).")
    answer = page_html(events[-1].output)
    assert f"(expression={expression}) failed:" in answer
    assert answer.count("<strong>") == 1  # the tool's name, nothing from the expression


def test_a_calculation_leads_the_answer_as_written():
    request = AIMessage(
        "", tool_calls=[{"name": "calculator", "args": {"expression": "2**3*4**2"}, "id": "c1"}]
    )
    result = ToolMessage('{"expression": "2**3*4**2", "result": 128}', tool_call_id="c1")

    answer = DemoChatModel().invoke([HumanMessage("2**3*4**2"), request, result]).content

    rendered = page_html(answer)
    assert rendered.startswith("<p>2**3*4**2 = 128.</p>")
    assert "<code>2**3*4**2</code> = <strong>128</strong>" in rendered


def test_a_markdown_link_in_the_question_comes_back_as_text_not_a_link(model):
    question = "[x](https://e.vil) recommend a city for gardens"
    plan = model.invoke([HumanMessage(question)])
    query = plan.tool_calls[0]["args"]["query"]
    result = ToolMessage(
        json.dumps(SEARCH_RESULT), tool_call_id=plan.tool_calls[0]["id"], name="search_travel_info"
    )

    answer = model.invoke([HumanMessage(question), plan, result]).content
    no_tools = DemoChatModel().invoke([HumanMessage(question)]).content

    assert "[x](https://e.vil)" in query
    for reply in (plan.content, answer, no_tools):
        rendered = page_html(reply)
        assert "<a " not in rendered
        assert "[x](https://e.vil)" in rendered


def test_markdown_in_tool_results_is_shown_as_text(model):
    plan = model.invoke([HumanMessage("Recommend a city for gardens, and weather in Suzhou")])
    search, weather = plan.tool_calls
    evil_search = {
        "results": [{"city": "[Evil](https://evil.example)", "snippet": "<b>hi</b> *x* _y_."}]
    }
    evil_weather = {
        "town": "# Heading",
        "forecast": [{"date": "1. first", "condition": "~~rain~~ | sun", "low_c": 1, "high_c": 9}],
    }
    results = [
        ToolMessage(json.dumps(evil_search), tool_call_id=search["id"], name=search["name"]),
        ToolMessage(json.dumps(evil_weather), tool_call_id=weather["id"], name=weather["name"]),
    ]

    answer = page_html(model.invoke([HumanMessage("gardens"), plan, *results]).content)

    assert "<a " not in answer and "<h1>" not in answer and "<s>" not in answer
    assert "<ol>" not in answer and "<table>" not in answer
    assert answer.count("<em>") == 1  # the footer's
    assert "<strong>[Evil](https://evil.example)</strong>" in answer
    assert "&lt;b&gt;hi&lt;/b&gt; *x* _y_." in answer
    assert "# Heading on 1. first: ~~rain~~ | sun, 1–9°C." in answer


# --- Arguments: passed as the user gave them, so the tool's own error shows -------------


async def test_a_number_over_the_schemas_maximum_is_passed_on_and_the_tool_error_reported():
    question = "B&B in Suzhou for 50 rooms"
    plan = DemoChatModel().bind_tools(default_tools()).invoke([HumanMessage(question)])

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    assert plan.tool_calls[0]["args"]["rooms"] == 50
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("check_bnb_availability", StepStatus.ERROR)]
    assert events[-1].output.startswith("Sorry, I can't answer that from data")
    assert "rooms: Input should be less than or equal to 10" in events[-1].output


def test_a_number_the_user_did_not_give_keeps_the_schema_default():
    model = DemoChatModel().bind_tools(default_tools())

    message = model.invoke([HumanMessage("B&B in Suzhou please")])

    assert message.tool_calls[0]["args"]["rooms"] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is sqrt(-1)", "sqrt(-1)"),
        ("log(-2) please", "log(-2)"),
        ("sin(-pi/2)", "sin(-pi/2)"),
        ("log10(1000)", "log10(1000)"),
        ("2 * -3", "2*-3"),
        ("what is -5", None),
        ("sqrt(x)", None),
    ],
)
def test_function_calls_and_unary_minus_count_as_arithmetic(text, expected):
    assert find_expression(text) == expected


async def test_sqrt_of_minus_one_is_calculated_and_its_error_reported():
    question = "what is sqrt(-1)"

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("calculator", StepStatus.ERROR)]
    assert "sqrt() is undefined for -1" in page_html(events[-1].output)


SUZHOU_TURN = [HumanMessage("Weather in Suzhou?"), AIMessage("Rainy in Suzhou.")]


@pytest.mark.parametrize("history", [[], SUZHOU_TURN], ids=["fresh", "after-suzhou"])
@pytest.mark.parametrize(
    ("question", "zone"),
    [
        ("What time is it in Mars/Olympus?", "Mars/Olympus"),
        ("What time is it in Europe/Londn?", "Europe/Londn"),
        ("What time is it in UTC+8?", "UTC+8"),
        ("What time is it in Narnia?", "Narnia"),
        ("What time is it in europe/london?", "Europe/London"),
    ],
)
def test_a_zone_the_user_wrote_is_passed_as_written_not_replaced(model, history, question, zone):
    message = model.invoke([*history, HumanMessage(question)])

    assert calls_of(message) == [("current_time", {"timezone": zone})]


async def test_with_the_bundled_tools_an_unknown_zone_fails_in_the_tool_and_is_explained():
    question = "what time is it in Mars/Olympus"
    history = [HumanMessage("苏州天气"), AIMessage("小雨。")]

    events = [
        e async for e in run(DemoChatModel(), default_tools(), [*history, HumanMessage(question)])
    ]

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("current_time", StepStatus.ERROR)]
    assert "Unknown time zone or city 'Mars/Olympus'" in events[-1].output
