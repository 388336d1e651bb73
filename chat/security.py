"""Websocket origin checking, and the one log line every refused socket writes.

Channels' ``AllowedHostsOriginValidator`` compares only the host name with
ALLOWED_HOSTS, so a page served from another port of the same host could open a socket
with the visitor's cookie. Here the Origin's ``host:port`` must equal the request's Host
header (the same-origin rule of RFC 6454), the Host must be in ALLOWED_HOSTS, or the
origin must be listed in CSRF_TRUSTED_ORIGINS (for proxies that rewrite Host).

A refused socket is accepted and then closed with :data:`CLOSE_ORIGIN_REFUSED`, never
refused in the handshake: a browser sees a refused handshake only as close code 1006,
the same as a network failure, and would reconnect forever without saying why. The
inner application (session, user, consumer) is never called for it, so the page that
opened it learns nothing but the code. Daphne drops a close frame's reason text, so the
code is the whole message; :func:`log_refusal` tells the operator the rest.
"""

from __future__ import annotations

import logging
from functools import partial
from importlib import import_module
from typing import Any
from urllib.parse import urlsplit

from channels.auth import AuthMiddleware, get_user
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.http.request import split_domain_port, validate_host
from django.utils.functional import SimpleLazyObject

logger = logging.getLogger("chat.sockets")

CLOSE_ORIGIN_REFUSED = 4403
# Longest header value written to the log: a hostile client picks these.
LOGGED_HEADER_CHARS = 200

NO_ORIGIN = "no Origin header (not a browser?)"
NULL_ORIGIN = "the Origin is 'null' (a sandboxed frame or a file:// page)"
NOT_HTTP = "the Origin is not an http(s) URL"
HOST_NOT_ALLOWED = "the Host is not in ALLOWED_HOSTS"
ORIGIN_NOT_HOST = (
    "the Origin is not the Host and not in CSRF_TRUSTED_ORIGINS "
    "(a proxy that rewrites Host? see docs/configuration.md)"
)


def origin_refusal(origin: str, host: str) -> str | None:
    """Return why a websocket from ``origin`` to ``host`` (the Host header) may not open.

    None if it may. The reason is one of this module's constants, for the server log.
    """
    if not origin:
        return NO_ORIGIN
    if origin == "null":
        return NULL_ORIGIN
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return None
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return NOT_HTTP
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return HOST_NOT_ALLOWED
    if parts.netloc.lower() != host.lower():
        return ORIGIN_NOT_HOST
    return None


def origin_allowed(origin: str, host: str) -> bool:
    """Return True if a websocket from ``origin`` to ``host`` (the Host header) may open."""
    return origin_refusal(origin, host) is None


def _header(scope: dict[str, Any], name: bytes) -> str:
    """Return a request header's value (the first if repeated), or ""."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin1")
    return ""


def log_refusal(scope: dict[str, Any], code: int, reason: str) -> None:
    """Log a websocket closed by the server for ``reason`` at WARNING on ``chat.sockets``.

    The message names the close code, the reason, the path and the Origin, Host and
    X-Forwarded-Host headers seen (quoted and cut at :data:`LOGGED_HEADER_CHARS`: a
    client chooses them). The record carries them as attributes too (``close_code``,
    ``reason``, ``origin``, ``host``, ``forwarded_host``, ``path``) for structured logs.
    """
    fields = {
        "close_code": code,
        "reason": reason,
        "path": str(scope.get("path", ""))[:LOGGED_HEADER_CHARS],
        "origin": _header(scope, b"origin")[:LOGGED_HEADER_CHARS],
        "host": _header(scope, b"host")[:LOGGED_HEADER_CHARS],
        "forwarded_host": _header(scope, b"x-forwarded-host")[:LOGGED_HEADER_CHARS],
    }
    logger.warning(
        "websocket closed with %s: %s; path %r, Origin %r, Host %r, X-Forwarded-Host %r",
        code, reason, fields["path"], fields["origin"], fields["host"], fields["forwarded_host"],
        extra=fields,
    )  # fmt: skip


async def close_at_once(receive: Any, send: Any, code: int) -> None:
    """Accept a websocket handshake, close it with ``code``, wait for the disconnect.

    A bare ASGI application: no session, user or channel layer is touched.
    """
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": code})
    while message["type"] != "websocket.disconnect":
        message = await receive()


class SameOriginValidator:
    """ASGI middleware: close websockets whose Origin is not this site with 4403."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            reason = origin_refusal(_header(scope, b"origin"), _header(scope, b"host"))
            if reason is not None:
                log_refusal(scope, CLOSE_ORIGIN_REFUSED, f"origin not allowed: {reason}")
                return await close_at_once(receive, send, CLOSE_ORIGIN_REFUSED)
        return await self.application(scope, receive, send)


class LazyUserMiddleware(AuthMiddleware):
    """Channels' ``AuthMiddleware`` with ``scope["user"]`` loaded on first use, in sync code.

    Channels loads the user in an ORM call of its own before the consumer runs: a second
    wait in the ORM thread's queue before a socket is accepted, which under load can pass
    Daphne's 5 s handshake limit (``--websocket_connect_timeout``). Here the user is a
    ``SimpleLazyObject`` over the same loader (``channels.auth.get_user``: session
    key, backend, session hash check), evaluated by the consumer's first ORM call that
    reads it (:func:`chat.consumers._find_conversation`). Read first from async code,
    it raises Django's ``SynchronousOnlyOperation``, as any query there does.
    """

    def populate_scope(self, scope: dict[str, Any]) -> None:
        if "user" not in scope:  # an outer layer (a test) may have set one
            scope["user"] = SimpleLazyObject(partial(get_user.func, scope))
        super().populate_scope(scope)  # checks the session is there

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        """Nothing to wait for: the user loads when first read."""


def session_ended(session_key: str, user: Any) -> bool:
    """Return True if the session stored under ``session_key`` may no longer be used by
    a socket of ``user`` (the scope's user, or an anonymous one for a guest).

    Ended: gone (logged out, replaced at login), past its expiry date (stored still, until
    ``clearsessions``), malformed, or no longer logging in ``user`` (the password changed,
    the user deleted or deactivated: the check a new socket's user gets,
    ``channels.auth.get_user``). ``Session.exists`` saw only the first. Sync: it reads
    the session (one query) and, for a login, the user (one more).
    """
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    logged_in = store.get(SESSION_KEY) is not None  # loads it; a miss clears the key
    if store.session_key is None:
        return True
    was_user = user is not None and user.is_authenticated
    if not logged_in:
        return was_user
    current = get_user.func({"session": store})
    if not current.is_authenticated:
        return True
    return was_user and current.pk != user.pk


def auth_middleware_stack(inner: Any) -> Any:
    """Channels' ``AuthMiddlewareStack`` (cookies, session, user) with
    :class:`LazyUserMiddleware` for the user."""
    return CookieMiddleware(SessionMiddleware(LazyUserMiddleware(inner)))
