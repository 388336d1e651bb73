"""Things a dotted path may name that are not usable tools."""

from __future__ import annotations

from langchain_core.tools import StructuredTool, tool

NOT_A_TOOL = 42


def undocumented(text: str) -> str:
    return text


@tool("look up")
def spaced(text: str) -> str:
    """A tool whose name has a space."""
    return text


blank = StructuredTool.from_function(func=lambda text: text, name="blank", description=" ")


@tool("shout")
def another_shout(text: str) -> str:
    """A second tool named shout."""
    return text


EMPTY: list[object] = []
