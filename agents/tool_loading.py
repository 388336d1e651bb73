"""Tools from code: resolve an agent's dotted paths into LangChain tools, and check them.

A path names a LangChain tool (a ``BaseTool`` instance: ``@tool`` functions and
``StructuredTool`` are ones), a plain typed Python function (made a tool by LangChain's own
``StructuredTool.from_function``: its name, its docstring as the description, its type
hints as the schema; an ``async def`` becomes the tool's coroutine), a list or tuple of
those, or a module (its ``TOOLS`` list). A sync tool runs in a worker thread when the loop
awaits it (``BaseTool.ainvoke`` hands ``_run`` to the event loop's executor), so it never
blocks the event loop.

:func:`load_tools` raises :class:`ToolLoadError` saying which path and what is wrong: an
import that fails, an object that is not a tool, two tools with one name, a name the
model APIs refuse, a tool without a description.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

# What OpenAI's API (and the servers copying it: vLLM, llama.cpp, Ollama...) accept as a
# function name; Anthropic's and Gemini's rules are narrower still on length only.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
TOOL_NAME_RULE = "1 to 64 letters, digits, '_' or '-' (the rule of OpenAI-compatible APIs)"
MODULE_LIST = "TOOLS"


class ToolLoadError(ValueError):
    """A tool path that cannot be used; the message names the path and the fault."""


def _import(path: str) -> Any:
    """Return the object a dotted path names, as ``from module import name`` would: the
    attribute ``name`` of ``module`` (a package's ``__init__`` may bind a tool over its
    submodule of the same name), else the module the whole path names."""
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", path):
        raise ToolLoadError(f"{path!r} is not a dotted path (package.module.name).")
    module_path, _, name = path.rpartition(".")
    parent = _import_module(module_path, path) if module_path else None
    if parent is not None and hasattr(parent, name):
        return getattr(parent, name)
    module = _import_module(path, path)
    if module is not None:
        return module
    if parent is None:
        raise ToolLoadError(f"{path}: there is no module {module_path or path!r} to import.")
    raise ToolLoadError(f"{path}: module {module_path} has no {name!r}.")


def _import_module(module_path: str, path: str) -> ModuleType | None:
    """Return the module ``module_path``, or None when no module has that name; raise
    :class:`ToolLoadError` (naming ``path``) when importing it, or what it imports, fails."""
    try:
        return importlib.import_module(module_path)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_path == missing or module_path.startswith(f"{missing}."):
            return None
        raise ToolLoadError(f"{path}: importing {module_path} failed: {exc}") from exc
    except Exception as exc:  # the tool's module raised while importing
        raise ToolLoadError(f"{path}: importing {module_path} failed: "
                            f"{type(exc).__name__}: {exc}") from exc  # fmt: skip


def _as_tool(obj: Any, path: str) -> BaseTool:
    if isinstance(obj, BaseTool):
        return obj
    if inspect.isfunction(obj) or inspect.iscoroutinefunction(obj):
        try:
            if inspect.iscoroutinefunction(obj):
                return StructuredTool.from_function(coroutine=obj)
            return StructuredTool.from_function(func=obj)
        except Exception as exc:  # e.g. a function without a docstring
            raise ToolLoadError(f"{path}: LangChain could not make {obj.__name__!r} a tool: "
                                f"{exc}") from exc  # fmt: skip
    kind = type(obj).__name__
    raise ToolLoadError(
        f"{path} is a {kind}, not a tool: name a LangChain tool (BaseTool, @tool, "
        f"StructuredTool), a typed function, a list of them or a module with {MODULE_LIST}."
    )


def resolve(path: str) -> list[BaseTool]:
    """Return the tools ``path`` names (one, or a list's or a module's in their order).

    Raises :class:`ToolLoadError` as the module docstring says.
    """
    obj = _import(path)
    if isinstance(obj, ModuleType):
        if not hasattr(obj, MODULE_LIST):
            raise ToolLoadError(f"{path} is a module without a {MODULE_LIST} list; name a tool "
                                f"in it, or give it {MODULE_LIST} = [...].")  # fmt: skip
        obj = getattr(obj, MODULE_LIST)
        path = f"{path}.{MODULE_LIST}"
    if isinstance(obj, list | tuple):
        if not obj:
            raise ToolLoadError(f"{path} is an empty list.")
        return [_as_tool(item, f"{path}[{index}]") for index, item in enumerate(obj)]
    return [_as_tool(obj, path)]


def check_tool(tool: BaseTool, where: str) -> None:
    """Raise :class:`ToolLoadError` if ``tool``'s name breaks :data:`TOOL_NAME` or it has
    no description (the model reads it to know when to call the tool)."""
    if not TOOL_NAME.fullmatch(tool.name):
        raise ToolLoadError(f"{where}: the tool name {tool.name!r} is refused by the model "
                            f"APIs; a name is {TOOL_NAME_RULE}. Rename the tool "
                            "(@tool(\"name\") or name=...).")  # fmt: skip
    if not (tool.description or "").strip():
        raise ToolLoadError(f"{where}: the tool {tool.name!r} has no description; write a "
                            "docstring saying when to use it and what it returns.")  # fmt: skip


def load_tools(paths: Sequence[str]) -> list[BaseTool]:
    """Return the tools of ``paths``, in order, each checked (:func:`check_tool`).

    Raises :class:`ToolLoadError` for the first path at fault, or for two tools with one
    name (the model calls tools by name).
    """
    return [tool for tool, _ in load_tools_by_path(paths)]


def load_tools_by_path(paths: Sequence[str]) -> list[tuple[BaseTool, str]]:
    """Return :func:`load_tools`' tools, each with the path that named it."""
    loaded: list[tuple[BaseTool, str]] = []
    origin: dict[str, str] = {}
    for path in paths:
        for tool in resolve(path):
            check_tool(tool, path)
            if tool.name in origin:
                first = origin[tool.name]
                raise ToolLoadError(f"{path}: a tool named {tool.name!r} comes from {first} "
                                    "already; tool names must differ.")  # fmt: skip
            origin[tool.name] = path
            loaded.append((tool, path))
    return loaded


def duplicate_names(tools: Iterable[BaseTool]) -> list[str]:
    """Return the names more than one of ``tools`` has, sorted."""
    seen: set[str] = set()
    twice: set[str] = set()
    for tool in tools:
        (twice if tool.name in seen else seen).add(tool.name)
    return sorted(twice)
