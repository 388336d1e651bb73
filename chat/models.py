"""Rows for conversations and the audit trail of every agent run and step.

A step's row is inserted when the step starts and updated with its outcome, as
healthchecks' ``Channel.notify`` does with a ``Notification``; the raw payload (JSON) sits
beside the tidy columns, as in simonw/llm's log; durations are milliseconds and times are
UTC.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ObjectDoesNotExist
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from agents.approvals import Outcome, ToolPolicy
from agents.events import RunStatus as RunStatusEnum
from agents.events import StepStatus as StepStatusEnum
from agents.events import is_format_error
from agents.providers import ProviderEntry, find_provider
from chat.pricing import ConversationUsage


class UnicodeJSONEncoder(json.JSONEncoder):
    """Write JSON with non-ASCII text as it is, so "苏州" stays searchable in the column.

    Django's JSONField stores ``json.dumps`` output, which escapes it (``\\u82cf``) by
    default; on SQLite a LIKE search for the Chinese text would then miss it.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["ensure_ascii"] = False
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


class Strategy(models.TextChoices):
    """How the model asks for tools; mirrors :data:`agents.strategies.STRATEGIES`."""

    TOOL_CALLING = "tool_calling", "Native tool calling"
    REACT = "react", "ReAct (text)"
    STRUCTURED_CHAT = "structured_chat", "Structured chat (JSON)"
    XML = "xml", "XML tags"


TOOL_CHOICE_AUTO = "auto"
TOOL_CHOICE_REQUIRED = "required"


class RunStatus(models.TextChoices):
    """How a run ended; mirrors :class:`agents.events.RunStatus`."""

    RUNNING = RunStatusEnum.RUNNING.value, "Running"
    SUCCEEDED = RunStatusEnum.SUCCEEDED.value, "Succeeded"
    FAILED = RunStatusEnum.FAILED.value, "Failed"
    CANCELLED = RunStatusEnum.CANCELLED.value, "Cancelled"
    MAX_ITERATIONS = RunStatusEnum.MAX_ITERATIONS.value, "Model turn limit reached"
    INTERRUPTED = RunStatusEnum.INTERRUPTED.value, "Interrupted"
    TIME_LIMIT = RunStatusEnum.TIME_LIMIT.value, "Time limit reached"
    REPEATED_FAILURE = RunStatusEnum.REPEATED_FAILURE.value, "Stopped: same call kept failing"
    BUDGET_EXCEEDED = RunStatusEnum.BUDGET_EXCEEDED.value, "Budget reached"
    WAITING = RunStatusEnum.WAITING.value, "Waiting for approval"


class StepStatus(models.TextChoices):
    """The outcome of a step; mirrors :class:`agents.events.StepStatus` (whose values are
    ``ToolMessage.status``'s)."""

    RUNNING = StepStatusEnum.RUNNING.value, "Running"
    SUCCESS = StepStatusEnum.SUCCESS.value, "Success"
    ERROR = StepStatusEnum.ERROR.value, "Error"
    PENDING = StepStatusEnum.PENDING.value, "Waiting for approval"


class StepKind(models.TextChoices):
    """A step is either one model turn or one tool call."""

    MODEL_TURN = "model_turn", "Model turn"
    TOOL_CALL = "tool_call", "Tool call"


class TitleSource(models.TextChoices):
    """Who made a conversation's title: only one made from the question may be replaced
    by the model's (chat/titles.py); one its owner gave never is."""

    QUESTION = "question", "Made from the first question"
    MODEL = "model", "Made by the model"
    OWNER = "owner", "Given by its owner"


