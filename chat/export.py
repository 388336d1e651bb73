"""Export agent traces as CSV: one row per step, the run's fields repeated on each row.

The column order is stable and documented in ``docs/csv-format.md``. Rows come from
:func:`trace_rows`, a generator over database cursors (``QuerySet.iterator``), so an
export streams in constant memory whatever its size. Quoting is the stdlib ``csv``
module's RFC 4180 dialect. Cells a spreadsheet would run as a formula are neutralised as
OWASP's "CSV Injection" page describes: a leading ``=``, ``+``, ``-``, ``@``, tab or
carriage return gets a ``'`` in front. Every cell but the machine values
(:data:`UNREDACTED_COLUMNS`) goes through the redaction policy (docs/redaction.md); the
stored rows are not changed.
"""

from __future__ import annotations

import csv
import heapq
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import QuerySet

from chat.models import AgentRun, AgentSnapshot, AgentStep, Approval, Conversation
from chat.store.feedback import feedback_of
from chat.traces.redaction import Redactor, active

COLUMNS: tuple[str, ...] = (
    "run_id",
    "run_started_at",
    "run_finished_at",
    "user",
    "conversation_id",
    "question",
    "strategy",
    "provider",
    "model",
    "run_status",
    "run_duration_ms",
    "run_iterations",
    "run_output",
    "run_error",
    "step_ordinal",
    "step_iteration",
    "step_kind",
    "tool_name",
    "tool_call_id",
    "arguments",
    "result",
    "model_text",
    "step_status",
    "step_error",
    "step_started_at",
    "step_finished_at",
    "step_duration_ms",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "tool_choice",
    "parallel_tool_calls",
    "step_error_type",
    "endpoint",
    "step_reasoning",
    "run_cost",
    "run_cost_currency",
    "usage_estimated",
    "step_first_token_ms",
    "approval_outcome",
    "approval_requested_at",
    "approval_decided_at",
    "approval_decided_by",
    "approval_original_arguments",
    "approval_edited_arguments",
    "approval_reason",
    "approval_always_allowed",
    "artifact",
    "agent",
    "agent_snapshot",
    "observation",
    "feedback_rating",
    "feedback_comment",
    "feedback_by",
    "feedback_at",
    "branched_from_run_id",
    "branch_kind",
    "run_model_key",
)
# Machine values (ids, times, numbers, enums, digests, hosts): written as stored. Every
# other column, a column added later included, is text the redaction policy reads.
UNREDACTED_COLUMNS = frozenset({
    "run_id", "run_started_at", "run_finished_at", "conversation_id", "strategy", "provider",
    "model", "run_status", "run_duration_ms", "run_iterations", "step_ordinal",
    "step_iteration", "step_kind", "tool_call_id", "step_status", "step_started_at",
    "step_finished_at", "step_duration_ms", "input_tokens", "output_tokens", "total_tokens",
    "tool_choice", "parallel_tool_calls", "step_error_type", "endpoint", "run_cost",
    "run_cost_currency", "usage_estimated", "step_first_token_ms", "approval_outcome",
    "approval_requested_at", "approval_decided_at", "approval_always_allowed", "agent",
    "agent_snapshot", "feedback_rating", "feedback_at", "branched_from_run_id", "branch_kind",
    "run_model_key",
})  # fmt: skip
# Written from JSON: redacted as values before encoding (Redactor.value: keys and strings,
# and a key naming a credential hides its value), so the cell is still valid JSON.
JSON_COLUMNS = frozenset(
    {"arguments", "approval_original_arguments", "approval_edited_arguments", "artifact"}
)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# A cell already starting with an apostrophe gets one more too, so reading a file back,
# stripping one leading "'" from every cell that has one restores every value exactly.
NEUTRALISED_PREFIXES = (*FORMULA_PREFIXES, "'")
CHUNK_SIZE = 2000
CONTENT_TYPE = "text/csv; charset=utf-8"
GUEST = "(guest)"
NO_OWNER = "(no owner)"


def owner_label(conversation: Conversation) -> str:
    """Return who a conversation belongs to: a username, ``(guest)`` for an anonymous
    browser, or ``(no owner)`` (started by ``manage.py ask`` without ``--user``)."""
    if conversation.owner is not None:
        return conversation.owner.get_username()
    return GUEST if conversation.guest_key else NO_OWNER


