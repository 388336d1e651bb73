"""Time the admin's run search on PostgreSQL at size, against Django's own icontains search.

Fills a scratch PostgreSQL database with N runs of 5 steps (a model turn asking for three
tools, the three calls, the answer) through COPY, migrated to 0023 so the load does not
maintain the search indexes; then applies migration 0024 (its index build at that size is
timed) and ``VACUUM ANALYZE``. Texts vary as real ones do: questions about 40 cities in six
shapes, JSON arguments, tool results naming hotels and a booking reference, tool_call_ids
in OpenAI's, Anthropic's and Mistral's shapes.

Then renders the run list through the real admin view (``changelist_view``, a superuser,
RequestFactory), ours (:mod:`chat.admin_search`) and the peer: the same admin with
Django's ``ModelAdmin.get_search_results`` over the same ``search_fields``, the search
as it was before 0024. For each query: the median of ``--repeat`` renders (the peer's of
``--peer-repeat``, cut at ``--peer-timeout-s`` by a statement time-out), the ratio, the
runs found, and whether both found the same runs (a run's number also finds that run in
ours, so that row may differ by it).

    .venv/bin/python bench/search.py --runs 600000            # about 20 minutes on 2 cores
    .venv/bin/python bench/search.py --tiny                    # seconds; figures meaningless
    .venv/bin/python bench/search.py --runs 600000 --keep      # keep the filled database
    .venv/bin/python bench/search.py --runs 600000 --reuse     # time a kept one again

``--database-url`` names the scratch database (dropped and created again unless
``--reuse``; dropped at the end unless ``--keep``); ``--explain`` prints EXPLAIN ANALYZE
of both page queries for each search; ``--only WORDS`` times the queries whose label
contains WORDS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tracedata import all_columns  # noqa: E402

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/agentchat_bench_search"
STEPS_PER_RUN = 5
RUNS_PER_CONVERSATION = 4
USERS = 200
BATCH_RUNS = 20_000
EPOCH = datetime(2026, 1, 1)
CITIES = (
    "Beijing", "Shanghai", "Chengdu", "Xian", "Hangzhou", "Suzhou", "Guilin", "Lijiang",
    "Kunming", "Xiamen", "Qingdao", "Harbin", "Dali", "Lhasa", "Nanjing", "Wuhan",
    "Chongqing", "Shenzhen", "Guangzhou", "Sanya", "Huangshan", "Zhangjiajie", "Dunhuang",
    "Pingyao", "Luoyang", "Kaifeng", "Yangshuo", "Fenghuang", "Tianjin", "Dalian",
    "Shenyang", "Changsha", "Hefei", "Fuzhou", "Nanning", "Guiyang", "Urumqi", "Kashgar",
    "Lanzhou", "Yinchuan",
)  # fmt: skip
SIGHTS = ("the old town", "the West Lake", "the panda base", "the Bund", "the city wall",
          "the night market", "the river", "the temple", "the museum", "the station")  # fmt: skip
DISHES = ("mapo tofu", "hot pot", "dan dan noodles", "xiaolongbao", "roujiamo", "char siu",
          "kung pao chicken", "biangbiang noodles")  # fmt: skip
ADJECTIVES = ("Quiet", "Lantern", "Jade", "Bamboo", "Willow", "Golden", "Misty", "Lotus",
              "Cedar", "Plum", "River", "Stone", "Cloud", "Silk", "Tea", "Pine", "Maple",
              "Crane", "Peony", "Orchid")  # fmt: skip
NOUNS = ("Courtyard", "Garden", "House", "Lodge", "Pavilion", "Terrace", "Gate", "Hall",
         "Retreat", "Harbour")  # fmt: skip
TOOLS = ("get_weather", "search_bnb", "train_times", "search_travel_info", "calculator")
QUESTIONS = (
    "What's the weather in {city} next {day}? Should I pack a raincoat?",
    "Find a quiet B&B in {city} for {n} nights under {price} yuan, close to {sight}.",
    "How long is the train from {city} to {city2}, and what does a second-class seat cost?",
    "Which sights should I not miss in {city} if I only have {n} days?",
    "Compare plan {n} with my old plan for order #{i}, then summarise it in 3 bullets.",
    "Is {dish} in {city} spicy? Translate the menu item 菜单 for me.",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
RESULT = (
    '{{"city": "{city}", "hotel": "{hotel}", "price": {price}, "currency": "CNY", '
    '"rating": 4.{r}, "booking_ref": "{ref}", "notes": "near {sight}; {temp}°C, '
    'humidity {hum}%; 早餐包含, free cancellation until 18:00; {n} rooms left"}}'
)
ANSWER = (
    "Here is what I found for {city}: **{hotel}** at {price} yuan a night (rating 4.{r}), "
    "near {sight}. The weather should be {temp}°C. Booking reference {ref}; "
    "free cancellation until 18:00 the day before."
)
NO_MATCH = '"purple elephant sandwich"'


def _ts(moment: datetime) -> str:
    return moment.isoformat(" ", timespec="microseconds")


def _call_id(rng: random.Random, k: int) -> str:
    """Return a tool_call_id in one of three servers' shapes."""
    shape = rng.randrange(3)
    if shape == 0:
        return f"call_{rng.getrandbits(96):024x}"
    if shape == 1:
        return f"toolu_01{rng.getrandbits(110):028x}"[:30]
    return f"{rng.getrandbits(45):09x}{k}"[:9]


