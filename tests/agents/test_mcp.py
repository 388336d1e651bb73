"""MCP servers' tools through agents.mcp, against real servers started as subprocesses
(tests/mcp_servers/awkward.py over stdio and streamable HTTP): no mock of the protocol."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import sys

import anyio
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException
from mcp.shared.exceptions import McpError

from agents.events import StepStatus, ToolCallFinished
from agents.mcp import (
    MODEL_TOOL_NAME,
    McpServerConfig,
    ToolListCache,
    list_server_tools,
    model_tool_names,
    open_mcp_tools,
)
from agents.mcp.toolset import _cause
from agents.runtime import RunLimits, run
from tests.agents.mcp_helpers import (
    awkward_http,
    children,
    free_port,
    python_config,
    refusing_server,
    stdio_config,
    until,
    vanishing_server,
)
from tests.fakes import ScriptedChatModel, tool_call
from tests.mcp_servers.awkward import LONG_NAME
from tests.timing import WAIT_S

SECRET = "s3cret-header-value-0451"


@pytest.fixture(params=["stdio", "streamable_http"])
def awkward(request):
    """The awkward server's config, over each transport."""
    if request.param == "stdio":
        yield stdio_config()
        return
    with awkward_http() as (url, _):
        yield McpServerConfig(name="awk", transport="streamable_http", url=url,
                              connect_timeout_s=WAIT_S)  # fmt: skip


def by_name(toolset):
    return {tool.name: tool for tool in toolset.tools}


def text_of(blocks) -> str:
    return "".join(block["text"] for block in blocks if block["type"] == "text")


# Configuration


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "has.dot", "transport": "stdio", "command": "x"}, "name"),
        ({"name": "x" * 33, "transport": "stdio", "command": "x"}, "name"),
        ({"name": "ok", "transport": "sse", "url": "http://h/mcp"}, "transport"),
        ({"name": "ok", "transport": "stdio"}, "command"),
        ({"name": "ok", "transport": "streamable_http", "url": "ftp://h/mcp"}, "url"),
        ({"name": "ok", "transport": "streamable_http"}, "url"),
        ({"name": "ok", "transport": "streamable_http", "url": "http://h/mcp",
          "headers_env": {"Authorization": "NOT-AN-ENV-NAME"}}, "headers_env"),
        ({"name": "ok", "transport": "streamable_http", "url": "http://h/mcp",
          "headers_env": {"Bad Header": "TOKEN"}}, "headers_env"),
        ({"name": "ok", "transport": "stdio", "command": "x", "connect_timeout_s": 0},
         "connect_timeout_s"),
    ],
)  # fmt: skip
def test_a_config_with_a_bad_value_raises_value_error_naming_the_field(fields, field):
    with pytest.raises(ValueError, match=rf"^{field}: "):
        McpServerConfig(**fields)


def test_a_config_keeps_header_variable_names_never_values_and_hides_the_child_env():
    config = McpServerConfig(
        name="web", transport="streamable_http", url="http://user:pw@h:8000/mcp?token=t",
        headers_env={"Authorization": "WEB_TOKEN"},
    )  # fmt: skip
    child = stdio_config(env={"API_KEY": SECRET})
    assert "WEB_TOKEN" in repr(config)
    assert SECRET not in repr(child)
    assert config.where == "http://h:8000/mcp"  # no credentials nor query in messages
    assert hash(config) == hash(McpServerConfig(**{**config.__dict__}))
    assert McpServerConfig(name="x", transport="stdio", command="x", cwd="").cwd is None


# Names


def test_model_tool_names_are_valid_distinct_and_stable():
    names = ["srv_ok", "srv_dotted.name", "srv_dotted_name", "srv_with space", "srv_café",
             "srv_" + "x" * 80, "srv_" + "x" * 81, "srv_ok"]  # fmt: skip
    mapped = model_tool_names(names)
    assert all(MODEL_TOOL_NAME.match(name) for name in mapped)
    assert len(set(mapped)) == len(mapped)
    assert mapped[0] == "srv_ok" and mapped[2] == "srv_dotted_name"  # valid names kept
    assert mapped[3] == "srv_with_space"
    assert mapped == model_tool_names(names)


# Listing and calling, both transports


