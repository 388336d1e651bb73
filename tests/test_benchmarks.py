"""The benchmarks measure what they claim and fail loudly: a benchmark that crashes exits
non-zero, so `make bench-tiny` (CI) cannot pass without it."""

from __future__ import annotations

import importlib.util
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
