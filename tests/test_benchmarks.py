"""The benchmarks measure what they claim and fail loudly: a benchmark that crashes exits
non-zero, so `make bench-tiny` (CI) cannot pass without it."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.deploy.shared import skip_or_fail

ROOT = Path(__file__).resolve().parents[1]


def test_the_export_benchmark_exits_non_zero_when_its_exports_crash(tmp_path):
    """bench/export.py ran each export in a child and printed a crashed one as
    "failed (exit 1)" in its table, then exited 0: `make bench-tiny` passed without it."""
    (tmp_path / "sitecustomize.py").write_text(
        'import sys\nif "--child" in sys.argv:\n    raise SystemExit(3)\n'
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "bench/export.py", "--sizes", "1000", "--methods", "ours"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert "failed (exit 1)" in result.stdout + result.stderr
    assert result.returncode != 0


def test_the_page_benchmark_counts_the_statements_of_a_page_load():
    """bench/page.py printed "SQL statements per load 0": it read the captured queries
    after more requests had cleared the connection's log (found by the new-user
    walkthrough)."""
    command = [sys.executable, "bench/page.py", "--tiny"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    count = re.search(r"SQL statements per load (\d+)", result.stdout)
    assert count and int(count.group(1)) > 0, result.stdout
    assert "INSERT INTO" in result.stdout  # a new visitor's conversation and session


def _bench_module(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_load_benchmark_reads_nginx_error_log_with_several_web_processes(tmp_path):
    """bench/load.py --web-processes N said "server log 0 lines matching errors" without
    reading nginx's error log: a Daphne that refused connections went unsaid (nginx passed
    each request on to another one, and logged the refusal in its own log only)."""
    load = _bench_module("load")
    if load.nginx_binary() is None:
        skip_or_fail("nginx is not installed: make deploy-deps installs it")

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    answering = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=answering.serve_forever, daemon=True).start()
    (tmp_path / "daphne.log").write_text("")
    try:
        refusing = load.free_port()  # nothing listens there
        with load.nginx_front([refusing, answering.server_port], tmp_path) as (_, port):
            for _ in range(4):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
                    assert page.read() == b"ok"  # passed on: the client sees nothing wrong
    finally:
        answering.shutdown()
    problems = load.server_log_problems(tmp_path)
    assert any("Connection refused" in line for line in problems), problems


def test_the_load_benchmarks_nginx_proxies_as_the_example_site_does():
    """bench/load.py --web-processes measures the layout of docs/deploy.md: its nginx
    config copies the example site's upstream and proxy settings by hand (no TLS, no
    static files), so a change to the site must reach it too."""
    load = _bench_module("load")
    site = (ROOT / "deploy" / "nginx" / "agentchat.conf").read_text()
    conf = load.NGINX_CONF.format(prefix="/tmp/bench", port=8000, servers="", user="")
    ours = {line.strip() for line in conf.splitlines()}
    kept = ("proxy_", "least_conn", "keepalive", "map ", "default ", '""')
    wanted = {line.strip() for line in site.splitlines() if line.strip().startswith(kept)}
    assert len(wanted) >= 12  # the site's proxy settings were found
    assert wanted <= ours, sorted(wanted - ours)


def _constants(path: Path, *names: str) -> dict[str, object]:
    """Return module-level constants of ``path`` without importing it (bench/floor_asgi.py
    sets Django up with settings of its own)."""
    tree = ast.parse(path.read_text())
    found = {
        target.id: ast.literal_eval(node.value)
        for node in tree.body if isinstance(node, ast.Assign)
        for target in node.targets if isinstance(target, ast.Name) and target.id in names
    }  # fmt: skip
    assert set(found) == set(names), found
    return found


def test_the_floor_does_the_work_it_stands_for():
    """bench/load.py --app floor: every visitor's page, socket and message, each run's
    rows (the run, its steps started and finished, both messages) and its frames through
    the channel layer, as bench/floor_asgi.py says; a floor doing less would flatter it."""
    shape = _constants(
        ROOT / "bench" / "floor_asgi.py", "TOOL_CALLS", "FRAMES_PER_RUN", "FRAME_BYTES"
    )
    command = [sys.executable, "bench/load.py", "--app", "floor", "--tiny", "--json"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout)
    conversations = figures["conversations"]
    assert figures["runs"] == {"completed": conversations, "succeeded": conversations,
                               "in_database": conversations}  # fmt: skip
    fewest, most = (2 + min(shape["TOOL_CALLS"]), 2 + max(shape["TOOL_CALLS"]))
    assert fewest * conversations <= figures["steps_in_database"] <= most * conversations
    assert figures["frames"] == conversations * shape["FRAMES_PER_RUN"]
    assert figures["frame_bytes"] == figures["frames"] * shape["FRAME_BYTES"]
    # Its events are checked as the app's are: each step's start and end, the status line.
    assert figures["steps"] == figures["steps_in_database"] and figures["lost_total"] == 0
    assert figures["latency_ms"]["all step events"]["count"] == 2 * figures["steps"]
    assert "the stack's floor" in result.stderr


def test_the_floor_comparison_refuses_what_it_cannot_compare():
    """--against-floor measures both sides as they are: a profile or an export would run
    on the app's side only."""
    for extra in (["--otel"], ["--profile", "/tmp/x"], ["--app", "floor"]):
        command = [sys.executable, "bench/load.py", "--against-floor", "--tiny", *extra]
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 2 and "--against-floor" in result.stderr, extra
    command = [sys.executable, "bench/load.py", "--app", "floor", "--run-owners", "1",
               "--redis-url", "redis://127.0.0.1:6379/8", "--tiny"]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "--app floor" in result.stderr


