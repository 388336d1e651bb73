"""ASGI entry point: HTTP through Django, websockets through Channels' router."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Django must be set up before anything imports models (the consumers do).
django_asgi_app = get_asgi_application()

from chat.checks import require_agent_checks  # noqa: E402

# Daphne runs no system checks: refuse to serve a model that cannot be built (an unknown
# AGENT_PROVIDER, a missing key) rather than fail each run later.
require_agent_checks()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chat.owner import install as install_run_owner  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402
from chat.security import SameOriginValidator, auth_middleware_stack  # noqa: E402

# The run owner opens as Daphne's reactor starts (its sweep runs with no page open); on
# SIGTERM it stops accepting, lets runs finish up to AGENT_SHUTDOWN_GRACE_S, ends the rest.
install_run_owner()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(auth_middleware_stack(URLRouter(websocket_urlpatterns))),
    }
)
