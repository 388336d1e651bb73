"""An MCP server with every awkward kind of tool, for tests/agents/test_mcp.py.

Run it over stdio (``python awkward.py``) or over streamable HTTP on loopback
(``python awkward.py --http --port N``: it prints ``ready on http://127.0.0.1:N/mcp``
once it accepts connections). Tools that answer text, raise, sleep, return an image, an
``isError`` result or structured output; names an OpenAI-style API refuses (a dot, a
space, unicode, more than 64 characters, two that map to the same name); ``die`` ends
the process mid-call; ``add_tool`` registers a tool at runtime, and the tools named one
a line in the file ``AWKWARD_EXTRA_TOOLS`` (when set) are registered at start, so a new
stdio process sees a tool added since the last one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import zlib
from typing import TypedDict

from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.types import CallToolResult, TextContent

LONG_NAME = "a_tool_whose_name_goes_on_and_on_well_past_what_the_model_apis_accept_" + "x" * 10
HEADER = "x-api-key"

server = FastMCP("awkward", log_level="WARNING")


def tiny_png() -> bytes:
    """Return a valid 1x1 red PNG, made with zlib and struct."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@server.tool()
def echo(text: str) -> str:
    """Return the text as it is."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Raise ValueError with the message."""
    raise ValueError(message)


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


@server.tool()
def image() -> Image:
    """Return a 1x1 red PNG."""
    return Image(data=tiny_png(), format="png")


@server.tool()
def refuse(reason: str) -> CallToolResult:
    """Return an isError result without raising."""
    return CallToolResult(content=[TextContent(type="text", text=reason)], isError=True)


class Forecast(TypedDict):
    city: str
    celsius: float


@server.tool()
def forecast(city: str) -> Forecast:
    """Return a structured forecast."""
    return {"city": city, "celsius": 21.5}


@server.tool()
def die() -> str:
    """End the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(1)


@server.tool()
def header_seen(ctx: Context) -> str:
    """Say whether the x-api-key header came and matches AWKWARD_EXPECTED_KEY (never
    echoing it)."""
    request = ctx.request_context.request
    value = request.headers.get(HEADER) if request is not None else None
    if value is None:
        return "absent"
    return "matches" if value == os.environ.get("AWKWARD_EXPECTED_KEY") else "differs"


def _added(name: str) -> None:
    server.add_tool(lambda: f"{name} here", name=name, description=f"Added at runtime: {name}.")


@server.tool()
def add_tool(name: str) -> str:
    """Register a tool named ``name`` that answers "<name> here"."""
    _added(name)
    return f"added {name}"


for awkward_name in ("dotted.name", "with space", "café_ü", LONG_NAME, "dotted_name"):
    server.add_tool(
        lambda n=awkward_name: f"{n} answered", name=awkward_name, description="Awkward name."
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    extra = os.environ.get("AWKWARD_EXTRA_TOOLS")
    if extra and os.path.exists(extra):
        with open(extra, encoding="utf-8") as lines:
            for name in filter(None, (line.strip() for line in lines)):
                _added(name)
    if not options.http:
        server.run("stdio")
        return
    asyncio.run(serve_http(options.port))


async def serve_http(port: int) -> None:
    import uvicorn

    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"
    )
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve())
    while not http.started and not serving.done():
        await asyncio.sleep(0.02)
    if http.started:
        print(f"ready on http://127.0.0.1:{port}/mcp", flush=True)
    await serving


if __name__ == "__main__":
    main()
