"""One tool of each kind a dotted path may name."""

from __future__ import annotations

import asyncio
import time

from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel, Field


def word_count(text: str) -> int:
    """Count the words of a text (split on white space). Returns the count."""
    return len(text.split())


async def slow_echo(text: str, seconds: float = 0.0) -> str:
    """Return the text after waiting the given seconds (an async tool)."""
    await asyncio.sleep(seconds)
    return text


def blocking_echo(text: str, seconds: float = 0.0) -> str:
    """Return the text after blocking the thread for the given seconds (a sync tool)."""
    time.sleep(seconds)
    return text


@tool
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper()


class _Reverse(BaseModel):
    text: str = Field(description="The text to reverse.")


reverse = StructuredTool.from_function(
    func=lambda text: text[::-1], name="reverse", description="Reverse a text.",
    args_schema=_Reverse,
)  # fmt: skip


def fails(reason: str) -> str:
    """Always raise ValueError with the reason (a tool that raises)."""
    raise ValueError(reason)


TEXT_TOOLS = [shout, reverse]

TOOLS = [word_count, shout]
