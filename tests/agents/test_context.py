"""The context window: long histories trimmed whole exchanges at a time, overflow ends a run."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from agents.context import ContextWindow, approximate_tokens, tools_tokens
from agents.events import ModelTurnStarted, RunFinished, RunStatus
from agents.history import QUESTION_ID_PREFIX, check_role_order, history_messages
from agents.runtime import RunLimits, run
from agents.strategies import STRATEGIES, get_strategy
from tests.agents.test_history import ANSWER, Builder
from tests.fakes import ScriptedChatModel, tool_call


@tool
def bnb_rooms(town: str) -> str:
    """Return B&B rooms in ``town``."""
    return f"Rooms in {town}: Garden Inn 380 yuan, Canal House 260 yuan. " + "details " * 40


@tool
def huge_page(url: str) -> str:
    """Return a page far larger than any context window here."""
    return "lorem ipsum " * 5_000


def long_conversation(strategy: str, messages: int = 1_000) -> list:
    """Return ``messages`` / 2 earlier exchanges with a tool call each (1,000 messages:
    500 questions and the runs that answered them)."""
    exchanges = []
    for n in range(messages // 2):
        builder = Builder(strategy).call(town=f"Town {n}").answer(f"{ANSWER} ({n})")
        exchanges.append(builder.ended(RunStatus.SUCCEEDED, f"{ANSWER} ({n})",
                                       question=f"Rooms in town {n}?"))  # fmt: skip
    return exchanges


def prompt_for(strategy_name: str, exchanges, question: str = "Which was the cheapest?"):
    strategy = get_strategy(strategy_name)
    history = history_messages(exchanges, strategy, max_observation_chars=8_000)
    messages = [SystemMessage("You are a travel assistant."), *history, HumanMessage(question)]
    return strategy, strategy.build_prompt(messages, [bnb_rooms])


def is_question(message) -> bool:
    return str(message.id or "").startswith(QUESTION_ID_PREFIX)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_long_history_is_trimmed_to_the_window_from_its_oldest_whole_exchange(strategy):
    _, prompt = prompt_for(strategy, long_conversation(strategy))
    window = ContextWindow(max_tokens=8_192)

    fitted = window.fit(prompt, [], extra_tokens=tools_tokens([bnb_rooms]))

    total = sum(approximate_tokens(m) for m in fitted) + tools_tokens([bnb_rooms])
    assert total <= window.budget < window.max_tokens
    assert fitted[0] is prompt[0] and fitted[-1] is prompt[-1]
    assert is_question(fitted[1]), "the kept history starts with a whole exchange"
    assert 2 < len(fitted) < len(prompt)
    assert "(499)" in fitted[-2].text, "the newest exchange is kept, the oldest dropped"
    check_role_order(fitted)


def test_the_history_never_starts_with_a_tool_result_or_a_call_without_its_results():
    _, prompt = prompt_for("tool_calling", long_conversation("tool_calling", 60))
    for max_tokens in range(400, 6_000, 37):
        window = ContextWindow(max_tokens=max_tokens, reply_tokens=100)
        fitted = window.fit(prompt, [])
        assert isinstance(fitted[0], SystemMessage)
        assert len(fitted) == 2 or is_question(fitted[1])
        check_role_order(fitted)


def test_a_text_strategy_s_history_never_starts_on_an_observation():
    _, prompt = prompt_for("react", long_conversation("react", 40))
    for max_tokens in range(1_500, 6_000, 53):
        fitted = ContextWindow(max_tokens=max_tokens, reply_tokens=100).fit(prompt, [])
        assert len(fitted) == 2 or is_question(fitted[1])
        assert not fitted[1].text.startswith("Observation:")


def test_what_fits_is_sent_whole():
    _, prompt = prompt_for("tool_calling", long_conversation("tool_calling", 6))

    assert ContextWindow(max_tokens=100_000).fit(prompt, []) == prompt


def test_chinese_text_counts_about_a_token_a_character():
    chinese = HumanMessage("推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。" * 10)
    english = HumanMessage("x" * len(chinese.text))

    assert approximate_tokens(english) == count_tokens_approximately([english])
    assert approximate_tokens(chinese) >= len(chinese.text)


def test_the_reply_keeps_a_quarter_of_a_small_window_and_at_most_4096_tokens():
    assert ContextWindow(max_tokens=8_192).budget == 8_192 - 2_048
    assert ContextWindow(max_tokens=128_000).budget == 128_000 - 4_096
    assert ContextWindow(max_tokens=8_192, reply_tokens=512).budget == 8_192 - 512
    assert ContextWindow(max_tokens=8_192, reply_tokens=16_000).budget == 8_192 // 2


def test_chinese_tool_arguments_count_too():
    call = {"name": "weather_forecast", "args": {"town": "苏州" * 50}, "id": "c1"}
    message = AIMessage("", tool_calls=[call])

    assert approximate_tokens(message) >= count_tokens_approximately([message]) + 75


async def events_of(model, messages, window, tools=(bnb_rooms,), strategy="tool_calling"):
    return [
        event
        async for event in run(model, list(tools), messages, strategy=get_strategy(strategy),
                               limits=RunLimits(max_iterations=4), context=window)
    ]  # fmt: skip


async def test_each_turn_s_request_stays_under_the_window_as_the_scratchpad_grows():
    _, prompt = prompt_for("tool_calling", long_conversation("tool_calling"))
    model = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[tool_call("bnb_rooms", {"town": "Suzhou"}, "call_a")]),
        AIMessage("", tool_calls=[tool_call("bnb_rooms", {"town": "Wuxi"}, "call_b")]),
        AIMessage("Canal House is the cheapest."),
    ])  # fmt: skip
    window = ContextWindow(max_tokens=4_096)

    events = await events_of(model, prompt, window)

    assert events[-1].status == RunStatus.SUCCEEDED
    schemas = tools_tokens([bnb_rooms])
    sizes = [sum(approximate_tokens(m) for m in sent) + schemas for sent in model.prompts]
    assert all(size <= window.budget for size in sizes), sizes
    kept = [sum(map(is_question, sent)) for sent in model.prompts]
    assert kept[0] > kept[1] > kept[2], "older exchanges make room for the scratchpad"
    for sent in model.prompts:
        assert isinstance(sent[0], SystemMessage) and sent[0].text == prompt[0].text
        assert any(m.text == "Which was the cheapest?" for m in sent)
        check_role_order(sent)


async def test_a_question_that_cannot_fit_ends_the_run_saying_so_without_calling_the_model():
    model = ScriptedChatModel(script=[])
    messages = [SystemMessage("system"), HumanMessage("word " * 20_000)]

    events = await events_of(model, messages, ContextWindow(max_tokens=8_192))

    assert not any(isinstance(e, ModelTurnStarted) for e in events)
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.status == RunStatus.FAILED
    assert "does not fit the model's context window" in finished.error
    assert "6,144 for them (8,192 tokens, 2,048 of them kept for the reply)" in finished.error
    assert model.prompts == []


@pytest.mark.parametrize("strategy", ["tool_calling", "react"])
async def test_a_tool_result_that_outgrows_the_window_ends_the_run_at_the_next_turn(strategy):
    if strategy == "tool_calling":
        first = AIMessage("", tool_calls=[tool_call("huge_page", {"url": "u"}, "call_1")])
    else:
        first = AIMessage('Thought: read it\nAction: huge_page\nAction Input: {"url": "u"}')
    model = ScriptedChatModel(script=[first])
    messages = [SystemMessage("system"), HumanMessage("Read the page.")]

    # The observation is clipped to 8,000 characters, about 2,000 tokens: over 1,536.
    events = await events_of(model, messages, ContextWindow(max_tokens=2_048),
                             tools=(huge_page,), strategy=strategy)  # fmt: skip

    assert len(model.prompts) == 1
    assert events[-1].status == RunStatus.FAILED and events[-1].iterations == 1
    assert "tokens" in events[-1].error


def test_counts_are_kept_per_message_object():
    calls = []

    def counter(message):
        calls.append(message)
        return 10

    window = ContextWindow(max_tokens=1_000, counter=counter)
    message = ToolMessage("r", tool_call_id="c")
    assert window.total([message, message]) == 20
    assert calls == [message]


@pytest.mark.parametrize(
    "message",
    [
        AIMessage("Hello there", name="helper"),
        AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": "二十"}, "call_1")]),
        AIMessage(
            "ok",
            tool_calls=[tool_call("echo", {"text": "x" * 37}, "c2")],
            additional_kwargs={"reasoning_content": "思考 a bit"},
        ),
        AIMessage([{"type": "text", "text": "blocks"}]),
        HumanMessage("What is 2+2? 你好"),
        HumanMessage("named", name="alice"),
        ToolMessage("1001", tool_call_id="call_1", name="add"),
        ToolMessage("", tool_call_id="call_123456789"),
        SystemMessage("You are careful."),
        SystemMessage("be brief", additional_kwargs={"__openai_role__": "developer"}),
    ],
)
def test_a_message_counts_what_count_tokens_approximately_and_the_extras_give(message):
    content = message.content if isinstance(message.content, str) else repr(message.content)
    calls = repr(message.tool_calls) if getattr(message, "tool_calls", None) else ""
    reasoning = message.additional_kwargs.get("reasoning_content", "")
    wide = sum(1 for ch in content + calls + reasoning if "\u4e00" <= ch <= "\u9fff")
    expected = count_tokens_approximately([message]) + -(-len(reasoning) // 4) + -(-wide * 3 // 4)
    assert approximate_tokens(message) == expected
