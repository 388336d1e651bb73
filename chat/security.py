"""Websocket origin checking: the browser's Origin must be this site, port included.

Channels' ``AllowedHostsOriginValidator`` compares only the host name with
ALLOWED_HOSTS, so a page served from another port of the same host could open a socket
with the visitor's cookie. Here the Origin's ``host:port`` must equal the request's Host
header (the same-origin rule of RFC 6454), the Host must be in ALLOWED_HOSTS, or the
origin must be listed in CSRF_TRUSTED_ORIGINS (for proxies that rewrite Host).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


def origin_allowed(origin: str, host: str) -> bool:
    """Return True if a websocket from ``origin`` to ``host`` (the Host header) may open."""
    if not origin or origin == "null":
        return False
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    return parts.netloc.lower() == host.lower()


class SameOriginValidator:
    """ASGI middleware: deny websocket handshakes whose Origin is not this site."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers", []))
        origin = headers.get(b"origin", b"").decode("latin1")
        host = headers.get(b"host", b"").decode("latin1")
        if scope["type"] == "websocket" and not origin_allowed(origin, host):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
