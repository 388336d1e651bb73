"""An httpx client for streamable HTTP on which a failing server fails the call, not the
run.

Two mcp 1.x behaviours (mcp 1.30.0, ``client/streamable_http.py``) that this transport
works around, below the SDK:

- A POST answered by an SSE stream that breaks or ends before the response (the server
  died mid-call) leaves the call waiting for ever: ``_handle_sse_response`` logs a break
  at debug level and, with no event id to resume from, returns without telling the
  session (python-sdk issues #1811 and #3441, fixed in 2.x only). Here such a stream
  ends with a JSON-RPC error event for the request's id, so ``call_tool`` raises
  ``McpError``, as when a stdio server dies. A stream that ends cleanly after an event
  id is left to the SDK, which resumes it; one that breaks after an event id fails the
  call instead of resuming.
- A POST that cannot connect or gets HTTP 4xx/5xx raises in a task of the transport's
  task group (``_handle_post_request``, ``response.raise_for_status()``), which cancels
  the task that opened the session: the whole run would stop as if a person had
  stopped it. Here a request gets a JSON-RPC error response instead (so ``call_tool``
  raises ``McpError``) and a notification a 202. ``initialize`` is left alone: its
  failure is how an unreachable server is told apart (HTTP 401, connection refused).
  404 is left to the SDK, which reports it as "Session terminated". A request answered
  200 with neither JSON nor SSE (an HTML page) gets such an error too: the SDK would
  leave it waiting for its time-out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR

BROKEN = "Connection closed: the server ended its answer before it was complete ({error})"
ENDED = "Connection closed: the server ended its answer without answering"
UNREACHABLE = "Connection closed: could not reach the server ({error})"
HTTP_ERROR = "The server answered HTTP {status}"
NOT_MCP_ANSWER = "The server answered with {kind}, not an MCP message"


def _error_event(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class _AnswerOnBreak(httpx.AsyncByteStream):
    """An SSE response body that ends with an error event for the request if the
    connection breaks, or if it ends with no event id to resume from: the SDK stops
    reading at the response, so it reads that event only when none came."""

    def __init__(self, stream: httpx.AsyncByteStream, request_id: Any) -> None:
        self._stream = stream
        self._request_id = request_id

    async def __aiter__(self) -> AsyncIterator[bytes]:
        resumable, head = False, b""  # head: the first bytes of the line being read
        try:
            async for chunk in self._stream:
                *ended, rest = chunk.split(b"\n")
                if ended:
                    ended[0] = head + ended[0]
                    resumable = resumable or any(line.startswith(b"id:") for line in ended)
                    head = rest[:3]
                else:
                    head = (head + rest)[:3]
                yield chunk
        except httpx.TransportError as exc:
            message = BROKEN.format(error=exc)
        else:
            if resumable:
                return  # the SDK reconnects with Last-Event-ID
            message = ENDED
        error = _error_event(self._request_id, CONNECTION_CLOSED, message)
        # The blank line first ends any event the end cut in half.
        yield f"\n\nevent: message\ndata: {json.dumps(error)}\n\n".encode()

    async def aclose(self) -> None:
        await self._stream.aclose()


def _message(request: httpx.Request) -> dict[str, Any] | None:
    """Return the JSON-RPC message a POST carries, or None (other methods, initialize)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") == "initialize":
        return None
    return message


def _answer(request: httpx.Request, message: dict[str, Any], code: int, text: str
            ) -> httpx.Response:  # fmt: skip
    if "id" not in message:  # a notification: nothing waits for an answer
        return httpx.Response(202, request=request)
    return httpx.Response(200, json=_error_event(message["id"], code, text), request=request)


class _FailCallsNotRuns(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self._transport = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        message = _message(request)
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.TransportError as exc:
            if message is None:
                raise
            return _answer(request, message, CONNECTION_CLOSED, UNREACHABLE.format(error=exc))
        if message is None:
            return response
        if response.status_code >= 400 and response.status_code != 404:
            await response.aclose()
            text = HTTP_ERROR.format(status=response.status_code)
            return _answer(request, message, INTERNAL_ERROR, text)
        kind = response.headers.get("content-type", "")
        if "id" in message and kind.startswith("text/event-stream"):
            response.stream = _AnswerOnBreak(response.stream, message["id"])
        elif (
            "id" in message
            and response.status_code == 200
            and not kind.startswith("application/json")
        ):
            # An HTML login page from a proxy, say: the SDK hands the session an error it
            # never pairs with the request, which then waits for its time-out.
            await response.aclose()
            text = NOT_MCP_ANSWER.format(kind=kind.split(";")[0].strip() or "no content type")
            return _answer(request, message, INTERNAL_ERROR, text)
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


def disconnect_aware_client(
    headers: dict[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    auth: httpx.Auth | None = None,
) -> httpx.AsyncClient:
    """Return the client ``mcp.shared._httpx_utils.create_mcp_http_client`` makes (its
    timeouts; httpx follows no redirect, the SDK does within the origin) on the
    transport above: the adapter's ``httpx_client_factory``."""
    if timeout is None:
        timeout = httpx.Timeout(30.0, read=300.0)
    return httpx.AsyncClient(
        headers=headers, timeout=timeout, auth=auth, transport=_FailCallsNotRuns()
    )
