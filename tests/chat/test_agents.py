"""Agents their owners define: a run uses its conversation's agent (prompt, tools from code
and MCP servers, limits, policies) and records what it was given, once per content."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError
from langchain_core.messages import AIMessage

from agents.definitions import load_agents_file
from agents.runtime import RunLimits
from chat.agents import limits_audit
from chat.checks import check_agents
from chat.export import COLUMNS, trace_rows
from chat.models import AgentRun, AgentSnapshot, AgentStep, Conversation
from tests.agents.mcp_helpers import awkward_http, children, until
from tests.chat.conftest import wait_for_runs
from tests.chat.test_consumer import ask_over_socket, make_conversation
from tests.fakes import tool_call
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
HELPER = """
[[agents]]
name = "helper"
label = "Text helper"
description = "Shouts and reverses text."
system_prompt = "You help with text. {extra}"
tools = ["tests.agents.own_tools.kinds.TEXT_TOOLS", "tests.agents.own_tools.kinds.fails"]
starters = ["Shout hello"]
placeholder = "Give me text…"
{rest}
"""


async def runs_ended() -> None:
    """Wait until no run is going (a socket's catch-up may show the last one ended first)."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    going = AgentRun.objects.filter(status="running")
    while await database_sync_to_async(going.exists)():
        assert asyncio.get_running_loop().time() < deadline, "a run still going"
        await wait_for_runs()
        await asyncio.sleep(0.05)


def define(settings, tmp_path: Path, text: str) -> None:
    """Make ``text`` the server's agents file."""
    path = tmp_path / "agents.toml"
    path.write_text(text, encoding="utf-8")
    settings.AGENT_DEFINITIONS = load_agents_file(path, python=sys.executable, base_dir=ROOT)


def define_mcp_agent(settings, tmp_path: Path, server: str, *, policies: str = "") -> None:
    """Make the agents file one agent, ``h``, whose tools are one MCP server's: ``server``
    is the body of its ``[[mcp_servers]]`` table, its ``name = "..."`` first; ``policies``
    the agent's ``tool_policies`` (TOML inline-table entries)."""
    name = re.match(r'\s*name = "([^"]+)"', server)[1]
    define(settings, tmp_path, f"""
[[agents]]
name = "h"
system_prompt = "You use the {name} server."
mcp_servers = ["{name}"]
tool_policies = {{ {policies} }}

[[mcp_servers]]
{server.strip()}
""")  # fmt: skip


def helper_agent(settings, tmp_path: Path, *, extra: str = "", rest: str = "") -> None:
    define(settings, tmp_path, HELPER.format(extra=extra, rest=rest))


async def test_a_run_uses_its_agents_prompt_and_tools_and_records_them(
    scripted_model, settings, tmp_path
):
    helper_agent(settings, tmp_path)
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("shout", {"text": "hi"}, "c1")]),
        AIMessage("HI it is."),
    ]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Shout hi")

    run = await database_sync_to_async(AgentRun.objects.select_related("snapshot").get)()
    assert (run.status, run.agent_key) == ("succeeded", "helper")
    assert scripted_model.prompts[0][0].content == "You help with text."
    assert [s.result for s in await database_sync_to_async(list)(run.steps.all())][1] == "HI"
    content = run.snapshot.content
    assert content["agent"] == {"name": "helper", "label": "Text helper"}
    assert content["system_prompt"] == "You help with text."
    assert [t["name"] for t in content["tools"]] == ["shout", "reverse", "fails"]
    assert content["tools"][0]["source"] == "tests.agents.own_tools.kinds.TEXT_TOOLS"
    assert content["tools"][2]["parameters"]["required"] == ["reason"]
    assert content["limits"]["max_iterations"] == settings.AGENT_MAX_ITERATIONS
    conversation = await database_sync_to_async(Conversation.objects.get)()
    assert conversation.agent_key == "helper"  # fixed by the first message


def test_a_snapshot_records_every_limit_the_run_ran_under():
    limits = RunLimits(max_result_chars=5_000, max_repeated_failures=2, trim_intermediate_steps=4)
    audit = limits_audit(limits)
    assert (audit["max_result_chars"], audit["max_observation_chars"]) == (5_000, 8_000)
    assert (audit["max_repeated_failures"], audit["trim_intermediate_steps"]) == (2, 4)
    assert limits_audit(RunLimits(trim_intermediate_steps=len))["trim_intermediate_steps"] == (
        "callable"
    )