def _booking_ref(index: int) -> str:
    return f"BK-{index * 7919 % 10_000_019:07d}"


def _run_rows(index: int, rng: random.Random) -> tuple[Any, Any, list[Any], list[str]]:
    """Return the message, run and step rows of run number ``index`` and its call ids."""
    run_id = index + 1
    conversation_id = index // RUNS_PER_CONVERSATION + 1
    start = EPOCH + timedelta(seconds=index * 13)
    city = CITIES[rng.randrange(len(CITIES))]
    words = {
        "city": city, "city2": CITIES[rng.randrange(len(CITIES))], "n": rng.randrange(2, 8),
        "day": DAYS[rng.randrange(7)], "price": rng.randrange(180, 900),
        "sight": SIGHTS[rng.randrange(len(SIGHTS))], "dish": DISHES[rng.randrange(len(DISHES))],
        "i": index, "r": rng.randrange(10), "temp": rng.randrange(-5, 35),
        "hum": rng.randrange(20, 95), "ref": _booking_ref(index),
        "hotel": f"{ADJECTIVES[rng.randrange(20)]} {NOUNS[rng.randrange(10)]}",
    }  # fmt: skip
    question = QUESTIONS[rng.randrange(len(QUESTIONS))].format(**words)
    parent = run_id - 1 if index % RUNS_PER_CONVERSATION else None
    message = (run_id, conversation_id, "user", question, None, _ts(start), parent)
    calls = []
    for k in range(3):
        tool = TOOLS[(index + k) % len(TOOLS)]
        args = {"city": city, "query": f"{words['sight']} {city}", "limit": 5}
        calls.append({"name": tool, "args": args, "id": _call_id(rng, k), "type": "tool_call"})
    steps: list[Any] = []
    moment = start + timedelta(milliseconds=5)
    turn_ms = 600 + index % 400
    steps.append(
        (run_id * 5 - 4, run_id, 1, 1, "model_turn", "success", "", "", None, "", "", "",
         json.dumps({"content": "", "tool_calls": calls}), _ts(moment),
         _ts(moment + timedelta(milliseconds=turn_ms)), turn_ms)
    )  # fmt: skip
    moment += timedelta(milliseconds=turn_ms)
    errors = 0
    for k, call in enumerate(calls):
        ms = 40 + (index * 7 + k) % 900
        failed = (index * 3 + k) % 25 == 0
        errors += failed
        result = RESULT.format(**words)
        error = "TimeoutError: the tool took longer than 10 s" if failed else ""
        steps.append(
            (run_id * 5 - 3 + k, run_id, 2 + k, 1, "tool_call", "error" if failed else "success",
             call["name"], call["id"], json.dumps(call["args"], ensure_ascii=False), result,
             error, "", "{}", _ts(moment), _ts(moment + timedelta(milliseconds=ms)), ms)
        )  # fmt: skip
        moment += timedelta(milliseconds=ms)
    answer = ANSWER.format(**words)
    steps.append(
        (run_id * 5, run_id, 5, 2, "model_turn", "success", "", "", None, answer, "", answer,
         json.dumps({"content": answer}), _ts(moment),
         _ts(moment + timedelta(milliseconds=turn_ms)), turn_ms)
    )  # fmt: skip
    end = moment + timedelta(milliseconds=turn_ms)
    status = "failed" if index % 50 == 0 else "succeeded"
    run = (
        run_id, conversation_id, run_id, "tool_calling", "auto", True, "openai", "gpt-4o-mini",
        status, _ts(start), _ts(end), _ts(end), int((end - start).total_seconds() * 1000), 2, 3,
        errors, answer, "", 2280, 244, 2524, 0,
    )  # fmt: skip
    return message, run, steps, [call["id"] for call in calls]


