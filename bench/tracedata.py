"""Fill a scratch database with realistic agent runs for the export benchmark.

Every run has :data:`STEPS_PER_RUN` steps: a model turn that asks for three tools, the
three tool calls, and a final model turn with the answer. Field sizes follow what the app
records for a real run: a question of about 80 characters, JSON arguments of about 60, a
tool result of about 400 (Chinese text, commas, quotes and line breaks in it, one in ten
starting with ``-`` or ``=`` so neutralisation has work to do), an answer of about 300.

Rows go in with ``executemany`` inside one transaction per batch, with SQLite's journal
and fsync off: a million steps take well under a minute, where ``bulk_create`` spends
most of its time building model instances. Each insert names every column of its table,
the ones this module does not set with the model's defaults (:func:`_insert`), so the
rows are those the ORM would write.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

STEPS_PER_RUN = 5
RUNS_PER_CONVERSATION = 4
USERS = 200
BATCH_RUNS = 10_000  # a multiple of RUNS_PER_CONVERSATION: no conversation spans two batches
EPOCH = datetime(2026, 1, 1)  # naive UTC, the way Django's SQLite backend stores datetimes
TOOLS = ("web_search", "get_weather", "calculator", "read_url", "lookup_order")

QUESTION = 'Compare "plan {m}" with the 旧套餐 for order #{i}, then summarise it in 3 bullets, ok?'
RESULT = (
    '{{"status": "ok", "order": {i}, "tool": "{tool}"}}\n'
    '北京, 晴转多云: 21°C, humidity 40%, wind 3 m/s; "feels like" 19°C.\n'
    "Plan {m}: 月费 59 元, 20 GB data, 300 minutes, contract 12 months, "
    '"no roaming" clause, cancellation fee 100 元.\n'
    "Old plan: 月费 79 元, 10 GB, unlimited minutes; customer since 2021-03-0{d}, "
    "3 open tickets, last one: 宽带故障, 已解决.\n"
    "Source: https://example.com/orders/{i}?view=full&lang=zh-CN, fetched in {ms} ms."
)
ANSWER = (
    "Here is the comparison for order #{i}:\n\n"
    '- **Price**: plan {m} costs 59 元/month, the old plan 79 元, so you save "20 元".\n'
    "- **Data**: 20 GB instead of 10 GB; minutes drop from unlimited to 300.\n"
    "- **Contract**: 12 months, cancellation fee 100 元.\n\n"
    "总结: 新套餐更便宜, 流量更多, 但通话分钟数有限。"
)
FORMULA_STARTS = ("-", "=", "+", "@")


def _ts(moment: datetime) -> str:
    return moment.isoformat(" ", timespec="microseconds")


def all_columns(
    model: Any, names: Sequence[str], prepare: Callable[[Any, Any], Any] | None = None
) -> tuple[list[str], tuple[Any, ...]]:
    """Return every column of ``model``'s table, those of ``names`` first, and the values
    of the others: what the ORM would write for each (its default, "" for text, None
    where null is allowed, through ``prepare(field, value)``: the field's own
    ``get_db_prep_save`` by default). So a column added later needs no change in the
    benchmarks' bulk writes; one the ORM could not fill either (no default, not null),
    or a name that is no field, raises ``ValueError``.
    """
    from django.db import connection

    if prepare is None:

        def prepare(field: Any, value: Any) -> Any:
            return field.get_db_prep_save(value, connection)

    fields = {field.name: field for field in model._meta.concrete_fields}
    unknown = set(names) - fields.keys()
    if unknown:
        raise ValueError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
    filled = []
    for name, field in fields.items():
        if name in names:
            continue
        value = field.get_default()
        if value is None and not field.null:
            raise ValueError(
                f"{model.__name__}.{name} has no default and is not null: give it a value "
                "where its rows are made"
            )
        filled.append((field, prepare(field, value)))
    columns = [fields[name].column for name in names] + [field.column for field, _ in filled]
    return columns, tuple(value for _, value in filled)


def _insert(cursor: Any, model: Any, names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` (values in the order of ``names``) into ``model``'s table, every
    other column given what the ORM would write (:func:`all_columns`)."""
    columns, extra = all_columns(model, names)
    marks = ", ".join(["%s"] * len(columns))
    cursor.executemany(
        f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) VALUES ({marks})",
        [row + extra for row in rows],
    )


CONVERSATION_FIELDS = (
    "id", "owner", "guest_key", "title", "strategy", "tool_choice", "parallel_tool_calls",
    "created_at", "updated_at",
)  # fmt: skip
MESSAGE_FIELDS = ("id", "conversation", "role", "content", "run", "created_at", "parent")
RUN_FIELDS = (
    "id", "conversation", "user_message", "strategy", "tool_choice", "parallel_tool_calls",
    "provider", "model_name", "status",
    "started_at", "finished_at", "heartbeat_at", "duration_ms", "iterations", "tool_call_count",
    "tool_error_count", "output", "error", "input_tokens", "output_tokens", "total_tokens",
    "format_error_count",
)  # fmt: skip
STEP_FIELDS = (
    "id", "run", "ordinal", "iteration", "kind", "status", "tool_name", "tool_call_id",
    "arguments", "result", "error", "text", "input_tokens", "output_tokens", "total_tokens",
    "raw", "started_at", "finished_at", "duration_ms", "error_type",
)  # fmt: skip


