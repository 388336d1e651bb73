"""Table-driven tests of the four strategies' parsers: what they accept and what they report."""

from __future__ import annotations

import json

import pytest
from langchain_core.agents import AgentFinish
from langchain_core.messages import AIMessage, ToolMessage

from agents.strategies import ParseError, get_strategy
from agents.strategies.code_blocks import MASK, mask_code
from agents.strategies.react import parse_react
from agents.strategies.structured_chat import parse_structured
from agents.strategies.xml import parse_xml
from tests.fakes import tool_call

FENCE = "```"

# (text, expected (tool, input) or final answer string)
REACT_OK = [
    (
        'Thought: I need the weather.\nAction: weather_forecast\nAction Input: {"town": "Suzhou"}',
        ("weather_forecast", {"town": "Suzhou"}),
    ),
    (
        'Thought: 查天气\nAction: weather_forecast\nAction Input: {"town": "苏州", "days": 2}',
        ("weather_forecast", {"town": "苏州", "days": 2}),
    ),
    (
        "Thought: search\nAction: search_travel_info\nAction Input: 园林",
        ("search_travel_info", "园林"),
    ),
    ('Action: search\nAction Input: "gardens"', ("search", "gardens")),
    (
        f'Thought: x\nAction: `calculator`\nAction Input: {FENCE}json\n{{"expression": "2+2"}}\n{FENCE}',
        ("calculator", {"expression": "2+2"}),
    ),
    (
        'Action: calculator\nAction Input: ~~~~json\n{"expression": "2+2"}\n~~~~',
        ("calculator", {"expression": "2+2"}),
    ),
    (
        f'Action: calculator\nAction Input: {FENCE}json {{"expression": "1"}}{FENCE}',
        ("calculator", {"expression": "1"}),
    ),
    ("Thought: x\nAction: [calculator]\nAction Input: {}", ("calculator", {})),
    ("Thought: x\nAction: calculator\nAction Input:", ("calculator", {})),  # nothing given
    (
        '**Action:** calculator\n**Action Input:** {"expression": "1+1"}',
        ("calculator", {"expression": "1+1"}),
    ),
    ("Action 2: calculator\nAction 2 Input: {}", ("calculator", {})),
    ("**Thought:** done\n**Final Answer:** 42", "42"),
    (
        'Thought: x\nAction: calculator\nAction Input: {"expression": "1+1"}\nObservation: 2\n'
        "Thought: done\nFinal Answer: 2",
        ("calculator", {"expression": "1+1"}),
    ),
    ("Thought: I now know the final answer\nFinal Answer: Suzhou.", "Suzhou."),
    ("Final Answer: 苏州的园林最好。\n\n- 拙政园\n- 留园", "苏州的园林最好。\n\n- 拙政园\n- 留园"),
]

REACT_BAD = [
    ("", "empty", ""),
    ("   \n", "empty", ""),
    ("Suzhou is nice.", "missing 'Action:'", ""),
    ("Thought: x\nAction: weather_forecast\n", "missing 'Action Input:'", "weather_forecast"),
    (
        'Thought: x\nAction: calculator\nAction Input: {"expression": "1"}\nFinal Answer: 1',
        "both an Action and a Final Answer",
        "",
    ),
    ("Thought: done\nFinal Answer:   ", "final answer was empty", ""),
    (
        'Thought: x\nAction: weather_forecast\nAction Input: {"town": "Su',
        "does not parse",
        "weather_forecast",
    ),
    ("Thought: x\nAction: calculator\nAction Input: [1, 2]", "not a JSON list", "calculator"),
    (
        "Action: a\nAction Input: {}\nAction: b\nAction Input: {}",
        "2 actions",
        "",
    ),
    ("Thought: x\nAction:\nAction Input: {}", "has no tool name", ""),
    ("Final Answer: a\nFinal Answer: b", "2 'Final Answer:' lines", ""),
    (
        "Action: calculator\nAction Input: " + "[" * 5000 + "]" * 5000,
        "nested too deeply",
        "calculator",
    ),
    (
        'Action: calculator\nAction Input: {"expression": NaN}',
        "NaN is not a JSON number",
        "calculator",
    ),
    ('Action: calculator\nAction Input: {"expression": 1e999}', "1e999 is too large", "calculator"),
    (
        'Action: calculator\nAction Input: {"expression": "\\ud83d"}',
        "unpaired UTF-16 surrogate",
        "calculator",
    ),
    (
        'Action: calculator\nAction Input: {"expression": "1", "expression": "2"}',
        "'expression' is repeated",
        "calculator",
    ),
]