class Conversation(models.Model):
    """A chat, owned by a logged-in user or, for a visitor, by one browser's guest key.

    The guest key is a random token kept in the visitor's session data; it survives the
    session key change at login, when the visitor's chats move to the user.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="conversations",
    )
    guest_key = models.CharField(max_length=64, blank=True, db_index=True)
    title = models.CharField(max_length=200, blank=True)
    title_source = models.CharField(
        max_length=16, choices=TitleSource.choices, default=TitleSource.QUESTION
    )
    strategy = models.CharField(
        max_length=32, choices=Strategy.choices, default=Strategy.TOOL_CALLING
    )
    # Native tool calling only: "auto", "required" or a tool's name (first turn only).
    tool_choice = models.CharField(max_length=200, default=TOOL_CHOICE_AUTO)
    parallel_tool_calls = models.BooleanField(default=True)
    # The configured model its runs use, by key ("default": AGENT_PROVIDER's model; the
    # others come from AGENT_MODELS_FILE, see project/agent_models.py). Fixed once it has
    # a message, unless that model is no longer configured (docs/models.md).
    model_key = models.CharField(max_length=32, default="default")
    # The agent its runs use, by name (settings.AGENT_DEFINITIONS, AGENTS_FILE); blank: the
    # default agent. Fixed once it has a message (docs/agents.md).
    agent_key = models.CharField(max_length=32, blank=True, default="", verbose_name="agent")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Set when its owner deletes it from their list: the page, the list and the socket no
    # longer show it, but its runs are evidence and stay for audit until purge_runs.
    hidden_at = models.DateTimeField(null=True, blank=True, verbose_name="deleted by its owner at")
    # The branch the page shows: the newest question of it (a leaf of the message tree, see
    # Message.parent). Null: the newest question of the conversation.
    current_message = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
    )  # fmt: skip
    # A fork: the question (of another conversation) this one continues after; its path up
    # to there is this conversation's history before its first question.
    forked_from = models.ForeignKey(
        "Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks",
    )  # fmt: skip

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="conv_owner_updated")]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"

    @property
    def uses_native_tool_calls(self) -> bool:
        """Return True for native tool calling, whose options (``tool_choice``...) apply."""
        return self.strategy == Strategy.TOOL_CALLING

    @property
    def settings_label(self) -> str:
        """Return the strategy and the native options that differ from the defaults.

        ``"Native tool calling · tool_choice required · one call per turn"``, as the badge
        of a conversation whose settings are fixed shows them; the text strategies have no
        such options.
        """
        parts = [self.get_strategy_display()]
        if self.uses_native_tool_calls and self.tool_choice != TOOL_CHOICE_AUTO:
            parts.append(f"tool_choice {self.tool_choice}")
        if self.uses_native_tool_calls and not self.parallel_tool_calls:
            parts.append("one call per turn")
        return " · ".join(parts)


class Message(models.Model):
    """One chat message; an assistant message points at the run that wrote it.

    A conversation's user messages form a tree (ChatGPT's ``parent`` / ``current_node``
    shape): each question's ``parent`` is the question before it on its branch, null for
    the first (or, for a fork's first, the question of the source conversation it
    continues after). Retry, regenerate and edit add a sibling; nothing is deleted.
    """

    class Role(models.TextChoices):
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField()
    run = models.ForeignKey(
        "AgentRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    # The id the sending page gave the frame (chat.frames.MessageFrame.client_id): a copy
    # sent again after a reconnect is acknowledged, not stored twice (chat.store.queue).
    client_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "client_id"], condition=~models.Q(client_id=""),
                name="message_client_id_once",
            ),
        ]  # fmt: skip
        # The admin's search of questions (chat.admin_search), on PostgreSQL only (0024).
        indexes = [
            GinIndex(fields=["content"], opclasses=["gin_trgm_ops"], name="message_content_trgm")
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class AgentSnapshot(models.Model):
    """What an agent gave the model for a run, stored once per distinct content.

    ``content`` (:func:`chat.agents.snapshot_content`): the agent's name and label, the
    system prompt as sent (with a text strategy's tool instructions), each tool's name,
    description, argument schema and where it came from, the MCP servers used (never a
    secret) and the limits the run ran under. ``digest`` is the SHA-256 of its canonical
    JSON: runs given the same share a row, and a changed configuration makes a new one, so
    an old run keeps saying what it was given.
    """

    digest = models.CharField(max_length=64, unique=True)
    content = models.JSONField(encoder=UnicodeJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.content.get('agent', {}).get('name', '?')} {self.digest[:12]}"


class BranchKind(models.TextChoices):
    """Why a run is another take of an earlier one (``AgentRun.branched_from``)."""

    RETRY = "retry", "Retry of a failed run"
    REGENERATE = "regenerate", "Regenerated answer"
    EDIT = "edit", "Edited question"


class AgentRun(models.Model):
    """One agent run: a user message in, steps, then a final status and output."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    user_message = models.OneToOneField(
        Message, on_delete=models.CASCADE, related_name="triggered_run"
    )
    strategy = models.CharField(max_length=32, choices=Strategy.choices)
    # The conversation's native tool-calling options when the run started (blank / None
    # for the text strategies, which make one call per turn and have no tool_choice).
    tool_choice = models.CharField(max_length=200, blank=True)
    parallel_tool_calls = models.BooleanField(null=True, blank=True)
    # The agent it ran as (its name in AGENTS_FILE when it started) and what that agent
    # gave the model: the system prompt as sent, the tools' schemas, the MCP servers and
    # the limits (AgentSnapshot, shared by every run given the same). None: not recorded
    # (a run from before agents were definitions, or one that failed before it had tools).
    agent_key = models.CharField(max_length=32, blank=True, default="", db_index=True,
                                 verbose_name="agent")  # fmt: skip
    snapshot = models.ForeignKey(
        "AgentSnapshot", null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    provider = models.CharField(max_length=32)
    model_name = models.CharField(max_length=200)
    # Where the model was reached: the base URL's host[:port] (never its user info, path
    # or query), the provider's default host without one, blank for the offline demo.
    endpoint = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(
        max_length=20, choices=RunStatus.choices, default=RunStatus.RUNNING, db_index=True
    )
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Waiting for a person's approval (agents.approvals): since when, and the total ms the
    # run has waited (not counted towards AGENT_MAX_EXECUTION_TIME_S).
    paused_at = models.DateTimeField(null=True, blank=True)
    waited_ms = models.PositiveIntegerField(default=0)
    # Updated by the process running the run; a stale heartbeat means that process died.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Set when someone presses Stop; the process running the run cancels it (at once when
    # the request reaches its owner_channel, else at its next heartbeat).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The channel-layer name of the run owner (chat.owner) of the process running it, the
    # last to start or resume it: where a Stop is sent.
    owner_channel = models.CharField(max_length=200, blank=True, default="",
                                     verbose_name="run owner's channel")  # fmt: skip
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    iterations = models.PositiveIntegerField(default=0)
    # Counted when the run ends, so lists and filters need no per-row query: tool calls
    # that ran, those of them that failed, and format errors (calls that never ran).
    tool_call_count = models.PositiveIntegerField(default=0)
    tool_error_count = models.PositiveIntegerField(default=0, db_index=True)
    format_error_count = models.PositiveIntegerField(default=0)
    output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    # What the tokens cost at the model's price when the run ended (chat/pricing.py);
    # None when the tokens or the price were unknown then.
    cost = models.DecimalField(max_digits=20, decimal_places=10, null=True, blank=True)
    cost_currency = models.CharField(max_length=3, blank=True, default="")
    # Another take of an earlier run of the same place in the conversation (retry,
    # regenerate, edit-and-rerun): the earlier run stays, as evidence and as a branch.
    branched_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="branches"
    )
    branch_kind = models.CharField(max_length=16, choices=BranchKind.choices, blank=True)
    # The configured model it ran with, by key, when a regenerate picked another than its
    # conversation's (which stays as it was); blank: its conversation's model_key.
    model_key = models.CharField(max_length=32, blank=True, default="",
                                 verbose_name="model key")  # fmt: skip

    # Set by chat.store.usage when a run ends: its conversation's summed usage, which the
    # page's header is sent again (chat.fragments.run_ended). Not a column.
    conversation_usage: ConversationUsage | None = None

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["conversation", "started_at"], name="run_conv_started"),
            models.Index(fields=["strategy", "started_at"], name="run_strategy_started"),
            models.Index(fields=["model_name", "started_at"], name="run_model_started"),
            # The admin's search (chat.admin_search), on PostgreSQL only (migration 0024).
            GinIndex(fields=["output"], opclasses=["gin_trgm_ops"], name="run_output_trgm"),
        ]
        permissions = [
            ("view_unredacted_trace", "Can see runs' stored text where exports redact it")
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"

    @property
    def is_running(self) -> bool:
        """Return True while the run has not ended."""
        return self.status == RunStatus.RUNNING

    @property
    def uses_native_tool_calls(self) -> bool:
        """Return True for a run of native tool calling (ToolMessages, ``tool_choice``)."""
        return self.strategy == Strategy.TOOL_CALLING

    @property
    def provider_entry(self) -> ProviderEntry | None:
        """Return the registry entry of the run's provider; None if it is no longer registered."""
        return find_provider(self.provider)

    @property
    def provider_label(self) -> str:
        """Return the run's provider for people, even one no longer registered."""
        entry = self.provider_entry
        if entry is not None:
            return entry.label
        if not self.provider:  # its conversation's model was no longer configured
            return "no configured model"
        return f"{self.provider}, no longer registered"

    @property
    def usage_estimated(self) -> bool:
        """Return True when the run's token counts are its model's estimate, not a count.

        A provider no longer registered cannot say: its counts are shown as stored.
        """
        entry = self.provider_entry
        return entry is not None and entry.usage_estimated

    @property
    def usage_so_far(self) -> dict[str, int]:
        """Return the stored token counts as a runtime usage dict (counts not None only):
        what a resumed run had used before its pause."""
        counts = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                  "total_tokens": self.total_tokens}  # fmt: skip
        return {key: value for key, value in counts.items() if value is not None}

    @property
    def is_waiting(self) -> bool:
        """Return True while a tool call of the run waits for a person's approval."""
        return self.status == RunStatus.WAITING

    @property
    def has_tool_errors(self) -> bool:
        """Return True for a run that succeeded although some of its tool calls failed."""
        return self.status == RunStatus.SUCCEEDED and self.tool_error_count > 0

    @property
    def answered_by_tool(self) -> str:
        """Return the name of the ``return_direct`` tool whose result is the run's answer,
        or "" (from its loaded steps when prefetched).

        Such a run succeeded with that call's result as its output, and no model turn
        came after its turn's calls: no model turn holds the answer, so the page shows
        the output itself.
        """
        if self.status != RunStatus.SUCCEEDED or not self.output:
            return ""
        for step in reversed(list(self.steps.all())):
            if not step.is_tool_call:
                return ""
            if step.status == StepStatus.SUCCESS and step.result == self.output:
                return step.tool_name
        return ""

    @property
    def model_turns(self) -> list[AgentStep]:
        """Return the run's model turns in order (from its loaded steps when prefetched)."""
        return [step for step in self.steps.all() if step.is_model_turn]


