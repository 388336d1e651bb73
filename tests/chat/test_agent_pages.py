"""Where agents show: the chat page (picker, header, introduction, starters, placeholder)
and the admin (a run's snapshot, the snapshots, the agents defined now)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from chat.models import AgentRun, AgentSnapshot, Conversation
from tests.chat.test_admin import staff_user
from tests.chat.test_export import make_run
from tests.chat.test_strategies import picker_post

pytestmark = pytest.mark.django_db


def test_a_new_chat_introduces_the_default_agent_with_its_starters_and_placeholder(alice):
    client, conversation = alice
    html = client.get(f"/c/{conversation.pk}/").content.decode()

    assert 'id="agent-badge">Agent: Travel assistant<' in html
    assert "<strong>Travel assistant</strong>: Plans trips in China" in html
    assert 'data-example="What&#x27;s the weather in Hangzhou, and what is 17*23?"' in html
    assert 'placeholder="Ask about a trip in China…"' in html
    assert '<option value="almanac">Almanac (MCP tools)</option>' in html


def test_picking_another_agent_reloads_the_page_as_that_agents(alice):
    client, conversation = alice
    response = picker_post(client, conversation, agent="almanac", strategy="tool_calling")

    assert response.status_code == 200 and response["HX-Refresh"] == "true"
    conversation.refresh_from_db()
    assert conversation.agent_key == "almanac"
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="agent-badge">Agent: Almanac (MCP tools)<' in html
    assert 'placeholder="Ask the almanac: units, dates, the moon, a chart…"' in html
    assert "What is the moon&#x27;s phase on 2026-12-24?" in html
    assert '<option value="weather_forecast"' not in html  # the travel tools are not its


def test_an_agent_that_is_not_defined_is_refused_and_nothing_changes(alice):
    client, conversation = alice
    response = picker_post(client, conversation, agent="nobody", strategy="tool_calling")

    assert response.status_code == 400
    assert "Pick one of the defined agents." in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.agent_key == ""


def test_a_started_chat_keeps_its_agent(alice):
    client, conversation = alice
    client.post(f"/c/{conversation.pk}/strategy/", {"agent": "almanac", "strategy": "xml"},
                HTTP_HX_REQUEST="true")  # fmt: skip
    conversation.messages.create(role="user", content="hi")
    response = picker_post(client, conversation, agent="travel", strategy="tool_calling")

    assert response.status_code == 409
    conversation.refresh_from_db()
    assert conversation.agent_key == "almanac"


def test_a_chat_whose_agent_is_gone_says_so(alice):
    client, conversation = alice
    Conversation.objects.filter(pk=conversation.pk).update(agent_key="retired")
    html = client.get(f"/c/{conversation.pk}/").content.decode()

    assert "Agent: retired (no longer configured)" in html
    assert "is no longer configured on this server. Start a new chat." in html


@pytest.fixture
def auditor() -> Client:
    client = Client()
    client.force_login(staff_user("auditor", "view_agentrun", "view_agentsnapshot"))
    return client


def snapshot(**content) -> AgentSnapshot:
    base = {"agent": {"name": "helper", "label": "Text helper"},
            "system_prompt": "You help.\u202e", "tools": [
                {"name": "shout", "description": "Shout <b>it</b>", "source": "x.shout",
                 "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}],
            "mcp_servers": [{"name": "down", "transport": "stdio", "command": "srv", "args": [],
                             "env": ["TOKEN"], "status": "unavailable", "reason": "not found"}],
            "limits": {"max_iterations": 3}}  # fmt: skip
    return AgentSnapshot.objects.create(digest="c" * 64, content={**base, **content})


def test_a_runs_page_shows_what_its_agent_gave_the_model(auditor):
    run = make_run(steps=1)
    AgentRun.objects.filter(pk=run.pk).update(agent_key="helper", snapshot=snapshot())

    html = auditor.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()

    assert "What the agent gave the model" in html
    assert "Text helper" in html and "<code>cccccccccccc</code>" in html
    assert "Shout &lt;b&gt;it&lt;/b&gt;" in html  # escaped
    assert "\u202e" not in html  # bidi controls shown as markers
    assert "<strong>unavailable</strong>: not found" in html and "environment TOKEN" in html


def test_an_old_runs_page_says_its_snapshot_was_not_recorded(auditor):
    run = make_run(steps=1)
    html = auditor.get(f"/admin/chat/agentrun/{run.pk}/change/").content.decode()
    assert "not recorded" in html


def test_the_run_list_filters_by_agent_and_by_snapshot(auditor):
    kept, other = make_run(question="kept one"), make_run(question="other one")
    shared = snapshot()
    AgentRun.objects.filter(pk=kept.pk).update(agent_key="helper", snapshot=shared)
    AgentRun.objects.filter(pk=other.pk).update(agent_key="travel")

    by_agent = auditor.get("/admin/chat/agentrun/?agent_key=helper").content.decode()
    by_snapshot = auditor.get(
        f"/admin/chat/agentrun/?snapshot__id__exact={shared.pk}"
    ).content.decode()

    for html in (by_agent, by_snapshot):
        assert "kept one" in html and "other one" not in html


def test_the_snapshots_list_counts_runs_and_links_the_agents_defined_now(auditor):
    shared = snapshot()
    for _ in range(2):
        run = make_run()
        AgentRun.objects.filter(pk=run.pk).update(snapshot=shared)

    html = auditor.get("/admin/chat/agentsnapshot/").content.decode()
    assert "Text helper (helper)" in html and "Agents defined now" in html
    page = auditor.get(f"/admin/chat/agentsnapshot/{shared.pk}/change/").content.decode()
    assert "2 runs" in page and "System prompt as sent" in page


def test_the_agents_defined_now_page_lists_each_agent_with_its_tools_and_mcp_tools(auditor):
    html = auditor.get("/admin/chat/agentsnapshot/defined/").content.decode()

    assert "Travel assistant <code>travel</code> · the default" in html
    assert "<code>agents.tools.calculator</code>" in html
    assert "MCP server <code>almanac</code>" in html
    assert "<code>almanac_moon_phase</code>" in html  # listed from the running server


def test_the_agents_page_is_for_staff_who_may_view_runs():
    client = Client()
    client.force_login(User.objects.create_user("nobody", is_staff=True))
    assert client.get("/admin/chat/agentsnapshot/defined/").status_code == 403


def test_a_server_that_hangs_is_listed_apart_and_the_page_does_not_wait(
    auditor, settings, tmp_path
):
    from agents.mcp import listing
    from tests.agents.mcp_helpers import children
    from tests.chat.test_agents import define_mcp_agent
    from tests.timing import wait_until

    define_mcp_agent(settings, tmp_path, """
