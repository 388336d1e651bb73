"""MCP servers bundled with the app: offline and deterministic, for the first-run demo of
an agent that brings its own tools (issue 20).

- ``almanac_server.py``: units, dates, the moon's phase and small bar charts, over stdio.
"""

from __future__ import annotations

import sys
from pathlib import Path

from agents.mcp.config import McpServerConfig

ALMANAC_SERVER = Path(__file__).resolve().parent / "almanac_server.py"


def almanac_config(name: str = "almanac", connect_timeout_s: float = 10.0) -> McpServerConfig:
    """Return the config that runs the almanac server with this Python, over stdio."""
    return McpServerConfig(
        name=name, transport="stdio", command=sys.executable, args=(str(ALMANAC_SERVER),),
        connect_timeout_s=connect_timeout_s,
    )  # fmt: skip
