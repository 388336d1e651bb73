"""Profile and count a server's work while ``bench/load.py --profile`` drives it.

Not part of the app: ``bench/load.py --profile DIR`` puts this directory first on the
server's ``PYTHONPATH`` with ``BENCH_PROFILE_DIR=DIR``, so Python imports it at start-up
(``sitecustomize``). Nothing happens until the benchmark sends ``SIGUSR1`` (after start-up
and migrations, right before the first browser): then every thread is profiled with
cProfile (the event loop's thread and each thread started after, such as the ORM's
shared thread and the HTTP request threads), and these are counted:

- calls through ``database_sync_to_async`` (Channels' class), with their wait in the
  executor's queue and their run time (ms), by the function called;
- SQL queries, by their first words, and database connections opened;
- template renders, by template name, with their CPU time (ms, includes included).

At exit (the benchmark stops Daphne with SIGTERM) it writes ``DIR/server.prof`` (pstats,
all threads merged) and ``DIR/counts.json``. The idea of counting the queue wait around
the executor is the instrumented executor of docs/benchmarks.md ("What limits one
process"), kept here so anyone can re-run it.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import os
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

OUT = os.environ.get("BENCH_PROFILE_DIR")

if OUT:
    import cProfile
    import pstats

    _profiles: list[cProfile.Profile] = []
    _lock = threading.Lock()
    _on = threading.Event()
    _counts: dict[str, Counter] = defaultdict(Counter)
    _times: dict[str, list[float]] = defaultdict(list)
    _waits: dict[str, list[float]] = defaultdict(list)
    _template_ms: Counter = Counter()

    def _profile_this_thread(*_: object) -> None:
        import sys

        sys.setprofile(None)
        if not _on.is_set() or COUNTS_ONLY:
            return
        profile = cProfile.Profile(time.thread_time)  # CPU, not waiting
        with _lock:
            _profiles.append(profile)
        profile.enable()

    # Only the counts (no cProfile, whose cost slows a loaded server into another regime).
    COUNTS_ONLY = os.environ.get("BENCH_PROFILE_COUNTS_ONLY") == "1"

    def _start(*_: object) -> None:
        if _on.is_set():
            return
        _on.set()
        if COUNTS_ONLY:
            return
        threading.setprofile(_profile_this_thread)
        _profile_this_thread()

    def _instrument() -> None:
        from channels.db import DatabaseSyncToAsync
        from django.db.backends.signals import connection_created
        from django.template.backends.django import Template

        submitted_at: contextvars.ContextVar[float] = contextvars.ContextVar("submitted")
        original_call = DatabaseSyncToAsync.__call__
        original_handler = DatabaseSyncToAsync.thread_handler

        async def counted_call(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            # The context is copied for the call: the worker thread reads this.
            token = submitted_at.set(time.perf_counter())
            try:
                return await original_call(self, *args, **kwargs)
            finally:
                submitted_at.reset(token)

        def counted_handler(self, loop, exc_info, task_context, func, child):  # type: ignore[no-untyped-def]
            if not _on.is_set():
                return original_handler(self, loop, exc_info, task_context, func, child)
            target = getattr(child, "func", child)
            name = getattr(target, "__qualname__", repr(target))

            def timed_child():  # type: ignore[no-untyped-def]
                began = time.perf_counter()
                try:
                    return child()
                finally:
                    ran = time.perf_counter() - began
                    with _lock:
                        _counts["database_sync_to_async"][name] += 1
                        waited = (began - submitted_at.get(began)) * 1000
                        _times["queue_wait_ms"].append(waited)
                        _waits[name].append(waited)
                        _times["run_ms"].append(ran * 1000)

            return original_handler(self, loop, exc_info, task_context, func, timed_child)

        DatabaseSyncToAsync.__call__ = counted_call  # type: ignore[method-assign]
        DatabaseSyncToAsync.thread_handler = counted_handler  # type: ignore[method-assign]

        def count_query(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
            if _on.is_set():
                words = " ".join(str(sql).split()[:3])[:60]
                with _lock:
                    _counts["queries"][words] += 1
            return execute(sql, params, many, context)

        def on_connection(sender, connection, **_: object) -> None:  # type: ignore[no-untyped-def]
            if _on.is_set():
                with _lock:
                    _counts["connections"]["opened"] += 1
            if count_query not in connection.execute_wrappers:  # kept across reconnects
                connection.execute_wrappers.append(count_query)

        connection_created.connect(on_connection, weak=False)

        original_render = Template.render

        def counted_render(self, context=None, request=None):  # type: ignore[no-untyped-def]
            if not _on.is_set():
                return original_render(self, context, request)
            name = self.origin.template_name
            began = time.thread_time()
            try:
                return original_render(self, context, request)
            finally:
                # CPU of this render, its includes' renders included (they are counted
                # under their own names too).
                cpu_ms = (time.thread_time() - began) * 1000
                with _lock:
                    _counts["templates"][name] += 1
                    _template_ms[name] += cpu_ms

        Template.render = counted_render  # type: ignore[method-assign]

    def _dump() -> None:
        out = Path(OUT)
        out.mkdir(parents=True, exist_ok=True)
        with _lock:
            profiles = list(_profiles)
        stats = None
        for profile in profiles:
            profile.disable()
            try:
                stats = pstats.Stats(profile) if stats is None else stats.add(profile)
            except TypeError:  # a thread that never ran a profiled call
                continue
        if stats is not None:
            stats.dump_stats(out / "server.prof")
        waits, runs = sorted(_times["queue_wait_ms"]), sorted(_times["run_ms"])

        def pct(values: list[float], p: float) -> float | None:
            return values[min(len(values) - 1, int(len(values) * p / 100))] if values else None

        summary = {key: dict(counter.most_common()) for key, counter in _counts.items()} | {
            "database_sync_to_async_total": sum(_counts["database_sync_to_async"].values()),
            "queries_total": sum(_counts["queries"].values()),
            "templates_total": sum(_counts["templates"].values()),
            "template_cpu_ms": {name: round(ms, 1) for name, ms in _template_ms.most_common()},
            "queue_wait_ms": {"p50": pct(waits, 50), "p95": pct(waits, 95), "max": pct(waits, 100)},
            "run_ms": {"p50": pct(runs, 50), "p95": pct(runs, 95), "sum": sum(runs)},
            # Each function's wait for its thread: a page's connect against a run's write.
            "queue_wait_ms_by_call": {
                name: {"p50": pct(sorted(w), 50), "p95": pct(sorted(w), 95)}
                for name, w in sorted(_waits.items(), key=lambda item: -len(item[1]))
            },
        }
        (out / "counts.json").write_text(json.dumps(summary, indent=2))

    signal.signal(signal.SIGUSR1, _start)
    atexit.register(_dump)
    # Django's modules import once settings are known; the ASGI module imports them
    # before serving, so patch when the first of them is imported.
    import importlib.abc
    import sys

    class _AfterDjango(importlib.abc.MetaPathFinder):
        done = False

        def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
            if name == "channels.db" and not self.done:
                self.done = True
                sys.meta_path.remove(self)
                spec = importlib.util.find_spec(name)
                loader = spec.loader
                original_exec = loader.exec_module

                def exec_module(module):  # type: ignore[no-untyped-def]
                    original_exec(module)
                    _instrument()

                loader.exec_module = exec_module
                return spec
            return None

    import importlib.util

    sys.meta_path.insert(0, _AfterDjango())