CONVERSATION_FIELDS = ("id", "owner", "guest_key", "title", "strategy", "tool_choice",
                       "parallel_tool_calls", "created_at", "updated_at")  # fmt: skip
MESSAGE_FIELDS = ("id", "conversation", "role", "content", "run", "created_at", "parent")
RUN_FIELDS = (
    "id", "conversation", "user_message", "strategy", "tool_choice", "parallel_tool_calls",
    "provider", "model_name", "status", "started_at", "finished_at", "heartbeat_at",
    "duration_ms", "iterations", "tool_call_count", "tool_error_count", "output", "error",
    "input_tokens", "output_tokens", "total_tokens", "format_error_count",
)  # fmt: skip
STEP_FIELDS = (
    "id", "run", "ordinal", "iteration", "kind", "status", "tool_name", "tool_call_id",
    "arguments", "result", "error", "text", "raw", "started_at", "finished_at", "duration_ms",
)  # fmt: skip


def _copy(cursor: Any, model: Any, names: Sequence[str], rows: Iterator[tuple[Any, ...]]) -> None:
    """COPY ``rows`` (values in the order of ``names``) into ``model``'s table, every other
    column given what the ORM would write (:func:`tracedata.all_columns`; COPY's text
    takes JSON as its text)."""
    columns, extra = all_columns(
        model,
        names,
        lambda _, value: json.dumps(value) if isinstance(value, dict | list) else value,
    )
    with cursor.copy(f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row + extra)


def fill(runs: int, seed: int = 24) -> tuple[float, dict[str, Any]]:
    """Insert users, conversations and ``runs`` runs of 5 steps; return seconds and the
    ids the queries look for (a run in the middle: its id, a call id, its booking ref)."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from chat.models import AgentRun, AgentStep, Conversation, Message

    began = time.perf_counter()
    rng = random.Random(seed)
    User.objects.bulk_create(
        User(username=f"analyst{n:03d}", password="!", is_staff=n < 5) for n in range(USERS)
    )
    target = runs // 2
    probe: dict[str, Any] = {}
    for first in range(0, runs, BATCH_RUNS):
        batch = range(first, min(first + BATCH_RUNS, runs))
        messages, run_rows, step_rows = [], [], []
        for index in batch:
            message, run, steps, call_ids = _run_rows(index, rng)
            messages.append(message)
            run_rows.append(run)
            step_rows.extend(steps)
            if index == target:
                probe = {"run_id": run[0], "call_id": call_ids[1], "ref": _booking_ref(index)}
        conversations = range(batch.start // RUNS_PER_CONVERSATION,
                              -(-batch.stop // RUNS_PER_CONVERSATION))  # fmt: skip
        conversation_rows = []
        for n in conversations:
            created = _ts(EPOCH + timedelta(seconds=n * RUNS_PER_CONVERSATION * 13))
            guest = n % 10 < 3
            conversation_rows.append(
                (n + 1, None if guest else n % USERS + 1, f"guest{n:026x}" if guest else "",
                 f"Trip planning #{n}", "tool_calling", "auto", True, created, created)
            )  # fmt: skip
        with transaction.atomic(), connection.cursor() as cursor:
            _copy(cursor, Conversation, CONVERSATION_FIELDS, iter(conversation_rows))
            _copy(cursor, Message, MESSAGE_FIELDS, iter(messages))
            _copy(cursor, AgentRun, RUN_FIELDS, iter(run_rows))
            _copy(cursor, AgentStep, STEP_FIELDS, iter(step_rows))
    with connection.cursor() as cursor:
        for table in ("auth_user", "chat_conversation", "chat_message", "chat_agentrun",
                      "chat_agentstep"):  # fmt: skip
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT max(id) FROM {table}))"
            )
    return time.perf_counter() - began, probe


def _vacuum() -> float:
    from django.db import connection

    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return time.perf_counter() - began


def _admins() -> tuple[Any, Any]:
    """Return our run admin and the peer: the same admin with Django's own search."""
    from django.contrib import admin

    from chat.admin import AgentRunAdmin
    from chat.models import AgentRun

    class IContainsRunAdmin(AgentRunAdmin):
        """The run admin with ``ModelAdmin.get_search_results``: icontains over
        ``search_fields``, the search before migration 0024."""

        def get_search_results(self, request: Any, queryset: Any, search_term: str) -> Any:
            return admin.ModelAdmin.get_search_results(self, request, queryset, search_term)

    return admin.site._registry[AgentRun], IContainsRunAdmin(AgentRun, admin.site)


