"""Measure how the pages grow with a conversation's length and a run's steps.

Fills a scratch SQLite database with conversations of 10, 100 and 1,000 messages (each
exchange a question and a run of 5 steps: a model turn asking for three tools, the
calls, the answer, with the texts of ``bench/tracedata.py``), conversations holding one
run of 10, 50 and 200 steps, and a second user with 10 and 1,000 conversations (the
sidebar). Then, for each size:

- in a child process (Django's test ``Client``, logged in as the owner, with
  ``CaptureQueriesContext``): the queries each page costs, and its status;
- over HTTP against Daphne (``scripts.serving.daphne``, the session cookie of that
  login): the time to the last byte (median of ``--repeats``, sizes interleaved) and
  the page's size;
- the websocket's catch-up on connect: the queries of ``chat.fragments.runs_caught_up``
  (in the child) and, over Daphne, the time from opening ``/ws/chat/<id>/`` to the
  frame with the latest run, and the bytes sent by then.

Pages: the conversation page (``/c/<id>/``), its "Show earlier messages" fragment
(``/c/<id>/earlier/?before=<run id>``), a long run's "Show the N earlier steps" fragment
(``/c/<id>/runs/<run id>/steps/?before=<ordinal>``) and its folded timeline's bars
(``/c/<id>/runs/<run id>/timeline/``), both loaded on request and growing with the run by
design, the admin's run page (``/admin/chat/agentrun/<id>/change/``) and conversation
page (``/admin/chat/conversation/<id>/change/``), and the sidebar's list (``/c/list/``).

Prints a table (size → queries, ms, KiB) with the growth ratio largest / smallest and
``os.getloadavg()``; ``--json`` puts JSON on stdout and the table on stderr. Exits 1 if
a page fails (a status other than 200, or the newest run missing from it).

    .venv/bin/python bench/growth.py            # 10/100/1,000 messages, 10/50/200 steps
    .venv/bin/python bench/growth.py --tiny     # seconds: for CI
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scripts.serving import daphne  # noqa: E402

MESSAGES = (10, 100, 1000)
STEPS = (10, 50, 200)
CONVERSATIONS = (10, 1000)
TINY = {"messages": (10, 40), "steps": (10, 20), "conversations": (3, 30)}
# --tiny shrinks the page's window with the sizes, so that it is exercised all the same.
TINY_SETTINGS = {"CHAT_PAGE_EXCHANGES": "5", "CHAT_RUN_STEPS_SHOWN": "8"}
STEPS_PER_EXCHANGE = 5


# The child: fill, then count queries in-process.


def _run_steps(run: Any, steps: int, index: int, start: Any) -> list[Any]:
    """Return ``steps`` unsaved AgentStep rows: model turns asking for up to three tools
    each, their calls, and the answer last (tracedata's texts and sizes)."""
    from datetime import timedelta

    from tracedata import ANSWER, RESULT, TOOLS

    from chat.models import AgentStep, StepKind, StepStatus

    rows: list[Any] = []
    moment = start
    iteration = 0
    left = steps - 1  # the answer is the last step
    while left > 0:
        block = 3 if left == 5 else min(4, left)  # never leave a turn with no call
        iteration += 1
        calls = [
            {"name": TOOLS[(index + k) % len(TOOLS)], "args": {"query": f"北京 #{index}", "k": k},
             "id": f"call_{index:08x}_{iteration:04x}_{k}", "type": "tool_call"}
            for k in range(block - 1)
        ]  # fmt: skip
        rows.append(
            AgentStep(run=run, ordinal=len(rows) + 1, iteration=iteration,
                      kind=StepKind.MODEL_TURN, status=StepStatus.SUCCESS,
                      raw={"content": "", "tool_calls": calls}, input_tokens=820,
                      output_tokens=64, total_tokens=884, started_at=moment,
                      finished_at=moment + timedelta(milliseconds=600), duration_ms=600)
        )  # fmt: skip
        moment += timedelta(milliseconds=600)
        for k, call in enumerate(calls):
            result = RESULT.format(i=index, tool=call["name"], m=index % 7, d=k + 1, ms=40)
            rows.append(
                AgentStep(run=run, ordinal=len(rows) + 1, iteration=iteration,
                          kind=StepKind.TOOL_CALL, status=StepStatus.SUCCESS,
                          tool_name=call["name"], tool_call_id=call["id"],
                          arguments=call["args"], result=result, started_at=moment,
                          finished_at=moment + timedelta(milliseconds=40), duration_ms=40)
            )  # fmt: skip
            moment += timedelta(milliseconds=40)
        left -= block
    answer = ANSWER.format(i=index, m=index % 7)
    rows.append(
        AgentStep(run=run, ordinal=len(rows) + 1, iteration=iteration + 1,
                  kind=StepKind.MODEL_TURN, status=StepStatus.SUCCESS, text=answer,
                  result=answer, raw={"content": answer}, input_tokens=1460, output_tokens=180,
                  total_tokens=1640, started_at=moment,
                  finished_at=moment + timedelta(milliseconds=600), duration_ms=600)
    )  # fmt: skip
    return rows


def fill_conversation(owner: Any, *, exchanges: int, steps: int, title: str) -> tuple[int, int]:
    """Store a conversation of ``exchanges`` question-and-run pairs, each run of ``steps``
    steps and its answer message; return ``(conversation id, newest run id)``."""
    from datetime import UTC, datetime, timedelta
    from itertools import pairwise

    from tracedata import ANSWER, QUESTION

    from chat.models import AgentRun, AgentStep, Conversation, Message, RunStatus

    conversation = Conversation.objects.create(owner=owner, title=title)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    questions = Message.objects.bulk_create(
        Message(conversation=conversation, role="user", content=QUESTION.format(m=n % 7, i=n))
        for n in range(exchanges)
    )
    for earlier, question in pairwise(questions):
        question.parent = earlier  # one branch: each question follows the one before it
    Message.objects.bulk_update(questions, ["parent"], batch_size=2000)
    runs = AgentRun.objects.bulk_create(
        AgentRun(conversation=conversation, user_message=question, strategy="tool_calling",
                 tool_choice="auto", parallel_tool_calls=True, provider="openai",
                 model_name="gpt-4o-mini", status=RunStatus.SUCCEEDED,
                 started_at=base + timedelta(minutes=n), iterations=steps // 4 + 1,
                 finished_at=base + timedelta(minutes=n, seconds=5), duration_ms=5000,
                 tool_call_count=steps - steps // 4 - 1, output=ANSWER.format(i=n, m=n % 7),
                 input_tokens=2280, output_tokens=244, total_tokens=2524)
        for n, question in enumerate(questions)
    )  # fmt: skip
    Message.objects.bulk_create(
        Message(conversation=conversation, role="assistant", content=run.output, run=run)
        for run in runs
    )
    rows = [row for n, run in enumerate(runs) for row in _run_steps(run, steps, n, run.started_at)]
    AgentStep.objects.bulk_create(rows, batch_size=2000)
    return conversation.pk, runs[-1].pk if runs else 0


def child(sizes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """Fill the database, count each page's queries in-process; return the targets."""
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from chat import fragments

    owner = User.objects.create_superuser("bench", "bench@example.com", "!")
    targets: list[dict[str, Any]] = []
    for messages in sizes["messages"]:
        cid, latest = fill_conversation(
            owner, exchanges=messages // 2, steps=STEPS_PER_EXCHANGE, title=f"{messages} messages"
        )
        targets.append({"page": "conversation", "size": messages, "unit": "messages",
                        "url": f"/c/{cid}/", "ws": cid, "latest": latest,
                        "user": "bench"})  # fmt: skip
        conversation_admin = f"/admin/chat/conversation/{cid}/change/"
        targets.append({"page": "admin conversation page", "size": messages, "unit": "messages",
                        "url": conversation_admin, "latest": None, "expect": "assistant",
                        "user": "bench"})  # fmt: skip
        # "Show earlier messages" once: the window before the newest run.
        targets.append({"page": "show earlier messages", "size": messages, "unit": "messages",
                        "url": f"/c/{cid}/earlier/?before={latest}", "latest": None,
                        "expect": "step-", "user": "bench"})  # fmt: skip
    for steps in sizes["steps"]:
        cid, latest = fill_conversation(owner, exchanges=1, steps=steps, title=f"{steps} steps")
        targets.append({"page": "run on the page", "size": steps, "unit": "steps",
                        "url": f"/c/{cid}/", "ws": cid, "latest": latest,
                        "user": "bench"})  # fmt: skip
        # "Show the N earlier steps": all but the last ones, on request (linear by design).
        targets.append({"page": "run's earlier steps, on request", "size": steps,
                        "unit": "steps", "url": f"/c/{cid}/runs/{latest}/steps/?before={10**6}",
                        "latest": None, "expect": "step-", "user": "bench"})  # fmt: skip
        targets.append({"page": "run's timeline, on opening", "size": steps, "unit": "steps",
                        "url": f"/c/{cid}/runs/{latest}/timeline/", "latest": None,
                        "expect": "tl-row", "user": "bench"})  # fmt: skip
        targets.append({"page": "admin run page", "size": steps, "unit": "steps",
                        "url": f"/admin/chat/agentrun/{latest}/change/", "latest": latest,
                        "user": "bench"})  # fmt: skip
    users = [owner]
    for count in sizes["conversations"]:
        user = User.objects.create_user(f"owner{count}", password="!")
        users.append(user)
        cid = 0
        for n in range(count):
            cid, _ = fill_conversation(user, exchanges=1, steps=STEPS_PER_EXCHANGE, title=f"#{n}")
        targets.append({"page": "sidebar list", "size": count, "unit": "conversations",
                        "url": "/c/list/", "latest": None, "user": user.username})  # fmt: skip
        targets.append({"page": "conversation, sidebar", "size": count, "unit": "conversations",
                        "url": f"/c/{cid}/", "latest": None, "user": user.username})  # fmt: skip
    cookies: dict[str, str] = {}
    clients = {}
    for user in users:
        client = Client()
        client.force_login(user)
        clients[user.username] = client
        cookies[user.username] = client.cookies["sessionid"].value
    for target in targets:  # warm the per-process caches (content types, templates)
        clients[target["user"]].get(target["url"])
    for target in targets:
        client = clients[target["user"]]
        with CaptureQueriesContext(connection) as queries:
            response = client.get(target["url"])
        target.update(_judged(target, response.status_code, response.content), queries=len(queries))
        if "ws" in target:
            with CaptureQueriesContext(connection) as queries:
                frames = fragments.runs_caught_up(conversation_id=target["ws"])
            target["ws_queries"] = len(queries)
            target["ws_bytes_inproc"] = sum(len(f.encode()) for f in frames)
    return {"targets": targets, "cookies": cookies}


def _judged(target: dict[str, Any], status: int, body: bytes) -> dict[str, Any]:
    """Return the status, and an error if the page failed or lacks its newest run."""
    error = "" if status == 200 else f"HTTP {status}"
    latest = target.get("latest")
    if not error and latest and b"step-" not in body:
        error = "no step on the page"
    expect = target.get("expect")
    if not error and expect and expect.encode() not in body:
        error = f"{expect!r} is not in the answer"
    on_chat_page = target["page"] != "admin run page"
    if not error and latest and on_chat_page and f'id="run-{latest}"'.encode() not in body:
        error = f"run {latest} is not on the page"
    return {"status": status, "error": error}


# The launcher: HTTP and websocket timings against Daphne.


def _fetch(base: str, url: str, cookie: str) -> tuple[int, int, float]:
    request = urllib.request.Request(base + url, headers={"Cookie": f"sessionid={cookie}"})
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as failure:
        body, status = failure.read(), failure.code
    return status, len(body), (time.perf_counter() - began) * 1000


async def _catch_up(base: str, target: dict[str, Any], cookie: str) -> tuple[int, float]:
    """Open the conversation's socket; return bytes and ms until the newest run arrives."""
    from websockets.asyncio.client import connect

    uri = f"{base.replace('http', 'ws', 1)}/ws/chat/{target['ws']}/"
    marker = f'id="run-{target["latest"]}"'
    size = 0
    began = time.perf_counter()
    async with connect(
        uri, origin=base, additional_headers={"Cookie": f"sessionid={cookie}"},
        ping_interval=None, open_timeout=60, max_size=None,
    ) as ws:  # fmt: skip
        while True:
            frame = await asyncio.wait_for(ws.recv(), 60)
            size += len(frame.encode() if isinstance(frame, str) else frame)
            if marker in frame:
                return size, (time.perf_counter() - began) * 1000


def measure(base: str, found: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    """Time every target over HTTP (and its socket's catch-up), interleaved; return rows."""
    targets = found["targets"]
    cookies = found["cookies"]
    times: dict[int, list[float]] = {n: [] for n in range(len(targets))}
    ws_times: dict[int, list[float]] = {n: [] for n in range(len(targets))}
    for target in targets:  # warm up: imports, template loading, the first connection
        _fetch(base, target["url"], cookies[target["user"]])
    for _ in range(repeats):
        for n, target in enumerate(targets):
            cookie = cookies[target["user"]]
            status, size, ms = _fetch(base, target["url"], cookie)
            times[n].append(ms)
            target["bytes"] = size
            if status != 200:
                target["error"] = target.get("error") or f"HTTP {status} from Daphne"
            if "ws" in target:
                ws_size, ws_ms = asyncio.run(_catch_up(base, target, cookie))
                ws_times[n].append(ws_ms)
                target["ws_bytes"] = ws_size
    rows = []
    for n, target in enumerate(targets):
        rows.append({**target, "ms": statistics.median(times[n])})
        if "ws" in target:
            rows.append({"page": f"catch-up on connect ({target['page']})", "size": target["size"],
                         "unit": target["unit"], "queries": target["ws_queries"],
                         "ms": statistics.median(ws_times[n]), "bytes": target["ws_bytes"],
                         "status": 200, "error": ""})  # fmt: skip
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Return the rows as a table, each page's sizes together, with growth ratios."""
    pages: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        pages.setdefault(row["page"], []).append(row)
    lines = [f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}",
             f"{'page':44} {'size':>18} {'queries':>8} {'ms':>9} {'KiB':>9}"]  # fmt: skip
    for page, group in pages.items():
        for row in group:
            size = f"{row['size']:,} {row['unit']}"
            mark = f"  FAILED: {row['error']}" if row.get("error") else ""
            lines.append(
                f"{page:44} {size:>18} {row['queries']:>8} {row['ms']:>9.1f} "
                f"{row['bytes'] / 1024:>9.1f}{mark}"
            )
        small, large = group[0], group[-1]
        lines.append(
            f"{'':44} {'growth ' + format(large['size'] / small['size'], '.0f') + 'x':>18} "
            f"{_ratio(large['queries'], small['queries']):>8} "
            f"{_ratio(large['ms'], small['ms']):>9} {_ratio(large['bytes'], small['bytes']):>9}"
        )
    return "\n".join(lines)


def _ratio(large: float, small: float) -> str:
    return f"{large / small:.2f}x" if small else "-"


def main() -> int:
    """Fill, count, serve, time, report; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small sizes, seconds (CI)")
    parser.add_argument("--repeats", type=int, default=None, help="timed loads per page (5)")
    parser.add_argument("--json", action="store_true", help="JSON on stdout, the table on stderr")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child({k: tuple(v) for k, v in json.loads(args.child).items()})))
        return 0
    sizes = TINY if args.tiny else {"messages": MESSAGES, "steps": STEPS,
                                    "conversations": CONVERSATIONS}  # fmt: skip
    repeats = args.repeats or (1 if args.tiny else 5)
    tmp = tempfile.mkdtemp(prefix="growth-")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp}/growth.sqlite3",
           "DJANGO_SETTINGS_MODULE": "project.settings", "DJANGO_DEBUG": "0"}  # fmt: skip
    env.pop("REDIS_URL", None)
    if args.tiny:
        env.update(TINY_SETTINGS)
    window = {name: env.get(name, "default") for name in TINY_SETTINGS}
    began = time.perf_counter()
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env,
                   check=True)  # fmt: skip
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(sizes)],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found = json.loads(out.strip().splitlines()[-1])
    filled = time.perf_counter() - began
    with daphne(env, timeout_s=60, log=Path(tmp) / "daphne.log") as (_server, port):
        rows = measure(f"http://127.0.0.1:{port}", found, repeats)
    report = f"{window}\n" + table(rows)
    failed = [row for row in rows if row.get("error")]
    keys = ("page", "size", "unit", "queries", "ms", "bytes", "status", "error")
    summary = {
        "load_average": os.getloadavg(), "repeats": repeats, "fill_s": round(filled, 1),
        "settings": window,
        "rows": [{key: row.get(key) for key in keys} for row in rows],
    }  # fmt: skip
    if args.json:
        print(report, file=sys.stderr)
        print(json.dumps(summary, indent=2))
    else:
        print(report)
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        subprocess.run(["rm", "-rf", tmp], check=False)
    if failed:
        print(f"{len(failed)} page(s) FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
