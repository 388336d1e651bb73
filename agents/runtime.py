"""The agent loop: ask the model, run the tool calls it asks for, repeat, yield events.

One loop for every strategy (:mod:`agents.strategies`: native tool calling, ReAct,
structured chat, XML), written as an async generator so a caller can stream every step.
Each iteration is a model turn (:mod:`agents.model_turn`) and then the tool calls it asked
for (:mod:`agents.tool_calls`). Tool failures and output that breaks the format are data
(an error observation the model sees on its next turn, and an error event); failures of
the loop itself raise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from agents.approvals import PolicyLookup, Resume, apply_policy, edited_note
from agents.context import ContextOverflow, ContextWindow, tools_tokens
from agents.events import (
    Event,
    ModelTurnStarted,
    RunFinished,
    RunPaused,
    RunStarted,
    RunStatus,
    ToolCallFinished,
)
from agents.history import fill_empty_replies
from agents.model_turn import ModelTurn
from agents.stopping import (
    BUDGET_ANSWERED,
    EARLY_STOPPING_METHODS,
    GENERATE_ASKED_FOR_TOOLS,
    GENERATE_EMPTY,
    GENERATE_FAILED,
    GENERATE_UNREADABLE,
    GENERATED_AT_LIMIT,
    RETURN_DIRECT_EMPTY,
    Budget,
    RepeatedFailures,
    RunClock,
    Trim,
    direct_answer,
    trimmed,
)
from agents.strategies import Strategy
from agents.strategies.base import IntermediateStep, TextStrategy
from agents.strategies.tool_calling import ToolCallingStrategy
from agents.timing import Deadline
from agents.tool_calls import TOOL_RUN_TIME_LIMIT, ToolCallBatch, ToolLimits, ToolTimer

# Why a run ended without an answer, stored on the run and shown to the user.
EMPTY_ANSWER = "The model returned neither text nor tool calls."
ITERATION_LIMIT = "Stopped after {limit} model turns without a final answer."


@dataclass(frozen=True)
class RunLimits:
    """Bounds on one run.

    ``max_iterations``: model turns before the run ends as ``max_iterations``;
    ``tool_timeout_s`` / ``model_timeout_s``: seconds one tool call / one model turn may
    take; ``max_observation_chars``: longest tool result the model sees (longer ones are
    clipped with a note; the full result stays on the event); ``max_result_chars``:
    longest result kept on the event, for storage (a tool that returns megabytes is
    clipped there too, with a note).

    LangChain's ``AgentExecutor`` options, by its names (:mod:`agents.stopping`):
    ``max_execution_time_s``: seconds of wall clock the whole run may take (None or 0:
    no limit), ending it as ``time_limit``; ``early_stopping_method``: ``"force"`` (end
    at ``max_iterations`` without an answer) or ``"generate"`` (one last model call
    without tools for a final answer); any other value raises ``ValueError``, as
    AgentExecutor's ``return_stopped_response`` does. ``max_repeated_failures``: the
    same failing call this many times in a row ends the run as ``repeated_failure``
    (0: never). ``trim_intermediate_steps``: the last N steps (or a callable's choice)
    in each turn's scratchpad (-1: all; :func:`agents.stopping.trimmed`). ``budget``:
    the run's tokens and cost limits (:class:`agents.stopping.Budget`), crossing one
    ends it as ``budget_exceeded``.
    """

    max_iterations: int = 15
    tool_timeout_s: float = 30.0
    model_timeout_s: float = 120.0
    max_observation_chars: int = 8_000
    max_result_chars: int = 1_000_000
    max_execution_time_s: float | None = None
    early_stopping_method: str = "force"
    max_repeated_failures: int = 3
    trim_intermediate_steps: Trim = -1
    budget: Budget = field(default_factory=Budget)

    def __post_init__(self) -> None:
        if self.early_stopping_method not in EARLY_STOPPING_METHODS:
            raise ValueError(
                "early_stopping_method should be one of 'force' or 'generate', "
                f"got {self.early_stopping_method!r}"
            )

    @property
    def tools(self) -> ToolLimits:
        """Return the bounds that apply to tool calls."""
        return ToolLimits(
            timeout_s=self.tool_timeout_s,
            max_observation_chars=self.max_observation_chars,
            max_result_chars=self.max_result_chars,
        )

    def tools_within(self, clock: RunClock) -> ToolLimits:
        """Return the bounds of the tool calls about to run: the time-out cut to what is
        left of the run's budget, with an observation that says so when it was."""
        timeout_s, capped = clock.cap(self.tool_timeout_s)
        if not capped:
            return self.tools
        return ToolLimits(
            timeout_s=timeout_s, max_observation_chars=self.max_observation_chars,
            max_result_chars=self.max_result_chars, timed_out=TOOL_RUN_TIME_LIMIT,
        )  # fmt: skip


def model_display_name(model: BaseChatModel) -> str:
    """Return a short name for ``model``: its ``model_name``/``model`` field or its type."""
    for attr in ("model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class _Bindings:
    """The model bound for each turn of one run: bound once for the first turn and once
    for all later ones (:meth:`agents.strategies.Strategy.bind`'s contract), not per turn.

    Binding converts every tool's schema (``ChatOpenAI.bind_tools`` calls
    ``convert_to_openai_tool`` per tool); doing it every turn made the run's cost per step
    grow with the tools offered (profiled with ``bench/loop.py --profile ours:200``).
    """

    def __init__(self, strategy: Strategy, model: BaseChatModel, tools: list[BaseTool]) -> None:
        self.strategy, self.model, self.tools = strategy, model, tools
        self._first: Runnable[LanguageModelInput, BaseMessage] | None = None
        self._later: Runnable[LanguageModelInput, BaseMessage] | None = None

    def for_turn(self, iteration: int) -> Runnable[LanguageModelInput, BaseMessage]:
        """Return the model bound for the ``iteration``-th turn (1-based)."""
        if iteration == 1:
            if self._first is None:
                self._first = self.strategy.bind(self.model, self.tools, iteration=1)
            return self._first
        if self._later is None:
            if self._first is not None and not self.strategy.first_turn_binds_apart:
                self._later = self._first
            else:
                self._later = self.strategy.bind(self.model, self.tools, iteration=iteration)
        return self._later


def _prompt_value(messages: list[BaseMessage]) -> ChatPromptValue:
    """Return ``messages`` as the prompt value a chat model turns any input into.

    Given a list, ``BaseChatModel`` validates it into a ``ChatPromptValue`` on every call
    (``convert_to_messages`` and pydantic's check of each message): work in proportion to
    the whole request, every turn, for messages the loop built itself and knows to be
    ``BaseMessage``s. A prompt value is taken as it is.
    """
    return ChatPromptValue.model_construct(messages=messages)


def _add_usage(total: dict[str, int], usage: dict | None) -> None:
    if not usage:
        return
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        value = usage.get(key)
        if isinstance(value, int):
            total[key] = total.get(key, 0) + value


async def run(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    *,
    strategy: Strategy | None = None,
    limits: RunLimits | None = None,
    context: ContextWindow | None = None,
    policy: PolicyLookup | None = None,
    resume: Resume | None = None,
) -> AsyncIterator[Event]:
    """Run the agent loop with ``strategy`` and yield :mod:`agents.events` as it goes.

    ``messages`` is the conversation (system message, earlier turns, the new question);
    it is not modified. ``strategy`` (default: native tool calling) builds the prompt from
    it, binds the model for each turn and parses each reply into tool calls or a final
    answer; see :mod:`agents.strategies`. Each turn the model is streamed with
    ``astream`` (every text piece is a :class:`TextDelta`; see
    :class:`agents.model_turn.ModelTurn`). The tool calls of one turn run concurrently
    (:class:`agents.tool_calls.ToolCallBatch`); each observation is paired with its call
    by ``tool_call_id`` and shown to the model in the next turn's scratchpad. Output that
    breaks the strategy's format, invalid arguments and unknown tools become error steps
    whose observation tells the model what to fix; such retries count as turns.

    With ``context`` (the model's window), each turn's request is fitted into it first
    (:meth:`agents.context.ContextWindow.fit`: the oldest earlier exchanges go first; the
    system message, the question and this run's scratchpad stay); when those alone do not
    fit, the run ends ``failed`` with a message saying how many tokens it needs and has.

    The last event is always a :class:`RunFinished`: ``succeeded`` (a non-empty final
    answer, or the result of a ``return_direct`` tool), ``failed`` (the model raised,
    timed out or answered with nothing, or the request outgrew the context window),
    ``max_iterations`` (with ``early_stopping_method="generate"``, with the answer of one
    last model call and a note saying so in ``error``), ``time_limit`` (the run's
    ``max_execution_time_s`` ran out), ``budget_exceeded`` (its tokens or their cost
    crossed ``limits.budget`` on a turn that gave no answer) or ``repeated_failure``
    (see :mod:`agents.stopping` for these controls and their LangChain sources).
    Cancelling the consumer's task cancels pending tool calls and propagates
    ``asyncio.CancelledError``.
    """
    limits = limits or RunLimits()
    strategy = strategy or ToolCallingStrategy()
    tool_list = list(tools)
    by_name = {tool.name: tool for tool in tool_list}
    direct = frozenset(tool.name for tool in tool_list if tool.return_direct)
    prompt = strategy.build_prompt(messages, tool_list)
    # The scratchpad only grows: each batch's steps are formatted (and, with a context
    # window, counted) once and appended, never rebuilt from all earlier steps.
    scratchpad: list[BaseMessage] = []
    scratchpad_tokens = 0
    usage_total: dict[str, int] = dict(resume.usage) if resume else {}
    # A native request carries the tools' schemas beside the messages; a text strategy
    # has them in its system message already.
    native = context is not None and not isinstance(strategy, TextStrategy)
    schemas = tools_tokens(tool_list) if native else 0
    bindings = _Bindings(strategy, model, tool_list)
    clock = RunClock(limits.max_execution_time_s, resume.spent_s if resume else 0.0)
    # Every step so far, kept only when each turn's scratchpad shows some of them.
    trim = limits.trim_intermediate_steps
    trimming = callable(trim) or trim > 0
    steps_so_far: list[IntermediateStep] = []
    repeats = RepeatedFailures(limits.max_repeated_failures)
    if resume is None:
        yield RunStarted(model=model_display_name(model), tools=tuple(by_name),
                         strategy=strategy.name)  # fmt: skip

    def ended(status: RunStatus, iterations: int, error: str = "", output: str = "") -> RunFinished:
        return RunFinished(status=status, output=output, iterations=iterations, error=error,
                           usage=usage_total)  # fmt: skip

    def after_batch(
        iteration: int, steps: Sequence[IntermediateStep], finished: dict[str, ToolCallFinished]
    ) -> RunFinished | None:
        """Return the run's end once a turn's calls are done, if it ends there: a
        ``return_direct`` answer, the same failing call again and again, or its time."""
        answer = direct_answer(steps, finished, direct)
        if answer is not None:
            name, result = answer
            if result.strip():
                return ended(RunStatus.SUCCEEDED, iteration, output=result)
            return ended(RunStatus.FAILED, iteration, RETURN_DIRECT_EMPTY.format(name=name))
        if repeats.tripped:
            return ended(RunStatus.REPEATED_FAILURE, iteration, repeats.reason())
        if clock.expired():
            return ended(RunStatus.TIME_LIMIT, iteration, clock.reason())
        return None

    # One timer for the run's lone tool calls and one for its model turns, each set
    # again only when it falls due.
    timer = ToolTimer()
    deadline = Deadline(limits.model_timeout_s)
    try:
        first = 1
        if resume is not None:
            first = resume.iteration + 1
            if clock.expired():
                yield ended(RunStatus.TIME_LIMIT, resume.iteration, clock.reason())
                return
            batch = ToolCallBatch(resume.to_run(), by_name, iteration=resume.iteration,
                                  limits=limits.tools_within(clock), timer=timer,
                                  notes=_edited_notes(resume))  # fmt: skip
            call_events = batch.run()
            try:
                async for event in call_events:
                    yield event
            finally:
                await call_events.aclose()
            turn = _resumed_turn(resume, batch)
            steps_so_far = [*resume.steps, *turn]
            repeats.feed_steps(steps_so_far)
            kept = trimmed(steps_so_far, trim)
            scratchpad = fill_empty_replies(strategy.format_scratchpad(kept))
            if context is not None:
                scratchpad_tokens = sum(map(context.counter, scratchpad))
            end = after_batch(resume.iteration, turn, batch.finished)
            if end is not None:
                yield end
                return
        for iteration in range(first, limits.max_iterations + 1):
            if clock.expired():
                yield ended(RunStatus.TIME_LIMIT, iteration - 1, clock.reason())
                return
            if context is None:
                history = [*prompt, *scratchpad]
            else:
                try:
                    history = context.fit(prompt, scratchpad, extra_tokens=schemas,
                                          scratchpad_tokens=scratchpad_tokens)  # fmt: skip
                except ContextOverflow as exc:
                    yield ended(RunStatus.FAILED, iteration - 1, str(exc))
                    return
            yield ModelTurnStarted(iteration=iteration)
            turn = ModelTurn(strategy, iteration=iteration, deadline=deadline,
                             timeout_s=clock.cap(limits.model_timeout_s)[0])  # fmt: skip
            # Closed as they are left (aclose, as contextlib.aclosing would, without its
            # object and two coroutines a turn), not when the garbage collector finds
            # them: a cancelled run's pending tool calls are cancelled before its end is
            # recorded.
            turn_events = turn.stream(bindings.for_turn(iteration), _prompt_value(history))
            try:
                async for event in turn_events:
                    yield event
            finally:
                await turn_events.aclose()
            _add_usage(usage_total, turn.usage)
            if turn.failure:
                if clock.expired():  # cut short by the run's budget, not the model's own
                    yield ended(RunStatus.TIME_LIMIT, iteration, clock.reason())
                else:
                    yield ended(RunStatus.FAILED, iteration, turn.failure)
                return
            over = limits.budget.crossed(usage_total)
            answered = turn.finish is not None and bool(turn.answer.strip())
            if over and not answered:
                # Spent: no more tool calls or turns.
                yield ended(RunStatus.BUDGET_EXCEEDED, iteration, over)
                return
            if turn.finish is not None:
                if not answered:
                    yield ended(RunStatus.FAILED, iteration, EMPTY_ANSWER)
                else:
                    # The turn that crossed the budget answered: its tokens are spent
                    # either way, so the answer stands, with a note that says so.
                    note = BUDGET_ANSWERED.format(why=over) if over else ""
                    yield ended(RunStatus.SUCCEEDED, iteration, note, output=turn.answer)
                return
            if clock.expired():
                yield ended(RunStatus.TIME_LIMIT, iteration, clock.reason())
                return
            # A held call is shown at once, in its place; the turn's other calls run meanwhile.
            actions, held = apply_policy(turn.actions, policy, by_name)
            batch = ToolCallBatch(actions, by_name, iteration=iteration, held=held,
                                  limits=limits.tools_within(clock), timer=timer)  # fmt: skip
            call_events = batch.run()
            try:
                async for event in call_events:
                    yield event
            finally:
                await call_events.aclose()
            if batch.held:
                # The loop ends here; the run goes on from the stored steps once every
                # held call is decided (agents.approvals.Resume).
                pending = tuple(action.tool_call_id for action in batch.held)
                yield RunPaused(iterations=iteration, pending=pending, usage=usage_total)
                return
            pairs = batch.intermediate_steps()  # in the order the model asked
            if trimming:
                steps_so_far.extend(pairs)
                kept = trimmed(steps_so_far, trim)
                scratchpad = fill_empty_replies(strategy.format_scratchpad(kept))
                if context is not None:
                    scratchpad_tokens = sum(map(context.counter, scratchpad))
            else:
                new = fill_empty_replies(strategy.format_scratchpad(pairs))
                scratchpad.extend(new)
                if context is not None:
                    # Counted once here and kept as a sum: fit() never counts the
                    # scratchpad again, so the window's per-message cache would only
                    # hold them.
                    scratchpad_tokens += sum(map(context.counter, new))
            finished = batch.finished
            repeats.feed((a.tool_input, finished[a.tool_call_id]) for a, _ in pairs)
            end = after_batch(iteration, pairs, finished)
            if end is not None:
                yield end
                return

        limit = limits.max_iterations
        if limits.early_stopping_method == "force":
            yield ended(RunStatus.MAX_ITERATIONS, limit, ITERATION_LIMIT.format(limit=limit))
            return
        # "generate": one last model call without tools, asked for the answer.
        request = _final_request(scratchpad, strategy.final_answer_request())
        if context is None:
            history = [*prompt, *request]
        else:
            try:
                tokens = scratchpad_tokens + sum(map(context.counter, request[-1:]))
                history = context.fit(prompt, request, scratchpad_tokens=tokens)
            except ContextOverflow as exc:
                why = GENERATE_FAILED.format(limit=limit, why=str(exc))
                yield ended(RunStatus.MAX_ITERATIONS, limit, why)
                return
        iteration = limit + 1
        yield ModelTurnStarted(iteration=iteration)
        turn = ModelTurn(strategy, iteration=iteration, deadline=deadline,
                         timeout_s=clock.cap(limits.model_timeout_s)[0])  # fmt: skip
        turn_events = turn.stream(strategy.bind_final(model, tool_list), _prompt_value(history))
        try:
            async for event in turn_events:
                yield event
        finally:
            await turn_events.aclose()
        _add_usage(usage_total, turn.usage)
        if turn.finish is not None and turn.answer.strip():
            error = GENERATED_AT_LIMIT.format(limit=limit)
            yield ended(RunStatus.MAX_ITERATIONS, iteration, error, output=turn.answer)
            return
        if turn.failure:
            why = turn.failure
        elif turn.finish is not None:
            why = GENERATE_EMPTY
        elif all(action.error for action in turn.actions):
            why = GENERATE_UNREADABLE
        else:
            why = GENERATE_ASKED_FOR_TOOLS
        yield ended(
            RunStatus.MAX_ITERATIONS, iteration, GENERATE_FAILED.format(limit=limit, why=why)
        )
    finally:
        timer.close()
        deadline.cancel()


def _edited_notes(resume: Resume) -> dict[str, str]:
    """Return the note put before the observation of each held call a person approved
    with other arguments, by ``tool_call_id``."""
    return {
        call_id: edited_note(decision.args)
        for call_id, decision in resume.decisions.items()
        if decision.approved and decision.args is not None
    }


def _resumed_turn(resume: Resume, batch: ToolCallBatch) -> list[IntermediateStep]:
    """Return the paused turn's ``(action, observation)`` pairs with the held calls'
    placeholders replaced by what they gave (a call run with a person's arguments has
    a note saying so before its result: :func:`_edited_notes`)."""
    turn: list[IntermediateStep] = []
    for action, observation in resume.turn:
        if action.tool_call_id in resume.decisions:
            observation = batch.observations[action.tool_call_id]
        turn.append((action, observation))
    return turn


def _final_request(scratchpad: list[BaseMessage], text: str) -> list[BaseMessage]:
    """Return ``scratchpad`` with ``text`` asked of the model after it.

    Appended to the last message when that is a user message already (a text strategy's
    observation), so the roles still alternate for servers that require it (vLLM and
    Mistral chat templates); a new user message otherwise (after native ToolMessages).
    """
    if scratchpad and isinstance(scratchpad[-1], HumanMessage):
        last = scratchpad[-1]
        if isinstance(last.content, str):
            joined = last.model_copy(update={"content": f"{last.content}\n\n{text}"})
            return [*scratchpad[:-1], joined]
    return [*scratchpad, HumanMessage(text)]