def _render(model_admin: Any, user: Any, query: dict[str, str]) -> tuple[float, int, list[int]]:
    """Render the run list for ``query``; return seconds, the count and the page's ids."""
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/chat/agentrun/?" + urllib.parse.urlencode(query))
    request.user = user
    began = time.perf_counter()
    response = model_admin.changelist_view(request)
    response.render()
    seconds = time.perf_counter() - began
    if response.status_code != 200 or "cl" not in response.context_data:
        raise RuntimeError(f"the run list answered {response.status_code} for {query}")
    changelist = response.context_data["cl"]
    return seconds, changelist.result_count, [run.pk for run in changelist.result_list]


def _timed(
    render: Callable[[], tuple[float, int, list[int]]], repeat: int, timeout_s: float | None
) -> tuple[float | None, int | None, list[int]]:
    """Return the median seconds of ``repeat`` renders, the count and ids (None: timed out)."""
    from django.db import connection
    from django.db.utils import OperationalError

    times, count, ids = [], None, []
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = %s", [int((timeout_s or 0) * 1000)])
    try:
        for _ in range(repeat):
            seconds, count, ids = render()
            times.append(seconds)
    except OperationalError:  # the statement time-out
        return None, None, []
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 0")
    return statistics.median(times), count, ids


def _explain(model_admin: Any, user: Any, query: dict[str, str]) -> str:
    """Return EXPLAIN ANALYZE of the list page's query for ``query``."""
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/chat/agentrun/?" + urllib.parse.urlencode(query))
    request.user = user
    changelist = model_admin.get_changelist_instance(request)
    page = changelist.get_queryset(request)[: model_admin.list_per_page]
    return page.explain(analyze=True)


