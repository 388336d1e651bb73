"""How runs and steps read on the page, the admin and the CSV: labels, previews, notes.

The rows' meaning (status, kind, outcome) lives in :mod:`chat.models`; what people read of
them is here, as two mixins the models inherit (``RunDisplay`` for ``AgentRun``,
``StepDisplay`` for ``AgentStep``) and the text helpers they use. Nothing here queries the
database beyond the rows' loaded relations (a step's ``run``).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist

from agents.approvals import (
    APPROVAL_CANCELLED,
    APPROVAL_EXPIRED,
    DENIED_BY_PERSON,
    DENIED_BY_POLICY,
    Outcome,
)
from agents.events import StepStatus
from agents.tool_calls import CLIPPED_NOTE
from chat.media import MediaShown, media_shown
from chat.pricing import TOKENS_UNKNOWN, cost_label

if TYPE_CHECKING:
    from chat.models import AgentRun, Approval

# The badge of a call that did not run because of its tool's policy or a person.
REFUSED_BADGES = {
    DENIED_BY_PERSON: "denied",
    APPROVAL_EXPIRED: "expired",
    DENIED_BY_POLICY: "not allowed",
    APPROVAL_CANCELLED: "not run",
}

# A folded tool card's one line of arguments, and the lines a long result opens with.
ARGUMENTS_PREVIEW_CHARS = 120
RESULT_CLIP_LINES = 30
RESULT_LINE_CHARS = 100  # about a line of a result at the chat's width

PREVIEW_NOTE = (
    "\n[the chat is showing the first {shown:,} of {total:,} characters stored; the admin's "
    "run page and the CSV export hold them all]"
)


def previewed(text: str) -> str:
    """Return ``text`` cut to ``CHAT_RESULT_PREVIEW_CHARS`` with :data:`PREVIEW_NOTE`, for
    the chat (whole when it fits)."""
    limit = settings.CHAT_RESULT_PREVIEW_CHARS
    if len(text) <= limit:
        return text
    return text[:limit] + PREVIEW_NOTE.format(shown=limit, total=len(text))


# What a result heading adds when the model read less than is stored, and when even the
# stored result is cut (the tool returned more than AGENT_MAX_RESULT_CHARS).
SENT_CLIPPED = ": the model was sent the first {seen:,} of {stored:,} characters"
STORED_CLIPPED = (
    ": the tool returned {returned:,} characters, the first {stored:,} are stored and the "
    "model was sent the first {seen:,}"
)
# The note agents.tool_calls.clip put at the end of a result stored clipped: (shown, total).
STORED_CLIP_NOTE = re.compile(
    re.escape(CLIPPED_NOTE)
    .replace(r"\{shown:,\}", r"([\d,]+)")
    .replace(r"\{total:,\}", r"([\d,]+)")
    + r"\Z"
)


def arguments_json(arguments: Any, indent: int | None = 2) -> str:
    """Return a tool call's stored arguments as JSON, Chinese kept readable: pretty, or
    on one line with keys sorted (``indent`` None); as stored when the model sent text
    that is not JSON, and ``""`` for none."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=indent is None, indent=indent)


class RunDisplay:
    """What an ``AgentRun`` shows: its tokens, cost and status badge."""

    @property
    def tokens_label(self) -> str:
        """Return the run's token total as its status line shows it.

        ``"≈412 tokens (estimated)"`` when the model estimated them, else ``"412 tokens"``;
        ``"tokens unknown"`` when the provider reported none (never 0).
        """
        if self.total_tokens is None:
            return TOKENS_UNKNOWN
        if self.usage_estimated:
            return f"≈{self.total_tokens:,} tokens (estimated)"
        return f"{self.total_tokens:,} tokens"

    @property
    def tokens_split(self) -> str:
        """Return ``"300 in · 112 out"``, or ``""`` when either count is unknown."""
        if self.input_tokens is None or self.output_tokens is None:
            return ""
        return f"{self.input_tokens:,} in · {self.output_tokens:,} out"

    @property
    def cost_label(self) -> str:
        """Return the run's cost (``"$0.0123"``, ``"≈$0.0123"`` estimated, ``"no price"``).

        ``""`` when its tokens are unknown; see :func:`chat.pricing.cost_label`.
        """
        return cost_label(self)

    @property
    def status_label(self) -> str:
        """Return the status as its badge reads: ``"Succeeded · 2 tool errors"`` or the
        status's own label."""
        label = self.get_status_display()
        if self.has_tool_errors:
            count = self.tool_error_count
            return f"{label} · {count} tool error{'s' if count > 1 else ''}"
        return label