STRUCTURED_OK = [
    (
        f'Thought: weather\nAction:\n{FENCE}json\n{{"action": "weather_forecast", '
        f'"action_input": {{"town": "Suzhou"}}}}\n{FENCE}',
        ("weather_forecast", {"town": "Suzhou"}),
    ),
    (
        f'Action:\n{FENCE}\n{{\n  "action": "check_bnb_availability",\n  "action_input": '
        f'{{"town": "苏州", "rooms": 1}}\n}}\n{FENCE}\n',
        ("check_bnb_availability", {"town": "苏州", "rooms": 1}),
    ),
    (
        '{"action": "calculator", "action_input": {"expression": "2*3"}}',
        ("calculator", {"expression": "2*3"}),
    ),
    ('{"action": "search", "action_input": "gardens"}', ("search", "gardens")),
    # Brackets in the Thought do not hide the blob the format asks for.
    (
        f'Thought: per source [1] I need the weather\nAction:\n{FENCE}json\n{{"action": "w", "action_input": {{}}}}\n{FENCE}',
        ("w", {}),
    ),
    (
        'Thought: fill the {town} argument\nAction:\n{"action": "w", "action_input": {"town": "Suzhou"}}',
        ("w", {"town": "Suzhou"}),
    ),
    ('Thought: fill the {town} argument\n{"action": "w", "action_input": {}}', ("w", {})),
    (
        f'Thought: I know what to respond\nAction:\n{FENCE}json\n{{"action": "Final Answer", '
        f'"action_input": "Go to **Suzhou**."}}\n{FENCE}',
        "Go to **Suzhou**.",
    ),
    ('{"action": "Final Answer", "action_input": "去苏州。"}', "去苏州。"),
    (
        f'Action:\n{FENCE}json\n{{"action": "calculator", "action_input": {{"expression": "1"}}}}\n'
        f"{FENCE}\nObservation: 1",
        ("calculator", {"expression": "1"}),
    ),
]

STRUCTURED_BAD = [
    ("", "empty", ""),
    ("Suzhou is the best city for gardens.", "no JSON blob", ""),
    (
        f'Action:\n{FENCE}json\n{{"action": "weather_forecast", "action_input": {{"town": "Suzhou",}}}}\n{FENCE}',
        "does not parse",
        "weather_forecast",
    ),
    (
        f'{FENCE}json\n{{"action": "calculator", "action_input": {{"expression": "1"}}}}\n{FENCE}\n'
        "I hope this helps!",
        "goes on after the JSON blob",
        "calculator",
    ),
    (
        '{"action": "a", "action_input": {}}\n{"action": "b", "action_input": {}}',
        "goes on after the JSON blob",
        "a",
    ),
    ('{"action": "calculator"}', '"action_input"', "calculator"),
    ('{"action_input": {"x": 1}}', '"action"', ""),
    ("[1, 2]", "JSON array, not an object", ""),
    (
        '{"action": "Final Answer", "action_input": {"answer": "x"}}',
        "must be the answer as a JSON string",
        "",
    ),
    ('{"action": "Final Answer", "action_input": "  "}', "final answer was empty", ""),
    ('{"action": "calculator", "action_input": 42}', "must be a JSON object", "calculator"),
    (
        '{"action": "calculator", "action": "Final Answer", "action_input": "x"}',
        "'action' is repeated",
        "calculator",
    ),
    ("[" * 5000 + "]" * 5000, "nested too deeply", ""),
    (
        '{"action": "calculator", "action_input": {"x": Infinity}}',
        "Infinity is not a JSON number",
        "calculator",
    ),
]