def queries(probe: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """Return the (label, querystring) of every timed list."""
    return [
        ("exact tool_call_id", {"q": probe["call_id"]}),
        ("run id", {"q": str(probe["run_id"])}),
        ("word in a question (Zhangjiajie)", {"q": "Zhangjiajie"}),
        ("word in a tool result (booking ref)", {"q": probe["ref"]}),
        ("word in many results (Lantern)", {"q": "Lantern"}),
        ("phrase with no match", {"q": NO_MATCH}),
        ("plain list", {}),
        ("filter (status failed)", {"status__exact": "failed"}),
        ("date drill-down (a month)", {"started_at__year": "2026", "started_at__month": "2"}),
    ]


def _database(url: str, *, create: bool) -> None:
    """Drop and create the database ``url`` names (when ``create``), through ``postgres``."""
    import psycopg

    parts = urllib.parse.urlsplit(url)
    name = parts.path.lstrip("/")
    admin_url = urllib.parse.urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            conn.execute(f'CREATE DATABASE "{name}"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=600_000, help="runs (5 steps each)")
    parser.add_argument("--tiny", action="store_true", help="2,000 runs, one render each")
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--repeat", type=int, default=3, help="renders per query, ours")
    parser.add_argument("--peer-repeat", type=int, default=1, help="renders per query, peer")
    parser.add_argument("--peer-timeout-s", type=float, default=120.0)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--reuse", action="store_true", help="time a database --keep left")
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE")
    parser.add_argument("--only", help="time only the queries whose label contains this")
    args = parser.parse_args()
    if args.tiny:
        args.runs, args.repeat, args.peer_repeat = 2_000, 1, 1
    if not args.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("--database-url must name a PostgreSQL database")
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.pop("REDIS_URL", None)
    if not args.reuse:
        _database(args.database_url, create=True)

    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from chat.models import AgentRun, AgentStep

    try:
        if args.reuse:
            probe = json.loads(User.objects.get(username="bench-search").last_name)
            print(f"reusing {AgentRun.objects.count():,} runs")
        else:
            call_command("migrate", verbosity=0, skip_checks=True)
            call_command("migrate", "chat", "0023", verbosity=0, skip_checks=True)
            seconds, probe = fill(args.runs)
            print(
                f"filled {args.runs:,} runs, {args.runs * STEPS_PER_RUN:,} steps: {seconds:.0f} s"
            )
            print(f"VACUUM ANALYZE: {_vacuum():.0f} s")
            began = time.perf_counter()
            call_command("migrate", "chat", verbosity=0, skip_checks=True)
            print(f"migration 0024 (pg_trgm, GIN indexes built concurrently): "
                  f"{time.perf_counter() - began:.0f} s")  # fmt: skip
            print(f"ANALYZE after it: {_vacuum():.0f} s")
            User.objects.create_superuser("bench-search", last_name=json.dumps(probe)[:150])
        user = User.objects.get(username="bench-search")
        print(f"runs {AgentRun.objects.count():,}, steps {AgentStep.objects.count():,}; "
              f"probe {probe}")  # fmt: skip
        ours, peer = _admins()
        _render(ours, user, {})  # templates compiled, connection open: not timed
        print(f"\n{'query':<38} {'ours s':>8} {'peer s':>8} {'peer/ours':>9} "
              f"{'found':>8} {'peer found':>10} {'same runs':>10}")  # fmt: skip
        failed = False
        for label, query in queries(probe):
            if args.only and args.only not in label:
                continue
            our_s, our_count, our_ids = _timed(lambda q=query: _render(ours, user, q),
                                               args.repeat, None)  # fmt: skip
            peer_s, peer_count, peer_ids = _timed(
                lambda q=query: _render(peer, user, q), args.peer_repeat, args.peer_timeout_s
            )
            if peer_s is None:
                peer_shown, ratio, same = f">{args.peer_timeout_s:.0f}", "-", "timed out"
                peer_count = None
            else:
                peer_shown, ratio = f"{peer_s:.3f}", f"{peer_s / our_s:.1f}x"
                same = (our_count, our_ids) == (peer_count, peer_ids)
                if label == "run id":
                    # Ours finds the run by its number and the number in texts; the peer
                    # in texts and inside tool_call_ids, which ours matches from the start.
                    same = "by design"
                else:
                    failed |= not same
                    same = "yes" if same else "NO"
            peer_found = "-" if peer_count is None else f"{peer_count:,}"
            print(f"{label:<38} {our_s:>8.3f} {peer_shown:>8} {ratio:>9} {our_count:>8,} "
                  f"{peer_found:>10} {same:>10}", flush=True)  # fmt: skip
            if args.explain and "q" in query:
                print(f"-- ours: {query}\n{_explain(ours, user, query)}")
                print(f"-- peer: {query}\n{_explain(peer, user, query)}", flush=True)
        return 1 if failed else 0
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            _database(args.database_url, create=False)


if __name__ == "__main__":
    sys.exit(main())