class StepDisplay:
    """What an ``AgentStep`` shows: its card's class, headings, previews and result text."""

    run: AgentRun

    @property
    def tokens_label(self) -> str:
        """Return a model turn's tokens: ``"120 in · 30 out"`` (``≈`` in front when its
        model estimates them), or ``"tokens unknown"``."""
        if self.input_tokens is None or self.output_tokens is None:
            if self.total_tokens is not None:
                return f"{'≈' if self.run.usage_estimated else ''}{self.total_tokens:,} tokens"
            return TOKENS_UNKNOWN
        shown = f"{self.input_tokens:,} in · {self.output_tokens:,} out"
        return f"≈{shown}" if self.run.usage_estimated else shown

    @property
    def text_is_markdown(self) -> bool:
        """Return True when a model turn's text is prose (native calls), not a text
        strategy's format (Thought:, JSON blob, tags), which is shown as written."""
        return self.run.uses_native_tool_calls

    @property
    def outcome_class(self) -> str:
        """Return the CSS class that sets the step's card apart.

        A model turn is the ``answer`` (``answer partial`` when Stop cut it off) or
        ``thinking`` on the way; a tool call that never
        ran is a ``parse-error``, one its run's end closed ``unfinished``.
        """
        if self.is_model_turn:
            if self.is_partial_answer:
                return "answer partial"
            return "answer" if self.is_answer else "thinking"
        if self.is_format_error:
            return "parse-error"
        return "unfinished" if self.is_unfinished else ""

    @property
    def arguments_label(self) -> str:
        """Return the heading of a tool call's arguments."""
        if self.is_format_error:
            return "Arguments (as far as they could be read)"
        return "Arguments"

    @property
    def result_label(self) -> str:
        """Return the heading of a tool call's result: what the model was sent, and as what.

        Native calls send a ToolMessage, the text strategies an observation. The stored
        result is whole up to ``AGENT_MAX_RESULT_CHARS`` (then cut, with a note at its end);
        the model was sent only the first ``AGENT_MAX_OBSERVATION_CHARS`` (the setting as it
        is now), and the heading says so when that is less than is stored.
        """
        sent_as = "ToolMessage" if self.run.uses_native_tool_calls else "observation"
        if self.is_format_error:
            return f"What the model was told of its format error (the {sent_as})"
        if self.is_error:
            head = f"Error (sent to the model as the {sent_as})"
        else:
            head = f"Result ({sent_as})"
        seen = settings.AGENT_MAX_OBSERVATION_CHARS
        cut = STORED_CLIP_NOTE.search(self.result)
        if cut:
            stored, returned = (int(group.replace(",", "")) for group in cut.groups())
            return head + STORED_CLIPPED.format(
                returned=returned, stored=stored, seen=min(seen, stored)
            )
        if len(self.result) > seen:
            return head + SENT_CLIPPED.format(seen=seen, stored=len(self.result))
        return head

    @property
    def badge(self) -> str:
        """Return a tool call's outcome in a word or two, as its card's badge shows it."""
        if self.is_running:
            return "running"
        if self.is_pending:
            return "waiting for approval"
        if not self.is_error:
            held = self.held
            approved = held is not None and held.outcome == Outcome.APPROVED
            return "ok · approved" if approved else "ok"
        if self.is_format_error:
            return "format error"
        refused = REFUSED_BADGES.get(self.error_type)
        if refused:
            return refused
        return "did not finish" if self.is_unfinished else "error"

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
    def arguments_rows(self) -> int:
        """Return the rows the approval form's arguments box needs (3 to 12)."""
        return max(3, min(12, self.arguments_json.count("\n") + 1))

    @property
    def arguments_json(self) -> str:
        """Return the arguments pretty-printed as JSON (:func:`arguments_json`)."""
        return arguments_json(self.arguments)

    @cached_property
    def result_display(self) -> str:
        """Return the result pretty-printed when that loses nothing, else as stored.

        Re-encoding JSON can change what the model read (float digits, ``1e400`` becoming
        ``Infinity``, a repeated key dropped), so the pretty form is used only when it
        parses back to exactly the same values, numbers compared as decimals. Computed once
        per row object: a card reads it for the pretty view and the raw/pretty toggle.
        """
        return pretty_json(self.result)

    @property
    def result_preview(self) -> str:
        """Return :attr:`result_display` cut to ``CHAT_RESULT_PREVIEW_CHARS`` with a note.

        The chat page shows this; a tool returning megabytes would make every reload of
        the conversation that heavy. The admin and the CSV export show the whole stored
        result (see :attr:`result_label` for what the model was sent).
        """
        if len(self.result) <= settings.CHAT_RESULT_PREVIEW_CHARS:
            return self.result_display
        return previewed(self.result)

    @cached_property
    def result_media(self) -> list[MediaShown]:
        """Return the images and files a tool returned (``result_blocks``), in order, as
        the card shows them (:func:`media_shown`); [] for a result that is only text."""
        blocks = self.result_blocks if isinstance(self.result_blocks, list) else []
        return [shown for block in blocks if (shown := media_shown(block)) is not None]

    @property
    def has_artifact(self) -> bool:
        """Return True for a tool call that kept an artifact beside its content."""
        return self.artifact is not None

    @cached_property
    def artifact_json(self) -> str:
        """Return the artifact pretty-printed as JSON (a note stored in its place as it is)."""
        return arguments_json(self.artifact)

    @property
    def artifact_preview(self) -> str:
        """Return :attr:`artifact_json` cut like :attr:`result_preview`, for the chat."""
        return previewed(self.artifact_json)

    # Display properties of the chat's cards (folded summary line, raw/pretty toggle).

    @property
    def arguments_preview(self) -> str:
        """Return the arguments on one line, ``city="Hangzhou", days=3``, clipped with "…".

        Keys as written, values as JSON (Chinese kept); text arguments (a text strategy's
        input, arguments that did not parse) on one line. At most
        :data:`ARGUMENTS_PREVIEW_CHARS` characters; "" for none.
        """
        if isinstance(self.arguments, dict):
            line = ", ".join(
                f"{key}={json.dumps(value, ensure_ascii=False)}"
                for key, value in self.arguments.items()
            )
        elif self.arguments is None:
            line = ""
        elif isinstance(self.arguments, str):
            line = self.arguments
        else:
            line = json.dumps(self.arguments, ensure_ascii=False)
        return clipped_line(line, ARGUMENTS_PREVIEW_CHARS)

    @property
    def text_preview(self) -> str:
        """Return a model turn's text on one line, clipped like the arguments, for its fold."""
        return clipped_line(self.text, ARGUMENTS_PREVIEW_CHARS)

    @property
    def summary_preview(self) -> str:
        """Return what a folded tool card shows after its name: its arguments on one line.

        A format error's card says the reply did not parse instead: the tool it named
        never ran, so its name and arguments are the model's, not a failed call's.
        """
        if self.is_format_error:
            return "the model's reply did not parse: the tool did not run"
        return self.arguments_preview

    @property
    def result_raw(self) -> str:
        """Return the result as the model was sent it, cut like :attr:`result_preview`."""
        return previewed(self.result)

    @property
    def result_has_pretty_form(self) -> bool:
        """Return True when the result is JSON shown re-indented (the raw/pretty toggle)."""
        return len(self.result) <= settings.CHAT_RESULT_PREVIEW_CHARS and (
            self.result_display != self.result
        )

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


def clipped_line(text: str, limit: int) -> str:
    """Return ``text`` on one line (whitespace runs as one space), cut to ``limit`` with "…"."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[: limit - 1].rstrip() + "…"


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-standard constant {name}")


def pretty_json(text: str) -> str:
    """Return ``text`` indented if it is a JSON object or array and that is lossless.

    Anything else comes back as it is: text that is not JSON, JSON that is not strict, and
    JSON nested deeper than Python's recursion limit (``[[[…]]]`` a few thousand deep, which
    a tool may return and ``json.loads`` cannot read).
    """
    strict = {"object_pairs_hook": _no_duplicate_keys, "parse_constant": _reject_constant}
    try:
        exact = json.loads(text, parse_float=Decimal, **strict)
        value = json.loads(text, **strict)
        if not isinstance(value, dict | list):
            return text
        pretty = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
        if json.loads(pretty, parse_float=Decimal, **strict) != exact:
            return text
    except (TypeError, ValueError, RecursionError):
        return text
    return pretty
