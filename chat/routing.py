"""Websocket URL routes."""

from __future__ import annotations

from django.urls import path, re_path

from chat.consumers import ChatConsumer, NotFoundConsumer

websocket_urlpatterns = [
    path("ws/chat/<int:conversation_id>/", ChatConsumer.as_asgi()),
    # Anything else: a clean close (4404) instead of a routing error in the server log.
    re_path(r"", NotFoundConsumer.as_asgi()),
]
