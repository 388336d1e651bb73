"""The agents a chat can pick: their definitions, their tools, and what a run was given.

Definitions come from ``AGENTS_FILE`` (``settings.AGENT_DEFINITIONS``, read by
:mod:`agents.definitions`); a conversation names its agent by ``agent_key`` (blank: the
default agent, the file's first). A run's tools are its agent's tools from code
(resolved once per process) and those of its MCP servers (listed per run, from sessions
that end with it: :func:`agent_tools`). :func:`snapshot_content` is what the run records
of all that, so its audit never depends on today's configuration.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from django.conf import settings
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.approvals import ToolPolicy
from agents.definitions import AgentDefinition, AgentsFile
from agents.runtime import RunLimits
from agents.tool_loading import load_tools_by_path
from agents.tools import with_simulated_latency

NOT_CONFIGURED = (
    "this conversation's agent {name!r} is no longer configured on this server (it has: "
    "{names}). Start a new chat to talk to one of those."
)


UNAVAILABLE_NOTE = (
    "Note from the app: the tools of these MCP servers are unavailable for this answer: "
    "{servers}. If the question needs them, say so."
)
logger = logging.getLogger(__name__)


class AgentNotConfigured(ValueError):
    """A conversation's agent name names no agent of ``AGENTS_FILE`` (it changed)."""


def agents_file() -> AgentsFile:
    """Return the agents and MCP servers of ``AGENTS_FILE``."""
    return settings.AGENT_DEFINITIONS


def agent_choices() -> list[tuple[str, str]]:
    """Return ``(name, label)`` of every agent, the default first, as the picker offers them."""
    return [(agent.name, agent.label) for agent in agents_file().agents]


def find_agent(name: str) -> AgentDefinition | None:
    """Return the agent called ``name`` ("" is the default agent), or None."""
    defined = agents_file()
    return defined.default if not name else defined.find(name)


def conversation_agent(name: str) -> AgentDefinition:
    """Return the agent a conversation's ``agent_key`` names.

    Raises :class:`AgentNotConfigured`, saying what to do, when it is no longer defined.
    """
    agent = find_agent(name)
    if agent is None:
        names = ", ".join(name for name, _ in agent_choices())
        raise AgentNotConfigured(NOT_CONFIGURED.format(name=name, names=names))
    return agent


@cache
def _code_tools(paths: tuple[str, ...]) -> tuple[tuple[BaseTool, str], ...]:
    return tuple(load_tools_by_path(paths))


def code_tools(agent: AgentDefinition) -> list[BaseTool]:
    """Return ``agent``'s tools from code, in its order (the bundled ones with the
    simulated latency of ``DEMO_TOOL_DELAY_MS``).

    Resolved once per process and list of paths. Raises
    :class:`agents.tool_loading.ToolLoadError` for a path the system checks refuse.
    """
    tools = [tool for tool, _ in _code_tools(agent.tools)]
    return with_simulated_latency(tools, latency_s=settings.DEMO_TOOL_DELAY_MS / 1000)


def code_tool_sources(agent: AgentDefinition) -> dict[str, str]:
    """Return the dotted path each of ``agent``'s tools from code was named by."""
    return {tool.name: path for tool, path in _code_tools(agent.tools)}


@dataclass(frozen=True)
class AgentTools:
    """The tools one run of an agent may call, and where each came from.

    ``sources`` maps each tool's name to a dotted path or ``mcp:<server>``; ``servers``
    the audit of each MCP server used (:meth:`agents.mcp.McpServerConfig.audit`)
    with its ``status``: ``connected`` or why it is unavailable.
    """

    tools: list[BaseTool]
    sources: Mapping[str, str] = field(default_factory=dict)
    servers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def unavailable(self) -> list[dict[str, Any]]:
        """Return the audits of the MCP servers that could not be used."""
        return [server for server in self.servers if server["status"] != "connected"]


