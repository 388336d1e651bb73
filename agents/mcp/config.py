"""One MCP server's configuration, checked when it is made, and the adapter's connection
dict built from it (langchain-mcp-adapters ``sessions.StdioConnection`` and
``StreamableHttpConnection``)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit

SERVER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,32}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# RFC 9110's token: the characters a header name may have.
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
TRANSPORTS = ("stdio", "streamable_http")
# ``${VAR}`` in an env value, which langchain-mcp-adapters expands from os.environ
# (sessions.py, _expand_env_vars).
_BRACED = re.compile(r"\$\{([^}]+)\}")

Transport = Literal["stdio", "streamable_http"]


class MissingSecret(LookupError):
    """A header's environment variable is not set; the message names the variable."""


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: how to start or reach it.

    ``name`` prefixes its tools' names (``<name>_<tool>``): 1-32 of ``[a-zA-Z0-9_-]``.
    ``transport`` is ``"stdio"`` (``command`` run with ``args`` in ``cwd``; ``env`` adds
    variables to the MCP SDK's default safe environment, ``mcp.client.stdio
    .get_default_environment``: HOME, LOGNAME, PATH, SHELL, TERM, USER) or
    ``"streamable_http"`` (``url``, http or https). ``headers_env`` maps a header's name
    to the NAME of the environment variable holding its value: the value is read when
    connecting and never kept here, logged or put in an error. ``connect_timeout_s``:
    seconds to start, initialize and list the tools.

    Raises ValueError naming the field for a bad value. ``env`` is left out of ``repr``
    (a child's variables may be secrets); ``env`` and ``headers_env`` are read-only
    mappings, left out of the hash.
    """

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False, hash=False)
    cwd: str | None = None
    url: str = ""
    headers_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    connect_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "headers_env", MappingProxyType(dict(self.headers_env)))
        object.__setattr__(self, "cwd", self.cwd or None)  # "" (unset) is not a directory
        self.validate()

    def validate(self) -> None:
        """Raise ValueError, naming the field, for the first bad value."""
        if not isinstance(self.name, str) or not SERVER_NAME.match(self.name):
            raise ValueError(f"name: {self.name!r} must be 1-32 of the characters a-z A-Z 0-9 _ -")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport: {self.transport!r} is not one of {', '.join(TRANSPORTS)}")
        if not self.connect_timeout_s > 0:
            raise ValueError(f"connect_timeout_s: {self.connect_timeout_s!r} must be positive")
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("command: a stdio server needs the command that starts it")
            if not all(isinstance(a, str) for a in self.args):
                raise ValueError("args: every argument must be a string")
            bad = [k for k, v in self.env.items() if not (ENV_NAME.match(k) and isinstance(v, str))]
            if bad:
                raise ValueError(f"env: {bad[0]!r} is not a variable name with a string value")
            return
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: {self.url!r} is not an http(s) URL")
        for header, variable in self.headers_env.items():
            if not HEADER_NAME.match(header):
                raise ValueError(f"headers_env: {header!r} is not a header name")
            if not ENV_NAME.match(variable):
                raise ValueError(
                    f"headers_env: {variable!r} (for {header}) is not an environment variable name"
                )

    @property
    def where(self) -> str:
        """Return where the server is, for messages: the command's name, or the URL
        without credentials, query or fragment."""
        if self.transport == "stdio":
            return self.command
        parts = urlsplit(self.url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"

    def headers(self, environ: Mapping[str, str]) -> dict[str, str]:
        """Return the HTTP headers with their values read from ``environ``.

        Raises :class:`MissingSecret` naming the variable when one is not set.
        """
        headers = {}
        for header, variable in self.headers_env.items():
            value = environ.get(variable)
            if value is None:
                raise MissingSecret(f"the environment variable {variable} (for the {header} "
                                    f"header) is not set")  # fmt: skip
            headers[header] = value
        return headers

    def connection(self, environ: Mapping[str, str], **session_kwargs: Any) -> dict[str, Any]:
        """Return the adapter's connection dict (``sessions.Connection``).

        Raises :class:`MissingSecret` when a header's variable is not set.
        """
        if self.transport == "stdio":
            # None, not {}: the SDK then gives the child its default environment alone.
            # The adapter expands ``${VAR}`` in env values from os.environ
            # (sessions.py, _create_stdio_session).
            return {"transport": "stdio", "command": self.command, "args": list(self.args),
                    "env": dict(self.env) or None, "cwd": self.cwd,
                    "session_kwargs": session_kwargs}  # fmt: skip
        from agents.mcp.http import disconnect_aware_client

        return {"transport": "streamable_http", "url": self.url,
                "headers": self.headers(environ),
                "httpx_client_factory": disconnect_aware_client,
                "session_kwargs": session_kwargs}  # fmt: skip

    def audit(self) -> dict[str, Any]:
        """Return what a run's snapshot records of the server, never a secret's value:
        the command and its arguments (with the names of the variables ``env`` sets), or
        the URL without credentials or query (with the names of the headers sent)."""
        out: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            out.update(command=self.command, args=list(self.args), env=sorted(self.env))
        else:
            out.update(url=self.where, headers=sorted(self.headers_env))
        return out

    def secrets(self, environ: Mapping[str, str], *, literal_env: bool = True) -> list[str]:
        """Return the values that must never show in a message: the headers' values in
        ``environ``, the values of the variables the child's env values reference
        (``${VAR}``, which the adapter expands from ``os.environ``) and, with
        ``literal_env``, the env values as written (a setting like ``"true"`` among them:
        fine in a reason for a failed start, not in every result a tool returns)."""
        values = [environ.get(v) for v in self.headers_env.values()]
        values += [
            os.environ.get(name, "") for v in self.env.values() for name in _BRACED.findall(v)
        ]
        if literal_env:
            values += list(self.env.values())
            values += [
                _BRACED.sub(lambda m: os.environ.get(m[1], m[0]), v) for v in self.env.values()
            ]
        return sorted({v for v in values if v and len(v) >= 4}, key=len, reverse=True)
