"""Measure the admin's "Export all matching runs as CSV" through a real Daphne server.

Fills a scratch SQLite database (bench/tracedata.py), starts Daphne on it, logs in as a
superuser over HTTP and downloads the export, sampling the server's RSS every 0.2 s.
Prints the time to the first byte, the total time and size, and Daphne's peak RSS.

    .venv/bin/python bench/admin_export.py [--steps 300000]
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.serving import daphne  # noqa: E402

PASSWORD = "bench-Admin-123"


def _rss_kib(pid: int) -> int:
    out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def main() -> None:
    """Fill, serve, download, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300_000, help="step rows to export")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp}/admin-export.sqlite3",
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        }
        env.pop("REDIS_URL", None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        fill = (
            "import sys; sys.path.insert(0, 'bench'); import django; django.setup(); "
            f"import tracedata; tracedata.fill({args.steps})"
        )
        subprocess.run([sys.executable, "-c", fill], cwd=ROOT, env=env, check=True)
        subprocess.run(
            [*manage, "createsuperuser", "--noinput", "--username", "bench",
             "--email", "bench@example.com"],
            cwd=ROOT, env=env, check=True, capture_output=True,
        )  # fmt: skip
        with daphne(env, timeout_s=30) as (server, port):
            report = _download(f"http://127.0.0.1:{port}", server.pid)
    print(f"steps: {args.steps:,}")
    print(report)


def _download(base: str, pid: int) -> str:
    baseline = _rss_kib(pid)
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    page = opener.open(base + "/admin/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token, "no CSRF token on the login page"
    form = {"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}
    opener.open(
        urllib.request.Request(
            base + "/admin/login/",
            data=urllib.parse.urlencode(form).encode(),
            headers={"Referer": base + "/admin/login/"},
        )
    )
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kib(pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.monotonic()
    first = None
    size = 0
    with opener.open(base + "/admin/chat/agentrun/export/") as response:
        while chunk := response.read(65536):
            first = first if first is not None else time.monotonic() - start
            size += len(chunk)
    total = time.monotonic() - start
    done.set()
    sampler.join()
    return (
        f"first byte after {first:.2f} s; {size / 1e6:.0f} MB in {total:.1f} s; "
        f"Daphne RSS {baseline / 1024:.0f} MiB before, {peak[0] / 1024:.0f} MiB peak"
    )


if __name__ == "__main__":
    main()
