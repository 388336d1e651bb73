"""The agent loop: ask the model, run the tool calls it asks for, repeat, yield events.

One loop for every strategy (:mod:`agents.strategies`: native tool calling, ReAct,
structured chat, XML), written as an async generator so a caller can stream every step.
Each iteration is a model turn (:mod:`agents.model_turn`) and then the tool calls it asked
for (:mod:`agents.tool_calls`). Tool failures and output that breaks the format are data
(an error observation the model sees on its next turn, and an error event); failures of
the loop itself raise.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

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
from agents.tool_calls import TOOL_RUN_TIME_LIMIT, ToolCallBatch, ToolLimits

# Why a run ended without an answer, stored on the run and shown to the user.
EMPTY_ANSWER = "The model returned neither text nor tool calls."
ITERATION_LIMIT = "Stopped after {limit} model turns without a final answer."

E = TypeVar("E")


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
    for all later ones (:meth:`agents.strategies.Strategy.bind`'s contract), not per turn,
    since binding converts every tool's schema (``ChatOpenAI.bind_tools``)."""

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


def run(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    messages: Sequence[BaseMessage],
    *,
    strategy: Strategy | None = None,
    limits: RunLimits | None = None,
    context: ContextWindow | None = None,
    policy: PolicyLookup | None = None,
    resume: Resume | None = None,
) -> AsyncGenerator[Event, None]:
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
    With ``policy``, calls whose tool asks for a person's approval are held and the run
    pauses (:class:`RunPaused`); ``resume`` goes on from such a pause
    (:class:`agents.approvals.Resume`).

    The last event is always a :class:`RunFinished` (or a :class:`RunPaused`):
    ``succeeded`` (a non-empty final answer, or the result of a ``return_direct`` tool),
    ``failed`` (the model raised, timed out or answered with nothing, or the request
    outgrew the context window), ``max_iterations`` (with
    ``early_stopping_method="generate"``, with the answer of one last model call and a
    note saying so in ``error``), ``time_limit`` (the run's ``max_execution_time_s`` ran
    out), ``budget_exceeded`` (its tokens or their cost crossed ``limits.budget`` on a
    turn that gave no answer) or ``repeated_failure`` (see :mod:`agents.stopping` for
    these controls and their LangChain sources). Cancelling the consumer's task cancels
    pending tool calls and propagates ``asyncio.CancelledError``; closing the generator
    (``aclose``) cancels them too.
    """
    return _Loop(model, tools, messages, strategy=strategy or ToolCallingStrategy(),
                 limits=limits or RunLimits(), context=context, policy=policy,
                 resume=resume).events()  # fmt: skip


class _Loop:
    """One run of :func:`run`: its state, and its phases as methods.

    The phases (the calls a resumed run was paused on, a model turn, the turn's tool
    calls, the answer at the limit) are async generators of their events; each leaves
    what it found on the loop (``turn``, the scratchpad) and, when the run ends there,
    its last event on ``end``. :meth:`events` takes them in turn until one ends the run,
    as LangChain's ``AgentExecutor._acall`` takes ``_atake_next_step`` until it returns
    an ``AgentFinish``.
    """

    def __init__(self, model: BaseChatModel, tools: Sequence[BaseTool],
                 messages: Sequence[BaseMessage], *, strategy: Strategy, limits: RunLimits,
                 context: ContextWindow | None, policy: PolicyLookup | None,
                 resume: Resume | None) -> None:  # fmt: skip
        self.model, self.strategy, self.limits = model, strategy, limits
        self.context, self.policy, self.resume = context, policy, resume
        self.tools = list(tools)
        self.by_name = {tool.name: tool for tool in self.tools}
        self.direct = frozenset(tool.name for tool in self.tools if tool.return_direct)
        self.prompt = strategy.build_prompt(messages, self.tools)
        self.bindings = _Bindings(strategy, model, self.tools)
        # A native request carries the tools' schemas beside the messages; a text strategy
        # has them in its system message already.
        native = context is not None and not isinstance(strategy, TextStrategy)
        self.schemas_tokens = tools_tokens(self.tools) if native else 0
        self.clock = RunClock(limits.max_execution_time_s, resume.spent_s if resume else 0.0)
        self.usage: dict[str, int] = dict(resume.usage) if resume else {}
        self.repeats = RepeatedFailures(limits.max_repeated_failures)
        # The scratchpad only grows: each batch's steps are formatted (and, with a context
        # window, counted) once and appended, never rebuilt from all earlier steps...
        self.scratchpad: list[BaseMessage] = []
        self.scratchpad_tokens = 0
        # ...unless each turn's scratchpad shows only some of the steps so far.
        self.trim = limits.trim_intermediate_steps
        self.trimming = callable(self.trim) or self.trim > 0
        self.steps: list[IntermediateStep] = []
        self.turn: ModelTurn | None = None
        self.end: RunFinished | RunPaused | None = None
        self._open: list[AsyncGenerator[Event, None]] = []

    async def events(self) -> AsyncGenerator[Event, None]:
        """Yield the run's events, phase by phase, ending with its :attr:`end`."""
        try:
            if self.resume is None:
                yield RunStarted(model=model_display_name(self.model), tools=tuple(self.by_name),
                                 strategy=self.strategy.name)  # fmt: skip
            for phase in self._phases():
                async for event in self._relay(phase):
                    yield event
                if self.end is not None:
                    yield self.end
                    return
        finally:
            await self._close()

    def _phases(self) -> Iterator[AsyncGenerator[Event, None]]:
        """Yield the run's phases in order, each made once the one before it has run."""
        first = 1
        if self.resume is not None:
            yield self._resumed_calls(self.resume)
            first = self.resume.iteration + 1
        for iteration in range(first, self.limits.max_iterations + 1):
            yield self._model_turn(iteration)
            yield self._tool_batch(iteration)
        yield self._answer_at_limit()

    def _relay(self, events: AsyncGenerator[E, None]) -> AsyncGenerator[E, None]:
        """Return ``events`` to relay with ``async for``, kept for :meth:`_close` until
        they end."""
        opened = self._open
        while opened and opened[-1].ag_frame is None:  # ended: nothing left to close
            opened.pop()
        opened.append(events)  # type: ignore[arg-type]
        return events

    async def _close(self) -> None:
        """Close the streams still open (the run was left at one of their events),
        innermost first: a stopped run's pending tool calls are cancelled before its end
        is recorded, not when the garbage collector finds them."""
        while self._open:
            await self._open.pop().aclose()

    async def _resumed_calls(self, resume: Resume) -> AsyncGenerator[Event, None]:
        """Run the paused turn's decided calls and rebuild the scratchpad from the stored
        steps with their results (:class:`agents.approvals.Resume`)."""
        if self.clock.expired():
            self.end = self._ended(RunStatus.TIME_LIMIT, resume.iteration, self.clock.reason())
            return
        batch = ToolCallBatch(resume.to_run(), self.by_name, iteration=resume.iteration,
                              limits=self.limits.tools_within(self.clock),
                              notes=_edited_notes(resume))  # fmt: skip
        async for event in self._relay(batch.run()):
            yield event
        turn = _resumed_turn(resume, batch)
        self.steps = [*resume.steps, *turn]
        self.repeats.feed_steps(self.steps)
        self._rebuild_scratchpad(trimmed(self.steps, self.trim))
        self.end = self._batch_end(resume.iteration, turn, batch.finished)

    async def _model_turn(self, iteration: int) -> AsyncGenerator[Event, None]:
        """Ask the model for the ``iteration``-th turn and leave it on :attr:`turn`."""
        if self.clock.expired():
            self.end = self._ended(RunStatus.TIME_LIMIT, iteration - 1, self.clock.reason())
            return
        try:
            history = self._fitted(self.scratchpad, extra_tokens=self.schemas_tokens)
        except ContextOverflow as exc:
            self.end = self._ended(RunStatus.FAILED, iteration - 1, str(exc))
            return
        yield ModelTurnStarted(iteration=iteration)
        turn = self.turn = self._new_turn(iteration)
        bound = self.bindings.for_turn(iteration)
        async for event in self._relay(turn.stream(bound, _prompt_value(history))):
            yield event
        _add_usage(self.usage, turn.usage)
        self.end = self._turn_end(turn, iteration)

    def _turn_end(self, turn: ModelTurn, iteration: int) -> RunFinished | None:
        """Return the run's end after a model turn, if it ends there: the model failed,
        answered (or answered nothing), crossed the budget, or the run's time ran out."""
        if turn.failure:
            if self.clock.expired():  # cut short by the run's budget, not the model's own
                return self._ended(RunStatus.TIME_LIMIT, iteration, self.clock.reason())
            return self._ended(RunStatus.FAILED, iteration, turn.failure)
        over = self.limits.budget.crossed(self.usage)
        answered = turn.finish is not None and bool(turn.answer.strip())
        if over and not answered:  # spent: no more tool calls or turns
            return self._ended(RunStatus.BUDGET_EXCEEDED, iteration, over)
        if turn.finish is not None:
            if not answered:
                return self._ended(RunStatus.FAILED, iteration, EMPTY_ANSWER)
            # The turn that crossed the budget answered: its tokens are spent either way,
            # so the answer stands, with a note that says so.
            note = BUDGET_ANSWERED.format(why=over) if over else ""
            return self._ended(RunStatus.SUCCEEDED, iteration, note, output=turn.answer)
        if self.clock.expired():
            return self._ended(RunStatus.TIME_LIMIT, iteration, self.clock.reason())
        return None

    async def _tool_batch(self, iteration: int) -> AsyncGenerator[Event, None]:
        """Run the tool calls :attr:`turn` asked for and add their steps to the scratchpad;
        pause the run when some wait for a person's decision."""
        assert self.turn is not None
        # A held call is shown at once, in its place; the turn's other calls run meanwhile.
        actions, held = apply_policy(self.turn.actions, self.policy, self.by_name)
        batch = ToolCallBatch(actions, self.by_name, iteration=iteration, held=held,
                              limits=self.limits.tools_within(self.clock))  # fmt: skip
        async for event in self._relay(batch.run()):
            yield event
        if batch.held:
            # The loop ends here; the run goes on from the stored steps once every held
            # call is decided (agents.approvals.Resume).
            pending = tuple(action.tool_call_id for action in batch.held)
            self.end = RunPaused(iterations=iteration, pending=pending, usage=self.usage)
            return
        pairs = batch.intermediate_steps()  # in the order the model asked
        self._add_steps(pairs)
        finished = batch.finished
        self.repeats.feed((a.tool_input, finished[a.tool_call_id]) for a, _ in pairs)
        self.end = self._batch_end(iteration, pairs, finished)

    def _batch_end(self, iteration: int, steps: Sequence[IntermediateStep],
                   finished: dict[str, ToolCallFinished]) -> RunFinished | None:  # fmt: skip
        """Return the run's end once a turn's calls are done, if it ends there: a
        ``return_direct`` answer, the same failing call again and again, or its time."""
        answer = direct_answer(steps, finished, self.direct)
        if answer is not None:
            name, result = answer
            if result.strip():
                return self._ended(RunStatus.SUCCEEDED, iteration, output=result)
            return self._ended(RunStatus.FAILED, iteration,
                               RETURN_DIRECT_EMPTY.format(name=name))  # fmt: skip
        if self.repeats.tripped:
            return self._ended(RunStatus.REPEATED_FAILURE, iteration, self.repeats.reason())
        if self.clock.expired():
            return self._ended(RunStatus.TIME_LIMIT, iteration, self.clock.reason())
        return None

    async def _answer_at_limit(self) -> AsyncGenerator[Event, None]:
        """End the run at ``max_iterations``: at once (``force``), or after one last model
        call without tools, asked for the answer (``generate``)."""
        limit = self.limits.max_iterations
        if self.limits.early_stopping_method == "force":
            self.end = self._ended(RunStatus.MAX_ITERATIONS, limit,
                                   ITERATION_LIMIT.format(limit=limit))  # fmt: skip
            return
        request = _final_request(self.scratchpad, self.strategy.final_answer_request())
        try:
            history = self._fitted(request, added=request[-1:])
        except ContextOverflow as exc:
            why = GENERATE_FAILED.format(limit=limit, why=str(exc))
            self.end = self._ended(RunStatus.MAX_ITERATIONS, limit, why)
            return
        iteration = limit + 1
        yield ModelTurnStarted(iteration=iteration)
        turn = self._new_turn(iteration)
        bound = self.strategy.bind_final(self.model, self.tools)
        async for event in self._relay(turn.stream(bound, _prompt_value(history))):
            yield event
        _add_usage(self.usage, turn.usage)
        if turn.finish is not None and turn.answer.strip():
            error = GENERATED_AT_LIMIT.format(limit=limit)
            self.end = self._ended(RunStatus.MAX_ITERATIONS, iteration, error, output=turn.answer)
            return
        if turn.failure:
            why = turn.failure
        elif turn.finish is not None:
            why = GENERATE_EMPTY
        elif all(action.error for action in turn.actions):
            why = GENERATE_UNREADABLE
        else:
            why = GENERATE_ASKED_FOR_TOOLS
        self.end = self._ended(RunStatus.MAX_ITERATIONS, iteration,
                               GENERATE_FAILED.format(limit=limit, why=why))  # fmt: skip

    def _new_turn(self, iteration: int) -> ModelTurn:
        """Return the ``iteration``-th model turn, its time-out cut to what is left of the
        run's own."""
        return ModelTurn(self.strategy, iteration=iteration,
                         timeout_s=self.clock.cap(self.limits.model_timeout_s)[0])  # fmt: skip

    def _fitted(self, scratchpad: list[BaseMessage], *, extra_tokens: int = 0,
                added: Sequence[BaseMessage] = ()) -> list[BaseMessage]:  # fmt: skip
        """Return the request of a turn: the prompt and ``scratchpad``, fitted into the
        context window when there is one (``added``: messages of ``scratchpad`` not
        counted in :attr:`scratchpad_tokens`); raise ``ContextOverflow`` when they cannot
        fit."""
        context = self.context
        if context is None:
            return [*self.prompt, *scratchpad]
        tokens = self.scratchpad_tokens + sum(map(context.counter, added))
        return context.fit(self.prompt, scratchpad, extra_tokens=extra_tokens,
                           scratchpad_tokens=tokens)  # fmt: skip

    def _add_steps(self, pairs: list[IntermediateStep]) -> None:
        """Add a batch's ``(action, observation)`` pairs to the scratchpad."""
        if self.trimming:
            self.steps.extend(pairs)
            self._rebuild_scratchpad(trimmed(self.steps, self.trim))
            return
        new = fill_empty_replies(self.strategy.format_scratchpad(pairs))
        self.scratchpad.extend(new)
        if self.context is not None:
            # Counted once here and kept as a sum: fit() never counts the scratchpad
            # again, so the window's per-message cache would only hold them.
            self.scratchpad_tokens += sum(map(self.context.counter, new))

    def _rebuild_scratchpad(self, steps: list[IntermediateStep]) -> None:
        """Make the scratchpad (and its token count) anew from ``steps``."""
        self.scratchpad = fill_empty_replies(self.strategy.format_scratchpad(steps))
        if self.context is not None:
            self.scratchpad_tokens = sum(map(self.context.counter, self.scratchpad))

    def _ended(self, status: RunStatus, iterations: int, error: str = "",
               output: str = "") -> RunFinished:  # fmt: skip
        return RunFinished(status=status, output=output, iterations=iterations, error=error,
                           usage=self.usage)  # fmt: skip


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
