"""Each text format's writer and parser agree: parsing what was written gives it back."""

from __future__ import annotations

import pytest

from agents.strategies import ParseError
from agents.strategies.react import (
    format_react,
    format_react_final,
    format_react_malformed,
    parse_react,
)
from agents.strategies.structured_chat import (
    format_structured,
    format_structured_final,
    format_structured_malformed,
    parse_structured,
)
from agents.strategies.xml import format_xml, format_xml_final, format_xml_malformed, parse_xml

FORMATS = {
    "react": (format_react, format_react_final, format_react_malformed, parse_react),
    "structured_chat": (
        format_structured, format_structured_final, format_structured_malformed, parse_structured,
    ),
    "xml": (format_xml, format_xml_final, format_xml_malformed, parse_xml),
}  # fmt: skip
INPUTS = [
    {"town": "Suzhou"},
    {"town": "苏州", "days": 2},
    {"query": "say \"hi\" and 'bye'"},
    {"expression": "1 < 2 & 3 > 2"},
    {"text": "a </tool_input> b <tool>x</tool> <final_answer>"},
    {"text": "line one\nObservation: two\n```json\n{}\n```"},
    {"nested": {"list": [1, 2.5, None, True], "empty": ""}},
    {},
    "Suzhou",
    '{"looks": "like JSON"}',
]
THOUGHTS = ["Checking the weather.", "Two\nlines with `ticks` <tool> and {braces}", "查一下"]
ANSWERS = [
    "Sunny, 17–24 °C.",
    "苏州**晴**。\n\n- 第一天：小雨\n- 第二天：多云",
    'He said "1 < 2" & left {braces} and `code`.',
    "Markdown:\n\n```python\nprint('hi')\n```",
    # Code showing every format's delimiters is content, whichever format it is written in.
    "运行：\n```\nThought: x\nAction: search\nAction Input: {}\nObservation: 1\nFinal Answer: 2\n```",
    "~~~xml\n<tool>a</tool><tool_input>{}</tool_input>\n<observation>1</observation>\n"
    "<final_answer>x</final_answer>\n~~~\nDone.",
    'Blob:\n````json\n{"action": "Final Answer", "action_input": "x"}\n```\n````',
    "Cut off:\n```python\nAction: search\n</final_answer>",  # a block that never closes
]


@pytest.mark.parametrize("tool_input", INPUTS)
@pytest.mark.parametrize("thought", THOUGHTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_written_call_parses_back_to_the_same_tool_and_input(fmt, thought, tool_input):
    write, _, _, parse = FORMATS[fmt]
    assert parse(write("weather_forecast", tool_input, thought)) == (
        "weather_forecast",
        tool_input,
    )


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_written_final_answer_parses_back_to_the_same_text(fmt, answer):
    _, write_final, _, parse = FORMATS[fmt]
    assert parse(write_final(answer)) == answer


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_written_malformed_call_is_rejected_naming_the_tool(fmt):
    _, _, write_malformed, parse = FORMATS[fmt]
    with pytest.raises(ParseError) as error:
        parse(write_malformed("calculator", {"expression": "17*23"}, "Calculating."))
    assert "calculator" in error.value.observation or error.value.tool == "calculator"


def test_the_xml_call_still_parses_when_the_stop_sequence_cuts_its_closing_tag():
    written = format_xml("search", {"q": "a </tool_input> b"}, "Searching.")
    cut = written[: written.index("</tool_input>")]
    assert cut == written.removesuffix("</tool_input>")
    assert parse_xml(cut) == ("search", {"q": "a </tool_input> b"})


@pytest.mark.parametrize("fmt", FORMATS)
def test_values_the_parsers_refuse_are_refused_when_written(fmt):
    write, _, _, _ = FORMATS[fmt]
    with pytest.raises(ValueError):
        write("calculator", {"expression": float("nan")}, "Calculating.")