def neutralise(cell: str) -> str:
    """Return ``cell`` with a ``'`` in front if a spreadsheet could run it as a formula.

    That is when its first character, or its first after leading spaces (some importers
    trim them), is one of :data:`FORMULA_PREFIXES`; a cell starting with ``'`` gets one
    too, so the change is reversible (see docs/csv-format.md).
    """
    if cell.startswith(NEUTRALISED_PREFIXES) or cell.lstrip(" ").startswith(FORMULA_PREFIXES):
        return "'" + cell
    return cell


def iso_utc(value: datetime | None) -> str | None:
    """Return a datetime as ISO 8601 in UTC with milliseconds (``2026-11-29T20:43:05.120Z``),
    or None; every export writes its times so (CSV, JSONL, span attributes)."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _iso(value: datetime | None) -> str:
    return iso_utc(value) or ""


def _text(value: Any) -> str:
    if value is None:
        return ""
    return str(value)


def _run_cells(run: AgentRun) -> list[str]:
    return [
        str(run.pk),
        _iso(run.started_at),
        _iso(run.finished_at),
        owner_label(run.conversation),
        str(run.conversation_id),
        run.user_message.content,
        run.strategy,
        run.provider,
        run.model_name,
        run.status,
        _text(run.duration_ms),
        str(run.iterations),
        run.output,
        run.error,
    ]


def _added_cells(run: AgentRun, step: AgentStep | None) -> list[str]:
    """Return the columns added after the first 30: the run's native tool-calling options,
    the step's ``error_type``, the host the run's model was reached at, the step's
    ``reasoning``, then the run's cost, its currency and whether its tokens are estimates,
    and a model turn's time to its first token (ms)."""
    parallel = run.parallel_tool_calls
    return [
        run.tool_choice,
        "" if parallel is None else str(parallel).lower(),
        step.error_type if step is not None else "",
        run.endpoint,
        step.reasoning if step is not None else "",
        "" if run.cost is None else f"{run.cost.normalize():f}",
        run.cost_currency if run.cost is not None else "",
        str(run.usage_estimated).lower(),
        _text(step.first_token_ms) if step is not None else "",
    ]


