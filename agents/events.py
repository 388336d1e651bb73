"""Typed events the runtime yields while a run goes on.

One run yields, in order: :class:`RunStarted`; per iteration a :class:`ModelTurnStarted`,
any number of :class:`ReasoningDelta` and :class:`TextDelta` (interleaved as the model
streams them; reasoning usually first), a :class:`ModelTurnFinished`, then for each tool call a
:class:`ToolCallStarted` and (in completion order, parallel calls interleave) a
:class:`ToolCallFinished`; finally exactly one :class:`RunFinished`, or, when calls wait
for a person's approval, an :class:`ApprovalRequested` per held call and a
:class:`RunPaused` (the run goes on later, :mod:`agents.approvals`). Times are UTC
``datetime`` values, durations are milliseconds.

The events that end a step (:class:`ModelTurnFinished`, :class:`ToolCallFinished`) carry
the step's start and finish as measured where its work happened (:mod:`agents.timing`):
``started_at`` and ``at``, with ``at - started_at`` exactly ``duration_ms``. The ``at``
of the other events is when the event was made.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


class RunStatus(enum.StrEnum):
    """How a run ended (or that it has not yet)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    MAX_ITERATIONS = "max_iterations"
    INTERRUPTED = "interrupted"
    TIME_LIMIT = "time_limit"
    """The run's wall-clock budget (``RunLimits.max_execution_time_s``) ran out."""
    REPEATED_FAILURE = "repeated_failure"
    """The model made the same failing tool call (same tool, arguments and error) several
    times in a row (``RunLimits.max_repeated_failures``)."""
    BUDGET_EXCEEDED = "budget_exceeded"
    """The run's tokens or their cost crossed its budget (``RunLimits.budget``: its
    ``max_tokens`` and ``max_cost``, :class:`agents.stopping.Budget`)."""
    WAITING = "waiting"
    """Paused: a tool call waits for a person's approval (:mod:`agents.approvals`). Not
    an end: the run goes on (as ``running``) once every held call is decided."""


class StepStatus(enum.StrEnum):
    """The outcome of one step (model turn or tool call).

    ``success`` and ``error`` are ``ToolMessage.status``'s values (langchain-core).
    """

    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    PENDING = "pending"
    """A tool call held for a person's approval (:mod:`agents.approvals`); not run yet."""


TEXT_TOOL_CALL = "TextToolCall"
"""``error_type`` of a reply that wrote a tool call into its text as markup
(``<tool_call>{...}</tool_call>``...) where a tool call through the API was expected."""

INVALID_TOOL_NAME = "InvalidToolName"
"""``error_type`` of a native call with no name, or a name strict servers refuse
(:func:`agents.strategies.base.usable_tool_name`): it never runs nor goes back to the
server."""

FORMAT_ERROR_TYPES = frozenset(
    {"OutputParserException", "InvalidToolCall", TEXT_TOOL_CALL, INVALID_TOOL_NAME}
)
"""``error_type`` values of a tool call that never ran: the model's output broke the
strategy's format (LangChain's ``OutputParserException``), a native call's arguments
were not JSON (an ``InvalidToolCall``), a native call had no usable name
(:data:`INVALID_TOOL_NAME`), or a native reply wrote its tool call into the
text (:data:`TEXT_TOOL_CALL`). Every other error type is a tool that ran and
failed, or a model call that failed; a tool's own exception of one of these names is
recorded with its module (``langchain_core.exceptions.OutputParserException``)."""


def is_format_error(error_type: str) -> bool:
    """Return True if ``error_type`` marks a format error (see :data:`FORMAT_ERROR_TYPES`)."""
    return error_type in FORMAT_ERROR_TYPES


