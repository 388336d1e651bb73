"""The agents file: the bundled one loads, and each fault names its agent and field."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

import pytest

from agents.bundled import bundled_agents
from agents.definitions import DefinitionError, load_agents_file

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = """
[[agents]]
name = "helper"
system_prompt = "You help."
tools = ["tests.agents.own_tools.kinds.shout"]
"""


def load(tmp_path: Path, text: str):
    path = tmp_path / "agents.toml"
    path.write_text(text, encoding="utf-8")
    return load_agents_file(path, python="/usr/bin/python3", base_dir=tmp_path)


def test_the_bundled_file_defines_the_travel_assistant_first_and_an_mcp_agent() -> None:
    defined = bundled_agents()

    assert [agent.name for agent in defined.agents] == ["travel", "almanac"]
    assert defined.default.name == "travel"
    assert len(defined.default.starters) == 4
    almanac = defined.find("almanac")
    assert almanac is not None
    (server,) = defined.servers_of(almanac)
    assert server.transport == "stdio"
    assert server.command == sys.executable  # {python}: the app's own interpreter
    assert server.cwd == str(ROOT)


def test_a_minimal_agent_takes_the_servers_settings_for_the_rest(tmp_path: Path) -> None:
    agent = load(tmp_path, MINIMAL).default

    assert agent.label == "helper"
    assert agent.models == () and agent.strategies == ()
    assert agent.limits.as_dict() == {}
    assert agent.source.endswith("[[agents]] #1 (helper)")


def test_limits_and_policies_are_read_with_their_types(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + """
tool_policies = { shout = "ask" }
[agents.limits]
max_iterations = 4
max_execution_time_s = 30
max_run_cost = 0.25
"""
    )
    agent = load(tmp_path, text).default

    assert agent.tool_policies == {"shout": "ask"}
    assert agent.limits.max_iterations == 4
    assert agent.limits.max_execution_time_s == 30.0
    assert agent.limits.max_run_cost == Decimal("0.25")
    assert agent.limits.as_dict() == {
        "max_iterations": 4, "max_execution_time_s": 30.0, "max_run_cost": "0.25",
    }  # fmt: skip


def test_an_http_server_keeps_header_variable_names_never_values(tmp_path: Path) -> None:
    text = (
        MINIMAL
        + """
mcp_servers = ["remote"]
[[mcp_servers]]
name = "remote"
transport = "streamable_http"
url = "http://127.0.0.1:9/mcp"
headers_env = { Authorization = "REMOTE_TOKEN" }
"""
    )
    defined = load(tmp_path, text)

    (server,) = defined.servers_of(defined.default)
    assert server.headers_env == {"Authorization": "REMOTE_TOKEN"}
    audit = server.audit()
    assert audit["headers"] == ["Authorization"]
    assert audit["url"] == "http://127.0.0.1:9/mcp"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "defines no agent"),
        ("agents = 3", "write each of agents as a [[agents]] table"),
        ("[models]\nx = 1", "has 'models' at its top level"),
        (
            "[[agents]]\nname = 'Helper'\nsystem_prompt = 'x'\ntools = ['a.b']",
            "#1: name 'Helper' must be 1 to 32 lower-case",
        ),
        ("[[agents]]\nname = 'a'\ntools = ['a.b']", "#1 (a): system_prompt is required"),
        (
            "[[agents]]\nname = 'a'\nsystem_prompt = 'x'",
            "(a): tools is empty and the agent has no mcp_servers",
        ),
        (MINIMAL + "colour = 'red'", "(helper) has an unknown field 'colour'"),
        (MINIMAL + "starters = 'hi'", "(helper): starters must be a list of strings"),
        (MINIMAL + "starters = ['hi', 'hi']", "(helper): starters names 'hi' twice"),
        (MINIMAL + "mcp_servers = ['gone']", "(helper): mcp_servers names 'gone', which no"),
        (
            MINIMAL + "tool_policies = { shout = 'maybe' }",
            "(helper): tool_policies sets 'shout' to 'maybe'",
        ),
        (
            MINIMAL + "models = ['a']\ndefault_model = 'b'",
            "(helper): default_model 'b' is not in its models",
        ),
        (
            MINIMAL + "[agents.limits]\nmax_iterations = 0",
            "(helper) limits: max_iterations must be above 0",
        ),
        (
            MINIMAL + "[agents.limits]\nmax_iterations = 1.5",
            "limits: max_iterations must be a whole number",
        ),
        (
            MINIMAL + "[agents.limits]\nmax_run_cost = -1",
            "limits: max_run_cost must not be negative",
        ),
        (MINIMAL + "[agents.limits]\nmax_steps = 3", "limits has an unknown field 'max_steps'"),
        (MINIMAL + MINIMAL, "#2 (helper): the name 'helper' is taken"),
        (
            MINIMAL + "[[mcp_servers]]\nname = 's'\ntransport = 'sse'\nurl = 'http://x'",
            "[[mcp_servers]] #1 (s): transport: 'sse' is not one of stdio, streamable_http",
        ),
        (MINIMAL + "[[mcp_servers]]\nname = 's'\ntransport = 'stdio'", "(s): command is required"),
        (
            MINIMAL
            + "[[mcp_servers]]\nname = 's'\ntransport = 'stdio'\ncommand = 'x'\nurl = 'http://x'",
            "(s): url is for streamable_http servers",
        ),
        (
            MINIMAL + "[[mcp_servers]]\nname = 's'\ntransport = 'streamable_http'\nurl = 'ftp://x'",
            "(s): url: 'ftp://x' is not an http(s) URL",
        ),
        (
            MINIMAL
            + "[[mcp_servers]]\nname = 's'\ntransport = 'streamable_http'\nurl = 'http://x'\n"
            "headers_env = { Authorization = 'Bearer abc' }",
            "headers_env: 'Bearer abc' (for Authorization) is not an environment variable name",
        ),
        ("[[agents]\n", "is not valid TOML"),
        (
            MINIMAL + 'label = "Help\u202eer"',
            "(helper): label holds the invisible character U+202E",
        ),
        (
            MINIMAL.replace("You help.", "You\\u0000 help."),
            "system_prompt holds the invisible character U+0000",
        ),
        (MINIMAL + 'starters = ["a\u200bb"]', "starters holds the invisible character U+200B"),
        (
            MINIMAL
            + "[[mcp_servers]]\nname = 's'\ntransport = 'stdio'\ncommand = 'x'\ncwd = 'no/such'",
            "(s): cwd 'no/such' is not a directory",
        ),
    ],
)
def test_a_fault_is_refused_naming_the_agent_and_the_field(
    tmp_path: Path, text: str, words: str
) -> None:
    with pytest.raises(DefinitionError) as caught:
        load(tmp_path, text)

    assert words in str(caught.value)
    assert str(tmp_path / "agents.toml") in str(caught.value)


def test_a_missing_file_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="cannot be read"):
        load_agents_file(tmp_path / "none.toml", python="python3", base_dir=tmp_path)


def test_joiners_that_emoji_and_scripts_need_are_kept(tmp_path: Path) -> None:
    agent = load(
        tmp_path, MINIMAL.replace("You help.", "You help \U0001f469\u200d\U0001f4bb.")
    ).default
    assert "\u200d" in agent.system_prompt
