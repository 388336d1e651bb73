"""Middleware of the project as a whole (not of one app)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse


class SyncMiddlewareChain:
    """Run every middleware above this one synchronously, in the request's thread.

    Under ASGI, Django runs each middleware that can be either in the mode of the one
    below it (``BaseHandler.load_middleware``). With the view's handler async at the
    bottom, Django's own middleware ran async, and ``MiddlewareMixin.__acall__`` passes
    each ``process_request`` and ``process_response`` to the request's thread with
    ``sync_to_async``: about a dozen hops between the event loop and the thread a page,
    each a wait for the loop and for the GIL while runs stream. This one is sync-only and
    last in ``MIDDLEWARE``, so the chain above it is sync: one hop in, one to the view.
    Django's docs: "Asynchronous support", the penalty of switching modes.
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)
