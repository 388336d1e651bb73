"""What people read of a run or a step: badges, headings, previews, token and cost labels.

A presenter wraps one row and reads only its columns and loaded relations (a step's
``run`` and ``approval``), never the database and never today's settings for a fact about
the row: what the model was sent is the step's stored ``observation``. The chat's cards,
the admin's run page and the CSV use these; templates get one through the ``presented``
filter (:mod:`chat.templatetags.chat_tags`). The rows' meaning (status, kind, outcome)
stays in :mod:`chat.models`.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from agents.approvals import (
    APPROVAL_CANCELLED,
    APPROVAL_EXPIRED,
    DENIED_BY_PERSON,
    DENIED_BY_POLICY,
    Outcome,
)
from agents.timing import whole_ms
from chat.display import (
    ARGUMENTS_PREVIEW_CHARS,
    RESULT_CLIP_LINES,
    RESULT_LINE_CHARS,
    arguments_json,
    clip_note,
    clipped_line,
    pretty_json,
    previewed,
)
from chat.media import MediaShown, media_shown
from chat.models import AgentRun
from chat.pricing import TOKENS_UNKNOWN, cost_label

if TYPE_CHECKING:
    from chat.models import AgentStep

# The badge of a call that did not run because of its tool's policy or a person.
REFUSED_BADGES = {
    DENIED_BY_PERSON: "denied",
    APPROVAL_EXPIRED: "expired",
    DENIED_BY_POLICY: "not allowed",
    APPROVAL_CANCELLED: "not run",
}

# What a result heading adds when the model read less than is stored, and when even the
# stored result is cut (the tool returned more than AGENT_MAX_RESULT_CHARS).
SENT_CLIPPED = ": the model was sent the first {seen:,} of {stored:,} characters"
STORED_CLIPPED = (
    ": the tool returned {returned:,} characters, the first {stored:,} are stored and the "
    "model was sent the first {seen:,}"
)
STORED_CLIPPED_SEEN_UNKNOWN = (
    ": the tool returned {returned:,} characters, the first {stored:,} are stored"
)
OBSERVATION_NOT_RECORDED = (
    "What the model was sent is not recorded: this step was stored before it was kept."
)


BRANCH_LABELS = {
    "retry": "Retry of run {run}",
    "regenerate": "Regenerated from run {run}",
    "edit": "Edited question of run {run}",
}


class RunPresenter:
    """What an ``AgentRun`` shows: its tokens, cost and status badge."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run

    @property
    def tokens_label(self) -> str:
        """Return the run's token total as its status line shows it.

        ``"≈412 tokens (estimated)"`` when the model estimated them, else ``"412 tokens"``;
        ``"tokens unknown"`` when the provider reported none (never 0).
        """
        run = self.run
        if run.total_tokens is None:
            return TOKENS_UNKNOWN
        if run.usage_estimated:
            return f"≈{run.total_tokens:,} tokens (estimated)"
        return f"{run.total_tokens:,} tokens"

    @property
    def branch_label(self) -> str:
        """Return which run this one is another take of, or ``""``: "Regenerated from
        run 12", "Retry of run 12", "Edited question of run 12" (docs/branches.md)."""
        run = self.run
        if not run.branch_kind or run.branched_from_id is None:
            return ""
        return BRANCH_LABELS.get(run.branch_kind, "Another take of run {run}").format(
            run=run.branched_from_id
        )

    @property
    def tokens_split(self) -> str:
        """Return ``"300 in · 112 out"``, or ``""`` when either count is unknown."""
        run = self.run
        if run.input_tokens is None or run.output_tokens is None:
            return ""
        return f"{run.input_tokens:,} in · {run.output_tokens:,} out"

    @property
    def cost_label(self) -> str:
        """Return the run's cost (``"$0.0123"``, ``"≈$0.0123"`` estimated, ``"no price"``).

        ``""`` when its tokens are unknown; see :func:`chat.pricing.cost_label`.
        """
        return cost_label(self.run)

    @property
    def status_label(self) -> str:
        """Return the status as its badge reads: ``"Succeeded · 2 tool errors"`` or the
        status's own label."""
        run = self.run
        label = run.get_status_display()
        if run.has_tool_errors:
            count = run.tool_error_count
            return f"{label} · {count} tool error{'s' if count > 1 else ''}"
        return label