@dataclass(frozen=True)
class RunStarted:
    """The run began: ``model`` is the model's display name, ``tools`` the tool names,
    ``strategy`` the name of the strategy (``tool_calling``, ``react``...)."""

    model: str
    tools: tuple[str, ...]
    strategy: str = "tool_calling"
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class ModelTurnStarted:
    """The model is being asked, for the ``iteration``-th time (1-based)."""

    iteration: int
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class TextDelta:
    """A piece of the model's streamed text in this iteration."""

    iteration: int
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's streamed reasoning ("thinking") in this iteration.

    Reasoning is never the answer and never parsed for actions. It comes from a
    ``reasoning_content`` field, reasoning content blocks or inline ``<think>`` markup
    (:mod:`agents.reasoning`). With ``moved``, ``text`` is everything this turn streamed
    so far as :class:`TextDelta`: a closing ``</think>`` without an opening one (the
    chat template opened it in the prompt) showed it was reasoning; a consumer moves it
    from the turn's text to its reasoning.
    """

    iteration: int
    text: str
    moved: bool = False


@dataclass(frozen=True)
class ModelTurnFinished:
    """The model's turn is complete.

    ``tool_calls`` are LangChain ``ToolCall`` dicts (``{"name", "args", "id"}``), parsed
    from the text for the text strategies; ``invalid_tool_calls`` are calls that cannot run
    (arguments that are not JSON, output that broke the format), each with an ``error``;
    ``final_answer`` is the answer when this turn ended the run (for a text strategy, the
    part of ``text`` after ``Final Answer:`` or the like), else empty; ``usage`` is the
    model's ``usage_metadata`` (``input_tokens``, ``output_tokens``, ``total_tokens``,
    per response: the per-key maximum over its chunks, never their sum) or None when the
    provider does not report it; ``text`` is the reply without its reasoning, which is in
    ``reasoning`` ("" for none); ``raw`` is the message as JSON-ready data;
    ``error`` is set when the model call itself failed (the run then fails too).

    ``started_at`` is when the model was asked and ``at`` when its reply ended (None
    only from a producer that did not measure; ``at`` is then when the event was made);
    ``first_token_ms`` is the time to the first chunk that carried text, reasoning or a
    tool call, from ``started_at`` (None when none came).
    """

    iteration: int
    text: str
    tool_calls: tuple[dict[str, Any], ...]
    invalid_tool_calls: tuple[dict[str, Any], ...]
    usage: dict[str, Any] | None
    duration_ms: int
    raw: dict[str, Any]
    error: str = ""
    error_type: str = ""
    final_answer: str = ""
    reasoning: str = ""
    at: datetime = field(default_factory=utcnow)
    started_at: datetime | None = None
    first_token_ms: int | None = None


@dataclass(frozen=True)
class ToolCallStarted:
    """A tool call is about to run (or, for an invalid call, to be reported).

    ``args`` is the arguments object, or text (a text strategy's input for a one-argument
    tool, or arguments that did not parse); ``log`` is the model text the call was parsed
    from (text strategies; empty for native calls).
    """

    iteration: int
    tool_call_id: str
    name: str
    args: dict[str, Any] | str
    log: str = ""
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class ToolCallFinished:
    """A tool call ended.

    ``result`` is the full result text (JSON for structured output) on success, or the
    error observation on failure; ``observation`` is the ToolMessage content the model is
    given (clipped at ``max_observation_chars``, after a note when a person edited the
    arguments), stored as the audit's record of what it saw; ``error`` is
    ``"ExceptionClass: message"`` when it failed and ``error_type`` that class's name
    (``ValidationError``, ``TimeoutError``, ``UnknownTool``...; a format error's is in
    :data:`FORMAT_ERROR_TYPES`: no tool ran). ``started_at`` and ``at`` are when the tool
    was invoked and when it returned (for a call that never ran, both are when it was
    reported; None only from a producer that did not measure).

    ``result`` and ``observation`` are always text, never empty and never base64 (see
    :mod:`agents.tool_output`). ``blocks``: the tool's content blocks when any was more
    than text (an image, a file), JSON-safe dicts in the tool's order, as langchain-core
    and OpenAI shape them (``{"type": "text", "text"}``, ``{"type": "image", "base64",
    "mime_type"}``, ``{"type": "image_url", "image_url": {"url"}}``...), an inline payload
    over :data:`agents.tool_output.MAX_BLOCK_DATA_CHARS` characters replaced by a text
    block with a note; empty otherwise (the text says it all). ``artifact``: what a
    ``response_format="content_and_artifact"`` tool (or a ToolMessage it returned) kept
    beside its content, JSON-safe (anything else as ``str``; a note over
    :data:`agents.tool_output.MAX_ARTIFACT_CHARS` characters of JSON); None for none.
    Neither is sent to the model.
    """

    iteration: int
    tool_call_id: str
    name: str
    status: StepStatus
    result: str
    observation: str
    error: str
    duration_ms: int
    error_type: str = ""
    at: datetime = field(default_factory=utcnow)
    started_at: datetime | None = None
    blocks: tuple[dict[str, Any], ...] = ()
    artifact: Any = None

    @property
    def is_format_error(self) -> bool:
        """Return True if no tool ran: the model's output did not parse."""
        return is_format_error(self.error_type)


@dataclass(frozen=True)
class ApprovalRequested:
    """A tool call is held until a person approves, edits or denies it (its tool's
    policy is ``ask``, :mod:`agents.approvals`); fields as :class:`ToolCallStarted`'s.

    On resume the call is reported like any other: a :class:`ToolCallStarted` (with the
    arguments it runs with) and a :class:`ToolCallFinished`, or only the latter's error
    for a call that was denied or expired.
    """

    iteration: int
    tool_call_id: str
    name: str
    args: dict[str, Any] | str
    log: str = ""
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class RunPaused:
    """The run waits for decisions on ``pending`` (``tool_call_id``s of the
    ``iterations``-th turn) and its loop has returned; ``usage`` is its token counts so
    far. It goes on with :class:`agents.approvals.Resume`."""

    iterations: int
    pending: tuple[str, ...]
    usage: dict[str, int] = field(default_factory=dict)
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class RunFinished:
    """The run ended with ``status``; ``output`` is the final answer text (may be empty),
    ``iterations`` the model turns it took, ``error`` why it ended without an answer (or
    a note beside one), ``usage`` its token counts in all (``input_tokens``,
    ``output_tokens``, ``total_tokens``)."""

    status: RunStatus
    output: str
    iterations: int
    error: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    at: datetime = field(default_factory=utcnow)


Event = (
    RunStarted
    | ModelTurnStarted
    | ReasoningDelta
    | TextDelta
    | ModelTurnFinished
    | ToolCallStarted
    | ToolCallFinished
    | ApprovalRequested
    | RunPaused
    | RunFinished
)