XML_OK = [
    (
        '<tool>weather_forecast</tool><tool_input>{"town": "Suzhou"}',
        ("weather_forecast", {"town": "Suzhou"}),
    ),
    (
        'I should check.\n<tool>weather_forecast</tool><tool_input>{"town": "苏州"}</tool_input>',
        ("weather_forecast", {"town": "苏州"}),
    ),
    (
        "<tool>search_travel_info</tool><tool_input>gardens & <water> towns",
        ("search_travel_info", "gardens & <water> towns"),
    ),
    (
        '<tool>calculator</tool><tool_input>{"expression": "1<2"}</tool_input><observation>true</observation>',
        ("calculator", {"expression": "1<2"}),
    ),
    (
        "<final_answer>Suzhou: <b>gardens</b> & canals</final_answer>",
        "Suzhou: <b>gardens</b> & canals",
    ),
    ("<final_answer>去苏州。</final_answer>\n", "去苏州。"),
    ("<final_answer>unclosed but clear", "unclosed but clear"),
    (
        '<tool>calculator</tool><tool_input>\n~~~json\n{"expression": "2"}\n~~~\n',
        ("calculator", {"expression": "2"}),
    ),
    (
        '<tool>calculator</tool><tool_input>```json\n{"expression": "3"}',
        ("calculator", {"expression": "3"}),
    ),
]

XML_BAD = [
    ("", "empty", ""),
    ("Suzhou is nice.", "no <tool> or <final_answer>", ""),
    ("<tool>weather_forecast</tool>", "no <tool_input>", "weather_forecast"),
    ('<tool_input>{"town": "Suzhou"}', "no <tool> name", ""),
    (
        "<tool>a</tool><tool_input>{}</tool_input><final_answer>x</final_answer>",
        "both a <tool> and a <final_answer>",
        "",
    ),
    ("<tool>a</tool><tool>b</tool><tool_input>{}", "2 <tool> tags", ""),
    ("<final_answer>x</final_answer> and more", "goes on after </final_answer>", ""),
    ("<final_answer> </final_answer>", "final answer was empty", ""),
    ("<tool>weather_forecast<tool_input>{}", "not closed", ""),
    ('<tool>weather_forecast</tool><tool_input>{"town": }', "does not parse", "weather_forecast"),
    ("<final_answer>a<final_answer>b</final_answer>", "more than one <final_answer>", ""),
    ("<tool>a</tool><tool_input>{}</tool_input><tool_input>{}", "more than one <tool_input>", ""),
    (
        "<tool>a</tool><tool_input>{}</tool_input> and then I will",
        "goes on after </tool_input>",
        "a",
    ),
    ("<tool>x " * 5000, "not closed", ""),
    ("<tool>calculator</tool><tool_input>" + "[" * 5000, "nested too deeply", "calculator"),
]


PARSERS = {"react": parse_react, "structured_chat": parse_structured, "xml": parse_xml}
ACCEPTED = [
    (name, text, expected)
    for name, table in (("react", REACT_OK), ("structured_chat", STRUCTURED_OK), ("xml", XML_OK))
    for text, expected in table
]
REPORTED = [
    (name, *case)
    for name, table in (("react", REACT_BAD), ("structured_chat", STRUCTURED_BAD), ("xml", XML_BAD))
    for case in table
]


@pytest.mark.parametrize(("name", "text", "expected"), ACCEPTED)
def test_a_parser_accepts_unambiguous_output(name, text, expected):
    assert PARSERS[name](text) == expected


@pytest.mark.parametrize(("name", "text", "reason", "tool"), REPORTED)
def test_a_parser_reports_what_was_wrong_and_what_it_could_read(name, text, reason, tool):
    with pytest.raises(ParseError) as info:
        PARSERS[name](text)
    assert reason in info.value.observation
    assert info.value.tool == tool
    assert info.value.llm_output == text


def test_a_text_strategy_action_keeps_the_log_and_a_fresh_tool_call_id():
    text = 'Thought: x\nAction: calculator\nAction Input: {"expression": "1"}\nObservation: made up'
    (first,) = get_strategy("react").parse(AIMessage(text))
    (second,) = get_strategy("react").parse(AIMessage(text))
    assert first.log == 'Thought: x\nAction: calculator\nAction Input: {"expression": "1"}'
    assert first.tool_call_id.startswith("call_") and first.tool_call_id != second.tool_call_id
    assert not first.error


