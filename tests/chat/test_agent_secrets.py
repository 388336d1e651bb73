"""An MCP server's secrets (its headers' values, the variables its env references) stay
out of every row and every prompt, even when the server echoes them back."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage

from chat.models import AgentRun, Conversation
from chat.runs import create_run, execute_run
from tests.agents.mcp_helpers import serving
from tests.chat.test_agents import define_mcp_agent
from tests.chat.test_consumer import make_conversation
from tests.fakes import tool_call

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-live-VERY-SECRET-123456"


async def ask(content: str) -> tuple[AgentRun, list]:
    """Run ``content`` in a new conversation with the agent ``h``; return the run, steps."""
    _, conversation = await make_conversation()
    await database_sync_to_async(
        Conversation.objects.filter(pk=conversation.pk).update
    )(agent_key="h")  # fmt: skip
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content=content)  # fmt: skip
    await execute_run(run.pk)
    run = await database_sync_to_async(
        AgentRun.objects.select_related("snapshot").get
    )(pk=run.pk)  # fmt: skip
    return run, await database_sync_to_async(lambda: list(run.steps.order_by("ordinal")))()


class Echoing(BaseHTTPRequestHandler):
    """A streamable HTTP MCP server whose tool call echoes the Authorization header back,
    as many APIs' "invalid token ..." errors do: in a JSON-RPC error, or an isError
    result, or (``mode`` "echo") a successful one."""

    protocol_version = "HTTP/1.1"
    mode = "rpc_error"

    def _send(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Mcp-Session-Id", "s1")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization", "")
        if "id" not in message:
            return self._send(202)
        if message.get("method") == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "e", "version": "1"},
            }
        elif message.get("method") == "tools/list":
            result = {
                "tools": [
                    {
                        "name": "whoami",
                        "description": "Who am I.",
                        "inputSchema": {"type": "object"},
                    }
                ]
            }
        elif self.mode == "call_html":  # a proxy's login page, say
            return self._send(200, f"<html>Log in, {auth}</html>".encode(), "text/html")
        elif self.mode == "rpc_error":
            error = {"code": -32000, "message": f"token {auth} is not allowed"}
            body = {"jsonrpc": "2.0", "id": message["id"], "error": error}
            return self._send(200, json.dumps(body).encode())
        else:
            text = {"call_is_error": f"token {auth} expired", "echo": f"you are {auth}"}
            result = {
                "isError": self.mode == "call_is_error",
                "content": [{"type": "text", "text": text[self.mode]}],
            }
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self._send(200, json.dumps(body).encode())  # fmt: skip

    def do_DELETE(self) -> None:
        self._send(200)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("mode", ["rpc_error", "call_is_error", "echo", "call_html"])
async def test_a_header_value_a_server_echoes_is_never_stored_nor_sent_to_the_model(
    mode, scripted_model, settings, tmp_path, monkeypatch
):
    monkeypatch.setenv("WEB_TOKEN", f"Bearer {SECRET}")
    scripted_model.script = [AIMessage("", tool_calls=[tool_call("web_whoami", {}, "c1")]),
                             AIMessage("done")]  # fmt: skip
    with serving(type("Echo", (Echoing,), {"mode": mode})) as url:
        define_mcp_agent(settings, tmp_path, f"""
name = "web"
transport = "streamable_http"
url = "{url}"
headers_env = {{ Authorization = "WEB_TOKEN" }}
""", policies='web_whoami = "allow"')  # fmt: skip
        _, steps = await ask("who am I?")

    call = steps[1]
    assert (call.status == "success") == (mode == "echo")
    if mode == "call_html":  # failed at once, not at the tool's time-out
        assert call.error_type == "McpError" and "answered with text/html" in call.result
    else:
        assert "***" in call.result
    sent = json.dumps([m.content for turn in scripted_model.prompts for m in turn])
    for text in (call.result, call.error, json.dumps(call.result_blocks), sent):
        assert SECRET not in text


async def test_a_referenced_env_value_a_server_prints_is_scrubbed_from_its_reason(
    scripted_model, settings, tmp_path, monkeypatch
):
    monkeypatch.setenv("APP_TOKEN", SECRET)
    code = "import os,sys,time; print('token=' + os.environ['TOKEN'], flush=True); time.sleep(60)"
    define_mcp_agent(settings, tmp_path, f"""
name = "s"
transport = "stdio"
command = "{{python}}"
args = ["-c", "{code}"]
env = {{ TOKEN = "${{APP_TOKEN}}" }}
connect_timeout_s = 3
""")  # fmt: skip
    scripted_model.script = [AIMessage("hi")]
    run, _ = await ask("hi")

    (server,) = run.snapshot.content["mcp_servers"]
    assert server["status"] == "unavailable" and "***" in server["reason"]
    assert SECRET not in json.dumps(run.snapshot.content)
    assert SECRET not in scripted_model.prompts[0][0].content
