"""Run every benchmark, at its full size (``make bench``) or at a tiny one (CI).

Each benchmark is a script of this directory run in a process of its own with this
Python; this file only knows their arguments. At the tiny size each one takes seconds and
its figures mean nothing: it is there so that a benchmark that no longer runs (a column
its raw inserts missed, a file it read that moved) fails CI instead of rotting. At the
full size the figures are the ones docs/benchmarks.md reports. ``bench/busy.py`` is not
here: it runs the test suite under load, and CI runs it as a stage of its own.

    .venv/bin/python bench/all.py [--tiny] [--only loop,stream] [--list]

Prints each benchmark's own output as it goes, then one line per benchmark (status and
wall time). Exit status 1 if any benchmark exited non-zero.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Benchmark:
    """A script under ``bench/`` and its arguments at each size.

    ``full`` is None for a benchmark run only at the tiny size; ``{tmp}`` in an argument
    is replaced by a scratch directory removed afterwards.
    """

    name: str
    script: str
    full: tuple[str, ...] | None
    tiny: tuple[str, ...]


BENCHMARKS = (
    # The parsers' check is already small; it fails on growth faster than linear.
    Benchmark("parsers", "parsers.py", (), ()),
    Benchmark(
        "export",
        "export.py",
        (),
        ("--sizes", "1000", "--methods", "ours,ours-unredacted,ours-jsonl,ours-otlp-json,naive"),
    ),
    Benchmark("admin_export", "admin_export.py", (), ("--steps", "1000")),
    # The app against the stack's floor (bench/floor_asgi.py) for the same visitors.
    Benchmark("load", "load.py", ("--against-floor",), ("--tiny", "--against-floor")),
    # The server's profiler (bench/profiling/) must not rot either; its full use is by hand.
    Benchmark("load_profile", "load.py", None, ("--tiny", "--counts-only", "--profile", "{tmp}")),
    # Live OpenTelemetry export to a sink collector; its 200-conversation figures, export on
    # against off, are in docs/benchmarks.md (by hand: two runs to compare).
    Benchmark("load_otel", "load.py", None, ("--tiny", "--otel")),
    # Runs in a run owner's process beside Daphne (CHAT_RUN_WORKERS), on Redis and a scratch
    # SQLite file both processes share; the 200-conversation figures on PostgreSQL are in
    # docs/benchmarks.md (by hand: with and without --run-owners).
    Benchmark(
        "load_run_owners",
        "load.py",
        None,
        ("--tiny", "--redis-url", "redis://127.0.0.1:6379/8", "--run-owners", "1"),
    ),
    # Two Daphne processes behind nginx (docs/deploy.md's layout; make deploy-deps installs
    # nginx) and a run owner; the 200- and 1,000-conversation figures are in
    # docs/benchmarks.md.
    Benchmark(
        "load_web_processes",
        "load.py",
        None,
        (
            "--tiny",
            "--redis-url",
            "redis://127.0.0.1:6379/8",
            "--web-processes",
            "2",
            "--run-owners",
            "1",
        ),
    ),
    Benchmark("loop", "loop.py", (), ("--tiny",)),
    Benchmark("layer", "layer.py", (), ("--tiny",)),
    Benchmark("page", "page.py", (), ("--tiny",)),
    Benchmark("growth", "growth.py", (), ("--tiny",)),
    # Our consumer against a bare one, on the in-memory layer and both Redis layers.
    Benchmark(
        "stream",
        "stream.py",
        ("--redis-url", "redis://127.0.0.1:6379/8", "--concurrency", "1,20,60"),
        ("--tiny", "--redis-url", "redis://127.0.0.1:6379/8"),
    ),
    # Two server processes on Redis (127.0.0.1:6379/9 unless --redis-url says otherwise).
    Benchmark("restart", "restart.py", (), ("--tiny",)),
    # The admin's run search on PostgreSQL (127.0.0.1:5432 unless --database-url says
    # otherwise): 600,000 runs, about 20 minutes; the tiny one fills 2,000.
    Benchmark("search", "search.py", ("--runs", "600000"), ("--tiny",)),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="seconds each; figures meaningless")
    parser.add_argument("--only", help="comma-separated names (see --list)")
    parser.add_argument("--list", action="store_true", help="print the names and exit")
    args = parser.parse_args()
    if args.list:
        for bench in BENCHMARKS:
            print(f"{bench.name}: bench/{bench.script}")
        return 0
    chosen = BENCHMARKS
    if args.only:
        names = {name.strip() for name in args.only.split(",") if name.strip()}
        unknown = names - {bench.name for bench in BENCHMARKS}
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))} (see --list)")
        chosen = tuple(bench for bench in BENCHMARKS if bench.name in names)
    outcomes = []
    for bench in chosen:
        arguments = bench.tiny if args.tiny else bench.full
        if arguments is None:
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-{bench.name}-") as tmp:
            command = [
                sys.executable,
                str(BENCH / bench.script),
                *(argument.replace("{tmp}", tmp) for argument in arguments),
            ]
            print(f"== {bench.name}: {' '.join(command[1:])}", flush=True)
            started = time.monotonic()
            code = subprocess.run(command, check=False).returncode
        outcomes.append((bench.name, code, time.monotonic() - started))
    print("\n== Benchmarks" + (" (tiny: the figures mean nothing)" if args.tiny else ""))
    for name, code, seconds in outcomes:
        print(f"{name:<14} {'ok' if code == 0 else f'FAILED (exit {code})':<18} {seconds:7.1f} s")
    return 1 if any(code for _, code, _ in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