class AgentStep(models.Model):
    """One step of a run: a model turn, or a tool call that turn asked for.

    Tool calls share their model turn's ``iteration``. For a model turn, ``text`` is what
    the model wrote (streamed), ``result`` its final answer when the turn ended the run
    (for a text strategy, the part after ``Final Answer:`` or the like) and ``raw`` the
    whole AIMessage. For a tool call, ``arguments`` is the call's JSON arguments (a string
    when the model sent text or unparseable arguments), ``result`` what the call gave
    (ToolMessage content up to ``AGENT_MAX_RESULT_CHARS``, or the error: always text,
    images as notes), ``result_blocks`` the content blocks when any was an image or a
    file, ``artifact`` what a ``content_and_artifact`` tool kept beside its content,
    ``observation`` what the model was given as the call's ToolMessage content (clipped at
    the run's ``max_observation_chars``, a person's edit noted; None: not recorded, for
    rows stored before it was kept and calls the run's end closed), and ``text`` the log:
    the model text a text strategy parsed the call from. A failed step has ``error``
    (``"ExceptionClass: message"``) and ``error_type`` (the class's name; empty for a step
    the run's end closed); see :data:`agents.events.FORMAT_ERROR_TYPES`.
    """

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="steps")
    ordinal = models.PositiveIntegerField()
    iteration = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=StepKind.choices)
    status = models.CharField(
        max_length=16, choices=StepStatus.choices, default=StepStatus.RUNNING, db_index=True
    )
    tool_name = models.CharField(max_length=200, blank=True, db_index=True)
    tool_call_id = models.CharField(max_length=200, blank=True, db_index=True)
    arguments = models.JSONField(null=True, blank=True, encoder=UnicodeJSONEncoder)
    result = models.TextField(blank=True)
    # A tool call's content blocks when any was more than text (an image, a file), and a
    # content_and_artifact tool's artifact: JSON-safe, capped (agents.tool_output), never
    # sent to the model; null for none.
    result_blocks = models.JSONField(null=True, blank=True, encoder=UnicodeJSONEncoder)
    artifact = models.JSONField(null=True, blank=True, encoder=UnicodeJSONEncoder)
    # What the model was given for a tool call (its ToolMessage content): None when not
    # recorded, never guessed from today's settings.
    observation = models.TextField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_type = models.CharField(max_length=100, blank=True, default="", db_index=True)
    text = models.TextField(blank=True)
    # A model turn's reasoning ("thinking"), never its answer.
    reasoning = models.TextField(blank=True, default="")
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    raw = models.JSONField(default=dict, blank=True, encoder=UnicodeJSONEncoder)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # A model turn's time to first token: ms from asking the model to the first chunk
    # with text, reasoning or a tool call (agents.model_turn); null when none came.
    first_token_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["run", "ordinal"], name="step_unique_ordinal")
        ]
        # The admin's search (chat.admin_search), on PostgreSQL only (migration 0024,
        # which also indexes arguments::text: an expression with an operator class needs
        # django.contrib.postgres installed); tool_call_id's b-trees answer an id or its
        # beginning.
        indexes = [
            GinIndex(fields=["result"], opclasses=["gin_trgm_ops"], name="step_result_trgm"),
            GinIndex(fields=["tool_name"], opclasses=["gin_trgm_ops"], name="step_tool_name_trgm"),
        ]

    def __str__(self) -> str:
        label = self.tool_name if self.kind == StepKind.TOOL_CALL else "model turn"
        return f"Step {self.ordinal} of run {self.run_id}: {label}"

    @property
    def is_model_turn(self) -> bool:
        """Return True for a model turn (else it is a tool call)."""
        return self.kind == StepKind.MODEL_TURN

    @property
    def is_tool_call(self) -> bool:
        """Return True for a tool call (else it is a model turn)."""
        return self.kind == StepKind.TOOL_CALL

    @property
    def is_running(self) -> bool:
        """Return True while the step has no outcome yet."""
        return self.status == StepStatus.RUNNING

    @property
    def is_error(self) -> bool:
        """Return True for a step that failed (its ``error`` says how)."""
        return self.status == StepStatus.ERROR

    @property
    def is_pending(self) -> bool:
        """Return True for a tool call held for a person's approval (not run yet)."""
        return self.status == StepStatus.PENDING

    @property
    def held(self) -> Approval | None:
        """Return the approval this tool call waited for, or None if it was not held
        (loaded with the step by every loader of cards: no query)."""
        try:
            return self.approval  # type: ignore[attr-defined]
        except ObjectDoesNotExist:
            return None

    @property
    def is_answer(self) -> bool:
        """Return True for a model turn that gave the run's final answer (in ``result``)."""
        return self.is_model_turn and self.status == StepStatus.SUCCESS and bool(self.result)

    @property
    def is_unfinished(self) -> bool:
        """Return True for a tool call the run's end closed (stopped, interrupted, failed).

        It has no result: the tool never answered and the model was sent nothing.
        """
        return self.is_tool_call and self.is_error and not self.result and not self.is_format_error

    @property
    def is_format_error(self) -> bool:
        """Return True for a tool call that never ran: the model's output did not parse."""
        return self.is_tool_call and is_format_error(self.error_type)

    @property
    def is_partial_answer(self) -> bool:
        """Return True for a native model turn whose reply Stop cut off mid-stream.

        Its run was cancelled while it streamed: the run's end closed it (an error with no
        type) with the text it had. A text strategy's partial reply is not known to be an
        answer, so it keeps its format's look.
        """
        return (
            self.is_model_turn
            and self.is_error
            and not self.error_type
            and bool(self.text)
            and self.run.status == RunStatus.CANCELLED
            and self.run.uses_native_tool_calls
        )


