"""One server's tools without a run, for the admin page and the start-up report, cached
for a TTL so a server that adds a tool is seen without restarting the app."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from agents.mcp.config import McpServerConfig
from agents.mcp.toolset import open_mcp_tools


@dataclass(frozen=True)
class McpToolInfo:
    """One tool as the server lists it: ``name`` (the server's), ``model_name`` (what the
    model is given, see :func:`agents.mcp.open_mcp_tools`), ``description`` and
    ``input_schema`` (the MCP tool's JSON schema)."""

    name: str
    model_name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ServerTools:
    """A server's tools, or, when it could not be opened, ``unavailable``: the reason."""

    server: str
    tools: tuple[McpToolInfo, ...] = ()
    unavailable: str = ""


class ToolListCache:
    """The lists :func:`list_server_tools` made, each with the ``clock()`` time (seconds)
    it was made at, keyed by the config (equal configs share a list; the headers' values
    are read from the environment and play no part)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lists: dict[McpServerConfig, tuple[float, ServerTools]] = {}

    def get(self, config: McpServerConfig, ttl_s: float) -> ServerTools | None:
        """Return the list made less than ``ttl_s`` seconds ago, or None."""
        entry = self._lists.get(config)
        if entry is None or self.clock() - entry[0] >= ttl_s:
            return None
        return entry[1]

    def put(self, config: McpServerConfig, listed: ServerTools) -> None:
        """Keep ``listed`` as of now."""
        self._lists[config] = (self.clock(), listed)

    def clear(self) -> None:
        """Forget every list."""
        self._lists.clear()


CACHE = ToolListCache()
logger = logging.getLogger(__name__)


def _info(tool: BaseTool) -> McpToolInfo:
    schema = tool.args_schema  # the MCP tool's inputSchema, a dict (adapter's tools.py)
    if not isinstance(schema, dict):
        schema = schema.model_json_schema() if schema is not None else {}
    return McpToolInfo(
        name=tool.metadata["mcp_tool_name"], model_name=tool.name,
        description=tool.description, input_schema=dict(schema),
    )  # fmt: skip


async def list_server_tools(config: McpServerConfig, *, environ: Mapping[str, str] = os.environ,
                            ttl_s: float = 60.0, cache: ToolListCache | None = None
                            ) -> ServerTools:  # fmt: skip
    """Return ``config``'s tools (or why it is unavailable), listed at most ``ttl_s``
    seconds ago: a fresh list opens a session of its own (within ``connect_timeout_s``)
    and closes it. ``cache``: the process's :data:`CACHE` unless given. Unavailable
    answers are cached too, so a page that lists a dead server does not wait on it
    every time. Two callers at once may both list."""
    cache = CACHE if cache is None else cache
    listed = cache.get(config, ttl_s)
    if listed is not None:
        return listed
    async with open_mcp_tools([config], environ) as toolset:
        tools = tuple(_info(tool) for tool in toolset.tools)
    listed = ServerTools(config.name, tools, toolset.unavailable.get(config.name, ""))
    cache.put(config, listed)
    return listed


_LISTING: set[McpServerConfig] = set()  # servers a background thread is listing now
_LISTING_LOCK = threading.Lock()


def cached_or_listing(config: McpServerConfig, *, ttl_s: float = 60.0) -> ServerTools | None:
    """Return ``config``'s tools as :data:`CACHE` holds them (listed less than ``ttl_s``
    seconds ago), or None while a thread of its own lists them (started now if none is).

    For sync callers that must not wait on a server (a page served in the thread all the
    app's database work shares): the list is there on a later call.
    """
    listed = CACHE.get(config, ttl_s)
    if listed is not None:
        return listed
    with _LISTING_LOCK:
        if config in _LISTING:
            return None
        _LISTING.add(config)
    threading.Thread(target=_list, args=(config, ttl_s), name=f"mcp-list-{config.name}",
                     daemon=True).start()  # fmt: skip
    return None


def _list(config: McpServerConfig, ttl_s: float) -> None:
    try:
        asyncio.run(list_server_tools(config, ttl_s=ttl_s))
    except Exception:
        logger.exception("listing MCP server %r failed", config.name)
    finally:
        with _LISTING_LOCK:
            _LISTING.discard(config)
