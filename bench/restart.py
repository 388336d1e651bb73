"""Measure what a deploy restart does to a run in flight, with two server processes.

Run from the repository root (Redis must be running; see bench/README.md)::

    .venv/bin/python bench/restart.py                 # 3 trials per mode, default heartbeats
    .venv/bin/python bench/restart.py --tiny          # seconds: short heartbeats, 1 trial

Each trial starts two Daphne processes, A and B, on one database (a scratch SQLite file,
or ``--database-url``) and one Redis channel layer, with the offline demo model and slow
tool calls. A browser-like client gets a session, opens the conversation's socket on A
and on B, and sends a question through B, so B runs it. Once A shows the run's first tool
call, B gets SIGTERM, as ``systemctl restart`` or a deploy sends it. Then the client sends
a new message on A at once, and measures from the signal:

- **B exits**: seconds until B's process ended, and the close code B's tab saw;
- **A sees the end**: seconds until A's tab got the run's final status line, and which;
- **at once**: what A answered to the message sent right after the signal;
- **next message**: seconds until a message sent on A (after the end was seen) was
  accepted, i.e. until the user can go on.

Modes, interleaved trial by trial: ``abandon`` (``AGENT_GRACEFUL_SHUTDOWN=false``: the
process stops and its runs with it; the others' sweep marks them ``interrupted`` once
their heartbeat is ``AGENT_STALE_AFTER_S`` old) and ``graceful`` (the default: a
stopping process lets its runs go on for ``AGENT_SHUTDOWN_GRACE_S``, then cancels the
rest, which end at once as ``cancelled``; see chat/owner.py). Prints a table and the
load average; ``--json`` prints JSON on stdout. Exits 1 if a trial went wrong (no end
seen, a server that did not stop, the next message never accepted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.serving import daphne  # noqa: E402

CONVERSATION_RE = re.compile(r"/c/(\d+)/$")
RUN_RE = re.compile(r'<section class="run" id="run-(\d+)"')
RUNNING_TOOL_CALL = re.compile(r'data-kind="tool_call"[^>]*data-status="running"')
FINAL_RE = re.compile(r'id="run-(\d+)-status" data-status="(?!running)(\w+)"')
ERROR_RE = re.compile(r'<div id="chat-error" class="chat-error visible"[^>]*>(.*?)</div>', re.S)
MODES = ("abandon", "graceful")
QUESTION = "Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room."
FOLLOW_UP = "What time is it?"


@dataclass
class Trial:
    """What one restart did, seconds from the SIGTERM."""

    mode: str
    run_id: int | None = None
    b_exit_s: float | None = None
    b_close_code: int | None = None
    a_end_s: float | None = None
    a_end_status: str = ""
    at_once: str = ""
    next_ok_s: float | None = None
    stored_status: str = ""
    stored_error: str = ""
    problem: str = ""


class Tab:
    """A socket as a page holds it: every frame, and an event when one arrives."""

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.arrived = asyncio.Event()
        self.close_code: int | None = None

    async def read(self, ws) -> None:
        try:
            async for frame in ws:
                self.frames.append(frame)
                self.arrived.set()
        except Exception:
            pass
        self.close_code = ws.close_code
        self.arrived.set()

    async def wait_for(self, pattern: re.Pattern[str], *, start: int = 0, timeout: float):
        """Return the first match of ``pattern`` in frames ``start`` on, or None at timeout."""
        deadline = time.monotonic() + timeout
        while True:
            for frame in self.frames[start:]:
                if match := pattern.search(frame):
                    return match
            self.arrived.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                return None


def session(base: str) -> tuple[int, str]:
    """GET / as a browser does; return the new conversation's id and the Cookie header."""
    import httpx

    with httpx.Client(follow_redirects=True, timeout=60) as http:
        page = http.get(f"{base}/")
        match = CONVERSATION_RE.search(page.url.path)
        if page.status_code != 200 or not match:
            raise RuntimeError(f"GET / ended at {page.url} with HTTP {page.status_code}")
        cookie = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
    return int(match.group(1)), cookie


