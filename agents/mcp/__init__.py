"""Tools from MCP servers, for agents that bring their own (issue 20).

Built on langchain-ai/langchain-mcp-adapters (``sessions.create_session``,
``tools.load_mcp_tools``) over the ``mcp`` SDK's client: one ``ClientSession`` per
server, opened for as long as a run needs its tools.

- :class:`McpServerConfig`: one server (stdio or streamable HTTP), checked when made.
- :func:`open_mcp_tools`: ``async with open_mcp_tools(configs) as toolset`` gives the
  tools of every server that answered (:class:`McpToolset`); the others are named in
  ``toolset.unavailable`` with a reason a person can act on.
- :func:`list_server_tools`: one server's tools without a run (admin page, start-up
  report), cached for a TTL.
- :func:`model_tool_names`: the names the model APIs accept, for names they refuse.
"""

from __future__ import annotations

from typing import Any

from agents.mcp.config import McpServerConfig
from agents.mcp.names import MODEL_TOOL_NAME, model_tool_names

# The session side (langchain-mcp-adapters, the SDK: about 0.5 s to import) loads when
# first used, not when settings read an agents file's servers (PEP 562).
_LAZY = {
    "McpToolInfo": "agents.mcp.listing",
    "ServerTools": "agents.mcp.listing",
    "ToolListCache": "agents.mcp.listing",
    "list_server_tools": "agents.mcp.listing",
    "cached_or_listing": "agents.mcp.listing",
    "McpToolset": "agents.mcp.toolset",
    "open_mcp_tools": "agents.mcp.toolset",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MODEL_TOOL_NAME",
    "McpServerConfig",
    "McpToolInfo",
    "McpToolset",
    "ServerTools",
    "ToolListCache",
    "cached_or_listing",
    "list_server_tools",
    "model_tool_names",
    "open_mcp_tools",
]
