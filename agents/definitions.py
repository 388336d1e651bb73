"""Agents as definitions: what each agent is, read from a TOML file.

An agent is data (:class:`AgentDefinition`): a name, a label and description, the system
prompt, its tools (dotted paths, resolved by :mod:`agents.tool_loading`) and the MCP
servers whose tools it uses, the models and strategies a chat with it may pick, its tool
approval policies, its limits and the starter questions an empty chat offers. The file
holds ``[[agents]]`` tables (the first is the default agent) and the ``[[mcp_servers]]``
they name; ``docs/agents.md`` describes every field.

Nothing here imports Django or the tools themselves: :func:`load_agents_file` checks the
file's shape and raises :class:`DefinitionError` naming the agent (or server) and the
field at fault; whether the tools import, the models exist and the strategies are known
is checked at start-up by the system checks (``chat/checks.py``), which can import code.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agents.approvals import ToolPolicy
from agents.mcp.config import McpServerConfig
from agents.sentences import clause

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
LABEL_MAX_CHARS = 80
MAX_STARTERS = 8
STARTER_MAX_CHARS = 300
PLACEHOLDER_MAX_CHARS = 120


class DefinitionError(ValueError):
    """An agents file that cannot be used; the message names the table and the field."""


@dataclass(frozen=True)
class AgentLimits:
    """An agent's own bounds on a run; None keeps the server's setting.

    ``max_iterations`` (model turns), ``max_execution_time_s`` (seconds of wall clock;
    0: no limit), ``tool_timeout_s`` (seconds per tool call), ``max_run_tokens`` (input
    and output tokens; 0: no limit), ``max_run_cost`` (in the model's price currency; 0:
    no limit): the ``AGENT_*`` settings of the same names, per agent.
    """

    max_iterations: int | None = None
    max_execution_time_s: float | None = None
    tool_timeout_s: float | None = None
    max_run_tokens: int | None = None
    max_run_cost: Decimal | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return the limits set (JSON-ready: the cost as a string)."""
        out: dict[str, Any] = {}
        for name in _LIMIT_KINDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = str(value) if isinstance(value, Decimal) else value
        return out


STDIO = "stdio"
STREAMABLE_HTTP = "streamable_http"


@dataclass(frozen=True)
class AgentDefinition:
    """One agent a chat can pick: who it is, what it is told and what it may use.

    ``name`` is short and stable (stored on conversations and runs, given to ``ask
    --agent``); ``tools`` are dotted paths; ``mcp_servers`` names of the file's
    ``[[mcp_servers]]``; ``models``/``strategies`` the keys a chat may pick (empty: any),
    with ``default_model``/``default_strategy`` ("" : the server's); ``tool_policies``
    by tool name (``allow``, ``ask``, ``deny``; an MCP server's tools are ``ask`` unless
    named here); ``source`` says where it was defined, for error messages.
    """

    name: str
    label: str
    system_prompt: str
    description: str = ""
    tools: tuple[str, ...] = ()
    mcp_servers: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    default_model: str = ""
    strategies: tuple[str, ...] = ()
    default_strategy: str = ""
    tool_policies: Mapping[str, str] = field(default_factory=dict)
    limits: AgentLimits = field(default_factory=AgentLimits)
    starters: tuple[str, ...] = ()
    placeholder: str = ""
    source: str = ""


@dataclass(frozen=True)
class AgentsFile:
    """What an agents file defines: its agents (the first is the default) and servers."""

    agents: tuple[AgentDefinition, ...]
    mcp_servers: Mapping[str, McpServerConfig]

    @property
    def default(self) -> AgentDefinition:
        """Return the default agent: the file's first."""
        return self.agents[0]

    def find(self, name: str) -> AgentDefinition | None:
        """Return the agent called ``name``, or None."""
        return next((agent for agent in self.agents if agent.name == name), None)

    def servers_of(self, agent: AgentDefinition) -> list[McpServerConfig]:
        """Return the MCP servers ``agent`` uses, in the order it names them."""
        return [self.mcp_servers[name] for name in agent.mcp_servers]