async def test_runs_given_the_same_share_one_snapshot_and_a_change_makes_a_new_one(
    scripted_model, settings, tmp_path
):
    helper_agent(settings, tmp_path)
    scripted_model.script = [AIMessage("one"), AIMessage("two"), AIMessage("three")]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "first")
    await ask_over_socket(conversation, user, "second")
    helper_agent(settings, tmp_path, extra="Be brief.")  # the operator edits the file
    await ask_over_socket(conversation, user, "third")

    runs = await database_sync_to_async(
        lambda: list(AgentRun.objects.select_related("snapshot").order_by("pk"))
    )()
    first, second, third = (run.snapshot for run in runs)
    assert first.pk == second.pk
    assert third.pk != first.pk
    assert await database_sync_to_async(AgentSnapshot.objects.count)() == 2
    assert first.content["system_prompt"] == "You help with text."  # the old run's truth
    assert third.content["system_prompt"] == "You help with text. Be brief."
    assert scripted_model.prompts[2][0].content == "You help with text. Be brief."


async def test_a_text_strategys_snapshot_has_the_system_prompt_as_sent(
    scripted_model, settings, tmp_path
):
    helper_agent(settings, tmp_path)
    scripted_model.script = [AIMessage("Final Answer: done")]
    user, conversation = await make_conversation()
    conversation.strategy = "react"
    await database_sync_to_async(conversation.save)()
    await ask_over_socket(conversation, user, "hi")

    run = await database_sync_to_async(AgentRun.objects.select_related("snapshot").get)()
    sent = run.snapshot.content["system_prompt"]
    assert sent == scripted_model.prompts[0][0].content
    assert sent.startswith("You help with text.") and "shout" in sent and "Action:" in sent


async def test_an_agents_own_limits_bound_its_runs(scripted_model, settings, tmp_path):
    helper_agent(settings, tmp_path, rest="[agents.limits]\nmax_iterations = 1")
    call = AIMessage("", tool_calls=[tool_call("shout", {"text": "a"}, "c1")])
    scripted_model.script = [call, AIMessage("never asked")]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "loop")

    run = await database_sync_to_async(AgentRun.objects.select_related("snapshot").get)()
    assert (run.status, run.iterations) == ("max_iterations", 1)
    assert run.snapshot.content["limits"]["max_iterations"] == 1


async def test_an_agents_tool_policy_holds_its_calls_for_approval(
    scripted_model, settings, tmp_path
):
    helper_agent(settings, tmp_path, rest='tool_policies = { shout = "ask" }')
    scripted_model.script = [AIMessage("", tool_calls=[tool_call("shout", {"text": "a"}, "c1")])]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "shout")

    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == "waiting"


async def test_a_conversation_whose_agent_is_gone_fails_saying_so_and_the_next_chat_works(
    scripted_model, settings, tmp_path
):
    user, conversation = await make_conversation()
    conversation.agent_key = "retired"
    await database_sync_to_async(conversation.save)()
    frames = await ask_over_socket(conversation, user, "hello?")

    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == "failed"
    assert "agent 'retired' is no longer configured" in run.error
    assert "status-failed" in frames[-1]
    scripted_model.script = [AIMessage("Hello.")]
    _, fresh = await make_conversation("bob")
    await ask_over_socket(fresh, _, "hello")
    latest = await database_sync_to_async(AgentRun.objects.order_by("pk").last)()
    assert (latest.status, latest.agent_key) == ("succeeded", "travel")


def test_the_csv_carries_each_runs_agent_and_snapshot_hash(settings, tmp_path):
    from tests.chat.test_export import make_run

    run = make_run(steps=1)
    snapshot = AgentSnapshot.objects.create(digest="ab" * 32, content={"agent": {}})
    AgentRun.objects.filter(pk=run.pk).update(agent_key="helper", snapshot=snapshot)

    (row,) = list(trace_rows(AgentRun.objects.all()))
    cells = dict(zip(COLUMNS, row, strict=True))
    assert (cells["agent"], cells["agent_snapshot"]) == ("helper", "ab" * 32)