async def test_tools_are_listed_prefixed_and_called(awkward):
    async with open_mcp_tools([awkward]) as toolset:
        assert toolset.servers == ["awk"] and toolset.unavailable == {}
        tools = by_name(toolset)
        assert text_of(await tools["awk_echo"].ainvoke({"text": "héllo"})) == "héllo"
        assert {"awk_echo", "awk_fail", "awk_sleep", "awk_image"} <= tools.keys()


async def test_awkward_names_are_mapped_and_calls_reach_the_original_name(awkward):
    async with open_mcp_tools([awkward]) as toolset:
        tools = by_name(toolset)
        assert all(MODEL_TOOL_NAME.match(name) for name in tools)
        originals = {t.metadata["mcp_tool_name"]: t for t in toolset.tools}
        for original in ("dotted.name", "with space", "café_ü", LONG_NAME, "dotted_name"):
            tool = originals[original]
            assert tool.metadata["mcp_server"] == "awk"
            assert text_of(await tool.ainvoke({})) == f"{original} answered"
        assert originals["dotted_name"].name == "awk_dotted_name"
        assert originals["dotted.name"].name.startswith("awk_dotted_name_")
        assert originals["with space"].name == "awk_with_space"
        assert len(originals[LONG_NAME].name) == 64


async def test_a_raising_tool_and_an_is_error_result_raise_tool_exception(awkward):
    async with open_mcp_tools([awkward]) as toolset:
        tools = by_name(toolset)
        with pytest.raises(ToolException, match="no such city"):
            await tools["awk_fail"].ainvoke({"message": "no such city"})
        with pytest.raises(ToolException, match=r"^quota used up$"):
            await tools["awk_refuse"].ainvoke({"reason": "quota used up"})
        # The session is still good after an error.
        assert text_of(await tools["awk_echo"].ainvoke({"text": "still here"})) == "still here"


async def test_an_image_comes_back_as_an_image_block_and_structured_output_as_artifact(awkward):
    async with open_mcp_tools([awkward]) as toolset:
        tools = by_name(toolset)
        [block] = await tools["awk_image"].ainvoke({})
        assert block["type"] == "image" and block["mime_type"] == "image/png"
        assert base64.b64decode(block["base64"]).startswith(b"\x89PNG\r\n\x1a\n")
        call = tool_call("awk_forecast", {"city": "Oslo"}, "call_1")
        message = await tools["awk_forecast"].ainvoke(call)
        assert isinstance(message, ToolMessage) and message.status == "success"
        assert message.artifact == {"structured_content": {"city": "Oslo", "celsius": 21.5}}


async def test_a_slow_tool_is_cut_by_asyncio_timeout_and_the_session_goes_on(awkward):
    async with open_mcp_tools([awkward]) as toolset:
        tools = by_name(toolset)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await tools["awk_sleep"].ainvoke({"seconds": 3600})
        assert text_of(await tools["awk_echo"].ainvoke({"text": "after"})) == "after"


async def test_a_server_dying_mid_call_raises_instead_of_hanging(awkward):
    async with open_mcp_tools([awkward]) as toolset:
        tools = by_name(toolset)
        async with asyncio.timeout(WAIT_S):  # a hang fails the test, not the suite
            with pytest.raises(McpError, match="Connection closed"):
                await tools["awk_die"].ainvoke({})
            # The next call fails too, and only the call: the task is not cancelled.
            with pytest.raises((McpError, ConnectionError), match="closed"):
                await tools["awk_echo"].ainvoke({"text": "anyone?"})
        assert asyncio.current_task().cancelling() == 0


async def test_an_http_answer_that_ends_without_a_response_raises_instead_of_hanging():
    with vanishing_server() as url:
        config = McpServerConfig(name="gone", transport="streamable_http", url=url,
                                 connect_timeout_s=WAIT_S)  # fmt: skip
        async with open_mcp_tools([config]) as toolset, asyncio.timeout(WAIT_S):
            assert toolset.unavailable == {}
            with pytest.raises(McpError, match="ended its answer without answering"):
                await by_name(toolset)["gone_vanish"].ainvoke({})


