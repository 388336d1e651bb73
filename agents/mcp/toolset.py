"""Open MCP servers for a run and give their tools as LangChain tools.

One ``mcp.ClientSession`` per server, made by langchain-mcp-adapters'
``sessions.create_session`` and kept open in a ``contextlib.AsyncExitStack`` while the
run uses the tools (without a session, the adapter's tools start a new one per call).
The tools are the adapter's ``tools.load_mcp_tools(session, server_name=...,
tool_name_prefix=True, handle_tool_errors=False)``.

``handle_tool_errors=False`` on purpose: our loop calls ``tool.ainvoke(args)`` with no
``tool_call_id``, and langchain-core then returns a handled error's content bare, its
``status="error"`` lost (``BaseTool.arun`` sets ``status = "error"``, then
``_format_output`` returns ``content`` unchanged when ``tool_call_id is None``:
langchain_core/tools/base.py, 1.8.3). Raised, an MCP ``isError`` result is the adapter's
``ToolException`` subclass, which ``agents.tool_calls`` turns into an error observation;
that holds as well once the loop invokes with a ToolCall.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_mcp_adapters.sessions import create_session
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.shared.exceptions import McpError
from pydantic import ValidationError

from agents.mcp.config import McpServerConfig, MissingSecret
from agents.mcp.names import model_tool_names
from agents.sentences import clause

logger = logging.getLogger(__name__)

# Why a server is unavailable: short, and about what a person can change.
TIMED_OUT = "did not answer within {seconds:g} s"
NOT_MCP = "; it wrote lines to stdout that are not MCP messages, e.g. {line!r}"
NO_COMMAND = "the command {command!r} was not found"
NOT_EXECUTABLE = "the command {command!r} cannot be run (permission denied)"
NOT_STARTED = "the command {command!r} could not start: {error}"
EXITED = "the process {command!r} exited before the MCP session started (see its stderr)"
CLOSED = "{url} closed the connection before the MCP session started"
HTTP_STATUS = "HTTP {status} from {url}"
NO_CONNECTION = "could not connect to {url} ({error})"
REFUSED = "refused the MCP session: {error}"
FAILED = "failed while starting: {error}"
# A call to a server whose session ended (its process died, say).
GONE = "the MCP server {server!r} is gone: its connection is closed"


@dataclass
class McpToolset:
    """What :func:`open_mcp_tools` gives: ``tools`` of every server that connected (named
    ``<server>_<tool>``, mapped to names the model APIs accept; ``tool.metadata`` has
    ``mcp_server`` and ``mcp_tool_name``, the server's own name for it), ``servers``
    (the names that connected, in order) and ``unavailable`` (server name -> reason)."""

    tools: list[BaseTool] = field(default_factory=list)
    servers: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)


class _StdoutWatch:
    """The session's ``message_handler``: remembers the first thing the transport could
    not read (a stdio server printing non-MCP text goes there, the SDK keeps going)."""

    def __init__(self) -> None:
        self.garbage: str | None = None

    async def __call__(self, message: Any) -> None:
        if not isinstance(message, Exception) or self.garbage is not None:
            return
        # The stdio transport sends pydantic's error for a line that is not JSON-RPC.
        errors = message.errors() if isinstance(message, ValidationError) else []
        line = errors[0].get("input") if errors else None
        self.garbage = (line if isinstance(line, str) else str(message))[:60]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _reason(config: McpServerConfig, exc: BaseException, watch: _StdoutWatch) -> str:
    """Return why ``config``'s server could not be opened, from what opening raised, with
    the first line it wrote that was not MCP, if any."""
    reason = clause(_cause(config, exc))  # the admin's agent page puts a stop after it
    return reason + (NOT_MCP.format(line=watch.garbage) if watch.garbage else "")


def _cause(config: McpServerConfig, exc: BaseException) -> str:
    leaves = _leaves(exc)
    # The transport's own error says more than "Connection closed", which follows it.
    exc = next((e for e in leaves if isinstance(e, httpx.HTTPError | OSError)), leaves[0])
    where = config.where
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return TIMED_OUT.format(seconds=config.connect_timeout_s)
    if isinstance(exc, MissingSecret):
        return str(exc)
    if isinstance(exc, httpx.HTTPStatusError):
        return HTTP_STATUS.format(status=exc.response.status_code, url=where)
    if isinstance(exc, httpx.HTTPError):
        return NO_CONNECTION.format(url=where, error=str(exc) or type(exc).__name__)
    if isinstance(exc, FileNotFoundError):
        return NO_COMMAND.format(command=where)
    if isinstance(exc, PermissionError):
        return NOT_EXECUTABLE.format(command=where)
    if isinstance(exc, OSError):
        return NOT_STARTED.format(command=where, error=exc.strerror or exc)
    # A stdio server that exited at once: the SDK's write of "initialize" to its closed
    # stdin can fail (anyio) before its read side reports the close (a busy machine).
    gone = isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError)
    if gone or (isinstance(exc, McpError) and "closed" in str(exc).lower()):
        if config.transport == "stdio":
            return EXITED.format(command=where)
        return CLOSED.format(url=where)
    if isinstance(exc, McpError):
        return REFUSED.format(error=exc)
    return FAILED.format(error=f"{type(exc).__name__}: {exc}")


def _scrubbed(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


async def _close_quietly(name: str, stack: AsyncExitStack) -> None:
    # A server that fails while closing is logged: its error must not replace the
    # run's own exception, nor stop the other servers from closing.
    try:
        await stack.aclose()
    except RuntimeError as exc:
        # anyio: "Attempted to exit cancel scope in a different task than it was entered
        # in" (a pytest-asyncio fixture's teardown, say). The process was ended before.
        logger.error("MCP server %r was not closed cleanly: %s. open_mcp_tools must be "
                     "entered and exited in the same task", name, exc)  # fmt: skip
    except Exception as exc:
        logger.warning("MCP server %r failed while closing: %s", name, type(exc).__name__)


async def _connect(config: McpServerConfig, environ: Mapping[str, str],
                   stack: AsyncExitStack, watch: _StdoutWatch) -> list[BaseTool]:  # fmt: skip
    async with asyncio.timeout(config.connect_timeout_s):
        connection = config.connection(environ, message_handler=watch)
        session = await stack.enter_async_context(create_session(connection))
        await session.initialize()
        return await load_mcp_tools(
            session, server_name=config.name, tool_name_prefix=True, handle_tool_errors=False
        )


async def _open_one(config: McpServerConfig, environ: Mapping[str, str],
                    stack: AsyncExitStack) -> list[BaseTool] | str:  # fmt: skip
    """Open ``config``'s session onto ``stack`` and return its tools, or return why not
    (scrubbed of secrets; nothing is left open then)."""
    watch = _StdoutWatch()
    server_stack = AsyncExitStack()
    try:
        tools = await _connect(config, environ, server_stack, watch)
    except BaseException as exc:
        # The transports see the exception: when one of their tasks failed (HTTP 401,
        # connection refused), its task group cancelled this task, and only its exit
        # turns that CancelledError back into the failure.
        try:
            suppressed = await server_stack.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception as failure:
            return _scrubbed(_reason(config, failure, watch), config.secrets(environ))
        if suppressed or isinstance(exc, Exception):
            return _scrubbed(_reason(config, exc, watch), config.secrets(environ))
        raise
    stack.push_async_callback(_close_quietly, config.name, server_stack)
    return tools


def _guarded(coroutine: Callable[..., Awaitable[Any]], server: str, secrets: Sequence[str]
             ) -> Callable[..., Awaitable[Any]]:  # fmt: skip
    """Return ``coroutine`` raising ConnectionError naming the server when its session's
    streams are closed (a stdio server that died: the SDK raises a bare
    ``anyio.ClosedResourceError``, which says nothing to the model or the audit log), and
    with ``secrets`` (the server's header and env values) scrubbed from what it returns
    and raises: a server may echo them ("token Bearer sk-... is not allowed"), and a call's
    result and error are stored and sent to the model."""

    @functools.wraps(coroutine)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = await coroutine(*args, **kwargs)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise ConnectionError(GONE.format(server=server)) from exc
        except Exception as exc:
            said = str(exc)
            if secrets and _scrubbed(said, secrets) != said:
                raise ToolException(_scrubbed(said, secrets)) from None
            raise
        return _scrubbed_result(result, secrets) if secrets else result

    return call


def _scrubbed_result(value: Any, secrets: Sequence[str]) -> Any:
    """Return a tool's result with ``secrets`` scrubbed from every string in it."""
    if isinstance(value, str):
        return _scrubbed(value, secrets)
    if isinstance(value, dict):
        return {key: _scrubbed_result(item, secrets) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrubbed_result(item, secrets) for item in value)
    return value


def _adapt(tools: list[BaseTool], servers: Sequence[str],
           secrets: Mapping[str, Sequence[str]]) -> None:  # fmt: skip
    """Give every tool a name the model APIs accept, keeping the server's own name in
    ``metadata``, a clear error once its server is gone, and its server's ``secrets``
    (by server name) scrubbed from its results (``servers``: each tool's server, in the
    same order)."""
    renamed = model_tool_names([t.name for t in tools])
    for tool, server, name in zip(tools, servers, renamed, strict=True):
        original = tool.name[len(server) + 1 :]
        tool.metadata = {**(tool.metadata or {}), "mcp_server": server, "mcp_tool_name": original}
        # Safe: the adapter's coroutine calls session.call_tool with the MCP tool's own
        # name, captured when it was made (tools.py, convert_mcp_tool_to_langchain_tool).
        tool.name = name
        if isinstance(tool, StructuredTool) and tool.coroutine is not None:
            tool.coroutine = _guarded(tool.coroutine, server, secrets.get(server, ()))


@asynccontextmanager
async def open_mcp_tools(
    configs: Sequence[McpServerConfig], environ: Mapping[str, str] = os.environ
) -> AsyncIterator[McpToolset]:
    """Open every server of ``configs`` and yield an :class:`McpToolset` of their tools.

    Servers are opened one after another, each within its ``connect_timeout_s`` (start,
    initialize, list tools). One that cannot be started or reached, times out, exits or
    speaks something else is named in ``unavailable`` with the reason (never a header's
    value, which is read from ``environ``) and the others go on: entering raises only
    ``CancelledError``. Every session is closed (a stdio server's process ended: the SDK
    closes its stdin, then sends SIGTERM and SIGKILL to its process group after 2 s each)
    however the block ends, normally, by an exception or by cancellation, in the task
    that entered it; anyio's cancel scopes, which the SDK's transports use, require it.
    The block's own exception comes out unchanged.

    A tool raises ``ToolException`` for an MCP ``isError`` result or a tool that raised
    in the server (``handle_tool_errors=False``, see the module's docstring), and
    ``McpError`` when the server goes away during the call (``ConnectionError`` for a
    later call to a stdio server that went away). Names duplicated across
    ``configs`` raise ValueError.
    """
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"configs: server names must be distinct, got {names}")
    toolset = McpToolset()
    servers: list[str] = []  # each tool's server
    async with AsyncExitStack() as stack:
        for config in configs:
            opened = await _open_one(config, environ, stack)
            if isinstance(opened, str):
                logger.warning("MCP server %r is unavailable: %s", config.name, opened)
                toolset.unavailable[config.name] = opened
                continue
            logger.info("MCP server %r: %d tools", config.name, len(opened))
            toolset.servers.append(config.name)
            toolset.tools.extend(opened)
            servers.extend(config.name for _ in opened)
        secrets = {c.name: c.secrets(environ, literal_env=False) for c in configs}
        _adapt(toolset.tools, servers, secrets)
        yield toolset
