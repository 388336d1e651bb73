"""Tools named by dotted path: every kind loads, every fault is refused with its path."""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.tools import BaseTool

from agents.tool_loading import ToolLoadError, load_tools, resolve

KINDS = "tests.agents.own_tools.kinds"
FAULTS = "tests.agents.own_tools.faults"


def test_a_langchain_tool_a_structured_tool_and_a_typed_function_each_load() -> None:
    tools = load_tools([f"{KINDS}.shout", f"{KINDS}.reverse", f"{KINDS}.word_count"])

    assert [tool.name for tool in tools] == ["shout", "reverse", "word_count"]
    assert all(isinstance(tool, BaseTool) for tool in tools)
    counted = tools[2]
    assert "Count the words" in counted.description
    assert counted.args == {"text": {"title": "Text", "type": "string"}}
    assert counted.invoke({"text": "one two three"}) == 3


def test_a_list_and_a_module_with_tools_load_in_their_order() -> None:
    assert [tool.name for tool in load_tools([f"{KINDS}.TEXT_TOOLS"])] == ["shout", "reverse"]
    assert [tool.name for tool in load_tools([KINDS])] == ["word_count", "shout"]


async def test_an_async_function_becomes_the_tools_coroutine() -> None:
    (echo,) = resolve(f"{KINDS}.slow_echo")

    assert await echo.ainvoke({"text": "hi", "seconds": 0}) == "hi"


async def test_a_sync_tool_runs_off_the_event_loop() -> None:
    (echo,) = resolve(f"{KINDS}.blocking_echo")
    loop_thread = threading.get_ident()
    ran_on: list[int] = []
    original = echo.func

    def spy(**kwargs: object) -> object:
        ran_on.append(threading.get_ident())
        return original(**kwargs)

    echo.func = spy
    try:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(tick())
        await echo.ainvoke({"text": "hi", "seconds": 0.2})
        ticker.cancel()
    finally:
        echo.func = original
    assert ran_on and ran_on[0] != loop_thread
    assert ticks > 1  # the loop went on while the tool blocked its thread


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (
            "tests.agents.own_tools.raises_on_import.thing",
            "RuntimeError: the tools module is broken",
        ),
        ("tests.agents.own_tools.needs_missing.thing", "package_that_is_not_installed"),
        ("tests.agents.own_tools.nowhere.thing", "there is no module 'tests.agents.own_tools"),
        (f"{KINDS}.missing", "has no 'missing'"),
        (f"{FAULTS}.NOT_A_TOOL", "is a int, not a tool"),
        (f"{FAULTS}.undocumented", "could not make 'undocumented' a tool"),
        (f"{FAULTS}.spaced", "'look up' is refused by the model APIs"),
        (f"{FAULTS}.blank", "has no description"),
        (f"{FAULTS}.EMPTY", "is an empty list"),
        (FAULTS, "a module without a TOOLS list"),
        ("not a path", "is not a dotted path"),
    ],
)
def test_a_path_that_is_not_a_usable_tool_is_refused_naming_it(path: str, words: str) -> None:
    with pytest.raises(ToolLoadError) as caught:
        load_tools([path])

    assert path in str(caught.value)
    assert words in str(caught.value)


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ToolLoadError, match=r"a tool named .shout. comes from .*kinds\.shout"):
        load_tools([f"{KINDS}.shout", f"{FAULTS}.another_shout"])