class ModelPrice(models.Model):
    """What a model's tokens cost: per million input and output tokens, in a currency.

    Edited in the admin. ``model_pattern`` is a model name (``gpt-4o-mini``) or a glob
    (``gpt-4o-mini*``, ``qwen*``); ``provider`` blank applies to any provider. When
    several match a run, the most specific wins (:func:`chat.pricing.price_for`). A run's
    cost is fixed when it ends: a price changed later applies to later runs.
    """

    provider = models.CharField(
        max_length=32, blank=True, help_text="A registered provider's name, or blank for any."
    )
    model_pattern = models.CharField(
        max_length=200,
        help_text="The model name as runs record it, or a pattern with * (gpt-4o-mini*).",
    )
    input_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(0)],
        help_text="Price of one million input tokens.",
    )  # fmt: skip
    output_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, validators=[MinValueValidator(0)],
        help_text="Price of one million output tokens.",
    )  # fmt: skip
    currency = models.CharField(
        max_length=3, default="USD", validators=[RegexValidator(r"^[A-Z]{3}\Z")],
        help_text="ISO 4217 code in capitals: USD, EUR, CNY.",
    )  # fmt: skip
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model_pattern"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "model_pattern"], name="price_unique_model")
        ]

    def __str__(self) -> str:
        return f"{self.provider or 'any provider'}: {self.model_pattern}"


