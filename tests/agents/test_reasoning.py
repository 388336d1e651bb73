"""Reasoning text: split from the reply however it streams, never parsed, never the answer."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool

from agents.events import (
    ModelTurnFinished,
    ReasoningDelta,
    RunFinished,
    RunStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agents.model_turn import response_usage
from agents.reasoning import ThinkSplitter, reasoning_of_chunk, split_think
from agents.runtime import RunLimits, run
from agents.strategies import get_strategy
from tests.fakes import ScriptedChatModel, tool_call


@tool
def weather_forecast(town: str) -> dict:
    """Give the weather forecast for a town."""
    return {"town": town, "forecast": "sunny"}


def pieces(parts: list[str]) -> tuple[list[tuple[str, str]], ThinkSplitter]:
    splitter = ThinkSplitter()
    out = []
    for part in parts:
        out += splitter.feed(part)
    out += splitter.finish()
    return out, splitter


def by_kind(out: list[tuple[str, str]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for kind, text in out:
        joined[kind] = joined.get(kind, "") + text
    return joined


REPLY = "<think>\nThe user wants </thin...> no: Action: x\n```json\n{}\n```\n</think>\n\nSunny."


@pytest.mark.parametrize("cut", range(len(REPLY) + 1))
def test_a_think_block_splits_the_same_wherever_the_chunks_are_cut(cut):
    out, splitter = pieces([REPLY[:cut], REPLY[cut:]])

    assert by_kind(out) == {
        "reasoning": "\nThe user wants </thin...> no: Action: x\n```json\n{}\n```\n",
        "text": "Sunny.",
    }
    assert (splitter.reasoning, splitter.text) == (by_kind(out)["reasoning"], "Sunny.")


def test_a_reply_streamed_one_character_at_a_time_splits_the_same():
    out, _ = pieces(list(REPLY))
    assert by_kind(out)["text"] == "Sunny."
    assert "Action: x" in by_kind(out)["reasoning"]


def test_a_closing_tag_alone_moves_the_text_before_it_into_the_reasoning():
    # The chat template opened <think> in the prompt (DeepSeek-R1, Qwen3 thinking).
    out, splitter = pieces(["Let me ", "think.\n</th", "ink>\n\nIt is ", "sunny."])

    assert out == [
        ("text", "Let me "),
        ("text", "think.\n"),
        ("moved", "Let me think.\n"),
        ("text", "It is "),
        ("text", "sunny."),
    ]
    assert (splitter.reasoning, splitter.text) == ("Let me think.\n", "It is sunny.")


def test_thinking_tags_are_read_too_and_white_space_before_the_tag_is_dropped():
    assert split_think("\n  <thinking>hmm</thinking>Yes.") == ("hmm", "Yes.")


def test_a_think_tag_later_in_an_answer_is_the_answer_s_text():
    text = "Use the <think> tag like this: <think>x</think>."
    assert split_think(text) == ("", text)
    out, _ = pieces([text])
    assert by_kind(out) == {"text": text}


def test_an_unclosed_think_block_is_all_reasoning_and_leaves_no_answer():
    assert split_think("<think>I was cut off at the token lim") == (
        "I was cut off at the token lim",
        "",
    )


def test_a_reply_without_markup_is_unchanged_including_a_lone_angle_bracket_at_the_end():
    assert split_think("  2 < 3 and x <") == ("", "  2 < 3 and x <")
    out, _ = pieces(["2 <", " 3 <"])
    assert by_kind(out) == {"text": "2 < 3 <"}


def test_reasoning_is_read_from_the_field_and_from_reasoning_blocks():
    assert (
        reasoning_of_chunk(AIMessageChunk("", additional_kwargs={"reasoning_content": "a"})) == "a"
    )
    chunk = AIMessageChunk(
        content=[
            {"type": "reasoning", "reasoning": "b"},
            {"type": "thinking", "thinking": "c"},
            {"type": "text", "text": "answer"},
        ]
    )
    assert reasoning_of_chunk(chunk) == "bc"
    assert reasoning_of_chunk(AIMessageChunk("plain")) == ""


# Usage: one response's figures are the per-key maximum over its chunks, never the sum.


def test_usage_repeated_on_every_chunk_is_counted_once():
    running = [
        {"input_tokens": 713, "output_tokens": n, "total_tokens": 713 + n} for n in (1, 2, 3, 4)
    ]
    assert response_usage(running) == {"input_tokens": 713, "output_tokens": 4, "total_tokens": 717}


def test_usage_on_the_last_chunk_only_is_taken_as_it_is():
    usage = {"input_tokens": 713, "output_tokens": 9, "total_tokens": 722}
    assert response_usage([usage]) == usage


def test_usage_split_into_input_first_and_output_last_is_added_up_in_the_total():
    first = {"input_tokens": 713, "output_tokens": 0, "total_tokens": 713}
    last = {"input_tokens": 0, "output_tokens": 50, "total_tokens": 50,
            "output_token_details": {"reasoning": 20}}  # fmt: skip
    assert response_usage([first, last]) == {
        "input_tokens": 713, "output_tokens": 50, "total_tokens": 763,
        "output_token_details": {"reasoning": 20},
    }  # fmt: skip


def usage_chunks(texts: list[str], usages: list[dict]) -> list[AIMessageChunk]:
    return [AIMessageChunk(content=t, usage_metadata=u) for t, u in zip(texts, usages, strict=True)]


@pytest.mark.parametrize(
    ("usages", "expected"),
    [
        (  # a server repeating its running totals on every chunk
            [
                {"input_tokens": 713, "output_tokens": n, "total_tokens": 713 + n}
                for n in range(1, 8)
            ],
            (713, 7, 720),
        ),
        (  # OpenAI: the last chunk only
            [None] * 6 + [{"input_tokens": 713, "output_tokens": 7, "total_tokens": 720}],
            (713, 7, 720),
        ),
        (  # input on the first chunk, output on the last
            [{"input_tokens": 713, "output_tokens": 0, "total_tokens": 713}]
            + [None] * 5
            + [{"input_tokens": 0, "output_tokens": 7, "total_tokens": 7}],
            (713, 7, 720),
        ),
    ],
)
async def test_a_turn_stores_one_response_s_usage_whatever_shape_the_server_streams(
    usages, expected
):
    chunks = usage_chunks(["It ", "is ", "sunny ", "in ", "Suzhou ", "today", "."], usages)
    model = ScriptedChatModel(script=[chunks])
    events = [e async for e in run(model, [], [HumanMessage("q")])]

    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    usage = turn.usage
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == expected
    assert turn.raw["usage_metadata"]["input_tokens"] == 713
    assert events[-1].usage == dict(
        zip(("input_tokens", "output_tokens", "total_tokens"), expected, strict=True)
    )


# Every strategy: inline thinking is taken out before the strategy parses.

THINKING = (
    '<think>\nMaybe I should write\nAction: calculator\nAction Input: {"x": 1}\n'
    '```json\n{"action": "calculator", "action_input": {}}\n```\n'
    "<tool>calculator</tool><tool_input>1</tool_input>\nFinal Answer: wrong\n</think>\n\n"
)
CALL = {
    "react": 'Thought: check\nAction: weather_forecast\nAction Input: {"town": "Suzhou"}',
    "structured_chat": (
        '```json\n{"action": "weather_forecast", "action_input": {"town": "Suzhou"}}\n```'
    ),
    "xml": '<tool>weather_forecast</tool><tool_input>{"town": "Suzhou"}',
}
ANSWER = {
    "tool_calling": "Sunny in Suzhou.",
    "react": "Thought: I now know the final answer\nFinal Answer: Sunny in Suzhou.",
    "structured_chat": (
        '```json\n{"action": "Final Answer", "action_input": "Sunny in Suzhou."}\n```'
    ),
    "xml": "<final_answer>Sunny in Suzhou.</final_answer>",
}


def call_for(name: str) -> AIMessage:
    if name == "tool_calling":
        return AIMessage(
            THINKING, tool_calls=[tool_call("weather_forecast", {"town": "Suzhou"}, "c1")]
        )
    return AIMessage(THINKING + CALL[name])


@pytest.mark.parametrize("name", ["tool_calling", "react", "structured_chat", "xml"])
async def test_thinking_that_looks_like_format_is_never_parsed_nor_the_answer(name):
    model = ScriptedChatModel(script=[call_for(name), AIMessage(THINKING + ANSWER[name])])
    messages = [SystemMessage("You are a travel assistant."), HumanMessage("Weather in Suzhou?")]
    events = [
        e
        async for e in run(
            model, [weather_forecast], messages, strategy=get_strategy(name),
            limits=RunLimits(max_iterations=4),
        )
    ]  # fmt: skip

    end = events[-1]
    assert isinstance(end, RunFinished)
    assert (end.status, end.output) == (RunStatus.SUCCEEDED, "Sunny in Suzhou.")
    assert [(c.name, c.args) for c in events if isinstance(c, ToolCallStarted)] == [
        ("weather_forecast", {"town": "Suzhou"})
    ]
    assert all(f.error_type == "" for f in events if isinstance(f, ToolCallFinished))
    turns = [e for e in events if isinstance(e, ModelTurnFinished)]
    assert all("Action: calculator" in t.reasoning for t in turns)
    assert all("<think>" not in t.text and "calculator" not in t.text for t in turns)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "calculator" not in streamed
    assert "calculator" in "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    # The second request carries no reasoning: the scratchpad holds the reply without it.
    second = model.prompts[1]
    assert not any("calculator" in str(m.content) for m in second)


async def test_the_native_scratchpad_keeps_reasoning_content_and_drops_inline_markup():
    first = AIMessage(
        "<think>inline</think>Checking.",
        additional_kwargs={"reasoning_content": "from the field"},
        tool_calls=[tool_call("weather_forecast", {"town": "Suzhou"}, "c1")],
    )
    model = ScriptedChatModel(script=[first, AIMessage("Sunny.")])
    events = [e async for e in run(model, [weather_forecast], [HumanMessage("q")])]

    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert (turn.reasoning, turn.text) == ("from the field\n\ninline", "Checking.")
    sent = model.prompts[1][1]
    assert isinstance(sent, AIMessage)
    assert sent.content == "Checking."
    assert sent.additional_kwargs["reasoning_content"] == "from the field"
    assert [c["id"] for c in sent.tool_calls] == ["c1"]


async def test_a_reply_that_is_only_thinking_is_an_empty_answer_not_the_thinking():
    model = ScriptedChatModel(script=[AIMessage("<think>I could say hello.</think>")])
    events = [e async for e in run(model, [], [HumanMessage("hi")])]

    assert (events[-1].status, events[-1].output) == (RunStatus.FAILED, "")


async def test_a_lone_closing_tag_moves_the_streamed_text_into_the_reasoning():
    chunks = [AIMessageChunk(t) for t in ["Thinking ", "hard.", "</think>", "\n\nSunny."]]
    model = ScriptedChatModel(script=[chunks])
    events = [e async for e in run(model, [], [HumanMessage("q")])]

    streamed = [(type(e).__name__, e.text, getattr(e, "moved", None))
                for e in events if isinstance(e, TextDelta | ReasoningDelta)]  # fmt: skip
    assert streamed == [
        ("TextDelta", "Thinking ", None),
        ("TextDelta", "hard.", None),
        ("ReasoningDelta", "Thinking hard.", True),
        ("TextDelta", "Sunny.", None),
    ]
    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert (turn.reasoning, turn.text, events[-1].output) == ("Thinking hard.", "Sunny.", "Sunny.")


async def test_a_reply_of_reasoning_content_only_fails_as_empty_and_keeps_the_reasoning():
    chunks = [AIMessageChunk("", additional_kwargs={"reasoning_content": "Half a thought"})]
    model = ScriptedChatModel(script=[chunks])
    events = [e async for e in run(model, [], [HumanMessage("q")])]
    assert next(e for e in events if isinstance(e, ModelTurnFinished)).reasoning == "Half a thought"
    assert (events[-1].status, events[-1].output) == (RunStatus.FAILED, "")


async def test_reasoning_streamed_in_pieces_is_kept_as_one_text():
    # Found in a browser: each streamed piece was stored as a paragraph of its own.
    pieces = ["The user ", "asked", " something simple."]
    chunks = [AIMessageChunk("", additional_kwargs={"reasoning_content": p}) for p in pieces]
    model = ScriptedChatModel(script=[[*chunks, AIMessageChunk("Hi.")]])
    events = [e async for e in run(model, [], [HumanMessage("q")])]

    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == pieces
    turn = next(e for e in events if isinstance(e, ModelTurnFinished))
    assert (turn.reasoning, turn.text) == ("The user asked something simple.", "Hi.")
