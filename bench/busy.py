"""Run tests on a busy machine: busy-loop processes take the CPU while pytest runs.

A test whose outcome depends on how fast the machine is (an assert on elapsed time, a
sleep and then a guess at what happened, a short time-out) passes on an idle laptop and
fails on a loaded CI runner. This runner makes the load on purpose: it starts ``--hogs``
busy loops (default two per CPU: with pytest, Daphne and Chromium on top, a load average
of about 5 on 2 cores), runs pytest beside them (the browser tests unless arguments follow
``--``), stops the hogs whatever happens, and prints each pass's time, outcome and the
load average it ran under.

    .venv/bin/python bench/busy.py                            # the browser tests, once
    .venv/bin/python bench/busy.py --passes 3 --compare       # a pass without load first
    .venv/bin/python bench/busy.py -- -q -p no:cacheprovider  # the whole suite

Exit status: 0 if every pass passed, else 1 (2 for bad arguments).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The browser tests as make test-browser runs them: a pytest-xdist worker per core.
DEFAULT_PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "-n", "auto", "--dist", "loadgroup",
                       "-m", "browser"]  # fmt: skip
# A busy loop that ends once its parent (this runner) is gone, even if the runner was
# killed with SIGKILL and could not stop it: it checks every few million iterations.
HOG = """
import os, sys
parent = int(sys.argv[1])
while os.getppid() == parent:
    for _ in range(2_000_000):
        pass
"""


@dataclass
class Pass:
    """One pytest run: its label, exit code, wall time (s) and load-average samples."""

    label: str
    returncode: int = -1
    seconds: float = 0.0
    loads: list[float] = field(default_factory=list)

    def line(self) -> str:
        outcome = "passed" if self.returncode == 0 else f"FAILED (exit {self.returncode})"
        load = (
            f"load avg (1 min) mean {sum(self.loads) / len(self.loads):.1f}, "
            f"max {max(self.loads):.1f}"
            if self.loads
            else "load not sampled"
        )
        return f"{self.label:<22} {outcome:<18} {self.seconds:7.1f} s   {load}"


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` busy-loop processes; they end on their own if this process dies."""
    return [subprocess.Popen([sys.executable, "-c", HOG, str(os.getpid())]) for _ in range(count)]


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Terminate the processes, then kill those still running after 5 s."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + 5
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def sample_load(into: list[float], done: threading.Event, every_s: float = 5.0) -> None:
    """Append the 1-minute load average to ``into`` every ``every_s`` until ``done``."""
    while not done.wait(every_s):
        into.append(os.getloadavg()[0])


def run_pytest(label: str, args: list[str], *, hogs: int, timeout_s: float) -> Pass:
    """Run pytest with ``args`` beside ``hogs`` busy loops; return how it went."""
    result = Pass(label)
    hog_processes = start_hogs(hogs)
    done = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(result.loads, done), daemon=True)
    sampler.start()
    start = time.monotonic()
    # Its own process group, so that stopping it stops its xdist workers, their servers and
    # browsers too (SIGTERM to pytest alone left them running on their own for seconds).
    pytest = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=ROOT, process_group=0)
    try:
        result.returncode = pytest.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"busy.py: pytest ran past {timeout_s:g} s; stopping it", flush=True)
        pytest.send_signal(signal.SIGINT)  # pytest prints what it was doing
        try:
            pytest.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(pytest.pid, signal.SIGKILL)
            pytest.wait()
        result.returncode = 124
    finally:
        if pytest.poll() is None:  # interrupted: do not leave pytest (and its servers) behind
            os.killpg(pytest.pid, signal.SIGTERM)
            pytest.wait()
        result.seconds = time.monotonic() - start
        done.set()
        stop(hog_processes)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Arguments after -- go to pytest instead of the default "
        + " ".join(DEFAULT_PYTEST_ARGS),
    )
    parser.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1),
                        help="busy-loop processes (default: two per CPU)")  # fmt: skip
    parser.add_argument("--passes", type=int, default=1, help="pytest runs under load")
    parser.add_argument("--compare", action="store_true",
                        help="run once without the hogs first, for the time it takes")  # fmt: skip
    parser.add_argument("--timeout-s", type=float, default=1800,
                        help="stop a pytest run that takes longer (exit 124)")  # fmt: skip
    args, rest = parser.parse_known_args(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    elif rest:
        parser.error(f"unknown arguments {rest}: put pytest's after --")
    if args.hogs < 0 or args.passes < 1:
        parser.error("--hogs must be 0 or more and --passes 1 or more")
    pytest_args = rest or DEFAULT_PYTEST_ARGS
    # SIGTERM (a CI time-out, kill) must stop the hogs too: turn it into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    cores = os.cpu_count() or 1
    print(f"busy.py: {args.hogs} busy loops on {cores} CPUs; pytest {' '.join(pytest_args)}",
          flush=True)  # fmt: skip
    passes: list[Pass] = []
    if args.compare:
        passes.append(run_pytest("without load", pytest_args, hogs=0, timeout_s=args.timeout_s))
    for number in range(1, args.passes + 1):
        label = f"pass {number}, {args.hogs} hogs"
        passes.append(run_pytest(label, pytest_args, hogs=args.hogs, timeout_s=args.timeout_s))
        print(passes[-1].line(), flush=True)

    print("\nbusy.py summary")
    for result in passes:
        print(result.line())
    return 0 if all(result.returncode == 0 for result in passes) else 1


if __name__ == "__main__":
    sys.exit(main())