class ToolPolicyChoice(models.TextChoices):
    """A tool's approval policy; mirrors :class:`agents.approvals.ToolPolicy`."""

    ALLOW = ToolPolicy.ALLOW.value, "Allow: runs at once"
    ASK = ToolPolicy.ASK.value, "Ask: a person approves each call"
    DENY = ToolPolicy.DENY.value, "Deny: never runs"


class ToolApprovalPolicy(models.Model):
    """A tool's approval policy as staff set it in the admin.

    It overrides ``AGENT_TOOL_POLICIES`` for that tool; a tool with neither is ``allow``
    (:func:`chat.approvals.policy_lookup`). Read when a run starts or resumes.
    """

    tool_name = models.CharField(max_length=200, unique=True)
    policy = models.CharField(max_length=8, choices=ToolPolicyChoice.choices)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip

    class Meta:
        ordering = ["tool_name"]
        verbose_name = "tool approval policy"
        verbose_name_plural = "tool approval policies"

    def __str__(self) -> str:
        return f"{self.tool_name}: {self.policy}"


class ToolGrant(models.Model):
    """ "Always allow this tool in this chat": calls to ``tool_name`` in ``conversation``
    run without asking, whatever its policy says (but not a ``deny``)."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="tool_grants"
    )
    tool_name = models.CharField(max_length=200)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    granted_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "tool_name"], name="grant_unique_tool")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} allowed in conversation {self.conversation_id}"


class ApprovalOutcome(models.TextChoices):
    """Where a held call's approval stands; mirrors :class:`agents.approvals.Outcome`."""

    PENDING = "pending", "Waiting"
    APPROVED = Outcome.APPROVED.value, "Approved"
    DENIED = Outcome.DENIED.value, "Denied"
    EXPIRED = Outcome.EXPIRED.value, "Expired (denied)"
    CANCELLED = Outcome.CANCELLED.value, "Cancelled (run stopped)"


