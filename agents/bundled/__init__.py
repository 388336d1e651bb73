"""MCP servers bundled with the app: offline and deterministic, for the first-run demo of
an agent that brings its own tools (issue 20).

- ``almanac_server.py``: units, dates, the moon's phase and small bar charts, over stdio.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agents.mcp.config import McpServerConfig

if TYPE_CHECKING:
    from agents.definitions import AgentsFile

ALMANAC_SERVER = Path(__file__).resolve().parent / "almanac_server.py"
AGENTS_TOML = Path(__file__).resolve().parent / "agents.toml"
"""The bundled agents (``AGENTS_FILE``'s default): the travel assistant and the almanac."""


def bundled_agents() -> AgentsFile:
    """Return the bundled agents, as the app reads them (``{python}``: this interpreter)."""
    # Imported here: the almanac server runs as ``-m agents.bundled.almanac_server``, and
    # its start-up should not pay for the runtime this package's __init__ would import.
    from agents.definitions import load_agents_file

    return load_agents_file(AGENTS_TOML, python=sys.executable, base_dir=AGENTS_TOML.parents[2])


def almanac_config(name: str = "almanac", connect_timeout_s: float = 10.0) -> McpServerConfig:
    """Return the config that runs the almanac server with this Python, over stdio."""
    return McpServerConfig(
        name=name, transport="stdio", command=sys.executable, args=(str(ALMANAC_SERVER),),
        connect_timeout_s=connect_timeout_s,
    )  # fmt: skip