@asynccontextmanager
async def agent_tools(
    agent: AgentDefinition, code: Sequence[BaseTool] | None = None
) -> AsyncIterator[AgentTools]:
    """Yield the tools a run of ``agent`` may call while it runs, and close what they
    need when it ends (its MCP sessions: :func:`agents.mcp.open_mcp_tools`).

    Tools from code come first (``code``, or the agent's own: :func:`code_tools`), then
    each MCP server's, named ``<server>_<tool>``; an MCP tool whose name a tool from code
    has already is left out (logged). A server that cannot be reached is recorded with
    its reason and the run goes on with the others' tools. Enter and leave it in one
    task (the MCP SDK's cancel scopes require it).
    """
    tools = code_tools(agent) if code is None else list(code)
    paths = code_tool_sources(agent)
    sources = {tool.name: paths.get(tool.name, "") for tool in tools}
    servers = agents_file().servers_of(agent)
    if not servers:
        yield AgentTools(tools=tools, sources=sources)
        return
    from agents.mcp import open_mcp_tools  # the SDK, imported when a run first needs it

    async with open_mcp_tools(servers) as toolset:
        audits = []
        for server in servers:
            status = "connected" if server.name in toolset.servers else "unavailable"
            reason = toolset.unavailable.get(server.name, "")
            audits.append({**server.audit(), "status": status, "reason": reason})
        for tool in toolset.tools:
            if tool.name in sources:
                logger.warning("agent %s: MCP tool %s has the name of a tool from code; "
                               "left out", agent.name, tool.name)  # fmt: skip
                continue
            sources[tool.name] = f"mcp:{(tool.metadata or {}).get('mcp_server', '')}"
            tools.append(tool)
        yield AgentTools(tools=tools, sources=sources, servers=audits)


def unavailable_note(tools: AgentTools) -> str:
    """Return what the system prompt adds when MCP servers could not be reached ("" when
    all were): their names and reasons, so the agent can say what it cannot do."""
    down = tools.unavailable
    if not down:
        return ""
    listed = "; ".join(f"{server['name']} ({server['reason']})" for server in down)
    return UNAVAILABLE_NOTE.format(servers=listed)


def tool_policies(agent: AgentDefinition, tools: AgentTools) -> dict[str, str]:
    """Return the agent's own tool policies: its ``tool_policies``, and ``ask`` for an
    MCP server's tool it does not name (third-party code, by default reviewed)."""
    policies = dict(agent.tool_policies)
    for name, source in tools.sources.items():
        if source.startswith("mcp:"):
            policies.setdefault(name, ToolPolicy.ASK.value)
    return policies


def agent_limits(limits: RunLimits, agent: AgentDefinition) -> RunLimits:
    """Return ``limits`` (the server's) with what ``agent``'s own limits set instead."""
    own = agent.limits
    budget = limits.budget
    if own.max_run_tokens is not None:
        budget = replace(budget, max_tokens=own.max_run_tokens)
    if own.max_run_cost is not None:
        budget = replace(budget, max_cost=own.max_run_cost)
    changes: dict[str, Any] = {"budget": budget}
    if own.max_iterations is not None:
        changes["max_iterations"] = own.max_iterations
    if own.tool_timeout_s is not None:
        changes["tool_timeout_s"] = own.tool_timeout_s
    if own.max_execution_time_s is not None:
        changes["max_execution_time_s"] = own.max_execution_time_s or None
    return replace(limits, **changes)


def limits_audit(limits: RunLimits) -> dict[str, Any]:
    """Return the limits a run ran under, as its snapshot records them (a callable
    ``trim_intermediate_steps`` as ``"callable"``)."""
    trim = limits.trim_intermediate_steps
    return {
        "max_iterations": limits.max_iterations,
        "max_execution_time_s": limits.max_execution_time_s or 0,
        "tool_timeout_s": limits.tool_timeout_s,
        "model_timeout_s": limits.model_timeout_s,
        "max_observation_chars": limits.max_observation_chars,
        "max_result_chars": limits.max_result_chars,
        "early_stopping_method": limits.early_stopping_method,
        "max_repeated_failures": limits.max_repeated_failures,
        "trim_intermediate_steps": "callable" if callable(trim) else trim,
        "max_run_tokens": limits.budget.max_tokens,
        "max_run_cost": str(limits.budget.max_cost),
    }


