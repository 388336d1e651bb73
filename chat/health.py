"""``GET /healthz``: whether this server process can do its work, for a load balancer.

A process is healthy when the database answers a ``SELECT 1`` and the channel layer
carries a message from this process back to it on a new channel (with Redis, a round trip
through the server every process shares). Both are tried at once, each within
:data:`CHECK_TIMEOUT_S`. No login, no session, no CSRF, never cached; nothing is migrated
or counted, so a probe every few seconds costs one query and two Redis commands.
The body names which part failed and the exception's class, never its text (which may
name hosts or users); the log (``chat.health``) has the rest. It also says how many
messages the channel layer could not deliver since the process started
(``chat.layers.UNDELIVERED``), which never makes the process unhealthy: a tab that stopped
reading fills its own channel, and taking the process out of rotation would not help it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from chat import store
from chat.layers import UNDELIVERED

logger = logging.getLogger(__name__)

# Seconds each part may take before it counts as failing: well under a load balancer's
# usual probe time-out (nginx Plus and HAProxy default to a few seconds).
CHECK_TIMEOUT_S = 3.0
PROBE_MESSAGE_TYPE = "health.probe"
OK = "ok"


class ProbeLost(RuntimeError):
    """The channel layer returned a message other than the probe sent."""


# The database probe still running, if any: a probe that outlived its time limit is
# waited for again by the next health check instead of another one piling up behind it.
_database_probe: asyncio.Future[None] | None = None


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark an abandoned probe's exception retrieved (it was reported as a time-out)."""
    if not future.cancelled():
        future.exception()


def _select_1() -> None:
    """Run the probe's query in a thread of its own, then give its connection back."""
    try:
        store.database_answers()
    finally:
        connection.close()  # back to the pool; this thread's connection is no one's


async def check_database() -> None:
    """Run ``SELECT 1`` on the default database; raise whatever the driver raises.

    A blocking call cannot be cut short: with the database unreachable it returns at the
    driver's or the pool's own time-out (psycopg's pool: 60 s), and asgiref waits for it
    even when cancelled. In the ORM's thread (``database_sync_to_async``) it also held
    every request of the process: the request ran there (WhiteNoise's middleware is sync),
    so ``/healthz`` answered only when the driver gave up and a load balancer saw its own
    time-out, not a 503. The query runs in a thread of its own and is shielded: the check
    answers at :data:`CHECK_TIMEOUT_S` and the query ends on its own.
    """
    global _database_probe
    loop = asyncio.get_running_loop()
    probe = _database_probe
    if probe is None or probe.done() or probe.get_loop() is not loop:
        probe = asyncio.ensure_future(sync_to_async(_select_1, thread_sensitive=False)())
        probe.add_done_callback(_retrieve)
        _database_probe = probe
    await asyncio.shield(probe)


async def check_channel_layer() -> None:
    """Send a message to a new channel of the default layer and receive it back.

    Raises ``RuntimeError`` when no layer is configured, :class:`ProbeLost` when another
    message comes back, and whatever the layer raises (``ConnectionError`` for Redis down).
    """
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer is configured")
    channel = await layer.new_channel()
    token = f"{time.monotonic_ns()}"
    await layer.send(channel, {"type": PROBE_MESSAGE_TYPE, "token": token})
    message = await layer.receive(channel)
    if message.get("token") != token:
        raise ProbeLost(f"received {message.get('type')!r} instead of the probe")


async def _outcome(name: str, check: Callable[[], Awaitable[None]]) -> str:
    """Return ``"ok"`` or the exception class's name (``"TimeoutError"`` after the limit)."""
    try:
        await asyncio.wait_for(check(), timeout=CHECK_TIMEOUT_S)
    except Exception as exc:  # a health check reports every failure, it never raises
        logger.warning("health check: %s failed: %r", name, exc)
        return type(exc).__name__
    return OK


@never_cache
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """Return 200 ``{"status": "ok", "database": "ok", "channel_layer": "ok",
    "undelivered": 0}`` when healthy.

    Otherwise 503 with ``"status": "failing"`` and, for the part that failed, the class of
    its exception instead of ``"ok"`` (e.g. ``"database": "OperationalError"``).
    ``undelivered``: messages the channel layer dropped since the process started (an
    int; not part of the status). GET and HEAD only (405 otherwise); sent with
    ``Cache-Control: no-cache, no-store``.
    """
    database, layer = await asyncio.gather(
        _outcome("database", check_database), _outcome("channel layer", check_channel_layer)
    )
    healthy = database == OK and layer == OK
    body = {
        "status": OK if healthy else "failing",
        "database": database,
        "channel_layer": layer,
        "undelivered": UNDELIVERED.count,
    }
    return JsonResponse(body, status=200 if healthy else 503)
