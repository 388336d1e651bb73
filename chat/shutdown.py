"""Stop a server process gracefully: stop accepting, let runs finish a while, end the rest.

Daphne stops on SIGTERM (``systemctl restart``, a deploy) or Ctrl-C. A run is a task of
the process that received its message (:func:`chat.runs.start_run`), so without this it
vanishes with the process: its row stays ``running`` until another process's sweep finds
its heartbeat stale (``AGENT_STALE_AFTER_S`` + up to ``AGENT_HEARTBEAT_S``: 61-70 s with
the defaults, measured by bench/restart.py), and until then its conversation refuses new
messages ("still working on your last message").

With ``AGENT_GRACEFUL_SHUTDOWN`` on (the default), :func:`install` adds a Twisted
"before shutdown" trigger, the phase in which Daphne cancels its consumers (closing this
process's sockets: pages reconnect, through the proxy, to another process). The trigger
stops listening, so the proxy sends new connections elsewhere; lets this process's runs go
on for up to ``AGENT_SHUTDOWN_GRACE_S``; then cancels the rest, each of which records its
end as ``cancelled`` ("the server stopped it") and publishes it to its conversation's
group, so every tab sees the end at once and the next message can go. Only a process that
dies without running its triggers (``kill -9``, a crash, the machine) still leaves its runs
to the sweep. Same idea as Gunicorn's graceful timeout and Celery's warm shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from django.conf import settings

from chat.runs import SWALLOWED_AFTER_S, cancel_local, running_runs

logger = logging.getLogger(__name__)

# Seconds the cancelled runs get to record their end (a few database writes each).
RECORD_TIMEOUT_S = 10.0

STOPPING = "the server is stopping"


def install() -> bool:
    """Register the graceful stop with Twisted's reactor; return whether it was registered.

    Does nothing (returns False) when ``AGENT_GRACEFUL_SHUTDOWN`` is off, or when no
    reactor was imported: this process is not Daphne (``manage.py``, the tests).
    """
    if not settings.AGENT_GRACEFUL_SHUTDOWN:
        return False
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None:
        return False
    reactor.addSystemEventTrigger("before", "shutdown", _before_shutdown, reactor)
    return True


def _before_shutdown(reactor: Any) -> Any:
    """Stop listening and finish the runs; return a Deferred Twisted waits for."""
    from twisted.internet import defer, tcp

    for reader in list(reactor.getReaders()):
        if isinstance(reader, tcp.Port):
            reader.stopListening()
    future = asyncio.ensure_future(finish_runs(grace_s=settings.AGENT_SHUTDOWN_GRACE_S))
    deferred = defer.Deferred.fromFuture(future)
    deferred.addErrback(lambda failure: logger.error("graceful stop failed: %s", failure))
    return deferred


async def finish_runs(*, grace_s: float, record_s: float = RECORD_TIMEOUT_S) -> tuple[int, int]:
    """Wait up to ``grace_s`` seconds for this process's runs, then cancel the rest.

    Each cancelled run records its end as ``cancelled`` (see :func:`chat.runs.execute_run`);
    this waits up to ``record_s`` seconds for those writes, cancelling again any run that
    swallowed its cancel (:func:`chat.runs.cancel_local`, every
    :data:`chat.runs.SWALLOWED_AFTER_S`). Returns ``(finished, cancelled)``: how many runs
    ended on their own within the grace, how many were cut.
    """
    runs = running_runs()
    if not runs:
        return 0, 0
    logger.info("stopping: waiting up to %g s for %d run(s)", grace_s, len(runs))
    done: set[asyncio.Task[Any]] = set()
    pending: set[asyncio.Task[Any]] = set(runs.values())
    if grace_s > 0:
        done, pending = await asyncio.wait(pending, timeout=grace_s)
    cut = len(pending)
    if pending:
        logger.warning("stopping: cancelling %d run(s) still going after %g s", cut, grace_s)
    loop = asyncio.get_running_loop()
    until = loop.time() + record_s
    while pending and (left := until - loop.time()) > 0:
        for run_id, task in runs.items():
            if task in pending:
                cancel_local(run_id, reason=STOPPING)
        _, pending = await asyncio.wait(pending, timeout=min(left, SWALLOWED_AFTER_S))
    return len(done), cut