_FUNCTIONS: dict[tuple[Any, ...], dict[str, Any]] = {}
_FUNCTIONS_KEPT = 512


def openai_function(tool: BaseTool) -> dict[str, Any]:
    """Return ``tool`` as the model is told of it: the ``function`` part of LangChain's
    ``convert_to_openai_tool`` (name, description, parameters' JSON schema). Read only.

    Made once per process for a tool whose arguments are a pydantic model class (every
    tool from code): LangChain builds a model and its JSON schema at each call, about
    1 ms a tool of every run's CPU. Keyed by what the conversion reads, so a tool made
    again per run (a wrapper) is found; an MCP tool's schema (a dict) is converted
    each time, which is cheap.
    """
    schema = tool.args_schema
    if not isinstance(schema, type):
        return convert_to_openai_tool(tool)["function"]
    key = (type(tool), tool.name, tool.description, schema)
    function = _FUNCTIONS.get(key)
    if function is None:
        if len(_FUNCTIONS) >= _FUNCTIONS_KEPT:  # tools made anew with new classes
            _FUNCTIONS.clear()
        function = _FUNCTIONS[key] = convert_to_openai_tool(tool)["function"]
    return function


def snapshot_content(
    agent: AgentDefinition,
    *,
    system_prompt: str,
    tools: AgentTools,
    limits: RunLimits,
) -> dict[str, Any]:
    """Return what a run records of what defined it (an ``AgentSnapshot``'s content).

    ``system_prompt``: the system message as sent (a text strategy's includes its tool
    instructions). Each tool: its name, description and parameters (the JSON schema the
    model is given, as ``convert_to_openai_tool`` makes it) and its source.
    """
    described = []
    for tool in tools.tools:
        function = openai_function(tool)
        entry = {
            "name": tool.name,
            "description": function.get("description", ""),
            "parameters": function.get("parameters", {}),
            "source": tools.sources.get(tool.name, ""),
        }
        original = (tool.metadata or {}).get("mcp_tool_name")
        if original and original != tool.name:
            entry["mcp_tool_name"] = original
        described.append(entry)
    return {
        "agent": {"name": agent.name, "label": agent.label},
        "system_prompt": system_prompt,
        "tools": described,
        "mcp_servers": list(tools.servers),
        "limits": limits_audit(limits),
    }


def snapshot_digest(content: Mapping[str, Any]) -> str:
    """Return the SHA-256 (hex) of ``content``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tool_names() -> list[str]:
    """Return the names of every agent's tools from code, each once, in the agents' order."""
    names: dict[str, None] = {}
    for agent in agents_file().agents:
        for tool in code_tools(agent):
            names.setdefault(tool.name)
    return list(names)


def allowed_models(
    agent: AgentDefinition, models: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Return the ``(key, label)`` of ``models`` that ``agent`` may use (all when it names none)."""
    if not agent.models:
        return list(models)
    return [(key, label) for key, label in models if key in agent.models]


def agent_settings(
    agent: AgentDefinition, *, model_key: str, strategy: str, model_keys: Sequence[str]
) -> tuple[str, str]:
    """Return the ``(model_key, strategy)`` a new chat with ``agent`` starts with.

    The agent's ``default_model`` and ``default_strategy`` when it sets them; else
    ``model_key`` and ``strategy`` (the chat's so far, or the server's defaults) when the
    agent allows them; else the first it allows (``model_keys``: the configured models).
    """
    usable = [key for key in model_keys if not agent.models or key in agent.models]
    model = agent.default_model or (
        model_key if model_key in usable else next(iter(usable), model_key)
    )
    if agent.default_strategy:
        strategy = agent.default_strategy
    elif agent.strategies and strategy not in agent.strategies:
        strategy = agent.strategies[0]
    return model, strategy
