"""The middleware chain under ASGI: Django's middleware runs in the request's thread."""

from __future__ import annotations

import threading

import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.test import AsyncClient
from django.utils.deprecation import MiddlewareMixin

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_page_request_runs_no_middleware_in_async_mode(monkeypatch):
    # In async mode each MiddlewareMixin hands its process_request and process_response
    # to the request's thread (sync_to_async): a dozen hops between the event loop and
    # that thread a page, each a wait for both while runs stream (docs/benchmarks.md).
    in_async_mode = []
    acall = MiddlewareMixin.__acall__

    async def counted(self, request):
        in_async_mode.append(type(self).__name__)
        return await acall(self, request)

    threads = set()
    process_request = SessionMiddleware.process_request

    def watched(self, request):
        threads.add(threading.get_ident())
        return process_request(self, request)

    monkeypatch.setattr(MiddlewareMixin, "__acall__", counted)
    monkeypatch.setattr(SessionMiddleware, "process_request", watched)

    response = await AsyncClient().get("/", follow=True)  # a new visitor's three requests

    assert response.status_code == 200
    assert in_async_mode == []
    assert threads and threading.get_ident() not in threads  # a thread, not the loop's