def stored_run(database_url: str, run_id: int) -> tuple[str, str]:
    """Return the stored ``(status, error)`` of run ``run_id``."""
    sql = "SELECT status, error FROM chat_agentrun WHERE id = {}"
    if database_url.startswith("sqlite:"):
        connection = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        row = connection.execute(sql.format("?"), (run_id,)).fetchone()
    else:
        import psycopg

        connection = psycopg.connect(database_url)
        row = connection.execute(sql.format("%s"), (run_id,)).fetchone()
    connection.close()
    return (row[0], row[1]) if row else ("", "")


async def restart_once(a: str, b: str, b_process: subprocess.Popen, trial: Trial, wait_s: float):
    """Play one trial against the servers at URLs ``a`` and ``b``; fill ``trial``."""
    from websockets.asyncio.client import connect

    conversation_id, cookie = session(a)

    def socket(base: str):
        return connect(f"{base.replace('http', 'ws', 1)}/ws/chat/{conversation_id}/",
                       origin=base, additional_headers={"Cookie": cookie}, ping_interval=None,
                       open_timeout=60, max_size=None)  # fmt: skip

    tab_a, tab_b = Tab(), Tab()
    async with socket(a) as ws_a, socket(b) as ws_b:
        readers = [asyncio.create_task(tab_a.read(ws_a)), asyncio.create_task(tab_b.read(ws_b))]
        try:
            await ws_b.send(json.dumps({"content": QUESTION}))
            if not await tab_a.wait_for(RUNNING_TOOL_CALL, timeout=60):
                trial.problem = "no tool call started"
                return
            run_id = int(RUN_RE.search("".join(tab_a.frames)).group(1))
            mark = len(tab_a.frames)
            signalled = time.monotonic()
            b_process.send_signal(signal.SIGTERM)
            exited = asyncio.get_running_loop().run_in_executor(None, b_process.wait)
            exited.add_done_callback(
                lambda _: setattr(trial, "b_exit_s", time.monotonic() - signalled)
            )
            await ws_a.send(json.dumps({"content": FOLLOW_UP}))
            answer = await tab_a.wait_for(
                re.compile(ERROR_RE.pattern + r"|" + RUN_RE.pattern), start=mark, timeout=wait_s
            )
            if answer is None:
                trial.at_once = "no answer"
            elif answer.group(1):
                trial.at_once = f"refused: {answer.group(1)[:60]}"
            else:
                trial.at_once = "accepted"
            trial.run_id = run_id
            this_run = re.compile(rf'id="run-{run_id}-status" data-status="(?!running)(\w+)"')
            end = await tab_a.wait_for(this_run, start=mark, timeout=wait_s)
            if end is None:
                trial.problem = "A never saw the run end"
                return
            trial.a_end_s = time.monotonic() - signalled
            trial.a_end_status = end.group(1)
            try:
                await asyncio.wait_for(asyncio.shield(exited), wait_s)
            except TimeoutError:
                trial.problem = f"B did not exit within {wait_s:g} s of SIGTERM"
                return
            if trial.at_once != "accepted":
                mark = len(tab_a.frames)
                await ws_a.send(json.dumps({"content": FOLLOW_UP}))
                accepted = await tab_a.wait_for(RUN_RE, start=mark, timeout=wait_s)
                if accepted is None:
                    trial.problem = "the next message was not accepted"
                    return
            trial.next_ok_s = time.monotonic() - signalled
            await tab_a.wait_for(FINAL_RE, start=mark, timeout=wait_s)  # let it finish
            trial.b_close_code = tab_b.close_code
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)