def test_the_checks_name_the_agent_and_the_tool_path_at_fault(settings, tmp_path):
    text = HELPER.format(extra="", rest='models = ["nowhere"]').replace(
        '"tests.agents.own_tools.kinds.fails"', '"tests.agents.own_tools.faults.undocumented"'
    )
    define(settings, tmp_path, text)

    messages = {message.id: message.msg for message in check_agents()}
    assert "Agent 'helper'" in messages["chat.E003"]
    define(settings, tmp_path, HELPER.format(extra="", rest='tool_policies = { shuot = "ask" }'))
    (misspelt,) = check_agents()
    assert misspelt.id == "chat.E005" and "names 'shuot', which is not one of its tools" in (
        misspelt.msg
    )
    assert "tests.agents.own_tools.faults.undocumented" in messages["chat.E003"]
    assert "models names 'nowhere'" in messages["chat.E004"]


def test_the_bundled_agents_pass_the_checks():
    assert check_agents() == []


def test_ask_starts_a_conversation_with_the_agent_named(settings, tmp_path, capsys):
    call_command("ask", "What is the moon's phase on 2026-12-24?", "--agent", "travel",
                 "--no-stream")  # fmt: skip
    assert "agent Travel assistant" in capsys.readouterr().out
    assert Conversation.objects.get().agent_key == "travel"
    with pytest.raises(CommandError, match="No agent is called 'nobody'; --agent takes one of: "
                                           "travel, almanac"):  # fmt: skip
        call_command("ask", "hi", "--agent", "nobody")
    conversation = Conversation.objects.get()
    with pytest.raises(CommandError, match="talks to the agent 'travel'"):
        call_command("ask", "hi", "--conversation", str(conversation.pk), "--agent", "almanac")


# Agents whose tools come from MCP servers, started for real (tests/mcp_servers/awkward.py)

AWKWARD = f"""
[[agents]]
name = "awk"
system_prompt = "You use the awkward server."
mcp_servers = ["awk", "down"]
tool_policies = {{ awk_echo = "allow" }}

[[mcp_servers]]
name = "awk"
transport = "stdio"
command = "{{python}}"
args = ["{ROOT / "tests" / "mcp_servers" / "awkward.py"}"]

[[mcp_servers]]
name = "down"
transport = "stdio"
command = "/nonexistent/mcp-server"
"""


async def test_an_mcp_agent_calls_its_servers_tools_and_closes_the_server_with_the_run(
    scripted_model, settings, tmp_path
):
    define(settings, tmp_path, AWKWARD)
    before = children()
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("awk_echo", {"text": "ping"}, "c1")]),
        AIMessage("It said ping."),
    ]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Echo ping")

    run = await database_sync_to_async(AgentRun.objects.select_related("snapshot").get)()
    steps = await database_sync_to_async(lambda: list(run.steps.order_by("ordinal")))()
    assert run.status == "succeeded"
    assert (steps[1].tool_name, steps[1].status, steps[1].result) == ("awk_echo", "success", "ping")
    servers = {s["name"]: s for s in run.snapshot.content["mcp_servers"]}
    assert servers["awk"]["status"] == "connected"
    assert servers["down"]["status"] == "unavailable" and servers["down"]["reason"]
    tools = {t["name"]: t for t in run.snapshot.content["tools"]}
    assert tools["awk_echo"]["source"] == "mcp:awk"
    # The unreachable server is named to the model, so the agent can say so.
    assert "down (" in scripted_model.prompts[0][0].content
    await until(lambda: not (children() - before), "the run's MCP server to end")


async def test_an_mcp_tool_the_agent_does_not_name_waits_for_approval(
    scripted_model, settings, tmp_path
):
    define(settings, tmp_path, AWKWARD)
    before = children()
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("awk_fail", {"message": "x"}, "c1")]),
    ]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Fail")

    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == "waiting"  # third-party code asks first
    await until(lambda: not (children() - before), "the paused run's MCP server to end")


async def test_an_mcp_tool_that_raises_is_an_error_step_and_the_next_message_works(
    scripted_model, settings, tmp_path
):
    define(settings, tmp_path, AWKWARD.replace('awk_echo = "allow"', 'awk_fail = "allow"'))
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("awk_fail", {"message": "broken"}, "c1")]),
        AIMessage("It failed."),
        AIMessage("Still here."),
    ]
    user, conversation = await make_conversation()
    await ask_over_socket(conversation, user, "Fail")
    await ask_over_socket(conversation, user, "Again?")
    await runs_ended()

    first, second = await database_sync_to_async(lambda: list(AgentRun.objects.order_by("pk")))()
    call = await database_sync_to_async(lambda: first.steps.get(kind="tool_call"))()
    assert (call.status, call.error_type) == ("error", "ToolException")
    assert "broken" in call.result
    assert (first.status, second.status) == ("succeeded", "succeeded")