_LIMIT_KINDS: dict[str, type] = {
    "max_iterations": int,
    "max_execution_time_s": float,
    "tool_timeout_s": float,
    "max_run_tokens": int,
    "max_run_cost": Decimal,
}
_AGENT_FIELDS = (
    "name", "label", "description", "system_prompt", "tools", "mcp_servers", "models",
    "default_model", "strategies", "default_strategy", "tool_policies", "limits",
    "starters", "placeholder",
)  # fmt: skip
_SERVER_FIELDS = (
    "name", "transport", "command", "args", "env", "cwd", "url", "headers_env",
    "connect_timeout_s",
)  # fmt: skip
# Control characters (but tab and line breaks), and the characters that reorder or hide
# text (bidi controls, zero-width ones: the "Trojan Source" trick, CVE-2021-42574): a
# label, a prompt or a tool path holding one reads other than it shows.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\u200e\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)  # ZWJ and ZWNJ (U+200C, U+200D) are left: emoji and several scripts join with them

# The fields of the other transport, refused by name rather than ignored.
_SERVER_FIELDS_OF = {
    "stdio": ("url", "headers_env"),
    "streamable_http": ("command", "args", "env", "cwd"),
}


class _Table:
    """Typed reads of one TOML table; each error names ``where`` and the field."""

    def __init__(self, table: object, where: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(table, dict):
            raise DefinitionError(f"{where} must be a table.")
        self.table, self.where, self.allowed = table, where, allowed

    def refuse_unknown(self) -> None:
        unknown = [name for name in self.table if name not in self.allowed]
        if unknown:
            raise DefinitionError(f"{self.where} has an unknown field {unknown[0]!r}; "
                                  f"fields: {', '.join(self.allowed)}.")  # fmt: skip

    def fail(self, name: str, problem: str) -> DefinitionError:
        return DefinitionError(f"{self.where}: {name} {problem}")

    def text(self, name: str, *, required: bool = False, max_chars: int = 0) -> str:
        value = self.table.get(name, "")
        if not isinstance(value, str):
            raise self.fail(name, f"must be a string, not {value!r}.")
        hidden = _HIDDEN.search(value)
        if hidden is not None:
            raise self.fail(name, f"holds the invisible character U+{ord(hidden[0]):04X}: a "
                                  "label or a prompt that reads other than it shows.")  # fmt: skip
        value = value.strip()
        if required and not value:
            raise self.fail(name, "is required.")
        if max_chars and len(value) > max_chars:
            raise self.fail(name, f"is over {max_chars} characters.")
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        value = self.table.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(name, f"must be a list of strings, not {value!r}.")
        for item in value:
            hidden = _HIDDEN.search(item)
            if hidden is not None:
                raise self.fail(name, f"holds the invisible character U+{ord(hidden[0]):04X} "
                                      f"in {item!r}.")  # fmt: skip
        stripped = tuple(v.strip() for v in value)
        if any(not v for v in stripped):
            raise self.fail(name, "has an empty entry.")
        twice = sorted({v for v in stripped if stripped.count(v) > 1})
        if twice:
            raise self.fail(name, f"names {twice[0]!r} twice.")
        return stripped

    def mapping(self, name: str) -> dict[str, str]:
        value = self.table.get(name, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.fail(name, "must be a table of strings.")
        return {str(k): v.strip() for k, v in value.items()}

    def number(self, name: str, default: float) -> float:
        value = self.table.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(name, f"must be a positive number, not {value!r}.")
        return float(value)


def _limits(table: object, where: str) -> AgentLimits:
    reader = _Table(table, where, tuple(_LIMIT_KINDS))
    reader.refuse_unknown()
    values: dict[str, Any] = {}
    for name, kind in _LIMIT_KINDS.items():
        if name not in reader.table:
            continue
        raw = reader.table[name]
        try:
            if isinstance(raw, bool):
                raise ValueError
            if kind is int and not isinstance(raw, int):
                raise ValueError
            value = Decimal(str(raw)) if kind is Decimal else kind(raw)
        except (ValueError, TypeError, InvalidOperation):
            word = {int: "a whole number", float: "a number", Decimal: "a number"}[kind]
            raise reader.fail(name, f"must be {word}, not {raw!r}.") from None
        if value < 0 or (kind is Decimal and not value.is_finite()):
            raise reader.fail(name, f"must not be negative, not {raw!r}.")
        if name in ("max_iterations", "tool_timeout_s") and value == 0:
            raise reader.fail(name, "must be above 0.")
        values[name] = value
    return AgentLimits(**values)


def _agent(table: object, where: str, servers: Mapping[str, McpServerConfig]) -> AgentDefinition:
    reader = _Table(table, where, _AGENT_FIELDS)
    name = reader.text("name", required=True)
    if not NAME_PATTERN.fullmatch(name):
        raise reader.fail(
            "name", f"{name!r} must be 1 to 32 lower-case letters, digits, '_' or '-', "
            "starting with a letter or digit."
        )  # fmt: skip
    reader.where = where = f"{where} ({name})"
    reader.refuse_unknown()
    mcp_servers = reader.texts("mcp_servers")
    for server in mcp_servers:
        if server not in servers:
            known = ", ".join(servers) or "none"
            raise reader.fail("mcp_servers", f"names {server!r}, which no [[mcp_servers]] "
                                             f"table defines (defined: {known}).")  # fmt: skip
    tools = reader.texts("tools")
    if not tools and not mcp_servers:
        raise reader.fail("tools", "is empty and the agent has no mcp_servers: it needs a tool.")
    policies = reader.mapping("tool_policies")
    for tool, policy in policies.items():
        if policy not in set(ToolPolicy):
            raise reader.fail("tool_policies", f"sets {tool!r} to {policy!r}; a policy is one "
                                               f"of {', '.join(ToolPolicy)}.")  # fmt: skip
    starters = reader.texts("starters")
    if len(starters) > MAX_STARTERS:
        raise reader.fail("starters", f"has {len(starters)}; at most {MAX_STARTERS}.")
    for starter in starters:
        if len(starter) > STARTER_MAX_CHARS:
            raise reader.fail("starters", f"has one over {STARTER_MAX_CHARS} characters.")
    models, strategies = reader.texts("models"), reader.texts("strategies")
    default_model = reader.text("default_model")
    if models and default_model and default_model not in models:
        raise reader.fail("default_model", f"{default_model!r} is not in its models.")
    default_strategy = reader.text("default_strategy")
    if strategies and default_strategy and default_strategy not in strategies:
        raise reader.fail("default_strategy", f"{default_strategy!r} is not in its strategies.")
    return AgentDefinition(
        name=name,
        label=reader.text("label", max_chars=LABEL_MAX_CHARS) or name,
        description=reader.text("description"),
        system_prompt=reader.text("system_prompt", required=True),
        tools=tools, mcp_servers=mcp_servers, models=models, default_model=default_model,
        strategies=strategies, default_strategy=default_strategy, tool_policies=policies,
        limits=_limits(reader.table.get("limits", {}), f"{where} limits"),
        starters=starters,
        placeholder=reader.text("placeholder", max_chars=PLACEHOLDER_MAX_CHARS),
        source=where,
    )  # fmt: skip


def _server(table: object, where: str, python: str, base_dir: Path) -> McpServerConfig:
    reader = _Table(table, where, _SERVER_FIELDS)
    name = reader.text("name", required=True)
    reader.where = where = f"{where} ({name})"
    reader.refuse_unknown()
    transport = reader.text("transport", required=True)
    unused = _SERVER_FIELDS_OF.get(transport, ())
    for field_name in unused:
        if field_name in reader.table:
            other = STREAMABLE_HTTP if transport == STDIO else STDIO
            raise reader.fail(field_name, f"is for {other} servers; this one is {transport}.")
    timeout = reader.number("connect_timeout_s", 10.0)
    try:
        if transport == STDIO:
            cwd = reader.text("cwd")
            if cwd and not (base_dir / cwd).is_dir():
                raise reader.fail("cwd", f"{cwd!r} is not a directory (relative to {base_dir}).")
            return McpServerConfig(
                name=name, transport=STDIO,
                command=reader.text("command", required=True).replace("{python}", python),
                args=tuple(_args(reader)), env=reader.mapping("env"),
                cwd=str(base_dir / cwd) if cwd else str(base_dir), connect_timeout_s=timeout,
            )  # fmt: skip
        return McpServerConfig(
            name=name, transport=transport, url=reader.text("url", required=True),  # type: ignore[arg-type]
            headers_env=reader.mapping("headers_env"), connect_timeout_s=timeout,
        )  # fmt: skip
    except ValueError as exc:  # McpServerConfig's own checks name the field
        if isinstance(exc, DefinitionError):
            raise
        raise DefinitionError(f"{where}: {clause(exc)}.") from None


def _args(reader: _Table) -> list[str]:
    value = reader.table.get("args", [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise reader.fail("args", f"must be a list of strings, not {value!r}.")
    return list(value)


def read_toml(path: str | Path, where: str) -> dict[str, Any]:
    """Return a TOML file's tables; raise :class:`DefinitionError` saying ``where`` the
    file is (the setting naming it) when it cannot be read, is not UTF-8 or not TOML."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise DefinitionError(f"{where} cannot be read: {clause(exc.strerror or exc)}.") from None
    except UnicodeDecodeError:
        raise DefinitionError(f"{where} is not UTF-8 text.") from None
    except tomllib.TOMLDecodeError as exc:
        raise DefinitionError(f"{where} is not valid TOML: {clause(exc)}.") from None


def load_agents_file(
    path: str | Path, *, python: str, base_dir: str | Path, setting: str = "AGENTS_FILE"
) -> AgentsFile:
    """Return the agents and MCP servers a TOML file defines, in its order.

    ``python`` replaces ``{python}`` in a stdio server's command (the app's interpreter);
    a server's ``cwd`` is relative to ``base_dir`` (the project's root, its default).
    Raises :class:`DefinitionError` for a file that is missing or not TOML, no agent, an
    unknown field, a wrong type, a bad name, a name used twice, an unknown policy or a
    server an agent names but the file does not define.
    """
    where = f"{setting} ({path})"
    data = read_toml(path, where)
    unknown = sorted(set(data) - {"agents", "mcp_servers"})
    if unknown:
        raise DefinitionError(f"{where} has {unknown[0]!r} at its top level; write "
                              "[[agents]] and [[mcp_servers]] tables.")  # fmt: skip
    server_tables, agent_tables = data.get("mcp_servers", []), data.get("agents", [])
    for key, tables in (("mcp_servers", server_tables), ("agents", agent_tables)):
        if not isinstance(tables, list):
            raise DefinitionError(f"{where}: write each of {key} as a [[{key}]] table.")
    servers: dict[str, McpServerConfig] = {}
    for number, table in enumerate(server_tables, start=1):
        server = _server(table, f"{where} [[mcp_servers]] #{number}", python, Path(base_dir))
        if server.name in servers:
            raise DefinitionError(f"{where} [[mcp_servers]] #{number} ({server.name}): the "
                                  f"name {server.name!r} is taken.")  # fmt: skip
        servers[server.name] = server
    if not agent_tables:
        raise DefinitionError(f"{where} defines no agent; add an [[agents]] table.")
    agents: list[AgentDefinition] = []
    for number, table in enumerate(agent_tables, start=1):
        agent = _agent(table, f"{where} [[agents]] #{number}", servers)
        if any(other.name == agent.name for other in agents):
            raise DefinitionError(f"{agent.source}: the name {agent.name!r} is taken.")
        agents.append(agent)
    return AgentsFile(agents=tuple(agents), mcp_servers=servers)
