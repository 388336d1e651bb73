"""The benchmarks measure what they claim and fail loudly: a benchmark that crashes exits
non-zero, so `make bench-tiny` (CI) cannot pass without it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