def test_native_parse_turns_tool_calls_into_actions_and_text_into_a_finish():
    strategy = get_strategy("tool_calling")
    message = AIMessage(
        "", tool_calls=[tool_call("add", {"a": 1}, "c1"), tool_call("add", {"a": 2}, "c2")]
    )
    actions = strategy.parse(message)
    assert [(a.tool, a.tool_input, a.tool_call_id) for a in actions] == [
        ("add", {"a": 1}, "c1"), ("add", {"a": 2}, "c2"),
    ]  # fmt: skip
    finish = strategy.parse(AIMessage("The answer."))
    assert isinstance(finish, AgentFinish) and finish.return_values == {"output": "The answer."}


def test_native_invalid_tool_calls_become_actions_carrying_their_error():
    """LangChain's classic parser drops these and returns an empty final answer."""
    message = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "weather_forecast", "args": '{"town": ', "id": "bad1", "error": "Expecting value",
             "type": "invalid_tool_call"}
        ],
        tool_calls=[tool_call("add", {"a": 1}, "ok1")],
    )  # fmt: skip
    broken, runnable = get_strategy("tool_calling").parse(message)
    assert broken.tool == "weather_forecast" and broken.tool_input == '{"town": '
    assert broken.error_type == "InvalidToolCall" and "not valid JSON" in broken.error
    assert runnable.tool == "add" and not runnable.error


def test_native_parse_gives_missing_and_repeated_ids_fresh_ones():
    message = AIMessage(
        "", tool_calls=[tool_call("add", {"a": 1}, ""), tool_call("add", {"a": 2}, "same"),
                        tool_call("add", {"a": 3}, "same")],
    )  # fmt: skip
    ids = [a.tool_call_id for a in get_strategy("tool_calling").parse(message)]
    assert len(set(ids)) == 3 and ids[1] == "same" and all(ids)
    assert [c["id"] for c in message.tool_calls] == ids  # the scratchpad pairs them too


def test_native_scratchpad_sends_each_turn_once_then_its_tool_messages():
    strategy = get_strategy("tool_calling")
    message = AIMessage(
        "", tool_calls=[tool_call("add", {"a": 1}, "c1"), tool_call("add", {"a": 2}, "c2")]
    )
    a1, a2 = strategy.parse(message)
    steps = [
        (a1, ToolMessage("1", tool_call_id="c1")),
        (a2, ToolMessage("2", tool_call_id="c2", status="error")),
    ]
    pad = strategy.format_scratchpad(steps)
    assert pad[0] is message and [m.tool_call_id for m in pad[1:]] == ["c1", "c2"]
    assert pad[2].status == "error"


@pytest.mark.parametrize(
    ("name", "observation"),
    [("react", "Observation: 42"), ("structured_chat", "Observation: 42"),
     ("xml", "<observation>42</observation>")],
)  # fmt: skip
def test_text_scratchpad_is_the_log_then_the_observation(name, observation):
    strategy = get_strategy(name)
    text = {
        "react": 'Action: calculator\nAction Input: {"expression": "6*7"}',
        "structured_chat": '{"action": "calculator", "action_input": {"expression": "6*7"}}',
        "xml": '<tool>calculator</tool><tool_input>{"expression": "6*7"}',
    }[name]
    (action,) = strategy.parse(AIMessage(text))
    ai, human = strategy.format_scratchpad([(action, ToolMessage("42", tool_call_id="x"))])
    assert ai.text.startswith(text) and human.text == observation
    if name == "xml":
        assert ai.text.endswith("</tool_input>")  # restored after the stop sequence cut it


# Code in a final answer is content: every delimiter of every text format, inside a code
# block of the answer, is kept as written and never read as format.
DELIMITERS = {
    "react": [
        "Thought: I need a tool",
        "Action: search_travel_info",
        'Action Input: {"query": "园林"}',
        "Observation: 42",
        "Final Answer: 42",
        "**Action:** search",
        "Action 2: search\nAction 2 Input: {}",
    ],
    "structured_chat": [
        '{"action": "search", "action_input": {"query": "园林"}}',
        'Action:\n```json\n{"action": "Final Answer", "action_input": "x"}\n```',
        "Observation: 42",
        "Thought: I know what to respond",
    ],
    "xml": [
        "<tool>search</tool>",
        '<tool>search</tool><tool_input>{"query": "园林"}</tool_input>',
        "<final_answer>42</final_answer>",
        "<final_answer>",
        "</final_answer>",
        "<observation>42</observation>",
    ],
}
# (opening line, closing line): ``` and ~~~ of any length, with and without an info
# string, indented (a list item), and a block showing a shorter fence inside a longer one.
FENCES = [
    ("```", "```"),
    ("```python", "```"),
    ("~~~", "~~~"),
    ("~~~~ text", "~~~~~"),
    ("   ```sh", "   ```"),
    ("````markdown\n```text", "```\n````"),
]