class Approval(models.Model):
    """A tool call held for a person's decision, and the decision: evidence for audit.

    ``arguments`` are the call's as the model asked; ``edited_arguments`` those it ran
    with when the person changed them (null: unchanged). ``decided_by`` is null for an
    expiry, a stop, or a user since deleted; ``decided_by_name`` keeps who it was.
    ``always_allowed``: the person also allowed the tool for the rest of the chat
    (:class:`ToolGrant`). Times are UTC; ``expires_at`` is null when approvals never
    expire (``AGENT_APPROVAL_TIMEOUT_S`` 0).
    """

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="approvals")
    step = models.OneToOneField(AgentStep, on_delete=models.CASCADE, related_name="approval")
    tool_name = models.CharField(max_length=200)
    tool_call_id = models.CharField(max_length=200, blank=True)
    arguments = models.JSONField(null=True, blank=True, encoder=UnicodeJSONEncoder)
    edited_arguments = models.JSONField(null=True, blank=True, encoder=UnicodeJSONEncoder)
    requested_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    outcome = models.CharField(
        max_length=16, choices=ApprovalOutcome.choices, default=ApprovalOutcome.PENDING,
        db_index=True,
    )  # fmt: skip
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    always_allowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["-requested_at", "-id"]
        permissions = [
            ("decide_approval", "Can decide tool calls waiting for approval in any conversation")
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} in run {self.run_id}: {self.get_outcome_display()}"

    @property
    def is_pending(self) -> bool:
        """Return True while nobody (and no expiry or stop) has decided."""
        return self.outcome == ApprovalOutcome.PENDING


