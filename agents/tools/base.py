"""Build the bundled tools: a typed function, a pydantic argument model, a description.

A tool's description is its function's docstring, written for a language model: when to
use it, when not, what each argument means and what comes back. Tools that take a town
list the towns they know in a last paragraph (``notes``), so a model can pick one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

from agents.tools.places import PLACES


def known_towns() -> str:
    """Return the gazetteer's towns as one line, e.g. "Hangzhou 杭州, Suzhou 苏州, ..."."""
    return ", ".join(f"{place.name} {place.name_zh}" for place in PLACES)


def make_tool(
    func: Callable[..., Any],
    *,
    name: str,
    args_schema: type[BaseModel],
    notes: str = "",
) -> BaseTool:
    """Return ``func`` as a structured tool named ``name`` validating ``args_schema``.

    The description is the cleaned docstring with ``notes`` appended as a last paragraph.
    An ``async def`` becomes the tool's coroutine (run by ``ainvoke``). Arguments that fail
    the schema raise pydantic's ValidationError from ``invoke``; the function's own
    ValueErrors propagate unchanged.
    """
    description = inspect.cleandoc(func.__doc__ or "")
    if notes:
        description = f"{description}\n\n{notes}"
    if inspect.iscoroutinefunction(func):
        return StructuredTool.from_function(
            coroutine=func, name=name, description=description, args_schema=args_schema
        )
    return StructuredTool.from_function(
        func=func, name=name, description=description, args_schema=args_schema
    )


def with_latency(tool: BaseTool, seconds: float) -> BaseTool:
    """Return a copy of a structured ``tool`` that waits ``seconds`` before it runs.

    The offline tools answer in microseconds, too fast to see a tool card in its running
    state; the demo (and the load benchmark) simulate a real API's latency with this. The
    wait is an ``asyncio.sleep``, so parallel calls still overlap. ``seconds <= 0`` returns
    ``tool`` itself.
    """
    if seconds <= 0:
        return tool
    if not isinstance(tool, StructuredTool):
        raise TypeError(f"with_latency needs a StructuredTool, not {type(tool).__name__}")

    async def delayed(**kwargs: Any) -> Any:
        await asyncio.sleep(seconds)
        if tool.coroutine is not None:
            return await tool.coroutine(**kwargs)
        return await asyncio.to_thread(tool.func, **kwargs)  # type: ignore[misc]

    return StructuredTool.from_function(
        func=tool.func,
        coroutine=delayed,
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,  # type: ignore[arg-type]
    )