def run_trial(mode: str, env: dict[str, str], database_url: str, tmp: Path, index: int) -> Trial:
    """Start A and B in ``mode``, restart B mid-run, return what happened."""
    trial = Trial(mode=mode)
    server_env = {**env, "AGENT_GRACEFUL_SHUTDOWN": "true" if mode == "graceful" else "false"}
    wait_s = float(env["AGENT_STALE_AFTER_S"]) + 3 * float(env["AGENT_HEARTBEAT_S"]) + 60
    with ExitStack() as stack:
        _a_process, a_port = stack.enter_context(
            daphne(server_env, timeout_s=60, log=tmp / f"{index}-{mode}-a.log")
        )
        b_process, b_port = stack.enter_context(
            daphne(server_env, timeout_s=60, log=tmp / f"{index}-{mode}-b.log")
        )
        a, b = f"http://127.0.0.1:{a_port}", f"http://127.0.0.1:{b_port}"
        try:
            asyncio.run(restart_once(a, b, b_process, trial, wait_s))
        except Exception as exc:
            trial.problem = f"{type(exc).__name__}: {exc}"
        if trial.run_id is not None:
            trial.stored_status, trial.stored_error = stored_run(database_url, trial.run_id)
    return trial


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per mode (3)")
    parser.add_argument(
        "--tiny", action="store_true", help="short heartbeats and tool calls, one trial, for CI"
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--database-url", default="", help="default: a scratch SQLite file")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--heartbeat-s", type=float, default=10.0, help="AGENT_HEARTBEAT_S")
    parser.add_argument("--stale-after-s", type=float, default=60.0, help="AGENT_STALE_AFTER_S")
    parser.add_argument("--grace-s", type=float, default=10.0, help="AGENT_SHUTDOWN_GRACE_S")
    parser.add_argument(
        "--tool-delay-ms",
        type=float,
        default=30000.0,
        help="DEMO_TOOL_DELAY_MS (the grace cuts it)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.tiny:
        args.trials, args.heartbeat_s, args.stale_after_s = 1, 0.2, 1.0
        args.grace_s, args.tool_delay_ms = 0.5, 3000.0
    modes = [mode for mode in args.modes.split(",") if mode]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}; the modes are {MODES}")

    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp_name:
        tmp = Path(tmp_name)
        database_url = args.database_url or f"sqlite:///{tmp / 'restart.sqlite3'}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": database_url,
            "REDIS_URL": args.redis_url,
            "DEMO_TOKEN_DELAY_MS": "5",
            "DEMO_TOOL_DELAY_MS": f"{args.tool_delay_ms:g}",
            "AGENT_TOOL_TIMEOUT_S": f"{args.tool_delay_ms / 1000 * 4 + 10:g}",
            "AGENT_HEARTBEAT_S": f"{args.heartbeat_s:g}",
            "AGENT_STALE_AFTER_S": f"{args.stale_after_s:g}",
            "AGENT_SHUTDOWN_GRACE_S": f"{args.grace_s:g}",
            "CHAT_RUNS_PER_MINUTE": "0",
        }
        env.pop("OPENAI_API_KEY", None)
        migrate = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
        subprocess.run(migrate, cwd=ROOT, env=env, check=True)
        trials = [
            run_trial(mode, env, database_url, tmp, index)
            for index in range(args.trials)
            for mode in modes
        ]
        if any(trial.problem for trial in trials):
            for log in sorted(tmp.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}", file=sys.stderr)
    report(trials, args, os.getloadavg())
    return 1 if any(trial.problem for trial in trials) else 0


def report(trials: list[Trial], args: argparse.Namespace, load: tuple[float, ...]) -> None:
    """Print each trial and the medians per mode (JSON on stdout with ``--json``)."""
    out = sys.stderr if args.json else sys.stdout
    print(f"heartbeat {args.heartbeat_s:g} s, stale after {args.stale_after_s:g} s, grace "
          f"{args.grace_s:g} s, tool calls {args.tool_delay_ms:g} ms; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=out)  # fmt: skip
    header = ("mode", "B exits s", "B tab close", "A sees end s", "end", "message at once",
              "next message s", "stored", "problem")  # fmt: skip
    print(" | ".join(header), file=out)

    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for t in trials:
        print(" | ".join([t.mode, s(t.b_exit_s), str(t.b_close_code), s(t.a_end_s),
                          t.a_end_status, t.at_once, s(t.next_ok_s),
                          f"{t.stored_status}: {t.stored_error[:50]}", t.problem or "-"]),
              file=out)  # fmt: skip
    for mode in dict.fromkeys(t.mode for t in trials):
        ends = [t.a_end_s for t in trials if t.mode == mode and t.a_end_s is not None]
        nexts = [t.next_ok_s for t in trials if t.mode == mode and t.next_ok_s is not None]
        if ends and nexts:
            print(f"{mode}: median end seen {statistics.median(ends):.2f} s, next message "
                  f"{statistics.median(nexts):.2f} s after SIGTERM", file=out)  # fmt: skip
    if args.json:
        print(json.dumps({"load": load, "trials": [asdict(t) for t in trials]}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