def _conversation(index: int) -> tuple[Any, ...]:
    created = EPOCH + timedelta(seconds=index * RUNS_PER_CONVERSATION * 13)
    guest = index % 10 < 3  # three conversations in ten belong to visitors
    owner = None if guest else index % USERS + 1
    key = f"guest{index:026x}" if guest else ""
    title = f"Plan comparison #{index}"
    return (index + 1, owner, key, title, "tool_calling", "auto", True, _ts(created), _ts(created))


def _run_rows(index: int) -> tuple[tuple[Any, ...], tuple[Any, ...], list[tuple[Any, ...]]]:
    """Return the message, run and step rows of run number ``index`` (0-based)."""
    run_id = index + 1
    conversation_id = index // RUNS_PER_CONVERSATION + 1
    start = EPOCH + timedelta(seconds=index * 13, microseconds=index % 1000 * 1000)
    question = QUESTION.format(m=index % 7, i=index)
    parent = run_id - 1 if index % RUNS_PER_CONVERSATION else None  # the question before it
    message = (run_id, conversation_id, "user", question, None, _ts(start), parent)
    steps: list[tuple[Any, ...]] = []
    calls = []
    moment = start + timedelta(milliseconds=5)
    errors = 0
    for k in range(3):
        tool = TOOLS[(index + k) % len(TOOLS)]
        call_id = f"call_{index:012x}{k:012x}"
        args = {"query": f"北京 plan {index % 7}, order #{index}", "limit": 5, "lang": "zh-CN"}
        calls.append({"name": tool, "args": args, "id": call_id, "type": "tool_call"})
    turn_ms = 600 + index % 400
    steps.append(
        (run_id * 5 - 4, run_id, 1, 1, "model_turn", "success", "", "", None, "", "", "", 820,
         64, 884, json.dumps({"content": "", "tool_calls": calls}), _ts(moment),
         _ts(moment + timedelta(milliseconds=turn_ms)), turn_ms, "")
    )  # fmt: skip
    moment += timedelta(milliseconds=turn_ms)
    for k, call in enumerate(calls):
        ms = 40 + (index * 7 + k) % 900
        failed = (index * 3 + k) % 25 == 0
        errors += failed
        result = RESULT.format(i=index, tool=call["name"], m=index % 7, d=k + 1, ms=ms)
        if (index + k) % 10 == 0:
            result = FORMULA_STARTS[(index + k) // 10 % 4] + result
        error = "TimeoutError: the tool took longer than 10 s" if failed else ""
        steps.append(
            (run_id * 5 - 3 + k, run_id, 2 + k, 1, "tool_call", "error" if failed else "success",
             call["name"], call["id"], json.dumps(call["args"]), result, error, "", None, None,
             None, "{}", _ts(moment), _ts(moment + timedelta(milliseconds=ms)), ms,
             "TimeoutError" if failed else "")
        )  # fmt: skip
        moment += timedelta(milliseconds=ms)
    answer = ANSWER.format(i=index, m=index % 7)
    steps.append(
        (run_id * 5, run_id, 5, 2, "model_turn", "success", "", "", None, answer, "", answer,
         1460, 180, 1640, json.dumps({"content": answer}), _ts(moment),
         _ts(moment + timedelta(milliseconds=turn_ms)), turn_ms, "")
    )  # fmt: skip
    end = moment + timedelta(milliseconds=turn_ms)
    duration = int((end - start).total_seconds() * 1000)
    run = (
        run_id, conversation_id, run_id, "tool_calling", "auto", True, "openai", "gpt-4o-mini",
        "succeeded",
        _ts(start), _ts(end), _ts(end), duration, 2, 3, errors, answer, "", 2280, 244, 2524, 0,
    )  # fmt: skip
    return message, run, steps


def _batches(runs: int) -> Iterator[range]:
    for first in range(0, runs, BATCH_RUNS):
        yield range(first, min(first + BATCH_RUNS, runs))


def fill(steps: int) -> float:
    """Insert users, conversations and runs totalling ``steps`` step rows; return seconds.

    ``steps`` must be a multiple of :data:`STEPS_PER_RUN`. Django must be set up and its
    default database migrated and empty.
    """
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from chat.models import AgentRun, AgentStep, Conversation, Message

    began = time.perf_counter()
    runs = steps // STEPS_PER_RUN
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=OFF")
        cursor.execute("PRAGMA synchronous=OFF")
    User.objects.bulk_create(
        User(username=f"analyst{n:03d}", password="!", is_staff=n < 5) for n in range(USERS)
    )
    for batch in _batches(runs):
        conversations = range(
            batch.start // RUNS_PER_CONVERSATION, -(-batch.stop // RUNS_PER_CONVERSATION)
        )
        messages, run_rows, step_rows = [], [], []
        for index in batch:
            message, run, run_steps = _run_rows(index)
            messages.append(message)
            run_rows.append(run)
            step_rows.extend(run_steps)
        with transaction.atomic(), connection.cursor() as cursor:
            conversation_rows = [_conversation(n) for n in conversations]
            _insert(cursor, Conversation, CONVERSATION_FIELDS, conversation_rows)
            _insert(cursor, Message, MESSAGE_FIELDS, messages)
            _insert(cursor, AgentRun, RUN_FIELDS, run_rows)
            _insert(cursor, AgentStep, STEP_FIELDS, step_rows)
    return time.perf_counter() - began