def final_reply(name: str, answer: str) -> str:
    """Return a reply in ``name``'s format whose final answer is ``answer``, as models write it."""
    blob = {"action": "Final Answer", "action_input": answer}
    return {
        "react": f"Thought: I now know the final answer\nFinal Answer: {answer}",
        "structured_chat": json.dumps(blob, ensure_ascii=False),  # Chinese as written
        "xml": f"<final_answer>{answer}</final_answer>",
    }[name]


CODE_CASES = [
    (name, delimiter, opening, closing)
    for name, delimiters in DELIMITERS.items()
    for delimiter in delimiters
    for opening, closing in FENCES
]


@pytest.mark.parametrize(("name", "delimiter", "opening", "closing"), CODE_CASES)
def test_a_delimiter_inside_a_code_block_of_the_answer_is_content(
    name, delimiter, opening, closing
):
    answer = f"运行这个：\n{opening}\n{delimiter}\n{closing}\n完成。"
    assert PARSERS[name](final_reply(name, answer)) == answer


@pytest.mark.parametrize(
    ("name", "delimiter"), [(n, d) for n, ds in DELIMITERS.items() for d in ds]
)
def test_a_fence_that_opens_in_the_answer_and_never_closes_is_code_to_the_end(name, delimiter):
    """A reply cut by its token limit keeps its unclosed code block as code."""
    answer = f"Run this:\n```python\n{delimiter}\nprint('未完"
    reply = {  # no closing tag or fence either: the reply simply stops
        "react": f"Final Answer: {answer}",
        "structured_chat": final_reply(name, answer),
        "xml": f"<final_answer>{answer}",
    }[name]
    assert PARSERS[name](reply) == answer


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        # A fence right after the label opens a block ("Final Answer: ```python").
        ("react", "Final Answer: ```python\nAction: search\n```", "```python\nAction: search\n```"),
        ("xml", "<final_answer>```xml\n<tool>a</tool>\n```</final_answer>", "```xml\n<tool>a</tool>\n```"),
        # Inline code spans are content too.
        ("xml", "<final_answer>Write `<tool>name</tool>` first.</final_answer>",
         "Write `<tool>name</tool>` first."),
        ("xml", "<final_answer>End with `<observation>`.</final_answer>", "End with `<observation>`."),
        # Code in the Thought before an action does not hide the action.
        ("react", 'Thought: not this:\n```\nFinal Answer: no\n```\nAction: calculator\nAction Input: {"expression": "1"}',
         ("calculator", {"expression": "1"})),
        ("xml", "Not this:\n```\n<final_answer>no</final_answer>\n```\n<tool>calculator</tool><tool_input>{}",
         ("calculator", {})),
        ("structured_chat", f'Thought: for example\n{FENCE}python\nprint("{{")\n{FENCE}\nAction:\n{FENCE}json\n'
         f'{{"action": "calculator", "action_input": {{"expression": "1"}}}}\n{FENCE}',
         ("calculator", {"expression": "1"})),
        # A fenced blob: ~~~, and a long backtick fence.
        ("structured_chat", '~~~json\n{"action": "calculator", "action_input": {}}\n~~~', ("calculator", {})),
        ("structured_chat", 'Action: ```json {"action": "calculator", "action_input": {}} ```', ("calculator", {})),
        # A fence right after "Action Input:" holds the input; a made-up observation after it is cut.
        ("react", f'Action: calculator\nAction Input: {FENCE}json\n{{"expression": "1"}}\n{FENCE}\n'
         "Observation: 1\nThought: done\nFinal Answer: 1", ("calculator", {"expression": "1"})),
        # A reply that is all one fenced block is read inside the fence.
        ("react", f'{FENCE}\nThought: x\nAction: calculator\nAction Input: {{"expression": "1"}}\n{FENCE}',
         ("calculator", {"expression": "1"})),
        ("react", f"{FENCE}text\nThought: done\nFinal Answer: 苏州。", "苏州。"),
        ("xml", f'{FENCE}xml\n<tool>calculator</tool><tool_input>{{"expression": "1"}}</tool_input>\n{FENCE}',
         ("calculator", {"expression": "1"})),
    ],
)  # fmt: skip
def test_code_around_the_format_is_read_as_code(name, text, expected):
    assert PARSERS[name](text) == expected


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        # An action and a final answer outside code stay the format error they are.
        ("react", f"Action: calculator\nAction Input: {{}}\n{FENCE}\nx\n{FENCE}\nFinal Answer: 1",
         "both an Action and a Final Answer"),
        ("xml", f"<tool>a</tool><tool_input>{{}}</tool_input>\n{FENCE}\nx\n{FENCE}\n<final_answer>1</final_answer>",
         "both a <tool> and a <final_answer>"),
        # Two answers outside code, or text after a structured answer.
        ("react", f"Final Answer: a\n{FENCE}\nx\n{FENCE}\nFinal Answer: b", "2 'Final Answer:' lines"),
        ("structured_chat", f'{FENCE}json\n{{"action": "Final Answer", "action_input": "a"}}\n{FENCE}\n'
         f"{FENCE}\nmore\n{FENCE}", "goes on after the JSON blob"),
        # Code only, no format outside it.
        ("react", f"Here:\n{FENCE}\nAction: calculator\nAction Input: {{}}\n{FENCE}", "missing 'Action:'"),
        ("xml", f"Here:\n{FENCE}\n<tool>a</tool><tool_input>{{}}\n{FENCE}", "no <tool> or <final_answer>"),
    ],
)  # fmt: skip
def test_format_errors_outside_code_are_still_reported(name, text, reason):
    with pytest.raises(ParseError) as info:
        PARSERS[name](text)
    assert reason in info.value.observation
    assert info.value.llm_output == text


