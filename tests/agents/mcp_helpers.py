"""Real MCP servers for the tests: the awkward test server over stdio or streamable HTTP,
a server that answers HTTP 401 to everything, and this process's child processes."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agents.mcp import McpServerConfig
from tests.timing import WAIT_S, wait_until

SERVERS = Path(__file__).resolve().parent.parent / "mcp_servers"
AWKWARD = SERVERS / "awkward.py"


def stdio_config(name: str = "awk", *, env: dict[str, str] | None = None,
                 **fields) -> McpServerConfig:  # fmt: skip
    """Return the awkward server over stdio; a generous time to connect on a busy machine."""
    return McpServerConfig(
        name=name, transport="stdio", command=sys.executable, args=(str(AWKWARD),),
        env=env or {}, connect_timeout_s=fields.pop("connect_timeout_s", WAIT_S), **fields,
    )  # fmt: skip


def python_config(name: str, code: str, **fields) -> McpServerConfig:
    """Return a stdio "server" that runs ``code`` (python -u -c); by default it has
    ``WAIT_S`` to connect, so a busy machine cannot turn its failure into a time-out."""
    fields.setdefault("connect_timeout_s", WAIT_S)
    return McpServerConfig(
        name=name, transport="stdio", command=sys.executable, args=("-u", "-c", code), **fields
    )


def free_port() -> int:
    """Return a loopback port nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def awkward_http(env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run the awkward server over streamable HTTP on a free loopback port; yield its URL
    and process once it accepts connections (polled), and stop it at the end."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(AWKWARD), "--http", "--port", str(port)],
        stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        wait_until(lambda: process.poll() is not None or _accepts(port), "the MCP HTTP server")
        assert process.poll() is None, "the MCP HTTP server exited while starting"
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.terminate()
        process.wait(timeout=WAIT_S)


class _Refuse(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_DELETE = do_POST

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Yield the ``/mcp`` URL of an HTTP server on a free loopback port answering with
    ``handler``, in a thread; stop it at the end."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/mcp"
    finally:
        httpd.shutdown()
        httpd.server_close()


def refusing_server() -> AbstractContextManager[str]:
    """Return :func:`serving` an HTTP server answering 401 to every request."""
    return serving(_Refuse)


def children() -> set[int]:
    """Return the pids of this process's children (any thread's), from /proc."""
    pids: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with open(path) as text:
            pids.update(int(pid) for pid in text.read().split())
    return pids


async def until(predicate: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll ``predicate`` every 50 ms without blocking the loop; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        await asyncio.sleep(0.05)


class _Vanishing(BaseHTTPRequestHandler):
    """A bare streamable HTTP MCP server with one tool, ``vanish``, whose call gets an SSE
    stream that ends cleanly with no answer."""

    protocol_version = "HTTP/1.1"

    def _send(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Mcp-Session-Id", "vanishing")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method = message.get("method")
        results = {
            "initialize": {"protocolVersion": message.get("params", {}).get("protocolVersion"),
                           "capabilities": {"tools": {}},
                           "serverInfo": {"name": "vanishing", "version": "1"}},
            "tools/list": {"tools": [{"name": "vanish", "inputSchema": {"type": "object"}}]},
        }  # fmt: skip
        if "id" not in message:
            self._send(202)
        elif method in results:
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": results[method]}
            self._send(200, json.dumps(answer).encode())
        else:  # tools/call: a stream that ends before any event
            self._send(200, b": nothing to say\n\n", "text/event-stream")

    def do_GET(self) -> None:
        self._send(405)

    def do_DELETE(self) -> None:
        self._send(200)

    def log_message(self, *args) -> None:
        pass


def vanishing_server() -> AbstractContextManager[str]:
    """Return :func:`serving` :class:`_Vanishing`."""
    return serving(_Vanishing)
