"""Tests for the offline demo model's final answers and plan lines, built from tool results."""

from __future__ import annotations

import html
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from markdown_it import MarkdownIt

from agents.events import RunFinished, RunStatus, StepStatus, ToolCallFinished
from agents.models.demo import DemoChatModel
from agents.models.demo_text import code_span, escape_markdown
from agents.runtime import run
from agents.tools import default_tools
from tests.agents.demo_support import GARDENS_QUESTION, MIXED_QUESTION, SEARCH_RESULT, results_turn


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


async def test_with_the_bundled_tools_the_gardens_answer_recommends_suzhou_in_chinese():
    events = [
        e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(GARDENS_QUESTION)])
    ]

    final = events[-1]
    assert isinstance(final, RunFinished) and final.status is RunStatus.SUCCEEDED
    assert final.output.startswith("推荐去**苏州**：苏州古典园林")
    assert "苏州 20" in final.output.split("\n\n", 1)[0]  # the first day's weather


# --- Markdown: values from arguments, questions and results render as written -----------


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


# --- Tool errors: reported plainly, with the tool's own message -------------------------


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


async def test_with_the_bundled_tools_an_unknown_town_fails_in_the_tool_and_is_explained():
    question = "What's the weather in Atlantis?"

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("weather_forecast", StepStatus.ERROR)]
    final = events[-1]
    assert isinstance(final, RunFinished) and final.status is RunStatus.SUCCEEDED
    assert final.output.startswith("Sorry, I can't answer that from data: the tool call failed.")
    assert "failed: Unknown town 'Atlantis'. Known towns: Hangzhou 杭州" in final.output


async def test_a_number_over_the_schemas_maximum_is_passed_on_and_the_tool_error_reported():
    question = "B&B in Suzhou for 50 rooms"
    plan = DemoChatModel().bind_tools(default_tools()).invoke([HumanMessage(question)])

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    assert plan.tool_calls[0]["args"]["rooms"] == 50
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("check_bnb_availability", StepStatus.ERROR)]
    assert events[-1].output.startswith("Sorry, I can't answer that from data")
    assert "rooms: Input should be less than or equal to 10" in events[-1].output


async def test_sqrt_of_minus_one_is_calculated_and_its_error_reported():
    question = "what is sqrt(-1)"

    events = [e async for e in run(DemoChatModel(), default_tools(), [HumanMessage(question)])]

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("calculator", StepStatus.ERROR)]
    assert "sqrt() is undefined for -1" in page_html(events[-1].output)


async def test_with_the_bundled_tools_an_unknown_zone_fails_in_the_tool_and_is_explained():
    question = "what time is it in Mars/Olympus"
    history = [HumanMessage("苏州天气"), AIMessage("小雨。")]

    events = [
        e async for e in run(DemoChatModel(), default_tools(), [*history, HumanMessage(question)])
    ]

    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [(e.name, e.status) for e in finished] == [("current_time", StepStatus.ERROR)]
    assert "Unknown time zone or city 'Mars/Olympus'" in events[-1].output