@pytest.mark.parametrize(
    ("name", "observation"),
    [("react", "Observation: 42"), ("structured_chat", "Observation: 42"), ("xml", "<observation>42</observation>")],
)  # fmt: skip
@pytest.mark.parametrize(("opening", "closing"), FENCES)
def test_cut_observation_never_cuts_inside_code_and_still_cuts_after_it(
    name, observation, opening, closing
):
    cut = get_strategy(name).cut_observation
    kept = f"Final Answer: see\n{opening}\n{observation}\n{closing}"
    assert cut(kept) == kept
    assert cut(f"{kept}\n{observation}").rstrip() == kept


def test_a_bare_structured_blob_whose_answer_holds_a_fence_is_not_cut_at_that_fence():
    """The fence inside the JSON string is mid-line; only a line-start fence holds the blob."""
    answer = 'Use:\n```json\n{"action": "search"}\n```\nObservation: none'
    blob = json.dumps({"action": "Final Answer", "action_input": answer})
    assert parse_structured(blob) == answer
    assert parse_structured(f"Thought: ok\nAction:\n{blob}") == answer


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("a `b` c", ["`b`"]),
        ("``a`b`` c", ["``a`b``"]),  # a span closes at a run of its own length only
        ("`a`` b", []),  # no partner: literal backticks
        ("`a\nb`", []),  # spans stay within a line
        ("x\n```py\nA\n```\ny", ["```py\nA\n```"]),
        ("x\n  ~~~\nA\n```\n~~~~\ny", ["  ~~~\nA\n```\n~~~~"]),
        ("x\n````\n```\nA\n```\n````", ["````\n```\nA\n```\n````"]),  # shorter fence inside
        ("x\n```\nA", ["```\nA"]),  # never closed: code to the end
        ("x ```\nA\n", []),  # a fence must start its line
        ("```a`b\nA\n", []),  # not a fence: its info string holds a backtick
    ],
)  # fmt: skip
def test_mask_code_masks_fenced_blocks_and_inline_spans_keeping_offsets(text, code):
    masked = mask_code(text)
    assert len(masked) == len(text)
    assert masked.count("\n") == text.count("\n")
    found, start = [], None
    for i, (a, b) in enumerate(zip(text, masked, strict=True)):
        if b == MASK or (a == "\n" and start is not None and i + 1 < len(text)
                         and masked[i + 1] == MASK):  # fmt: skip
            start = i if start is None else start
        elif start is not None:
            found.append(text[start:i])
            start = None
    if start is not None:
        found.append(text[start:])
    assert found == code