def _arguments(arguments: Any) -> str:
    """Return arguments as JSON (keys sorted, UTF-8 kept), or as stored when the model
    sent text that is not JSON; ``""`` for none."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _approval_of(step: AgentStep | None) -> Approval | None:
    """Return the approval a held call waited for, loaded with its step, or None."""
    if step is None:
        return None
    try:
        return step.approval
    except ObjectDoesNotExist:
        return None


def _approval_cells(approval: Approval | None, redactor: Redactor) -> list[str]:
    """Return the columns added after the first 39: a held call's approval (how it
    ended, when it was asked and decided, by whom, the arguments as the model asked and
    as a person edited them, the reason, and whether the tool was then always allowed
    in the chat); all empty for a step that was never held."""
    if approval is None:
        return [""] * 8
    return [
        approval.outcome,
        _iso(approval.requested_at),
        _iso(approval.decided_at),
        approval.decided_by_name,
        _arguments(redactor.value(approval.arguments)),
        _arguments(redactor.value(approval.edited_arguments)),
        approval.reason,
        str(approval.always_allowed).lower(),
    ]


def _feedback_cells(run: AgentRun) -> list[str]:
    """Return the last four columns: the owner's feedback on the run's answer (rating,
    comment, who, when last given or changed), the same on each of the run's rows; all
    empty when none was given."""
    feedback = feedback_of(run)
    if feedback is None:
        return [""] * 4
    return [feedback.rating, feedback.comment, feedback.given_by_name,
            _iso(feedback.updated_at)]  # fmt: skip


def _branch_cells(run: AgentRun) -> list[str]:
    """Return the last three columns: the run this one is another take of (its id, and
    ``retry``, ``regenerate`` or ``edit``), empty for a first take, and the configured
    model key a regenerate picked for it (empty: its conversation's); docs/branches.md."""
    branched = "" if run.branched_from_id is None else str(run.branched_from_id)
    return [branched, run.branch_kind, run.model_key]


def _step_cells(step: AgentStep | None, redactor: Redactor) -> list[str]:
    if step is None:
        return [""] * 16
    arguments = _arguments(redactor.value(step.arguments))
    return [
        str(step.ordinal),
        str(step.iteration),
        step.kind,
        step.tool_name,
        step.tool_call_id,
        arguments,
        step.result,
        step.text,
        step.status,
        step.error,
        _iso(step.started_at),
        _iso(step.finished_at),
        _text(step.duration_ms),
        _text(step.input_tokens),
        _text(step.output_tokens),
        _text(step.total_tokens),
    ]


def trace_rows(
    runs: QuerySet[AgentRun], *, redactor: Redactor | None = None
) -> Iterator[list[str]]:
    """Yield one list of cells (in :data:`COLUMNS` order) per step of ``runs``.

    Every cell but :data:`UNREDACTED_COLUMNS` passes through ``redactor`` (the settings'
    policy, :func:`chat.traces.redaction.active`, when None; ``Redactor()`` for none).

    Rows are ordered by run id, then step ordinal; a run without steps (it failed before
    the model was asked) still gets one row with empty step cells. Memory stays constant:
    two cursors are read in chunks of :data:`CHUNK_SIZE` and merged. Cells are plain text,
    not yet neutralised (:func:`csv_lines` does that).
    """
    run_ids = runs.order_by().values("pk")
    steps = (
        AgentStep.objects.filter(run__in=run_ids)
        .select_related(
            "run__conversation__owner", "run__user_message", "run__feedback", "approval"
        )
        .order_by("run_id", "ordinal")
        .iterator(chunk_size=CHUNK_SIZE)
    )
    bare_runs = (
        AgentRun.objects.filter(pk__in=run_ids, steps__isnull=True)
        .select_related("conversation__owner", "user_message", "feedback")
        .order_by("pk")
        .iterator(chunk_size=CHUNK_SIZE)
    )
    # Each snapshot's hash, read once (a snapshot's content is kilobytes of schemas).
    digests = dict(
        AgentSnapshot.objects.filter(runs__in=run_ids).values_list("pk", "digest").distinct()
    )
    redactor = active() if redactor is None else redactor
    text_cells = [
        index for index, name in enumerate(COLUMNS)
        if name not in UNREDACTED_COLUMNS and name not in JSON_COLUMNS
    ] if redactor.enabled else []  # fmt: skip
    step_rows = ((step.run_id, step.ordinal, step.run, step) for step in steps)
    run_rows = ((run.pk, 0, run, None) for run in bare_runs)
    for _run_id, _ordinal, run, step in heapq.merge(
        step_rows, run_rows, key=lambda row: (row[0], row[1])
    ):
        cells = _run_cells(run) + _step_cells(step, redactor) + _added_cells(run, step)
        artifact = _arguments(redactor.value(step.artifact)) if step is not None else ""
        agent = [run.agent_key, digests.get(run.snapshot_id, "")]
        observation = _text(step.observation) if step is not None else ""
        approval = _approval_cells(_approval_of(step), redactor)
        row = [*cells, *approval, artifact, *agent, observation, *_feedback_cells(run),
               *_branch_cells(run)]  # fmt: skip
        for index in text_cells:
            if row[index]:  # most rows leave half their text columns empty
                row[index] = redactor.text(row[index])
        yield row


class _Echo:
    """A file-like object whose ``write`` returns what it was given (Django's CSV recipe)."""

    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[list[str]], *, bom: bool = False) -> Iterator[str]:
    """Yield the CSV text of a header and ``rows``, line by line, cells neutralised.

    With ``bom``, the first chunk starts with a UTF-8 byte-order mark (as text, U+FEFF) so
    Excel reads the file as UTF-8. Lines end with CRLF (RFC 4180).
    """
    # Every cell quoted, as OWASP advises: a spreadsheet that splits on ";" (some locales)
    # still keeps "a;=1+1" in one cell instead of starting a new one with "=1+1".
    writer = csv.writer(_Echo(), lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    yield ("\ufeff" if bom else "") + writer.writerow(COLUMNS)
    for row in rows:
        yield writer.writerow([neutralise(cell) for cell in row])


def write_csv(rows: Iterable[list[str]], out: Any, *, bom: bool = False) -> int:
    """Write the CSV to the text stream ``out``; return the number of data rows."""
    count = -1
    for line in csv_lines(rows, bom=bom):
        out.write(line)
        count += 1
    return count


def export_filename(
    prefix: str = "agent-traces", *, bom: bool = False, extension: str = "csv"
) -> str:
    """Return a download file name stamped with the current UTC time.

    ``agent-runs-20261201T031500Z.csv``; with ``bom`` (the Excel variant, which starts with
    a byte-order mark) ``agent-runs-20261201T031500Z-excel.csv``, so the two downloads of
    the same runs never overwrite or pass for each other. ``extension`` names the
    format's (``jsonl``, ``otlp.jsonl``).
    """
    suffix = "-excel" if bom else ""
    return f"{prefix}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}{suffix}.{extension}"


def can_export(user: Any) -> bool:
    """Return True if ``user`` may export traces: active staff with view permission on runs."""
    return bool(user.is_active and user.is_staff and user.has_perm("chat.view_agentrun"))