async def test_an_mcp_error_is_an_error_observation_in_the_agent_loop():
    model = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[tool_call("awk_refuse", {"reason": "not today"}, "c1")]),
        AIMessage("", tool_calls=[tool_call("awk_echo", {"text": "ok"}, "c2")]),
        AIMessage("Done."),
    ])  # fmt: skip
    async with open_mcp_tools([stdio_config()]) as toolset:
        events = [e async for e in run(model, toolset.tools, [HumanMessage("go")],
                                       limits=RunLimits())]  # fmt: skip
    refused, echoed = [e for e in events if isinstance(e, ToolCallFinished)]
    assert refused.status == StepStatus.ERROR and "not today" in refused.observation
    assert echoed.status == StepStatus.SUCCESS and "ok" in echoed.observation


# Servers that cannot be used


async def test_servers_that_cannot_start_are_unavailable_and_the_others_work():
    closed = f"http://127.0.0.1:{free_port()}/mcp"
    with refusing_server() as refusing:
        configs = [
            McpServerConfig(name="nocmd", transport="stdio", command="/nonexistent/mcp-server"),
            python_config("crash", "import sys; sys.exit(3)"),
            python_config("garbage", "print('hello, world'); import sys; sys.exit(0)"),
            python_config("silent", "import time; time.sleep(3600)", connect_timeout_s=0.5),
            McpServerConfig(name="closed", transport="streamable_http", url=closed,
                            connect_timeout_s=WAIT_S),
            McpServerConfig(name="refusing", transport="streamable_http", url=refusing,
                            connect_timeout_s=WAIT_S),
            McpServerConfig(name="nokey", transport="streamable_http", url=refusing,
                            headers_env={"Authorization": "UNSET_MCP_TOKEN"}),
            stdio_config(),
        ]  # fmt: skip
        async with open_mcp_tools(configs, environ={}) as toolset:
            assert toolset.servers == ["awk"]
            echo = by_name(toolset)["awk_echo"]
            assert text_of(await echo.ainvoke({"text": "alive"})) == "alive"
    # The transports' own cancellations (401, refused) are all taken back: a cancel left
    # counted would turn the loop's later time-outs into cancellations.
    assert asyncio.current_task().cancelling() == 0
    reasons = toolset.unavailable
    assert reasons["nocmd"] == "the command '/nonexistent/mcp-server' was not found"
    assert reasons["crash"].startswith("the process ") and "exited before" in reasons["crash"]
    assert "not MCP messages, e.g. 'hello, world'" in reasons["garbage"]
    assert reasons["silent"].startswith("did not answer within 0.5 s")
    assert reasons["closed"].startswith(f"could not connect to {closed}")
    assert reasons["refusing"] == f"HTTP 401 from {refusing}"
    assert reasons["nokey"] == (
        "the environment variable UNSET_MCP_TOKEN (for the Authorization header) is not set"
    )


async def test_duplicate_server_names_raise_value_error():
    with pytest.raises(ValueError, match="distinct"):
        async with open_mcp_tools([stdio_config(), stdio_config()]):
            pass


# Secrets


async def test_a_header_value_reaches_the_server_and_no_message_or_log(caplog):
    caplog.set_level(logging.DEBUG)
    environ = {"AWK_KEY": SECRET}
    with awkward_http(env={"AWKWARD_EXPECTED_KEY": SECRET}) as (url, _), refusing_server() as bad:
        good = McpServerConfig(
            name="web",
            transport="streamable_http",
            url=url,
            headers_env={"x-api-key": "AWK_KEY"},
            connect_timeout_s=WAIT_S,
        )
        refused = McpServerConfig(name="bad", transport="streamable_http", url=bad,
                                  headers_env={"x-api-key": "AWK_KEY"},
                                  connect_timeout_s=WAIT_S)  # fmt: skip
        async with open_mcp_tools([good, refused], environ=environ) as toolset:
            seen = await by_name(toolset)["web_header_seen"].ainvoke({})
    assert text_of(seen) == "matches"
    assert toolset.unavailable == {"bad": f"HTTP 401 from {bad}"}
    for text in (repr(good), repr(refused), repr(toolset.unavailable), caplog.text):
        assert SECRET not in text


# Closing


def awkward_children(before: set[int]) -> set[int]:
    return children() - before


async def test_stdio_children_end_when_the_block_ends_normally():
    before = children()
    async with open_mcp_tools([stdio_config("a"), stdio_config("b")]) as toolset:
        assert toolset.servers == ["a", "b"]
        assert len(awkward_children(before)) == 2
    await until(lambda: not awkward_children(before), "the stdio servers to end")


