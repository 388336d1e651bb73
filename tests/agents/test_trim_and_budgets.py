"""AgentExecutor's trim_intermediate_steps, and budgets of tokens and cost per run, in the
one loop under every strategy, with a scripted model."""

from __future__ import annotations

from decimal import Decimal

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from agents.events import RunFinished, RunStatus, ToolCallStarted
from agents.history import check_role_order
from agents.runtime import RunLimits
from agents.stopping import BUDGET_COST, Budget, trimmed
from tests.agents.test_executor_options import STRATEGIES, answer, call, collect
from tests.fakes import ScriptedChatModel, tool_call


def sums(*pairs) -> list[AIMessage]:
    return [call("tool_calling", "add", {"a": a, "b": b}, f"c{n}") for n, (a, b) in
            enumerate(pairs)]  # fmt: skip


def with_usage(message: AIMessage, tokens: int) -> AIMessage:
    message.usage_metadata = {"input_tokens": tokens - 10, "output_tokens": 10,
                              "total_tokens": tokens}  # fmt: skip
    return message


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_only_the_last_n_steps_go_back_to_the_model(strategy):
    script = [call(strategy, "add", {"a": n, "b": 1000}, f"c{n}") for n in range(1, 5)]
    model = ScriptedChatModel(script=[*script, answer(strategy, "done")])
    events = await collect(model, strategy, trim_intermediate_steps=2)
    assert events[-1].status == RunStatus.SUCCEEDED
    last = "\n".join(str(m.content) for m in model.prompts[-1])
    assert "1003" in last and "1004" in last  # the last two results
    assert "1001" not in last and "1002" not in last  # the first two were trimmed
    first = "\n".join(str(m.content) for m in model.prompts[2])
    assert "1001" in first and "1002" in first  # not trimmed while there were only two
    if strategy == "tool_calling":
        check_role_order(model.prompts[-1])


async def test_a_turns_parallel_calls_are_kept_together_and_a_callable_decides_its_own():
    turn = AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 1}, "p1"),
                                     tool_call("add", {"a": 2, "b": 2}, "p2"),
                                     tool_call("add", {"a": 3, "b": 3}, "p3")])  # fmt: skip
    later = call("tool_calling", "add", {"a": 4, "b": 4}, "p4")
    model = ScriptedChatModel(script=[turn, later, answer("tool_calling", "ok")])
    await collect(model, "tool_calling", trim_intermediate_steps=2)
    request = model.prompts[-1]
    check_role_order(request)  # no call without its result
    ids = [m.tool_call_id for m in request if isinstance(m, ToolMessage)]
    assert ids == ["p1", "p2", "p3", "p4"]  # "last 2" reached into the parallel turn

    seen: list[int] = []

    def keep_last(steps):
        seen.append(len(steps))
        return steps[-1:]

    model = ScriptedChatModel(script=[*sums((1, 1), (2, 2)), answer("tool_calling", "ok")])
    await collect(model, "tool_calling", trim_intermediate_steps=keep_last)
    assert seen == [1, 2]
    assert [m.tool_call_id for m in model.prompts[-1] if isinstance(m, ToolMessage)] == ["c1"]


def test_trimmed_keeps_everything_for_zero_or_less_and_short_lists():
    steps = [(object(), "a"), (object(), "b")]
    assert trimmed(steps, -1) == steps and trimmed(steps, 0) == steps
    assert trimmed(steps, 5) == steps


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_crossing_the_token_budget_ends_the_run_before_its_calls_run(strategy):
    model = ScriptedChatModel(script=[
        with_usage(call(strategy, "add", {"a": 1, "b": 2}, "c1"), 60),
        with_usage(call(strategy, "add", {"a": 3, "b": 4}, "c2"), 60),
        answer(strategy, "never reached"),
    ])  # fmt: skip
    events = await collect(model, strategy, budget=Budget(max_tokens=100))
    end = events[-1]
    assert isinstance(end, RunFinished) and end.status == RunStatus.BUDGET_EXCEEDED
    assert "120 tokens" in end.error and "budget of 100" in end.error
    assert end.iterations == 2 and end.usage["total_tokens"] == 120
    # The second turn's call did not run: the budget was spent when it was asked for.
    started = [e.args for e in events if isinstance(e, ToolCallStarted)]
    assert started == [{"a": 1, "b": 2}]


async def test_an_answer_that_crosses_the_budget_is_kept():
    model = ScriptedChatModel(script=[with_usage(answer("tool_calling", "Sunny."), 500)])
    events = await collect(model, "tool_calling", budget=Budget(max_tokens=100))
    assert events[-1].status == RunStatus.SUCCEEDED and events[-1].output == "Sunny."
    assert events[-1].error.startswith("The run crossed its budget in the model turn that")
    assert "500 tokens" in events[-1].error


async def test_the_cost_budget_prices_the_runs_usage_and_an_unpriced_model_is_not_limited():
    def price(usage):  # $1 per thousand tokens in, $2 out
        return Decimal(usage["input_tokens"]) / 1000 + Decimal(usage["output_tokens"]) * 2 / 1000

    script = [with_usage(call("tool_calling", "add", {"a": 1, "b": 2}, "c1"), 400),
              with_usage(call("tool_calling", "add", {"a": 1, "b": 3}, "c2"), 400),
              answer("tool_calling", "done")]  # fmt: skip
    budget = Budget(max_cost=Decimal("0.5"), cost=price, currency="USD")
    events = await collect(ScriptedChatModel(script=list(script)), "tool_calling", budget=budget)
    assert events[-1].status == RunStatus.BUDGET_EXCEEDED
    assert events[-1].error == BUDGET_COST.format(used="0.82", limit="0.5", currency="USD")
    tiny = Budget(max_cost=Decimal("1E-7"), cost=price, currency="USD")
    events = await collect(ScriptedChatModel(script=list(script)), "tool_calling", budget=tiny)
    assert "budget of 0.0000001 USD" in events[-1].error
    unpriced = Budget(max_cost=Decimal("0.5"), cost=lambda usage: None, currency="")
    events = await collect(ScriptedChatModel(script=list(script)), "tool_calling",
                           budget=unpriced)  # fmt: skip
    assert events[-1].status == RunStatus.SUCCEEDED


async def test_a_server_that_reports_no_usage_is_not_limited():
    model = ScriptedChatModel(script=[*sums((1, 1)), answer("tool_calling", "ok")])
    events = await collect(model, "tool_calling", budget=Budget(max_tokens=1))
    assert events[-1].status == RunStatus.SUCCEEDED


def test_limits_default_to_no_budget_and_no_trim():
    limits = RunLimits()
    assert limits.budget.crossed({"total_tokens": 10**9}) == ""
    assert limits.trim_intermediate_steps == -1