name = "mute"
transport = "stdio"
command = "{python}"
args = ["-c", "import time; time.sleep(600)"]
connect_timeout_s = 2
""")  # fmt: skip
    before = children()
    # Served in the thread all database work shares: it answers at once, saying so.
    html = auditor.get("/admin/chat/agentsnapshot/defined/").content.decode()
    assert "Listing its tools now" in html
    (config,) = settings.AGENT_DEFINITIONS.mcp_servers.values()
    wait_until(lambda: listing.CACHE.get(config, 60) is not None, "the listing to end")
    html = auditor.get("/admin/chat/agentsnapshot/defined/").content.decode()
    assert "Unavailable: did not answer within 2 s" in html, html[html.find("MCP server") :][:600]
    wait_until(lambda: not (children() - before), "the server to end")


def test_the_tool_filter_offers_the_mcp_tools_runs_were_given(auditor):
    from chat.models import AgentStep

    run = make_run(question="charted", steps=2)
    AgentStep.objects.filter(run=run, kind="tool_call").update(tool_name="almanac_bar_chart")
    tools = [{"name": "almanac_bar_chart", "source": "mcp:almanac"}]
    AgentRun.objects.filter(pk=run.pk).update(snapshot=snapshot(tools=tools))

    listed = auditor.get("/admin/chat/agentrun/").content.decode()
    other = auditor.get("/admin/chat/agentrun/?tool=other").content.decode()

    assert "?tool=almanac_bar_chart" in listed
    assert "charted" not in other  # a tool its run was given is not "a name no tool has"


def test_the_policy_form_offers_the_mcp_tools_runs_were_given():
    run = make_run()
    tools = [{"name": "almanac_moon_phase", "source": "mcp:almanac"}]
    AgentRun.objects.filter(pk=run.pk).update(snapshot=snapshot(tools=tools))
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))

    html = client.get("/admin/chat/toolapprovalpolicy/add/").content.decode()
    assert '<option value="almanac_moon_phase">' in html
    assert '<option value="calculator">' in html


def test_a_model_gone_is_replaced_only_by_one_its_agent_may_use(alice, settings, tmp_path):
    from tests.chat.test_agents import HELPER, define
    from tests.chat.test_configured_models import LOCAL

    settings.AGENT_EXTRA_MODELS = [LOCAL]
    define(settings, tmp_path, HELPER.format(extra="", rest=f'models = ["{LOCAL.key}"]'))
    client, conversation = alice
    Conversation.objects.filter(pk=conversation.pk).update(agent_key="helper",
                                                           model_key="retired")  # fmt: skip
    conversation.messages.create(role="user", content="hi")

    refused = picker_post(client, conversation, model="default")
    taken = picker_post(client, conversation, model=LOCAL.key)

    assert refused.status_code == 400 and '<option value="default"' not in refused.content.decode()
    assert taken.status_code == 200
    conversation.refresh_from_db()
    assert conversation.model_key == LOCAL.key
