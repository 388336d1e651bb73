"""The ways of exporting runs that bench/export.py measures.

Each takes a queryset of runs and a path, writes a file and returns the number of records
it reports: data rows (one per step) for the CSV methods, lines for ours-jsonl (one per
run) and ours-otlp-json (what :func:`chat.traces.otlp.otlp_json_lines` yields). Django
must be set up before this is imported.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

METHODS = ("ours", "ours-unredacted", "ours-jsonl", "ours-otlp-json", "import-export", "naive")
# Our other formats, through the table every download path uses (chat.traces.formats).
FILE_FORMATS = {"ours-jsonl": "jsonl", "ours-otlp-json": "otlp-json"}


def _step_resource() -> Any:
    """Return a ModelResource class for AgentStep, written the way the docs show."""
    from import_export import fields, resources

    from chat.models import AgentStep

    def run_field(name: str) -> Any:
        return fields.Field(column_name=name, dehydrate_method=f"dehydrate_{name}")

    class AgentStepResource(resources.ModelResource):
        run_id = run_field("run_id")
        run_started_at = run_field("run_started_at")
        run_finished_at = run_field("run_finished_at")
        user = run_field("user")
        conversation_id = run_field("conversation_id")
        question = run_field("question")
        strategy = run_field("strategy")
        provider = run_field("provider")
        model = run_field("model")
        run_status = run_field("run_status")
        run_duration_ms = run_field("run_duration_ms")
        run_iterations = run_field("run_iterations")
        run_output = run_field("run_output")
        run_error = run_field("run_error")

        class Meta:
            model = AgentStep
            fields = (
                "run_id", "run_started_at", "run_finished_at", "user", "conversation_id",
                "question", "strategy", "provider", "model", "run_status", "run_duration_ms",
                "run_iterations", "run_output", "run_error", "ordinal", "iteration", "kind",
                "tool_name", "tool_call_id", "arguments", "result", "text", "status", "error",
                "started_at", "finished_at", "duration_ms", "input_tokens", "output_tokens",
                "total_tokens",
            )  # fmt: skip
            export_order = fields

        def dehydrate_run_id(self, step: Any) -> int:
            return step.run_id

        def dehydrate_run_started_at(self, step: Any) -> str:
            return step.run.started_at.isoformat()

        def dehydrate_run_finished_at(self, step: Any) -> str:
            finished = step.run.finished_at
            return finished.isoformat() if finished else ""

        def dehydrate_user(self, step: Any) -> str:
            owner = step.run.conversation.owner
            return owner.get_username() if owner else "(guest)"

        def dehydrate_conversation_id(self, step: Any) -> int:
            return step.run.conversation_id

        def dehydrate_question(self, step: Any) -> str:
            return step.run.user_message.content

        def dehydrate_strategy(self, step: Any) -> str:
            return step.run.strategy

        def dehydrate_provider(self, step: Any) -> str:
            return step.run.provider

        def dehydrate_model(self, step: Any) -> str:
            return step.run.model_name

        def dehydrate_run_status(self, step: Any) -> str:
            return step.run.status

        def dehydrate_run_duration_ms(self, step: Any) -> int | None:
            return step.run.duration_ms

        def dehydrate_run_iterations(self, step: Any) -> int:
            return step.run.iterations

        def dehydrate_run_output(self, step: Any) -> str:
            return step.run.output

        def dehydrate_run_error(self, step: Any) -> str:
            return step.run.error

    return AgentStepResource


NAIVE_COLUMNS = (
    "run_id", "run__started_at", "run__finished_at", "run__conversation__owner__username",
    "run__conversation_id", "run__user_message__content", "run__strategy", "run__provider",
    "run__model_name", "run__status", "run__duration_ms", "run__iterations", "run__output",
    "run__error", "ordinal", "iteration", "kind", "tool_name", "tool_call_id", "arguments",
    "result", "text", "status", "error", "started_at", "finished_at", "duration_ms",
    "input_tokens", "output_tokens", "total_tokens",
)  # fmt: skip


def _steps(runs: Any) -> Any:
    from chat.models import AgentStep

    return (
        AgentStep.objects.filter(run__in=runs.order_by().values("pk"))
        .select_related("run__conversation__owner", "run__user_message")
        .order_by("run_id", "ordinal")
    )


def export(method: str, runs: Any, path: Path) -> int:
    """Export ``runs``' steps to ``path`` with ``method``; return the rows it reports."""
    if method == "ours":
        from chat.export import trace_rows, write_csv

        with path.open("w", encoding="utf-8", newline="") as out:
            return write_csv(trace_rows(runs), out)
    if method == "ours-unredacted":
        # The same export with the redaction policy off (docs/redaction.md, "Cost").
        from chat.export import trace_rows, write_csv
        from chat.traces.redaction import Redactor

        with path.open("w", encoding="utf-8", newline="") as out:
            return write_csv(trace_rows(runs, redactor=Redactor()), out)
    if method in FILE_FORMATS:
        from chat.traces import redaction
        from chat.traces.formats import FORMATS

        pieces = FORMATS[FILE_FORMATS[method]].pieces(runs, redaction.active())
        count = 0
        with path.open("w", encoding="utf-8", newline="") as out:
            for piece in pieces:
                out.write(piece)
                count += 1
        return count
    if method == "import-export":
        from import_export.formats.base_formats import CSV

        dataset = _step_resource()().export(_steps(runs))
        with path.open("w", encoding="utf-8", newline="") as out:
            out.write(CSV().export_data(dataset))
        return len(dataset)
    if method == "naive":
        rows = list(_steps(runs).values_list(*NAIVE_COLUMNS))
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out, lineterminator="\r\n")
            writer.writerow(NAIVE_COLUMNS)
            writer.writerows(rows)
        return len(rows)
    raise ValueError(f"unknown method {method!r}")