class StepPresenter:
    """What an ``AgentStep`` shows: its card's class, headings, previews and result text.

    Computed values are kept per presenter: a card reads the pretty result for its view
    and for the raw/pretty toggle.
    """

    def __init__(self, step: AgentStep) -> None:
        self.step = step

    @property
    def tokens_label(self) -> str:
        """Return a model turn's tokens: ``"120 in · 30 out"`` (``≈`` in front when its
        model estimates them), or ``"tokens unknown"``."""
        step = self.step
        estimated = step.run.usage_estimated
        if step.input_tokens is None or step.output_tokens is None:
            if step.total_tokens is not None:
                return f"{'≈' if estimated else ''}{step.total_tokens:,} tokens"
            return TOKENS_UNKNOWN
        shown = f"{step.input_tokens:,} in · {step.output_tokens:,} out"
        return f"≈{shown}" if estimated else shown

    @property
    def text_is_markdown(self) -> bool:
        """Return True when a model turn's text is prose (native calls), not a text
        strategy's format (Thought:, JSON blob, tags), which is shown as written."""
        return self.step.run.uses_native_tool_calls

    @property
    def outcome_class(self) -> str:
        """Return the CSS class that sets the step's card apart.

        A model turn is the ``answer`` (``answer partial`` when Stop cut it off) or
        ``thinking`` on the way; a tool call that never ran is a ``parse-error``, one its
        run's end closed ``unfinished``.
        """
        step = self.step
        if step.is_model_turn:
            if step.is_partial_answer:
                return "answer partial"
            return "answer" if step.is_answer else "thinking"
        if step.is_format_error:
            return "parse-error"
        return "unfinished" if step.is_unfinished else ""

    @property
    def elapsed_ms(self) -> int:
        """Return how long a running step has run, in ms, as of now (0 without a start).

        Where it is drawn, static/js/timeline.js counts on from it (``data-so-far-ms``).
        """
        started = self.step.started_at
        return whole_ms(timezone.now() - started) if started else 0

    @property
    def arguments_label(self) -> str:
        """Return the heading of a tool call's arguments."""
        if self.step.is_format_error:
            return "Arguments (as far as they could be read)"
        return "Arguments"

    @property
    def sent_as(self) -> str:
        """Return what a tool call's outcome reached the model as: ``ToolMessage``
        (native calls) or ``observation`` (the text strategies)."""
        return "ToolMessage" if self.step.run.uses_native_tool_calls else "observation"

    @property
    def seen_chars(self) -> int | None:
        """Return how many characters of the stored result the model was sent, from the
        stored ``observation``: all of them when it holds the result whole (after a
        note of a person's edit), the clip note's count when it was clipped; None when
        the observation was not recorded (or does not say)."""
        step = self.step
        observation = step.observation
        if observation is None:
            return None
        if observation.endswith(step.result):
            return len(step.result)
        clipped = clip_note(observation)
        return clipped[0] if clipped else None

    @property
    def result_label(self) -> str:
        """Return the heading of a tool call's result: what the model was sent, and as what.

        The stored result is whole up to ``AGENT_MAX_RESULT_CHARS`` (then cut, with a note
        at its end); the model was sent what the step's ``observation`` holds, and the
        heading says so when that is less than is stored. A step stored before
        observations were kept makes no claim of what was sent (:attr:`seen_chars`).
        """
        step = self.step
        if step.is_format_error:
            return f"What the model was told of its format error (the {self.sent_as})"
        if step.is_error:
            head = f"Error (sent to the model as the {self.sent_as})"
        else:
            head = f"Result ({self.sent_as})"
        seen = self.seen_chars
        cut = clip_note(step.result)
        if cut:
            stored, returned = cut
            if seen is None:
                return head + STORED_CLIPPED_SEEN_UNKNOWN.format(returned=returned, stored=stored)
            return head + STORED_CLIPPED.format(
                returned=returned, stored=stored, seen=min(seen, stored)
            )
        if seen is not None and seen < len(step.result):
            return head + SENT_CLIPPED.format(seen=seen, stored=len(step.result))
        return head

    @property
    def observation_differs(self) -> bool:
        """Return True when the stored ``observation`` is not the stored result: the
        admin then shows it beside the result (clipped, or with a person's edit noted)."""
        step = self.step
        return step.observation is not None and step.observation != step.result

    @property
    def observation_not_recorded(self) -> bool:
        """Return True for a tool call that had an outcome the model was sent but whose
        observation is not stored (a row from before it was kept)."""
        step = self.step
        return (
            step.is_tool_call
            and step.observation is None
            and not (step.is_running or step.is_pending or step.is_unfinished)
        )

    @property
    def observation_not_recorded_note(self) -> str:
        """Return what the admin says of a step whose observation is not recorded."""
        return OBSERVATION_NOT_RECORDED

    @property
    def badge(self) -> str:
        """Return a tool call's outcome in a word or two, as its card's badge shows it."""
        step = self.step
        if step.is_running:
            return "running"
        if step.is_pending:
            return "waiting for approval"
        if not step.is_error:
            held = step.held
            approved = held is not None and held.outcome == Outcome.APPROVED
            return "ok · approved" if approved else "ok"
        if step.is_format_error:
            return "format error"
        refused = REFUSED_BADGES.get(step.error_type)
        if refused:
            return refused
        return "did not finish" if step.is_unfinished else "error"

    @property
    def arguments_rows(self) -> int:
        """Return the rows the approval form's arguments box needs (3 to 12)."""
        return max(3, min(12, self.arguments_json.count("\n") + 1))

    @cached_property
    def arguments_json(self) -> str:
        """Return the arguments pretty-printed as JSON (:func:`chat.display.arguments_json`)."""
        return arguments_json(self.step.arguments)

    @cached_property
    def result_display(self) -> str:
        """Return the result pretty-printed when that loses nothing, else as stored.

        Re-encoding JSON can change what the model read (float digits, ``1e400`` becoming
        ``Infinity``, a repeated key dropped), so the pretty form is used only when it
        parses back to exactly the same values (:func:`chat.display.pretty_json`).
        """
        return pretty_json(self.step.result)

    @property
    def result_preview(self) -> str:
        """Return :attr:`result_display` cut to ``CHAT_RESULT_PREVIEW_CHARS`` with a note.

        The chat page shows this, so a tool returning megabytes does not make every
        reload that heavy; the admin and the CSV export show the whole stored result.
        """
        if len(self.step.result) <= settings.CHAT_RESULT_PREVIEW_CHARS:
            return self.result_display
        return previewed(self.step.result)

    @cached_property
    def result_media(self) -> list[MediaShown]:
        """Return the images and files a tool returned (``result_blocks``), in order, as
        the card shows them (:func:`chat.media.media_shown`); [] for a result that is
        only text."""
        blocks = self.step.result_blocks
        blocks = blocks if isinstance(blocks, list) else []
        return [shown for block in blocks if (shown := media_shown(block)) is not None]

    @property
    def has_artifact(self) -> bool:
        """Return True for a tool call that kept an artifact beside its content."""
        return self.step.artifact is not None

    @cached_property
    def artifact_json(self) -> str:
        """Return the artifact pretty-printed as JSON (a note stored in its place as it is)."""
        return arguments_json(self.step.artifact)

    @property
    def artifact_preview(self) -> str:
        """Return :attr:`artifact_json` cut like :attr:`result_preview`, for the chat."""
        return previewed(self.artifact_json)

    @property
    def arguments_preview(self) -> str:
        """Return the arguments on one line, ``city="Hangzhou", days=3``, clipped with "…".

        Keys as written, values as JSON (Chinese kept); text arguments (a text strategy's
        input, arguments that did not parse) on one line. At most
        :data:`chat.display.ARGUMENTS_PREVIEW_CHARS` characters; "" for none.
        """
        arguments = self.step.arguments
        if isinstance(arguments, dict):
            line = ", ".join(
                f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
            )
        elif arguments is None:
            line = ""
        elif isinstance(arguments, str):
            line = arguments
        else:
            line = json.dumps(arguments, ensure_ascii=False)
        return clipped_line(line, ARGUMENTS_PREVIEW_CHARS)

    @property
    def text_preview(self) -> str:
        """Return a model turn's text on one line, clipped like the arguments, for its fold."""
        return clipped_line(self.step.text, ARGUMENTS_PREVIEW_CHARS)

    @property
    def summary_preview(self) -> str:
        """Return what a folded tool card shows after its name: its arguments on one line.

        A format error's card says the reply did not parse instead: the tool it named
        never ran, so its name and arguments are the model's, not a failed call's.
        """
        if self.step.is_format_error:
            return "the model's reply did not parse: the tool did not run"
        return self.arguments_preview

    @property
    def result_raw(self) -> str:
        """Return the result as stored, cut like :attr:`result_preview`."""
        return previewed(self.step.result)

    @property
    def result_has_pretty_form(self) -> bool:
        """Return True when the result is JSON shown re-indented (the raw/pretty toggle)."""
        result = self.step.result
        return len(result) <= settings.CHAT_RESULT_PREVIEW_CHARS and (self.result_display != result)

    @property
    def result_is_long(self) -> bool:
        """Return True when the shown result is long enough to open clipped ("show all"):
        ``RESULT_CLIP_LINES`` lines, or as many characters as that many full lines hold (a
        long result on one line, as a minified JSON body is, wraps as tall)."""
        preview = self.result_preview
        return (
            preview.count("\n") >= RESULT_CLIP_LINES
            or len(preview) >= RESULT_CLIP_LINES * RESULT_LINE_CHARS
        )


def presented(row: AgentRun | AgentStep) -> RunPresenter | StepPresenter:
    """Return the presenter of a run or a step (the templates' ``presented`` filter)."""
    return RunPresenter(row) if isinstance(row, AgentRun) else StepPresenter(row)
