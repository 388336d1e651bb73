"""Benchmark the trace exports (CSV, JSONL, OTLP JSON) against django-import-export and a
naive export.

Run from the repository root (see bench/README.md)::

    .venv/bin/python bench/export.py [--sizes 10000,100000,1000000] [--keep] [--json]

It builds a scratch SQLite database in a temporary directory, fills it with runs of five
steps each (bench/tracedata.py) up to the largest size, then exports the first N step rows
(the first N/5 runs by id) once per method and size, each in a fresh Python process so one
export's peak memory cannot leak into the next (the launcher itself never imports Django:
a child starts with its parent's peak as its own ``ru_maxrss``). A child reports its wall time, its
baseline RSS (after ``django.setup()`` and imports) and its peak RSS (``ru_maxrss``). The
parent checks the row count of every file with ``csv.reader`` and prints a table with
ratios against ours, and whether each of our formats' peak RSS stayed flat between the two
largest sizes.

Methods:

- ``ours``: ``write_csv(trace_rows(runs), file)``, the path of ``export_traces`` and the admin,
  with the default redaction policy (every built-in detector, docs/redaction.md).
- ``ours-unredacted``: the same with the policy off (``Redactor()``), to price redaction.
- ``ours-jsonl``, ``ours-otlp-json``: our JSONL and OTLP JSON files, written piece by piece
  from the table every download uses (``chat.traces.formats``); checked by their line
  count (one per run for JSONL) instead of CSV rows. OTLP JSON is skipped while
  ``chat/traces/otlp.py`` is not there.
- ``import-export``: a django-import-export ``ModelResource`` on AgentStep (model fields via
  ``Meta.fields``, run fields via ``dehydrate_*``), ``resource.export(queryset)`` into a
  tablib Dataset, written with the admin's CSV format. Needs requirements-bench.txt.
- ``naive``: ``list(queryset.values_list(...))`` and ``csv.writer``, no formatting at all.

A child is killed when it runs longer than ``--timeout`` seconds or its RSS passes
``--max-rss-gib``; a size is not even attempted when a straight-line estimate from the
previous size already breaks either limit.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from methods import FILE_FORMATS, METHODS, export
from tracedata import STEPS_PER_RUN, fill

ROOT = Path(__file__).resolve().parent.parent
FLAT_TOLERANCE = 0.20
MIB = 1024 * 1024
csv.field_size_limit(sys.maxsize)


@dataclass
class Result:
    """One (method, size) measurement; ``skipped`` says why there are no figures."""

    method: str
    size: int
    seconds: float | None = None
    rows: int | None = None
    baseline_mib: float | None = None
    peak_mib: float | None = None
    hwm_mib: float | None = None
    skipped: str = ""

    @property
    def growth_mib(self) -> float | None:
        if self.peak_mib is None or self.baseline_mib is None:
            return None
        return self.peak_mib - self.baseline_mib

    @property
    def rows_per_second(self) -> float | None:
        return self.size / self.seconds if self.seconds else None


# --- the child: one export in a fresh process ---------------------------------------------


def setup_django(database: Path) -> None:
    """Point Django at ``database`` (through DATABASE_URL) and set it up."""
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _rss_mib() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(method: str, size: int, database: Path, output: Path) -> None:
    """Export ``size`` step rows with ``method``; print the figures as one JSON line."""
    setup_django(database)
    from django.db import connection

    # Each method's modules are imported before the baseline, so it measures the export.
    import chat.export
    from chat.models import AgentRun

    if method in FILE_FORMATS:
        import chat.traces.formats
    if method == "ours-otlp-json":
        import chat.traces.otlp  # noqa: F401  (the OpenTelemetry SDK)

    if method == "import-export":
        import import_export.resources  # noqa: F401

    last = AgentRun.objects.order_by("pk").values_list("pk", flat=True)[size // STEPS_PER_RUN - 1]
    runs = AgentRun.objects.filter(pk__lte=last)
    connection.ensure_connection()
    baseline = _rss_mib()
    began = time.perf_counter()
    rows = export(method, runs, output)
    seconds = time.perf_counter() - began
    figures = {"seconds": seconds, "rows": rows, "baseline_mib": baseline, "peak_mib": _rss_mib()}
    # The kernel's high-water mark of this process's own memory map: a cross-check of
    # ru_maxrss, which a child inherits from its parent's peak.
    figures["hwm_mib"] = _proc_status("self", "VmHWM") / MIB
    print(json.dumps(figures))


# --- the parent: fill, run children, check, report ----------------------------------------


def _proc_status(pid: int | str, key: str) -> int:
    """Return a ``/proc/<pid>/status`` memory figure (``VmRSS``, ``VmHWM``) in bytes, or 0."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_child(
    method: str, size: int, database: Path, output: Path, *, timeout: float, max_rss: int
) -> Result:
    """Run one export in a fresh interpreter, killing it at ``timeout`` s or ``max_rss`` bytes."""
    command = [sys.executable, __file__, "--child", method, "--size", str(size)]
    command += ["--database", str(database), "--output", str(output)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    began = time.monotonic()
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            rss = _proc_status(proc.pid, "VmRSS")
            elapsed = time.monotonic() - began
            if elapsed > timeout or rss > max_rss:
                proc.kill()
                proc.communicate()
                slow = elapsed > timeout
                limit = f"{timeout:g} s" if slow else f"{max_rss / MIB:,.0f} MiB"
                why = (
                    f"skipped: too {'slow' if slow else 'big'} (killed after {elapsed:.0f} s "
                    f"at {rss / MIB:,.0f} MiB RSS, limit {limit})"
                )
                return Result(method, size, skipped=why)
    if proc.returncode != 0:
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        return Result(method, size, skipped=f"failed (exit {proc.returncode}): {tail[0]}")
    figures = json.loads(stdout.strip().splitlines()[-1])
    return Result(method, size, **figures)


def count_rows(path: Path) -> int:
    """Return the number of data rows (after the header) in the CSV file at ``path``."""
    with path.open(encoding="utf-8", newline="") as source:
        return sum(1 for _ in csv.reader(source)) - 1


def count_lines(path: Path) -> int:
    """Return the number of lines of the JSON Lines file at ``path``, each checked as JSON."""
    with path.open(encoding="utf-8") as source:
        return sum(1 for line in source if json.loads(line) is not None)


def check_file(method: str, size: int, output: Path, reported: int) -> str:
    """Return why ``method``'s file of ``size`` steps is wrong, or ``""``.

    CSV: a row per step; JSONL: a line per run; OTLP JSON: as many lines as it reported.
    """
    if method not in FILE_FORMATS:
        expected, found = size, count_rows(output)
    else:
        found = count_lines(output)
        expected = size // STEPS_PER_RUN if method == "ours-jsonl" else max(found, 1)
    if found != expected or reported != expected:
        return (
            f"FAILED: {found:,} records in the file, {reported:,} reported, {expected:,} expected"
        )
    return ""


def too_big(previous: Result | None, size: int, *, timeout: float, max_rss: int) -> str:
    """Return why ``size`` would break a limit, by straight-line estimate, or ``""``."""
    if previous is None or previous.seconds is None or previous.growth_mib is None:
        return ""
    scale = size / previous.size
    seconds = previous.seconds * scale
    peak = previous.baseline_mib + previous.growth_mib * scale
    if seconds <= timeout and peak * MIB <= max_rss:
        return ""
    what = "too slow" if seconds > timeout else "too big"
    return (
        f"skipped: {what} (measured at {previous.size:,}: {previous.seconds:.1f} s, "
        f"peak {previous.peak_mib:,.0f} MiB; estimate at {size:,}: {seconds:,.0f} s, "
        f"peak {peak:,.0f} MiB; limits {timeout:g} s, {max_rss / MIB:,.0f} MiB)"
    )


def machine() -> dict[str, Any]:
    """Return what the figures depend on: CPUs, memory, Python, SQLite, library versions."""
    import sqlite3
    from importlib import metadata

    with open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info if "model name" in line), "")
    with open("/proc/meminfo") as info:
        memory = int(info.readline().split()[1]) * 1024
    versions = {}
    for package in ("Django", "django-import-export", "tablib"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "memory_gib": round(memory / 1024**3, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        **versions,
    }


def _ratio(value: float | None, ours: float | None) -> str:
    if value is None or not ours or ours <= 0:
        return "n/a"
    return f"{value / ours:.1f}x"


def table(results: list[Result]) -> str:
    """Return the results as a text table, each method's ratios against ours at that size."""
    ours = {r.size: r for r in results if r.method == "ours" and not r.skipped}
    head = (
        f"{'rows':>9}  {'method':<15} {'seconds':>8} {'rows/s':>8} {'peak MiB':>9} "
        f"{'growth MiB':>10} {'time/ours':>9} {'peak/ours':>9} {'growth/ours':>11}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if r.skipped:
            lines.append(f"{r.size:>9,}  {r.method:<15} {r.skipped}")
            continue
        base = ours.get(r.size)
        lines.append(
            f"{r.size:>9,}  {r.method:<15} {r.seconds:>8.1f} {r.rows_per_second:>8,.0f} "
            f"{r.peak_mib:>9,.0f} {r.growth_mib:>10,.1f} "
            f"{_ratio(r.seconds, base and base.seconds):>9} "
            f"{_ratio(r.peak_mib, base and base.peak_mib):>9} "
            f"{_ratio(r.growth_mib, base and base.growth_mib):>11}"
        )
    return "\n".join(lines)


def verdict(results: list[Result]) -> dict[str, Any]:
    """Return whether each of our formats' peak RSS stayed within FLAT_TOLERANCE between
    the two largest sizes it was measured at; ``flat`` is True only if all did."""
    texts, flats = [], {}
    for method in (m for m in METHODS if m.startswith("ours")):
        ours = sorted(
            (r for r in results if r.method == method and not r.skipped), key=lambda r: r.size
        )
        if len(ours) < 2:
            if any(r.method == method for r in results):
                texts.append(f"verdict ({method}): needs it measured at two sizes")
            continue
        small, large = ours[-2], ours[-1]
        change = (large.peak_mib - small.peak_mib) / small.peak_mib
        flats[method] = change <= FLAT_TOLERANCE
        texts.append(
            f"verdict ({method}): peak RSS {'stayed flat' if flats[method] else 'GREW'} from "
            f"{small.size:,} to {large.size:,} rows: {small.peak_mib:,.0f} -> "
            f"{large.peak_mib:,.0f} MiB ({change:+.1%}, tolerance {FLAT_TOLERANCE:.0%}) for "
            f"{large.size / small.size:g}x the rows"
        )
    flat = all(flats.values()) if flats else None
    return {"flat": flat, "by_method": flats, "text": "\n".join(texts) or "verdict: nothing"}


def parse_sizes(text: str) -> list[int]:
    """Return sizes from ``10000,100k,1M``: sorted, each a multiple of STEPS_PER_RUN."""
    sizes = []
    for item in text.split(","):
        item = item.strip().lower()
        factor = {"k": 1_000, "m": 1_000_000}.get(item[-1:], 1)
        number = int(float(item.rstrip("km")) * factor)
        if number <= 0 or number % STEPS_PER_RUN:
            raise argparse.ArgumentTypeError(f"{item}: not a positive multiple of {STEPS_PER_RUN}")
        sizes.append(number)
    return sorted(set(sizes))


def say(text: str) -> None:
    """Print progress to standard error."""
    print(text, file=sys.stderr, flush=True)


def measure(
    methods: list[str], sizes: list[int], workdir: Path, *, timeout: float, max_rss: int, keep: bool
) -> list[Result]:
    """Export each size with each method in its own child; check each file's row count."""
    database = workdir / "bench.sqlite3"
    installed = machine()["django-import-export"] != "not installed"
    results: list[Result] = []
    for method in methods:
        previous = None
        for size in sizes:
            result = None
            if method == "import-export" and not installed:
                why = "skipped: not installed (pip install -r requirements-bench.txt)"
                result = Result(method, size, skipped=why)
            elif method == "ours-otlp-json" and not (ROOT / "chat/traces/otlp.py").exists():
                result = Result(method, size, skipped="skipped: chat/traces/otlp.py not there")
            elif skip := too_big(previous, size, timeout=timeout, max_rss=max_rss):
                result = Result(method, size, skipped=skip)
            if result is None:
                output = workdir / f"{method}-{size}.out"
                say(f"{method} at {size:,} rows...")
                result = run_child(method, size, database, output, timeout=timeout, max_rss=max_rss)
                if not result.skipped:
                    result.skipped = check_file(method, size, output, result.rows or 0)
                    previous = result
                elif previous is not None:
                    result.skipped += (
                        f"; measured at {previous.size:,}: {previous.seconds:.1f} s, "
                        f"peak {previous.peak_mib:,.0f} MiB"
                    )
                if not keep:
                    output.unlink(missing_ok=True)
                if result.skipped:
                    say(f"  {result.skipped}")
                else:
                    say(f"  {result.seconds:.1f} s, peak {result.peak_mib:,.0f} MiB")
            results.append(result)
    return sorted(results, key=lambda r: (r.size, METHODS.index(r.method)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("10000,100000,1000000"))
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated")
    parser.add_argument("--keep", action="store_true", help="keep the database and CSV files")
    parser.add_argument(
        "--json", action="store_true", help="print JSON (the table goes to standard error)"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per export")
    parser.add_argument("--max-rss-gib", type=float, default=12, help="RSS limit per export")
    parser.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    parser.add_argument("--fill", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.size, args.database, args.output)
        return 0
    if args.fill:
        setup_django(args.database)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(fill(args.fill))
        return 0

    methods = [m for m in args.methods.split(",") if m]
    if unknown := set(methods) - set(METHODS):
        parser.error(f"unknown methods: {', '.join(sorted(unknown))}")
    max_rss = int(args.max_rss_gib * 1024 * MIB)
    largest = max(args.sizes)
    workdir = Path(tempfile.mkdtemp(prefix="bench-export-"))
    database = workdir / "bench.sqlite3"
    try:
        say(f"Filling {database} with {largest:,} steps ({largest // STEPS_PER_RUN:,} runs)...")
        # In a child too: a process starts with its parent's peak RSS as its own ru_maxrss,
        # so this process stays small (it never imports Django).
        filler = [sys.executable, __file__, "--fill", str(largest), "--database", str(database)]
        fill_seconds = float(subprocess.run(filler, check=True, stdout=subprocess.PIPE).stdout)
        say(f"  done in {fill_seconds:.1f} s, {database.stat().st_size / MIB:,.0f} MiB.")
        results = measure(
            methods, args.sizes, workdir, timeout=args.timeout, max_rss=max_rss, keep=args.keep
        )
    finally:
        if args.keep:
            say(f"Kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    summary = verdict(results)
    info = machine()
    command = " ".join([".venv/bin/python", "bench/export.py", *sys.argv[1:]])
    text = "\n".join(
        [
            f"$ {command}",
            f"{info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB, Python "
            f"{info['python']}, SQLite {info['sqlite']}, Django {info['Django']}, "
            f"django-import-export {info['django-import-export']}, tablib {info['tablib']}",
            f"fill: {largest:,} steps in {fill_seconds:.1f} s",
            "",
            table(results),
            summary["text"],
        ]
    )
    if args.json:
        # The table goes to standard error, so one run gives both.
        say(text)
        report = {
            "command": command,
            "machine": info,
            "fill_seconds": fill_seconds,
            "launcher_peak_rss_mib": _rss_mib(),
            "results": [
                {**asdict(r), "growth_mib": r.growth_mib, "rows_per_second": r.rows_per_second}
                for r in results
            ],
            "verdict": summary,
        }
        print(json.dumps(report, indent=2))
    else:
        print(text)
    # An export that crashed or wrote the wrong rows is a broken benchmark, not a figure:
    # it printed "failed" in the table and exited 0, so CI's tiny run passed without it.
    broken = [r for r in results if r.skipped.lower().startswith("failed")]
    if broken:
        say(
            f"{len(broken)} export(s) FAILED: "
            + "; ".join(f"{r.method} at {r.size:,}: {r.skipped}" for r in broken)
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