async def test_stdio_children_end_and_the_exception_comes_out_unchanged():
    before = children()
    error = RuntimeError("the run failed")
    with pytest.raises(RuntimeError) as raised:
        async with open_mcp_tools([stdio_config("a"), stdio_config("b")]):
            assert len(awkward_children(before)) == 2
            raise error
    assert raised.value is error
    await until(lambda: not awkward_children(before), "the stdio servers to end")


async def test_stdio_children_end_when_the_task_is_cancelled():
    before = children()
    opened = asyncio.Event()

    async def use_tools() -> None:
        async with open_mcp_tools([stdio_config("a"), stdio_config("b")]) as toolset:
            opened.set()
            await by_name(toolset)["a_sleep"].ainvoke({"seconds": 3600})

    task = asyncio.create_task(use_tools())
    async with asyncio.timeout(WAIT_S):
        await opened.wait()
    assert len(awkward_children(before)) == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: not awkward_children(before), "the stdio servers to end")


async def test_closing_in_another_task_still_ends_the_child_and_logs_why(caplog):
    before = children()
    tools = open_mcp_tools([stdio_config()])
    await asyncio.create_task(tools.__aenter__())
    assert len(awkward_children(before)) == 1
    await asyncio.create_task(tools.__aexit__(None, None, None))
    await until(lambda: not awkward_children(before), "the stdio server to end")
    assert "must be entered and exited in the same task" in caplog.text


async def test_a_server_that_never_answers_is_ended_after_its_connect_timeout():
    before = children()
    silent = python_config("silent", "import time; time.sleep(3600)", connect_timeout_s=0.5)
    async with open_mcp_tools([silent]) as toolset:
        assert "silent" in toolset.unavailable
    await until(lambda: not awkward_children(before), "the silent server to end")


# Listing without a run


async def test_the_tool_list_is_cached_until_its_ttl_runs_out(tmp_path):
    extra = tmp_path / "extra-tools"
    config = stdio_config(env={"AWKWARD_EXTRA_TOOLS": str(extra)})
    now = [1000.0]
    cache = ToolListCache(clock=lambda: now[0])

    first = await list_server_tools(config, ttl_s=60, cache=cache)
    assert first.unavailable == "" and "echo" in {t.name for t in first.tools}
    echo = next(t for t in first.tools if t.name == "echo")
    assert echo.model_name == "awk_echo" and echo.input_schema["required"] == ["text"]

    extra.write_text("late_tool\n")
    now[0] += 59
    assert await list_server_tools(config, ttl_s=60, cache=cache) is first
    now[0] += 1
    fresh = await list_server_tools(config, ttl_s=60, cache=cache)
    assert "late_tool" in {t.name for t in fresh.tools}


async def test_a_tool_added_at_runtime_is_listed_by_a_new_session():
    with awkward_http() as (url, _):
        config = McpServerConfig(name="web", transport="streamable_http", url=url,
                                 connect_timeout_s=WAIT_S)  # fmt: skip
        async with open_mcp_tools([config]) as toolset:
            await by_name(toolset)["web_add_tool"].ainvoke({"name": "runtime_tool"})
        listed = await list_server_tools(config, cache=ToolListCache())
    assert "runtime_tool" in {t.name for t in listed.tools}


async def test_an_unavailable_server_is_listed_with_its_reason():
    config = python_config("crash", "import sys; sys.exit(3)")
    listed = await list_server_tools(config, cache=ToolListCache())
    assert listed.tools == () and re.match(r"the process .* exited before", listed.unavailable)


def test_the_awkward_server_runs_as_a_script():
    # Its --help is enough to show the file imports and parses outside pytest.
    import subprocess

    from tests.agents.mcp_helpers import AWKWARD

    done = subprocess.run([sys.executable, str(AWKWARD), "--help"], capture_output=True,
                          text=True, timeout=WAIT_S)  # fmt: skip
    assert done.returncode == 0 and "--http" in done.stdout


@pytest.mark.parametrize("closed", [anyio.BrokenResourceError, anyio.ClosedResourceError])
def test_a_stdio_server_whose_stdin_closed_at_start_is_said_to_have_exited(closed):
    # On a busy machine the SDK's write of "initialize" to a process that already exited
    # fails with anyio's error before its read side reports the close.
    config = python_config("crash", "import sys; sys.exit(3)")
    reason = _cause(config, ExceptionGroup("opening", [closed()]))
    assert reason.startswith("the process ") and "exited before" in reason