class QueuedMessage(models.Model):
    """A message sent while its conversation's run was going, waiting in the database.

    The run owner sends the oldest when the run ends (chat.owner), in whichever process,
    with or without a page open; until then its owner sees it and may remove it. It is
    not evidence yet: removing it deletes the row, and sending it turns it into a Message.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="queued_messages"
    )
    content = models.TextField()
    created_at = models.DateTimeField()
    # The page's id for the frame that sent it, carried to the Message it becomes.
    client_id = models.CharField(max_length=64, blank=True, default="")
    # When its owner asked for it to go next ("Stop and send now"): the latest such
    # request goes first (chat.store.queue.QUEUE_ORDER).
    steered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "client_id"], condition=~models.Q(client_id=""),
                name="queued_client_id_once",
            ),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"queued: {self.content[:60]}"


class FeedbackRating(models.TextChoices):
    """A person's verdict on an answer: thumbs up or down."""

    UP = "up", "Thumbs up"
    DOWN = "down", "Thumbs down"


class Feedback(models.Model):
    """The conversation owner's verdict on one run's answer, with an optional comment.

    One row per run, changed in place: ``created_at`` is when it was first given,
    ``updated_at`` its latest change. ``given_by`` is null for a guest or a user since
    deleted; ``given_by_name`` keeps who it was (a username, or ``(guest)``). Exported
    with the run (CSV, JSONL) and to telemetry as the GenAI semantic conventions'
    ``gen_ai.evaluation.result`` event.
    """

    COMMENT_MAX_CHARS = 2000

    run = models.OneToOneField(AgentRun, on_delete=models.CASCADE, related_name="feedback")
    rating = models.CharField(max_length=8, choices=FeedbackRating.choices, db_index=True)
    comment = models.TextField(blank=True)
    given_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    given_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-updated_at", "-id"]
        verbose_name_plural = "feedback"

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on run {self.run_id}"