async def test_the_bundled_almanac_agent_runs_its_mcp_server(scripted_model, settings):
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("almanac_days_between",
                                            {"start": "2026-01-01", "end": "2026-12-25"}, "c1")]),
        AIMessage("358 days."),
    ]  # fmt: skip
    user, conversation = await make_conversation()
    conversation.agent_key = "almanac"
    await database_sync_to_async(conversation.save)()
    await ask_over_socket(conversation, user, "Days?")

    run = await database_sync_to_async(AgentRun.objects.get)()
    call = await database_sync_to_async(lambda: run.steps.get(kind="tool_call"))()
    assert (run.status, run.agent_key, call.status) == ("succeeded", "almanac", "success")
    assert '"days": 358' in call.result


async def test_stop_during_an_mcp_call_ends_the_run_and_its_server(
    scripted_model, settings, tmp_path
):
    from tests.chat.test_cancel import connect, receive_until_finished

    define(settings, tmp_path, AWKWARD.replace('awk_echo = "allow"', 'awk_sleep = "allow"'))
    before = children()
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("awk_sleep", {"seconds": 3600}, "c1")]),
        AIMessage("never reached"),
    ]
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "Sleep"}))
    calls = AgentStep.objects.filter(kind="tool_call", status="running")
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not await database_sync_to_async(calls.exists)():
        assert asyncio.get_running_loop().time() < deadline, "the MCP call never started"
        await asyncio.sleep(0.05)
    await communicator.send_to(text_data=json.dumps({"type": "cancel"}))
    await receive_until_finished(communicator)
    await wait_for_runs()
    await communicator.disconnect()

    run = await database_sync_to_async(AgentRun.objects.get)()
    assert run.status == "cancelled"
    await until(lambda: not (children() - before), "the stopped run's MCP server to end")


async def test_an_http_mcp_servers_header_comes_from_the_environment_and_is_never_stored(
    scripted_model, settings, tmp_path, monkeypatch
):
    from tests.mcp_servers.awkward import HEADER

    secret = "k3y-from-the-environment-77"
    monkeypatch.setenv("AWK_KEY", secret)
    scripted_model.script = [
        AIMessage("", tool_calls=[tool_call("web_header_seen", {}, "c1")]),
        AIMessage("Seen."),
    ]
    with awkward_http({"AWKWARD_EXPECTED_KEY": secret}) as (url, _):
        define_mcp_agent(settings, tmp_path, f"""
name = "web"
transport = "streamable_http"
url = "{url}"
headers_env = {{ {HEADER} = "AWK_KEY" }}
""", policies='web_header_seen = "allow"')  # fmt: skip
        user, conversation = await make_conversation()
        await ask_over_socket(conversation, user, "Was the header sent?")

    run = await database_sync_to_async(AgentRun.objects.select_related("snapshot").get)()
    call = await database_sync_to_async(lambda: run.steps.get(kind="tool_call"))()
    assert (run.status, call.result) == ("succeeded", "matches")
    (server,) = run.snapshot.content["mcp_servers"]
    assert server["headers"] == [HEADER] and server["status"] == "connected"
    stored = json.dumps([run.snapshot.content, call.result, call.arguments, run.output])
    assert secret not in stored


def test_a_tool_is_described_as_langchain_converts_it_once_per_process():
    """``openai_function`` gives what ``convert_to_openai_tool`` gives; a tool from code
    (arguments a pydantic class) is converted once, a tool made again around the same
    function is found, another description is its own entry, and a schema given as a
    dict (an MCP server's) is converted each time."""
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from chat.agents import openai_function

    def lookup(city: str, days: int = 1) -> str:
        """Look a city up."""
        return city

    tool = StructuredTool.from_function(lookup)
    first = openai_function(tool)
    assert first == convert_to_openai_tool(tool)["function"]
    again = StructuredTool.from_function(lookup, args_schema=tool.args_schema)
    assert openai_function(again) is first
    other = StructuredTool.from_function(
        lookup, description="Another text.", args_schema=tool.args_schema
    )
    assert openai_function(other)["description"] == "Another text."

    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    mcp = StructuredTool(name="mcp_lookup", description="d", args_schema=schema, func=lookup)
    assert openai_function(mcp) == convert_to_openai_tool(mcp)["function"]
    assert openai_function(mcp) is not openai_function(mcp)
