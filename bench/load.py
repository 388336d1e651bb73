"""Load-test one Daphne process with N concurrent websocket conversations.

Run from the repository root (see bench/README.md)::

    .venv/bin/python bench/load.py [--conversations 200] [--ramp-s 2] [--json]

It migrates a scratch SQLite database (or the one given with ``--database-url``), starts
Daphne on it exactly as the browser tests do, with the offline demo model, and then plays
N browsers at once, their starts spread over ``--ramp-s`` seconds. Each one gets a session
the way a browser does (``GET /``, the cookie check, the redirect to its new conversation),
opens ``/ws/chat/<id>/`` with its session cookie and the site's Origin, sends one of the
travel questions of ``chat/views.py`` and reads HTML fragments until its run's final
status line, noting the arrival time (``time.time()``) of every frame.

Afterwards it reads every run's steps from the database and checks, client by client, that
a frame created each step, a frame gave its final state, the run's final status arrived,
and the streamed text (deltas with their offsets, plus the periodic whole-text snapshots)
adds up to the stored text. Anything missing is a lost event. Latency is a frame's arrival
minus the step's ``started_at`` / ``finished_at`` (the run's ``finished_at`` for the status
line): the time from the event in the server to the frame in the client, both on this
machine's clock.

Prints completed runs, lost events, latency percentiles, wall time and runs per second,
Daphne's VmRSS / VmHWM before and after, its peak threads and open files (sampled every
0.5 s), CPU seconds, and the lines of its log that look like errors (``daphne.log`` in the
temporary directory). Exits 1 if a run did not succeed or an event was lost. The server is
stopped and the temporary directory removed (unless ``--keep``) however the script ends,
Ctrl-C and SIGTERM included.

With ``--run-owners N`` (and ``--redis-url``) the runs go to N run owners' processes
(``manage.py runowner``, ``CHAT_RUN_WORKERS=1``) and Daphne serves pages and sockets only;
their CPU counts in the CPU per run and their logs in the error lines.

With ``--web-processes N`` (N > 1, and ``--redis-url``) N Daphne processes serve behind an
nginx with the upstream and proxy settings of ``deploy/nginx/agentchat.conf`` (plain http,
one worker; ``make deploy-deps`` installs nginx), as docs/deploy.md deploys them. The
clients talk to nginx; the Daphne figures are the processes' sums, nginx's CPU is printed
apart and counts in the CPU per run, and its error log is read with the servers' logs.

With ``--app floor`` Daphne serves ``bench/floor_asgi.py`` instead: the same visitors'
work (pages, sockets, each run's rows and frames) through Django and Channels as they
come, with no code of ours, which its docstring details: the stack's floor. Its frames
mark runs and steps as the app's do, so its events are checked and timed the same way
(its text is not compared). ``--against-floor`` measures the floor, then the app, with the
same options (the floor keeps its runs in Daphne) and prints ours / floor.

With ``--otel``, a sink collector (``bench/otlp_sink.py``, a process of its own) counts
spans and Daphne's live OpenTelemetry export points at it (``--otel-content`` captures
message content too); the server's CPU is read once the sink has every run's spans, and
the report adds what it received. Without it, no OTEL_* endpoint reaches Daphne.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import json
import os
import platform
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.serving import (  # noqa: E402
    ServerDidNotStart,
    free_port,
    nginx_binary,
    run_owner,
    terminate,
    wait_listening,
)
from scripts.serving import daphne as serve  # noqa: E402

MIB = 1024 * 1024
FINAL_STEP = ("success", "error")
LOST_KINDS = ("message accepted", "step started", "step finished", "run status", "text")

RUN_RE = re.compile(r'<section class="run" id="run-(\d+)"')
STATUS_RE = re.compile(r'id="run-(\d+)-status" data-status="(\w+)"')
STEP_RE = re.compile(r'id="step-(\d+)"[^>]*?\sdata-status="(\w+)"')
DELTA_RE = re.compile(
    r'<div hx-swap-oob="beforeend:#step-(\d+)-text"(?: data-offset="(\d+)")?>(.*?)</div>', re.S
)
SNAPSHOT_RE = re.compile(
    r'<div class="turn-text streaming" id="step-(\d+)-text" hx-swap-oob="true">(.*?)</div>', re.S
)
APPS = {"app": "project.asgi:application", "floor": "bench.floor_asgi:application"}
FLOOR_SETTINGS = "bench.floor_settings"
CONVERSATION_RE = re.compile(r"/c/(\d+)/$")
# Errors, and what channels-redis logs (at INFO) when it drops a message: "over capacity".
EXPORT_COST_RE = re.compile(
    r"telemetry: (\d+) run\(s\) exported; CPU ([\d.]+) s reading and building spans, "
    r"([\d.]+) s sending"
)
LOG_PROBLEMS = re.compile(
    r"Traceback|ERROR|CRITICAL|locked|Too many open files|over capacity"
    r"|\[(?:error|crit|alert|emerg)\]"  # nginx's levels, in its error log
)


def examples() -> list[str]:
    """Return the example questions the empty chat page offers (the demo's own, no Django)."""
    from agents.demo.scenarios import EXAMPLES

    return list(EXAMPLES)


# --- the server ---------------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """Return ``VmRSS``, ``VmHWM`` (bytes), ``Threads`` and open ``fds`` of process ``pid``."""
    figures = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures[key] = int(value.split()[0]) * 1024
            elif key == "Threads":
                figures[key] = int(value)
    figures["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return figures


def proc_status_sum(pids: Sequence[int]) -> dict[str, int]:
    """Return :func:`proc_status` summed over ``pids`` (the web processes)."""
    total: dict[str, int] = {}
    for pid in pids:
        for key, value in proc_status(pid).items():
            total[key] = total.get(key, 0) + value
    return total


def open_files_limit(pid: int) -> int:
    """Return the soft limit of open files of process ``pid`` (``/proc/<pid>/limits``)."""
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    return int(line.split()[3])


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """Return the user + system CPU time of process ``pid`` (or its thread ``tid``) in s."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def daphne(
    env: dict[str, str],
    log: Path,
    *,
    profile_dir: Path | None = None,
    migrate: bool = True,
    application: str = APPS["app"],
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Migrate (unless ``migrate`` is false), start Daphne on a free port, yield (process,
    port); always stop it.

    With ``profile_dir``, Daphne loads ``bench/profiling/sitecustomize.py``, which
    profiles and counts its work from the SIGUSR1 :func:`measure` sends until it exits,
    and writes ``server.prof`` and ``counts.json`` there.
    """
    if migrate:
        manage = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
        subprocess.run(manage, cwd=ROOT, env=env, check=True)
    if profile_dir is not None:
        path = [str(ROOT / "bench" / "profiling"), env.get("PYTHONPATH", "")]
        env = {**env, "BENCH_PROFILE_DIR": str(profile_dir),
               "PYTHONPATH": os.pathsep.join(p for p in path if p)}  # fmt: skip
    with serve(env, timeout_s=30, log=log, application=application) as started:
        yield started


@contextmanager
def otlp_sink() -> Iterator[str]:
    """Start ``bench/otlp_sink.py`` in a process of its own; yield its base URL; stop it."""
    command = [sys.executable, str(ROOT / "bench" / "otlp_sink.py")]
    sink = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        port = int(sink.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        sink.terminate()
        sink.wait(10)


def sink_counts(url: str) -> dict[str, int]:
    """Return what the sink has received: ``{"requests": N, "spans": N}``."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/count", timeout=10) as response:
        return json.loads(response.read())


def wait_for_spans(url: str, expected: int, timeout_s: float) -> dict[str, int]:
    """Poll the sink until it has ``expected`` spans or ``timeout_s`` passes; return its
    counts (the batch processor sends every few seconds)."""
    deadline = time.monotonic() + timeout_s
    counts = sink_counts(url)
    while counts["spans"] < expected and time.monotonic() < deadline:
        time.sleep(0.25)
        counts = sink_counts(url)
    return counts


NGINX_CONF = """\
# deploy/nginx/agentchat.conf's upstream and proxy settings, on plain http (bench only).
daemon off;
{user}
worker_processes 1;
worker_rlimit_nofile 20000;
pid {prefix}/nginx.pid;
error_log {prefix}/nginx-error.log;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream agentchat {{
        least_conn;
{servers}
        keepalive 16;
    }}
    map $http_upgrade $agentchat_connection {{
        default upgrade;
        ""      "";
    }}
    server {{
        listen 127.0.0.1:{port};
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $agentchat_connection;
        proxy_http_version 1.1;
        location /ws/ {{
            proxy_pass http://agentchat;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            proxy_buffering off;
        }}
        location / {{
            proxy_pass http://agentchat;
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


@contextmanager
def nginx_front(
    ports: Sequence[int], workdir: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Start nginx on a free port in front of Daphne processes on ``ports``; yield (master
    process, port); always stop it. Raises ``ServerDidNotStart`` with its error log if it
    does not listen within 10 s."""
    binary = nginx_binary()
    assert binary is not None  # main() checks
    prefix = workdir / "nginx"
    prefix.mkdir()
    port = free_port()
    servers = "\n".join(
        f"        server 127.0.0.1:{p} max_fails=3 fail_timeout=10s;" for p in ports
    )
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONF.format(
        prefix=prefix, port=port, servers=servers,
        # Its workers write temporary files here, in a directory only its owner may enter.
        user="user root;" if os.geteuid() == 0 else "",
    ))  # fmt: skip
    log = prefix / "nginx-error.log"
    with log.open("ab") as out:  # appended to, as nginx does: not written over its lines
        process = subprocess.Popen([binary, "-p", str(prefix), "-c", str(conf), "-e", str(log)],
                                   stderr=out)  # fmt: skip
    try:
        try:
            wait_listening(process, port, timeout_s=10)
        except ServerDidNotStart as failure:
            tail = log.read_text(errors="replace")[-3000:]
            raise ServerDidNotStart(f"nginx {failure}\n{tail}".rstrip()) from None
        yield process, port
    finally:
        terminate(process)


def process_tree_cpu_seconds(pid: int) -> float:
    """Return the CPU seconds of process ``pid`` and its children (nginx's workers)."""
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        pids = [pid, *(int(child) for child in children.read().split())]
    return sum(cpu_seconds(p) for p in pids)


def server_log_problems(workdir: Path) -> list[str]:
    """Return the lines of the servers' logs in ``workdir`` that say something went wrong
    (``LOG_PROBLEMS``): Daphne's (``daphne.log``, ``daphne-N.log``), the run owners' and,
    with ``--web-processes``, nginx's (an upstream that refused or timed out is said there
    only: nginx passes the request on to another Daphne)."""
    logs = [workdir / "daphne.log", *sorted(workdir.glob("daphne-*.log")),
            *sorted(workdir.glob("runowner-*.log")),
            *sorted(workdir.glob("nginx/nginx-error.log"))]  # fmt: skip
    return [line for path in logs for line in path.read_text().splitlines()
            if LOG_PROBLEMS.search(line)]  # fmt: skip


# --- the clients --------------------------------------------------------------------------


@dataclass
class Client:
    """One simulated browser: its conversation, the frames it received and when."""

    index: int
    question: str
    conversation_id: int | None = None
    began: float = 0.0
    paged: float = 0.0
    opened: float = 0.0
    sent: float = 0.0
    done: float = 0.0
    frames: list[tuple[float, str]] = field(default_factory=list)
    final_status: str = ""
    error: str = ""


class NoPage(Exception):
    """A first visit that did not end on a conversation's page."""


async def first_visit(base: str, timeout: float) -> tuple[int, str]:
    """Load ``/`` as a new browser does (the cookie check, the redirect to a new
    conversation, its page); return the conversation's id and the session's cookies."""
    import httpx

    # verify=False: plain HTTP to 127.0.0.1. Building httpx's default TLS context costs
    # 18 ms of this process's CPU a client, which stalled every client for seconds.
    async with httpx.AsyncClient(follow_redirects=True, timeout=timeout, verify=False) as http:
        page = await http.get(f"{base}/")
        match = CONVERSATION_RE.search(page.url.path)
        if page.status_code != 200 or not match:
            raise NoPage(f"GET / ended at {page.url} with HTTP {page.status_code}")
        return int(match.group(1)), "; ".join(f"{k}={v}" for k, v in http.cookies.items())


def _failure(exc: Exception) -> str:
    """Return what a browser's failure says: a :class:`NoPage` its own words."""
    return str(exc) if isinstance(exc, NoPage) else f"{type(exc).__name__}: {exc}"


def open_socket(base: str, conversation_id: int, cookie: str, timeout: float) -> Any:
    """Return the websocket of a conversation's page (an async context manager)."""
    from websockets.asyncio.client import connect

    # No client pings: browsers send none, and a late pong under load would close the
    # socket from this side and count as a loss the server did not cause.
    return connect(
        f"{base.replace('http', 'ws', 1)}/ws/chat/{conversation_id}/", origin=base,
        additional_headers={"Cookie": cookie}, ping_interval=None, open_timeout=timeout,
        max_size=None,
    )  # fmt: skip


async def converse(client: Client, base: str, delay: float, timeout: float) -> None:
    """Open a session and a socket as a browser would, ask, read until the run ends."""
    await asyncio.sleep(delay)
    client.began = time.time()
    try:
        client.conversation_id, cookie = await first_visit(base, timeout)
        client.paged = time.time()
        async with open_socket(base, client.conversation_id, cookie, timeout) as ws:
            client.opened = time.time()
            await ws.send(json.dumps({"content": client.question}))
            client.sent = time.time()
            while True:
                frame = await ws.recv()
                client.frames.append((time.time(), frame))
                if isinstance(frame, str) and (status := _final_status(frame)):
                    client.final_status = status
                    client.done = time.time()
                    return
    except asyncio.CancelledError:
        client.error = client.error or "timed out"
        raise
    except Exception as exc:
        client.error = _failure(exc)


def _final_status(frame: str) -> str:
    for _run, status in STATUS_RE.findall(frame):
        if status != "running":
            return status
    return ""


@dataclass
class Probe:
    """A visitor who opens a page while the runs go and asks nothing: when it began
    (``time.time()``), and its page and socket times in ms (0 when it never got there)."""

    began: float = 0.0
    paged_ms: float = 0.0
    opened_ms: float = 0.0
    during_runs: bool = False
    error: str = ""


async def open_page(probe: Probe, base: str, delay: float, timeout: float,
                    clients: list[Client]) -> None:  # fmt: skip
    """After ``delay``, open a page and its socket as a new visitor does, then leave."""
    await asyncio.sleep(delay)
    probe.began = time.time()
    probe.during_runs = any(c.opened and not c.done for c in clients)
    try:
        conversation_id, cookie = await first_visit(base, timeout)
        probe.paged_ms = (time.time() - probe.began) * 1000
        async with open_socket(base, conversation_id, cookie, timeout):
            probe.opened_ms = (time.time() - probe.began) * 1000
    except Exception as exc:
        probe.error = _failure(exc)


async def play(
    clients: list[Client], base: str, pids: Sequence[int], *, ramp_s: float, timeout_s: float,
    probes: Sequence[Probe] = (), probe_every_s: float = 1.0,
) -> dict[str, int]:  # fmt: skip
    """Run every client, starts spread evenly over ``ramp_s``; cancel the rest at the timeout.
    Each of ``probes`` opens a page after the ramp, one every ``probe_every_s``.

    Return the peaks of the web processes' ``/proc`` figures, summed over ``pids``
    (``proc_status_sum``), sampled every 0.5 s.
    """
    n = len(clients)
    tasks = [
        asyncio.create_task(converse(c, base, ramp_s * i / n, timeout_s))
        for i, c in enumerate(clients)
    ]
    tasks += [
        asyncio.create_task(open_page(p, base, ramp_s + probe_every_s * i, timeout_s, clients))
        for i, p in enumerate(probes)
    ]
    peaks: dict[str, int] = {}

    async def sample() -> None:
        while True:
            for key, value in proc_status_sum(pids).items():
                peaks[key] = max(peaks.get(key, 0), value)
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    _done, pending = await asyncio.wait(tasks, timeout=timeout_s + ramp_s)
    for task in [*pending, sampler]:
        task.cancel()
    await asyncio.gather(*pending, sampler, return_exceptions=True)
    return peaks


# --- the check ----------------------------------------------------------------------------


def _utc_seconds(value: datetime | str | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):  # SQLite: naive UTC text
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def read_rows(database_url: str, conversation_ids: list[int]) -> tuple[list[dict], list[dict]]:
    """Return the runs of ``conversation_ids`` and their steps, as dicts, from the database."""
    run_sql = (
        "SELECT id, conversation_id, status, error, started_at, finished_at FROM chat_agentrun "
        "WHERE conversation_id IN ({})"
    )
    step_sql = (
        "SELECT s.id, s.run_id, s.kind, s.status, s.text, s.started_at, s.finished_at "
        "FROM chat_agentstep s JOIN chat_agentrun r ON r.id = s.run_id "
        "WHERE r.conversation_id IN ({}) ORDER BY s.run_id, s.ordinal"
    )
    if database_url.startswith("sqlite:"):
        path = ROOT / database_url.removeprefix("sqlite:///")  # relative: to the server's cwd
        connection: Any = sqlite3.connect(path)
        marks = ",".join("?" * len(conversation_ids))
    else:
        import psycopg

        connection = psycopg.connect(database_url)
        marks = ",".join(["%s"] * len(conversation_ids))
    with connection:
        tables = []
        for sql in (run_sql, step_sql):
            cursor = connection.execute(sql.format(marks), conversation_ids)
            names = [column[0] for column in cursor.description]
            tables.append([dict(zip(names, row, strict=True)) for row in cursor.fetchall()])
    connection.close()
    return tables[0], tables[1]


def _utf8(frame: str | bytes) -> int:
    """Return a frame's size on the wire, in bytes (text frames are UTF-8)."""
    return len(frame.encode()) if isinstance(frame, str) else len(frame)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Check:
    """What the clients saw against what the database holds."""

    steps: int = 0
    runs: int = 0
    texts: int = 0  # model turns whose streamed text was compared with the stored text
    lost: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOST_KINDS, 0))
    latency_ms: dict[str, list[float]] = field(
        default_factory=lambda: {"step started": [], "step finished": [], "run finished": []}
    )
    examples: list[str] = field(default_factory=list)

    def lose(self, kind: str, what: str) -> None:
        self.lost[kind] += 1
        if len(self.examples) < 10:
            self.examples.append(what)

    @property
    def lost_total(self) -> int:
        return sum(self.lost.values())


@dataclass
class Seen:
    """What one client's frames showed of its run: when each thing first arrived."""

    accepted: float | None = None  # the frame with the user's message and the empty run
    status: float | None = None  # the run's final status line
    started: dict[int, float] = field(default_factory=dict)  # step id -> arrival
    finished: dict[int, float] = field(default_factory=dict)
    text: dict[int, str] = field(default_factory=dict)  # streamed text, as the page has it
    gaps: dict[int, int] = field(default_factory=dict)  # deltas past the end of that text


def read_frames(frames: list[tuple[float, str]], run_id: int) -> Seen:
    """Return what ``frames`` (arrival time, frame) showed of run ``run_id``.

    Streamed text is rebuilt as the page's script does: a delta is appended when its
    ``data-offset`` is where the text ends, and a whole-text snapshot replaces the text.
    A delta starting past the end is a gap (the page drops it and waits for a snapshot).
    """
    seen = Seen()
    for at, frame in frames:
        if not isinstance(frame, str):
            continue
        if seen.accepted is None and str(run_id) in RUN_RE.findall(frame):
            seen.accepted = at
        for step_id, status in STEP_RE.findall(frame):
            if status == "running":
                seen.started.setdefault(int(step_id), at)
            elif status in FINAL_STEP:
                seen.finished.setdefault(int(step_id), at)
        for step_id, snapshot in SNAPSHOT_RE.findall(frame):
            seen.text[int(step_id)] = html.unescape(snapshot)
        for step_id, offset, delta in DELTA_RE.findall(frame):
            key = int(step_id)
            so_far = seen.text.get(key, "")
            if offset and int(offset) > _utf16(so_far):
                seen.gaps[key] = seen.gaps.get(key, 0) + 1
            elif not offset or int(offset) == _utf16(so_far):
                seen.text[key] = so_far + html.unescape(delta)
        for status_run, status in STATUS_RE.findall(frame):
            if status_run == str(run_id) and status != "running" and seen.status is None:
                seen.status = at
    return seen


def check(
    clients: list[Client], runs: list[dict], steps: list[dict], *, texts: bool = True
) -> Check:
    """Compare each client's frames with its run's rows: lost events and latencies; with
    ``texts``, each model turn's streamed text with its stored text too."""
    result = Check()
    run_of = {r["conversation_id"]: r for r in runs}
    steps_of: dict[int, list[dict]] = {}
    for step in steps:
        steps_of.setdefault(step["run_id"], []).append(step)
    for client in clients:
        run = run_of.get(client.conversation_id)
        if run is None:
            continue  # never accepted: reported as a failed run, not as lost events
        result.runs += 1
        seen = read_frames(client.frames, run["id"])
        where = f"client {client.index} (conversation {client.conversation_id}, run {run['id']})"
        if seen.accepted is None:
            result.lose("message accepted", f"{where}: no frame with the run")
        if seen.status is None:
            result.lose("run status", f"{where}: no final status line")
        elif (end := _utc_seconds(run["finished_at"])) is not None:
            result.latency_ms["run finished"].append((seen.status - end) * 1000)
        for step in steps_of.get(run["id"], []):
            result.steps += 1
            sid = step["id"]
            for kind, arrivals, column in (
                ("step started", seen.started, "started_at"),
                ("step finished", seen.finished, "finished_at"),
            ):
                if sid not in arrivals:
                    result.lose(kind, f"{where}: step {sid} ({step['kind']}) never {kind[5:]}")
                elif (db_at := _utc_seconds(step[column])) is not None:
                    result.latency_ms[kind].append((arrivals[sid] - db_at) * 1000)
            if not texts or step["kind"] != "model_turn":
                continue
            stored, streamed = step["text"] or "", seen.text.get(sid, "")
            result.texts += 1 if stored else 0
            if seen.gaps.get(sid) or streamed != stored:
                result.lose(
                    "text",
                    f"{where}: step {sid} streamed {_utf16(streamed)} of {_utf16(stored)} "
                    f"UTF-16 units, {seen.gaps.get(sid, 0)} gaps",
                )
    return result


# --- the report ---------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float | None:
    """Return the nearest-rank ``p`` percentile (0-100) of ``values``, or None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def machine(database_url: str, redis_url: str) -> dict[str, Any]:
    """Return what the figures depend on: CPUs, memory, Python, database, versions."""
    with open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info if "model name" in line), "")
    with open("/proc/meminfo") as info:
        memory = int(info.readline().split()[1]) * 1024
    info_: dict[str, Any] = {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "memory_gib": round(memory / 1024**3, 1),
        "python": platform.python_version(),
        "open_files_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }
    if database_url.startswith("sqlite:"):
        info_["database"] = f"SQLite {sqlite3.sqlite_version}"
    else:
        import psycopg

        with psycopg.connect(database_url) as connection:
            version = connection.execute("SHOW server_version").fetchone()[0]
        info_["database"] = f"PostgreSQL {version.split()[0]}"
    info_["channel_layer"] = "Redis (channels-redis)" if redis_url else "in-memory"
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    info_["commit"] = head.stdout.strip() + (" (with local changes)" if changed.stdout else "")
    for package in ("Django", "daphne", "channels", "channels-redis", "websockets", "httpx"):
        try:
            info_[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info_[package] = "not installed"
    return info_


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def report(figures: dict[str, Any]) -> str:
    """Return the figures as the text table and the verdict line."""
    m, runs, mem = figures["machine"], figures["runs"], figures["server"]
    per_run = figures["frames"] / max(1, runs["completed"])
    # Several web processes: their sums (behind nginx).
    daphnes = "Daphne" if mem["web_processes"] == 1 else f"Daphne x{mem['web_processes']}"
    payers = (("Daphne's", True), ("run owners'", mem["run_owners"]),
              ("nginx's", mem["web_processes"] > 1))  # fmt: skip
    lost = ", ".join(f"{k} {v}" for k, v in figures["lost"].items())
    lines = [
        f"$ {figures['command']}",
        "the app:" if figures["app"] == "app" else "the stack's floor (bench/floor_asgi.py):",
        f"{m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, "
        f"{m['database']}, {m['channel_layer']} channel layer, Django {m['Django']}, "
        f"Daphne {m['daphne']}, Channels {m['channels']}, websockets {m['websockets']}; "
        f"commit {m['commit']}",
        f"demo model: token delay {figures['token_delay_ms']:g} ms, "
        f"tool delay {figures['tool_delay_ms']:g} ms; starts spread over {figures['ramp_s']:g} s",
        "",
        f"conversations      {figures['conversations']}",
        f"runs completed     {runs['completed']} / {figures['conversations']} "
        f"(succeeded {runs['succeeded']})",
        f"wall time          {figures['wall_s']:.1f} s (first request to "
        f"{'last status line' if runs['completed'] == figures['conversations'] else 'give-up'}), "
        f"{figures['runs_per_s']:.1f} runs/s",
        f"frames received    {figures['frames']:,} ({per_run:.0f} per run, "
        f"{figures['frame_bytes'] / max(1, runs['completed']) / 1024:.1f} KiB); steps checked "
        f"{figures['steps']:,}, streamed texts checked {figures['texts']:,}",
        f"lost events        {figures['lost_total']} ({lost})",
        "",
        f"{'latency, ms':<36}{'count':>7}{'p50':>8}{'p95':>8}{'max':>8}",
    ]
    for name, row in figures["latency_ms"].items():
        lines.append(
            f"{name:<36}{row['count']:>7}{_ms(row['p50']):>8}{_ms(row['p95']):>8}"
            f"{_ms(row['max']):>8}"
        )
    lines += [
        "",
        f"{daphnes + ' VmRSS':<19}{mem['rss_before_mib']:.0f} MiB before, "
        f"{mem['rss_after_mib']:.0f} MiB"
        f" after; VmHWM {mem['hwm_after_mib']:.0f} MiB",
        f"{daphnes + ' threads':<19}{mem['threads_before']} before, {mem['threads_peak']} at peak; "
        f"open files {mem['fds_before']} before, {mem['fds_peak']} at peak "
        f"(limit {mem['fds_limit']})",
        f"CPU seconds        {daphnes} {mem['cpu_s']:.1f} (event loop thread"
        f"{'s' if mem['web_processes'] > 1 else ''} "
        f"{mem['cpu_event_loop_s']:.1f}, other threads "
        f"{mem['cpu_s'] - mem['cpu_event_loop_s']:.1f}), this client "
        f"{figures['client_cpu_s']:.1f}"
        + (
            f", {mem['run_owners']} run owner(s) {mem['cpu_run_owners_s']:.1f}"
            if mem["run_owners"]
            else ""
        )
        + (f", nginx {mem['cpu_nginx_s']:.1f}" if mem["web_processes"] > 1 else ""),
        f"CPU per run        {mem['cpu_per_run_ms']:.0f} ms ("
        + ", ".join(name for name, on in payers if on)
        + " CPU / runs completed)",
        "load average       {:.2f} {:.2f} {:.2f} (1, 5, 15 min, at the end)".format(
            *figures["load_average"]
        ),
        f"server log         {len(figures['log_problems'])} lines matching errors",
    ]
    lines += [f"  {line}" for line in figures["log_problems"][:5]]
    if figures["otel"] is not None:
        otel = figures["otel"]
        lines.append(f"OpenTelemetry      live export on: the sink received {otel['spans']} of "
                     f"{otel['spans_expected']} spans in {otel['requests']} requests")  # fmt: skip
        if "export_cpu_s" in otel:
            share = otel["export_cpu_s"] / max(mem["cpu_s"], 1e-9) * 100
            per_run = otel["export_cpu_s"] * 1000 / max(1, otel["runs_exported"])
            lines.append(f"export CPU         {otel['export_cpu_s']:.2f} s in its own threads "
                         f"({per_run:.1f} ms per run, {share:.1f}% of Daphne's CPU)")  # fmt: skip
    if figures["profile"] is not None:
        lines += profile_lines(figures["profile"], figures["runs"]["completed"])
        if Path(figures["profile_dir"], "server.prof").exists():
            lines.append(f"profile            {figures['profile_dir']}/server.prof (pstats)")
    for failure in figures["failures"][:10]:
        lines.append(f"not succeeded: {failure}")
    lines += [f"lost: {example}" for example in figures["lost_examples"]]
    lines.append(figures["verdict"])
    return "\n".join(lines)


# What --against-floor compares: (label, figure's path in the JSON).
AGAINST_FLOOR = (
    ("CPU per run, ms", ("server", "cpu_per_run_ms")),
    ("GET / -> page loaded p95, ms", ("latency_ms", "GET / -> page loaded (client)", "p95")),
    ("GET / -> socket open p50, ms", ("latency_ms", "GET / -> socket open (client)", "p50")),
    ("GET / -> socket open p95, ms", ("latency_ms", "GET / -> socket open (client)", "p95")),
    ("mid-run visitor: socket open p50, ms",
     ("latency_ms", "mid-run visitor: GET / -> socket open", "p50")),
    ("mid-run visitor: socket open p95, ms",
     ("latency_ms", "mid-run visitor: GET / -> socket open", "p95")),
    ("step events p50, ms", ("latency_ms", "all step events", "p50")),
    ("step events p95, ms", ("latency_ms", "all step events", "p95")),
    ("send -> first frame p50, ms", ("latency_ms", "send -> first frame (client)", "p50")),
    ("frames per run", ("frames",)),
    ("frame KiB per run", ("frame_bytes",)),
    ("wall time, s", ("wall_s",)),
)  # fmt: skip
# Figures given per run, and their units' scale: the rest are printed as they are.
PER_RUN = {"frames": 1, "frame_bytes": 1024}


def _figure(figures: dict[str, Any], where: tuple[str, ...]) -> float | None:
    value: Any = figures
    for key in where:
        value = value[key]
    if where[0] in PER_RUN:
        return value / max(1, figures["runs"]["completed"]) / PER_RUN[where[0]]
    return value


def _one(value: float | None) -> str:
    """Return ``value`` whole from 100 on, else with one decimal ("-" for None)."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def floor_lines(app: dict[str, Any], floor: dict[str, Any]) -> list[str]:
    """Return the app's figures against the floor's (``--against-floor``) as lines: each
    figure, both sides and ours / floor."""
    lines = [
        "ours against the stack's floor (bench/floor_asgi.py), measured in this invocation",
        "(ratio: ours / floor, higher is worse; the floor has the app's shape at 200 "
        "conversations, where the comparison holds; ratios of a few ms are mostly noise):",
        f"{'':<38}{'ours':>9}{'floor':>9}{'ratio':>8}",
    ]
    for label, where in AGAINST_FLOOR:
        ours, bare = _figure(app, where), _figure(floor, where)
        ratio = f"{ours / bare:.1f}x" if ours is not None and bare else "-"
        lines.append(f"{label:<38}{_one(ours):>9}{_one(bare):>9}{ratio:>8}")
    return lines


def profile_lines(counts: dict[str, Any], runs: int) -> list[str]:
    """Return the counts of ``bench/profiling/sitecustomize.py``, per run, as lines."""
    per = max(1, runs)
    wait, run = counts["queue_wait_ms"], counts["run_ms"]
    lines = [
        f"database_sync_to_async {counts['database_sync_to_async_total']:,} calls "
        f"({counts['database_sync_to_async_total'] / per:.1f} per run); queue wait p50 "
        f"{_ms(wait['p50'])} ms, p95 {_ms(wait['p95'])} ms; run p50 {run['p50'] or 0:.1f} ms, "
        f"thread busy {run['sum'] / 1000:.1f} s",
        f"queries            {counts['queries_total']:,} ({counts['queries_total'] / per:.1f} "
        f"per run); connections opened "
        f"{counts.get('connections', {}).get('opened', 0):,}",
        f"template renders   {counts['templates_total']:,} "
        f"({counts['templates_total'] / per:.1f} per run)",
    ]
    waits = counts.get("queue_wait_ms_by_call", {})
    for key in ("database_sync_to_async", "templates", "queries"):
        top = list(counts.get(key, {}).items())[:8]
        for name, n in top:
            line = f"  {key}: {name} {n / per:.2f}/run"
            if name in waits:
                line += f", wait p50 {_ms(waits[name]['p50'])} / p95 {_ms(waits[name]['p95'])} ms"
            lines.append(line)
    # CPU of each template's renders (includes counted in their includer too).
    renders, cpu = counts.get("templates", {}), counts.get("template_cpu_ms", {})
    lines += [
        f"  template CPU: {name} {ms / per:.2f} ms/run, {ms / max(1, renders.get(name, 1)):.2f} "
        f"ms a render"
        for name, ms in list(cpu.items())[:8]
    ]
    return lines


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else None,
    }


# --- main -------------------------------------------------------------------------------


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Start the server, play the clients, check them against the database; return figures."""
    database_url = args.database_url or f"sqlite:///{workdir / 'load.sqlite3'}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEMO_TOKEN_DELAY_MS": f"{args.token_delay_ms:g}",
        "DEMO_TOOL_DELAY_MS": f"{args.tool_delay_ms:g}",
        "DJANGO_SETTINGS_MODULE": FLOOR_SETTINGS if args.app == "floor" else "project.settings",
    }
    env.pop("OPENAI_API_KEY", None)
    env.pop("REDIS_URL", None)
    for name in [name for name in env if name.startswith("OTEL_")]:
        env.pop(name)  # export on or off as the options say, never the caller's collector
    if args.redis_url:
        env["REDIS_URL"] = args.redis_url
        # A prefix of its own: pub/sub channels are global to the Redis server, and the run
        # owners' group must not reach another app's (or another bench's) run owners.
        env["REDIS_PREFIX"] = f"bench-load-{os.getpid()}"
    if args.run_owners:
        env["CHAT_RUN_WORKERS"] = "1"
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(otlp_sink()) if args.otel else None
        if sink is not None:
            env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{sink}/v1/traces"
            env["OTEL_SERVICE_NAME"] = "agent-chat-bench"
            if args.otel_content:
                env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
        return _measure(args, workdir, env, database_url, sink)


def _measure(
    args: argparse.Namespace, workdir: Path, env: dict[str, str], database_url: str,
    sink: str | None,
) -> dict[str, Any]:  # fmt: skip
    questions = examples()
    clients = [Client(i, questions[i % len(questions)]) for i in range(args.conversations)]
    log = workdir / "daphne.log"
    profile_dir = Path(args.profile).resolve() if args.profile else None
    if args.counts_only:
        env["BENCH_PROFILE_COUNTS_ONLY"] = "1"
    with contextlib.ExitStack() as stack:
        web = [
            stack.enter_context(daphne(
                env, log if i == 0 else workdir / f"daphne-{i}.log",
                profile_dir=profile_dir, migrate=i == 0, application=APPS[args.app],
            ))
            for i in range(args.web_processes)
        ]  # fmt: skip
        process, port = web[0]
        pids = [p.pid for p, _ in web]
        front = None
        if args.web_processes > 1:
            front, port = stack.enter_context(nginx_front([p for _, p in web], workdir))
        owners = [
            stack.enter_context(run_owner(env, timeout_s=30, log=workdir / f"runowner-{i}.log"))
            for i in range(args.run_owners)
        ]  # fmt: skip
        before, cpu_before = proc_status_sum(pids), sum(cpu_seconds(pid) for pid in pids)
        loop_cpu_before = sum(cpu_seconds(pid, pid) for pid in pids)
        owners_cpu_before = sum(cpu_seconds(owner.pid) for owner in owners)
        front_cpu_before = process_tree_cpu_seconds(front.pid) if front else 0.0
        if profile_dir is not None:
            process.send_signal(signal.SIGUSR1)  # start profiling (bench/profiling/)
        say(f"Daphne {', '.join(map(str, pids))}"
            + (f" behind nginx on port {port}" if front else f" on port {port}")
            + f"; {args.conversations} conversations...")  # fmt: skip
        began = time.time()
        base = f"http://127.0.0.1:{port}"
        probes = [Probe() for _ in range(args.probes)]
        # The clients' CPU, not the process's: --against-floor measures twice in it.
        client_cpu_before = time.process_time()
        peaks = asyncio.run(
            play(clients, base, pids, ramp_s=args.ramp_s, timeout_s=args.timeout_s,
                 probes=probes, probe_every_s=args.probe_every_s)
        )  # fmt: skip
        client_cpu = time.process_time() - client_cpu_before
        # Until the last status line; until the give-up when a client never got one.
        ended = time.time()
        if all(c.done for c in clients):
            ended = max(c.done for c in clients)
        otel = None
        if sink is not None:
            # The server's export work is counted: its CPU is read once the sink has every
            # run's spans (one per run and one per step).
            ids = [c.conversation_id for c in clients if c.conversation_id is not None]
            runs, steps = read_rows(database_url, ids) if ids else ([], [])
            expected = len(runs) + len(steps)
            otel = {"spans_expected": expected, **wait_for_spans(sink, expected, 30.0)}
        after, cpu_after = proc_status_sum(pids), sum(cpu_seconds(pid) for pid in pids)
        loop_cpu = sum(cpu_seconds(pid, pid) for pid in pids) - loop_cpu_before
        owners_cpu = sum(cpu_seconds(owner.pid) for owner in owners) - owners_cpu_before
        front_cpu = process_tree_cpu_seconds(front.pid) - front_cpu_before if front else 0.0
        fds_limit = open_files_limit(process.pid)
        load_average = os.getloadavg()
    counts = None
    if profile_dir is not None and (profile_dir / "counts.json").exists():
        counts = json.loads((profile_dir / "counts.json").read_text())
    conversation_ids = [c.conversation_id for c in clients if c.conversation_id is not None]
    runs, steps = read_rows(database_url, conversation_ids) if conversation_ids else ([], [])
    # The floor's frames mark its runs and steps as the app's do; its text is no answer's.
    result = check(clients, runs, steps, texts=args.app == "app")

    run_of = {r["conversation_id"]: r for r in runs}
    failures = []
    for c in clients:
        run = run_of.get(c.conversation_id) or {}
        if c.final_status != "succeeded" or run.get("status") != "succeeded":
            failures.append(
                f"client {c.index} conversation {c.conversation_id}: client saw "
                f"{c.final_status or 'no final status'}, database says "
                f"{run.get('status', 'no run')} {run.get('error') or ''} {c.error}".rstrip()
            )
    log_problems = server_log_problems(workdir)
    if otel is not None:
        # What the export's own threads spent (logged by Daphne as it stopped): the cost
        # of export without the noise of comparing two whole runs on a shared machine.
        cost = EXPORT_COST_RE.search(log.read_text())
        if cost is not None:
            otel["runs_exported"] = int(cost.group(1))
            otel["export_cpu_s"] = float(cost.group(2)) + float(cost.group(3))
    completed = sum(1 for c in clients if c.final_status)
    succeeded = sum(1 for c in clients if c.final_status == "succeeded")
    accepted_ms = [
        (c.frames[0][0] - c.sent) * 1000 for c in clients if c.frames and c.sent
    ]  # client clock only
    connect_ms = [(c.opened - c.began) * 1000 for c in clients if c.opened]
    latency = {name: _summary(values) for name, values in result.latency_ms.items()}
    latency["all step events"] = _summary(
        result.latency_ms["step started"] + result.latency_ms["step finished"]
    )
    latency["run duration (database)"] = _summary(
        [
            (_utc_seconds(r["finished_at"]) - _utc_seconds(r["started_at"])) * 1000
            for r in runs
            if r["finished_at"] is not None
        ]
    )
    latency["send -> first frame (client)"] = _summary(accepted_ms)
    latency["GET / -> page loaded (client)"] = _summary(
        [(c.paged - c.began) * 1000 for c in clients if c.paged]
    )
    latency["GET / -> socket open (client)"] = _summary(connect_ms)
    # Visitors who open a page while the runs go (the "a page someone opens").
    during = [p for p in probes if p.during_runs]
    latency["mid-run visitor: GET / -> page"] = _summary([p.paged_ms for p in during if p.paged_ms])
    latency["mid-run visitor: GET / -> socket open"] = _summary(
        [p.opened_ms for p in during if p.opened_ms]
    )
    failures += [f"a page opened mid-run: {p.error}" for p in probes if p.error]
    clean = not failures and result.lost_total == 0
    if otel is not None and otel["spans"] < otel["spans_expected"]:
        failures.append(f"the sink received {otel['spans']} of {otel['spans_expected']} spans")
        clean = False
    wall = ended - began
    verdict = (
        f"verdict: {'OK' if clean else 'FAILED'}: {succeeded}/{args.conversations} "
        f"{'floor ' if args.app == 'floor' else ''}conversations succeeded, "
        f"{result.lost_total} events lost, step events p95 "
        f"{_ms(latency['all step events']['p95'])} ms"
    )
    return {
        "command": " ".join([".venv/bin/python", "bench/load.py", *sys.argv[1:]]),
        "app": args.app,
        "machine": machine(database_url, args.redis_url),
        "conversations": args.conversations,
        "ramp_s": args.ramp_s,
        "token_delay_ms": args.token_delay_ms,
        "tool_delay_ms": args.tool_delay_ms,
        "runs": {"completed": completed, "succeeded": succeeded, "in_database": len(runs)},
        "steps_in_database": len(steps),
        "wall_s": wall,
        "runs_per_s": completed / wall if wall > 0 else 0.0,
        "frames": sum(len(c.frames) for c in clients),
        "frame_bytes": sum(_utf8(frame) for c in clients for _, frame in c.frames),
        "steps": result.steps,
        "texts": result.texts,
        "lost": result.lost,
        "lost_total": result.lost_total,
        "lost_examples": result.examples,
        "latency_ms": latency,
        "server": {
            "rss_before_mib": before["VmRSS"] / MIB,
            "rss_after_mib": after["VmRSS"] / MIB,
            "hwm_before_mib": before["VmHWM"] / MIB,
            "hwm_after_mib": after["VmHWM"] / MIB,
            "rss_peak_sampled_mib": peaks.get("VmRSS", 0) / MIB,
            "threads_before": before["Threads"],
            "threads_peak": peaks.get("Threads", 0),
            "fds_before": before["fds"],
            "fds_peak": peaks.get("fds", 0),
            "fds_limit": fds_limit,
            "cpu_s": cpu_after - cpu_before,
            # The main thread runs the event loop (Twisted's asyncio reactor); the others
            # are the ORM's shared thread and the HTTP requests' threads.
            "cpu_event_loop_s": loop_cpu,
            # With --run-owners, theirs too: a run costs both processes.
            "run_owners": args.run_owners,
            "cpu_run_owners_s": owners_cpu,
            "web_processes": args.web_processes,
            "cpu_nginx_s": front_cpu,
            "cpu_per_run_ms": (cpu_after - cpu_before + owners_cpu + front_cpu)
            * 1000
            / max(1, completed),
        },
        "load_average": load_average,
        "profile": counts,
        "otel": otel,
        "profile_dir": str(profile_dir) if profile_dir else None,
        "client_cpu_s": client_cpu,
        "failures": failures,
        "log_problems": log_problems[:50],
        "log": str(log),
        "ok": clean,
        "verdict": verdict,
    }


def say(text: str) -> None:
    """Print progress to standard error."""
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200, help="concurrent browsers")
    parser.add_argument("--ramp-s", type=float, default=2.0, help="spread the starts over this")
    parser.add_argument(
        "--timeout-s", type=float, default=300.0, help="give up on clients after this"
    )
    parser.add_argument(
        "--token-delay-ms",
        type=float,
        default=float(os.environ.get("DEMO_TOKEN_DELAY_MS", 15)),
        help="demo model: pause between streamed chunks (DEMO_TOKEN_DELAY_MS)",
    )
    parser.add_argument(
        "--tool-delay-ms",
        type=float,
        default=float(os.environ.get("DEMO_TOOL_DELAY_MS", 400)),
        help="demo tools: simulated latency of each call (DEMO_TOOL_DELAY_MS)",
    )
    parser.add_argument(
        "--probes", type=int, default=10,
        help="visitors who open a page (and its socket) after the ramp, while the runs go",
    )  # fmt: skip
    parser.add_argument(
        "--probe-every-s", type=float, default=1.0, help="one probe every this many seconds"
    )
    parser.add_argument("--database-url", help="instead of a scratch SQLite file (e.g. postgres)")
    parser.add_argument("--redis-url", help="use the Redis channel layer (REDIS_URL)")
    parser.add_argument(
        "--run-owners", type=int, default=0, metavar="N",
        help="run the runs in N processes of their own (manage.py runowner, "
        "CHAT_RUN_WORKERS=1) beside Daphne; needs --redis-url",
    )  # fmt: skip
    parser.add_argument(
        "--web-processes", type=int, default=1, metavar="N",
        help="serve with N Daphne processes behind nginx (docs/deploy.md); needs --redis-url",
    )  # fmt: skip
    parser.add_argument(
        "--app", choices=sorted(APPS), default="app",
        help="what Daphne serves: the app, or the stack's floor for the same visitors "
        "(bench/floor_asgi.py: the framework's requests, relay and minimal writes, no code "
        "of ours)",
    )  # fmt: skip
    parser.add_argument(
        "--against-floor", action="store_true",
        help="measure the floor first (--app floor, its runs in Daphne), then the app, and "
        "print ours / floor",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="profile the server (cProfile, every thread) and count its database calls, "
        "queries and template renders; write server.prof and counts.json to DIR",
    )
    parser.add_argument(
        "--counts-only",
        action="store_true",
        help="with --profile: only the counts and queue waits, no cProfile (its cost "
        "overloads the server at 200 conversations)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="live OpenTelemetry export on, to a sink collector in a process of its own",
    )
    parser.add_argument(
        "--otel-content", action="store_true", help="with --otel: capture message content"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="3 conversations started over 0.5 s, for CI: checks the bench still runs",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON (the table goes to standard error)"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.conversations, args.ramp_s, args.probes = 3, 0.5, 1
    if args.conversations < 1:
        parser.error("--conversations must be at least 1")
    if args.run_owners and not args.redis_url:
        parser.error("--run-owners needs --redis-url: the processes share the channel layer")
    if args.against_floor and (args.app == "floor" or args.profile or args.otel):
        parser.error("--against-floor measures the app and the floor as they are: "
                     "no --app floor, --profile or --otel")  # fmt: skip
    if args.app == "floor" and (args.run_owners or args.otel):
        parser.error("--app floor runs its runs in Daphne and exports nothing: "
                     "no --run-owners or --otel")  # fmt: skip
    if args.web_processes < 1:
        parser.error("--web-processes must be at least 1")
    if args.web_processes > 1:
        if not args.redis_url:
            parser.error("--web-processes needs --redis-url: the processes share the groups")
        if args.profile or args.otel:
            parser.error("--profile and --otel measure one web process: no --web-processes")
        if nginx_binary() is None:
            parser.error("--web-processes needs nginx: make deploy-deps installs it")
    # A plain `kill` should stop Daphne too: turn SIGTERM into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sides = [args]
    if args.against_floor:  # the floor first; it runs its runs in Daphne, with no run owner
        sides.insert(0, argparse.Namespace(**{**vars(args), "app": "floor", "run_owners": 0}))
    measured = []
    for side in sides:
        workdir = Path(tempfile.mkdtemp(prefix=f"bench-load-{side.app}-"))
        try:
            measured.append(measure(side, workdir))
        except KeyboardInterrupt:
            say("Interrupted; Daphne was stopped.")
            return 130
        finally:
            if args.keep:
                say(f"Kept {workdir}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)
    text = "\n\n".join(report(figures) for figures in measured)
    if args.against_floor:
        floor, figures = measured
        text += "\n\n" + "\n".join(floor_lines(figures, floor))
        figures = {**figures, "floor": floor, "ok": figures["ok"] and floor["ok"]}
    else:
        figures = measured[0]
    if args.json:
        say(text)
        print(json.dumps(figures, indent=2))
    else:
        print(text)
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
