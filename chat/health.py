"""``GET /healthz``: whether this server process can do its work, for a load balancer.

A process is healthy when the database answers a ``SELECT 1`` and the channel layer
carries a message from this process back to it on a new channel (with Redis, a round trip
through the server every process shares). Both are tried at once, each within
:data:`CHECK_TIMEOUT_S`. No login, no session, no CSRF, never cached; nothing is migrated
or counted, so a probe every few seconds costs one query and two Redis commands.
The body names which part failed and the exception's class, never its text (which may
name hosts or users); the log (``chat.health``) has the rest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from chat import store

logger = logging.getLogger(__name__)

# Seconds each part may take before it counts as failing: well under a load balancer's
# usual probe time-out (nginx Plus and HAProxy default to a few seconds).
CHECK_TIMEOUT_S = 3.0
PROBE_MESSAGE_TYPE = "health.probe"
OK = "ok"


class ProbeLost(RuntimeError):
    """The channel layer returned a message other than the probe sent."""


async def check_database() -> None:
    """Run ``SELECT 1`` on the default database; raise whatever the driver raises."""
    await database_sync_to_async(store.database_answers)()


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
    """Return 200 ``{"status": "ok", "database": "ok", "channel_layer": "ok"}`` when healthy.

    Otherwise 503 with ``"status": "failing"`` and, for the part that failed, the class of
    its exception instead of ``"ok"`` (e.g. ``"database": "OperationalError"``). GET and
    HEAD only (405 otherwise); sent with ``Cache-Control: no-cache, no-store``.
    """
    database, layer = await asyncio.gather(
        _outcome("database", check_database), _outcome("channel layer", check_channel_layer)
    )
    healthy = database == OK and layer == OK
    body = {"status": OK if healthy else "failing", "database": database, "channel_layer": layer}
    return JsonResponse(body, status=200 if healthy else 503)