def test_the_floor_comparison_prints_each_figure_and_its_ratio():
    load = _bench_module("load")
    app = {"server": {"cpu_per_run_ms": 150.0}, "wall_s": 30.0, "runs": {"completed": 10},
           "frames": 400, "frame_bytes": 10 * 44 * 1024,
           "latency_ms": {name: {"p50": 300.0, "p95": 900.0} for name in (
               "GET / -> page loaded (client)", "GET / -> socket open (client)",
               "mid-run visitor: GET / -> socket open", "send -> first frame (client)",
               "all step events")}}  # fmt: skip
    floor = json.loads(json.dumps(app))
    floor["server"]["cpu_per_run_ms"] = 50.0
    floor["runs"]["completed"] = 20  # the per-run rows divide by each side's own runs
    floor["latency_ms"]["mid-run visitor: GET / -> socket open"] = {"p50": None, "p95": None}
    lines = load.floor_lines(app, floor)
    assert any(re.search(r"CPU per run, ms\s+150\s+50\.0\s+3\.0x", line) for line in lines), lines
    assert any(re.search(r"frames per run\s+40\.0\s+20\.0\s+2\.0x", line) for line in lines)
    assert any(re.search(r"frame KiB per run\s+44\.0\s+22\.0\s+2\.0x", line) for line in lines)
    assert any(re.search(r"wall time, s\s+30\.0\s+30\.0\s+1\.0x", line) for line in lines)
    # No mid-run visitor on one side: no ratio, not a crash.
    assert any(re.search(r"mid-run visitor: socket open p95, ms\s+900\s+-\s+-$", line)
               for line in lines), lines  # fmt: skip


def test_the_load_benchmarks_client_cpu_is_its_clients_not_its_process(tmp_path, monkeypatch):
    """bench/load.py printed as "this client" the CPU its process had used since it began:
    with --against-floor, the app's figure held the floor's half too."""
    import argparse
    import contextlib
    import time

    load = _bench_module("load")

    @contextlib.contextmanager
    def no_daphne(env, log, **_):  # type: ignore[no-untyped-def]
        log.write_text("")
        yield argparse.Namespace(pid=os.getpid()), 1

    async def busy_clients(clients, base, pids, **_):  # type: ignore[no-untyped-def]
        ends = time.process_time() + 0.2
        while time.process_time() < ends:
            pass
        return {}

    monkeypatch.setattr(load, "daphne", no_daphne)
    monkeypatch.setattr(load, "play", busy_clients)
    args = argparse.Namespace(
        database_url=None, redis_url=None, token_delay_ms=15.0, tool_delay_ms=400.0,
        app="floor", run_owners=0, web_processes=1, otel=False, otel_content=False,
        profile=None, counts_only=False, conversations=1, probes=0, ramp_s=0.0,
        timeout_s=1.0, probe_every_s=1.0,
    )  # fmt: skip
    began = time.process_time()
    figures = load.measure(args, tmp_path)
    spent = time.process_time() - began
    assert 0.2 <= figures["client_cpu_s"] <= spent, (figures["client_cpu_s"], spent)
