"""Two Daphne processes on one PostgreSQL database and one Redis channel layer.

A run started through process B is seen, event by event, by a socket on process A; a
reload on either shows the same history; Stop pressed on A stops the run B runs; a run
waiting for approval goes on in the other process (a decision sent there, or taken in its
admin). Each
test starts both servers on pytest-django's test database (``django_db(transaction=True)``:
what anyone writes is committed, so all see it, and it is flushed afterwards).
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.demo.scenarios import EXAMPLES
from chat.models import AgentRun, Approval
from chat.runs import CANCELLED, STOPPED
from scripts.serving import daphne
from tests.deploy.shared import server_env
from tests.timing import WAIT_S

CONVERSATION_RE = re.compile(r"/c/(\d+)/$")
STEP_RE = re.compile(r'id="step-(\d+)"[^>]*?\sdata-status="(\w+)"')
RUN_RE = re.compile(r'<section class="run" id="run-(\d+)"')
STATUS_RE = re.compile(r'id="run-(\d+)-status" data-status="(\w+)"')
DELTA_RE = re.compile(r'hx-swap-oob="beforeend:#step-(\d+)-text"')
MESSAGES_RE = re.compile(r'<div id="messages" class="messages">(.*?)<div id="chat-error"', re.S)

# The servers must see the test's rows and the test theirs: real commits. (A fixture that
# asked for ``transactional_db`` itself, without this mark, got the real database.)
pytestmark = pytest.mark.django_db(transaction=True)


@dataclass(frozen=True)
class Server:
    """One Daphne process of the pair: its base URL, its log and its process."""

    url: str
    log: Path
    process: subprocess.Popen[bytes] = field(compare=False, repr=False)

    @property
    def ws(self) -> str:
        return self.url.replace("http", "ws", 1)


@pytest.fixture
def two_servers(tmp_path) -> Iterator[Callable[..., tuple[Server, Server]]]:
    """Return ``start(**env)``: two Daphne processes sharing the test database and Redis.

    Both run the offline demo model; ``env`` adds to their environment. They are stopped
    before the test database is flushed, and their logs printed (shown on failure).
    """
    env = server_env()
    stack = ExitStack()

    def start(**extra: str) -> tuple[Server, Server]:
        servers = []
        for name in ("a", "b"):
            log = tmp_path / f"daphne-{name}.log"
            process, port = stack.enter_context(daphne({**env, **extra}, timeout_s=WAIT_S, log=log))
            servers.append(Server(url=f"http://127.0.0.1:{port}", log=log, process=process))
        return servers[0], servers[1]

    with stack:
        yield start
    # Printed once the servers have stopped, whole: pytest shows it when the test fails.
    for log in sorted(tmp_path.glob("daphne-*.log")):
        print(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}")


def new_conversation(server: Server) -> tuple[int, str]:
    """Get a guest session as a browser does (``GET /``, the cookie check); return the new
    conversation's id and the ``Cookie`` header that goes with it."""
    with httpx.Client(follow_redirects=True, timeout=WAIT_S) as http:
        page = http.get(f"{server.url}/")
        match = CONVERSATION_RE.search(page.url.path)
        assert page.status_code == 200 and match, (page.status_code, page.url)
        cookie = "; ".join(f"{name}={value}" for name, value in http.cookies.items())
    return int(match.group(1)), cookie


def history(server: Server, conversation_id: int, cookie: str) -> str:
    """Return the ``#messages`` part of the conversation's page as ``server`` renders it."""
    page = httpx.get(f"{server.url}/c/{conversation_id}/", headers={"Cookie": cookie},
                     timeout=WAIT_S)  # fmt: skip
    assert page.status_code == 200, page.status_code
    [messages] = MESSAGES_RE.findall(page.text)
    return messages


@dataclass
class Tab:
    """A socket of the conversation, as a page holds it: every frame it received."""

    frames: list[str] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self, ws) -> None:
        """Keep every frame of ``ws`` until it closes (or the test cancels the reading)."""
        async for frame in ws:
            self.frames.append(frame)
            self.arrived.set()

    async def wait_for(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        """Return the first match of ``pattern`` in the frames, waiting for new frames."""

        async def seen() -> re.Match[str]:
            while True:
                for frame in self.frames:
                    if match := pattern.search(frame):
                        return match
                self.arrived.clear()
                await self.arrived.wait()

        try:
            return await asyncio.wait_for(seen(), WAIT_S)
        except TimeoutError:
            raise AssertionError(f"no frame showed {what} in {WAIT_S:g} s") from None


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait for them, whatever they ended with."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def open_socket(server: Server, conversation_id: int, cookie: str):
    """Open the conversation's socket on ``server`` with the session and the page's Origin."""
    from websockets.asyncio.client import connect

    return connect(
        f"{server.ws}/ws/chat/{conversation_id}/", origin=server.url,
        additional_headers={"Cookie": cookie}, ping_interval=None, open_timeout=WAIT_S,
        max_size=None,
    )  # fmt: skip


@asynccontextmanager
async def two_tabs(
    a: Server, b: Server, conversation_id: int, cookie: str, question: str = EXAMPLES[0]
) -> AsyncIterator[tuple[Tab, Tab, Any]]:
    """Open the conversation in a tab on ``a`` and one on ``b``, ask ``question`` through
    ``b``, and yield ``(tab_a, tab_b, socket_a)`` while both tabs read; on exit the
    readers stop and the sockets close."""
    tab_a, tab_b = Tab(), Tab()
    async with (
        open_socket(a, conversation_id, cookie) as ws_a,
        open_socket(b, conversation_id, cookie) as ws_b,
    ):
        readers = [asyncio.create_task(tab_a.read(ws_a)), asyncio.create_task(tab_b.read(ws_b))]
        try:
            await ws_b.send(json.dumps({"content": question}))
            yield tab_a, tab_b, ws_a
        finally:
            await stop(readers)


@asynccontextmanager
async def asking(server: Server, conversation_id: int, cookie: str, question: str):
    """Open the conversation's socket on ``server``, ask ``question`` and yield the tab
    while it reads; on exit the reader stops and the socket closes."""
    tab = Tab()
    async with open_socket(server, conversation_id, cookie) as ws:
        reader = asyncio.create_task(tab.read(ws))
        try:
            await ws.send(json.dumps({"content": question}))
            yield tab
        finally:
            await stop([reader])


RUNNING_TOOL_CALL = re.compile(r'data-kind="tool_call"[^>]*data-status="running"')
FINAL = re.compile(r'id="run-(\d+)-status" data-status="(?!running)(\w+)"')


def test_a_run_started_on_one_process_streams_to_a_tab_on_the_other(two_servers):
    a, b = two_servers()
    conversation_id, cookie = new_conversation(a)
    question = EXAMPLES[0]

    async def converse() -> Tab:
        async with two_tabs(a, b, conversation_id, cookie, question) as (tab_a, tab_b, _):
            await tab_a.wait_for(FINAL, "the run's final status line on A")
            await tab_b.wait_for(FINAL, "the run's final status line on B")
        return tab_a

    tab_a = asyncio.run(converse())
    run = AgentRun.objects.get(conversation_id=conversation_id)
    steps = list(run.steps.order_by("ordinal"))
    assert run.status == "succeeded", run.error
    assert len(steps) >= 3  # a model turn, its tool calls, the answer
    received = "".join(tab_a.frames)
    assert f'id="run-{run.pk}"' in received  # the user's message and the empty run
    seen = {}
    for step_id, status in STEP_RE.findall(received):
        seen.setdefault(int(step_id), set()).add(status)
    for step in steps:
        assert seen.get(step.pk, set()) >= {"running", step.status}, (step.pk, seen)
    assert {int(step_id) for step_id in DELTA_RE.findall(received)} & {s.pk for s in steps}
    assert STATUS_RE.findall(received)[-1] == (str(run.pk), "succeeded")

    page_a, page_b = history(a, conversation_id, cookie), history(b, conversation_id, cookie)
    assert page_a == page_b
    assert html.escape(question) in page_a
    for step in steps:
        assert f'id="step-{step.pk}"' in page_a


def test_stop_on_one_process_cancels_the_run_the_other_process_runs(two_servers):
    # Tool calls that take long enough to press Stop during them. The stop reaches B's
    # task through the conversation's group (Redis) or at B's next heartbeat (2 s here):
    # both are the contract (docs/architecture.md, "The websocket's contract"). The stale
    # cut-off stays far away: the run is never taken for dead.
    a, b = two_servers(
        DEMO_TOOL_DELAY_MS="600000", AGENT_TOOL_TIMEOUT_S="900", AGENT_HEARTBEAT_S="2",
        AGENT_STALE_AFTER_S="10800",
    )  # fmt: skip
    conversation_id, cookie = new_conversation(a)

    async def converse() -> str:
        async with two_tabs(a, b, conversation_id, cookie) as (tab_a, tab_b, ws_a):
            await tab_a.wait_for(RUNNING_TOOL_CALL, "a running tool call on A")
            await ws_a.send(json.dumps({"type": "cancel"}))
            final = await tab_a.wait_for(FINAL, "the run's end on A")
            await tab_b.wait_for(FINAL, "the run's end on B")
        return final.group(2)

    assert asyncio.run(converse()) == "cancelled"
    run = AgentRun.objects.get(conversation_id=conversation_id)
    assert run.status == "cancelled"
    assert run.error == STOPPED


def test_a_restart_of_the_process_running_a_run_ends_it_at_once_in_the_other_tabs(two_servers):
    # No grace: B cancels its run as it stops. Heartbeats too rare for the stale-run sweep
    # to be what ends it (that takes AGENT_STALE_AFTER_S: docs/deploy.md).
    a, b = two_servers(
        DEMO_TOOL_DELAY_MS="600000", AGENT_TOOL_TIMEOUT_S="900", AGENT_HEARTBEAT_S="3600",
        AGENT_STALE_AFTER_S="10800", AGENT_SHUTDOWN_GRACE_S="0",
    )  # fmt: skip
    conversation_id, cookie = new_conversation(a)

    async def converse() -> tuple[str, list[str]]:
        async with two_tabs(a, b, conversation_id, cookie) as (tab_a, _, ws_a):
            await tab_a.wait_for(RUNNING_TOOL_CALL, "a running tool call on A")
            b.process.send_signal(signal.SIGTERM)
            final = await tab_a.wait_for(FINAL, "the run's end on A")
            await asyncio.to_thread(b.process.wait, WAIT_S)
            await ws_a.send(json.dumps({"content": "What time is it?"}))
            another_run = re.compile(rf'<section class="run" id="run-(?!{final.group(1)}")')
            await tab_a.wait_for(another_run, "the next message accepted on A")
        return final.group(2), RUN_RE.findall("".join(tab_a.frames))

    status, runs_seen = asyncio.run(converse())
    assert status == "cancelled"
    assert b.process.returncode == 0  # stopped, not killed
    first = AgentRun.objects.filter(conversation_id=conversation_id).order_by("pk").first()
    assert first.status == "cancelled" and first.error == CANCELLED
    assert len(set(runs_seen)) == 2


TRAVEL = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
WAITING = re.compile(r'id="run-(\d+)-status" data-status="waiting"')
HELD_STEP = re.compile(r'name="step" value="(\d+)"')
ENDED = re.compile(r'id="run-(\d+)-status" data-status="(?!running|waiting)(\w+)"')


def approved_and_run(conversation_id: int) -> Approval:
    """Return the one approval of the conversation's run, checking the run succeeded and
    the approved call ran."""
    run = AgentRun.objects.get(conversation_id=conversation_id)
    approval = run.approvals.get()
    assert run.status == "succeeded" and approval.outcome == "approved"
    assert run.steps.get(pk=approval.step_id).status == "success"
    return approval


def test_a_run_paused_on_a_process_that_stopped_is_resumed_by_the_other(two_servers):
    """The run asks for approval on B, B stops (nothing of the run is in memory), the
    decision is sent to A: A resumes the run from the rows and both tabs' evidence is
    the same (docs/architecture.md, "People in the loop")."""
    a, b = two_servers(AGENT_TOOL_POLICIES="check_bnb_availability=ask",
                       AGENT_SHUTDOWN_GRACE_S="0")  # fmt: skip
    conversation_id, cookie = new_conversation(a)

    async def converse() -> str:
        async with two_tabs(a, b, conversation_id, cookie, TRAVEL) as (tab_a, _, ws_a):
            await tab_a.wait_for(WAITING, "the run waiting for approval, seen on A")
            step_id = (await tab_a.wait_for(HELD_STEP, "the held call's card on A")).group(1)
            b.process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(b.process.wait, WAIT_S)
            await ws_a.send(json.dumps({"type": "approval", "step": step_id,
                                        "decision": "approve"}))  # fmt: skip
            final = await tab_a.wait_for(ENDED, "the resumed run's end on A")
        return final.group(2)

    assert asyncio.run(converse()) == "succeeded"
    approved_and_run(conversation_id)


SELECTED = re.compile(r'name="_selected_action" value="(\d+)"')
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
APPROVED = re.compile(r'data-approval="approved"[^>]*>.*?by reviewer at', re.S)


def approve_in_admin(server: Server) -> None:
    """Log in to ``server``'s admin as ``reviewer`` and approve the one held call there."""
    with httpx.Client(base_url=server.url, timeout=WAIT_S, follow_redirects=True) as http:
        login = http.get("/admin/login/")
        form = {"username": "reviewer", "password": "pw-reviewer-1", "next": "/admin/",
                "csrfmiddlewaretoken": CSRF.search(login.text).group(1)}  # fmt: skip
        assert http.post("/admin/login/", data=form).url.path == "/admin/"
        listed = http.get("/admin/chat/approval/")
        [selected] = SELECTED.findall(listed.text)
        decided = http.post("/admin/chat/approval/", data={
            "action": "approve_selected", "_selected_action": selected,
            "csrfmiddlewaretoken": CSRF.search(listed.text).group(1),
        })  # fmt: skip
        assert "Approved 1 call" in decided.text, decided.text[-2000:]


def test_a_decision_in_one_process_admin_resumes_the_run_in_the_other(two_servers):
    """The run waits on B, its one tab open there; staff approve the call in A's admin:
    the tab sees the decision and B's socket resumes the run, through Redis. The sweeps
    are ten minutes apart here: nothing else could have moved it."""
    from django.contrib.auth.models import User

    a, b = two_servers(AGENT_TOOL_POLICIES="check_bnb_availability=ask",
                       AGENT_HEARTBEAT_S="600", AGENT_STALE_AFTER_S="1800")  # fmt: skip
    conversation_id, cookie = new_conversation(a)
    User.objects.create_superuser("reviewer", "reviewer@example.com", "pw-reviewer-1")

    async def converse() -> str:
        async with asking(b, conversation_id, cookie, TRAVEL) as tab:
            await tab.wait_for(WAITING, "the run waiting for approval, on B")
            await asyncio.to_thread(approve_in_admin, a)
            await tab.wait_for(APPROVED, "the admin's decision on the card, on B")
            final = await tab.wait_for(ENDED, "the resumed run's end on B")
        return final.group(2)

    assert asyncio.run(converse()) == "succeeded"
    assert approved_and_run(conversation_id).decided_by_name == "reviewer"


def wait_for_status(run_id: int, wanted: str, what: str) -> AgentRun:
    """Poll the run's row until its status is ``wanted`` (nothing else moves it here)."""
    import time

    deadline = time.monotonic() + WAIT_S
    while (run := AgentRun.objects.get(pk=run_id)).status != wanted:
        assert time.monotonic() < deadline, f"{what}: still {run.status} after {WAIT_S:g} s"
        time.sleep(0.05)
    return run


def test_servers_that_start_after_a_decision_resume_the_run_with_no_page_open(two_servers):
    """An operator's morning: the run waited, both servers stopped, staff approved the
    call meanwhile (no server to tell). The servers start and nobody opens a chat page:
    their run owners' sweep, which starts with the process, resumes the run."""
    from django.contrib.auth.models import User

    from agents.approvals import Outcome
    from chat import store

    env = {"AGENT_TOOL_POLICIES": "check_bnb_availability=ask", "AGENT_HEARTBEAT_S": "0.5",
           "AGENT_STALE_AFTER_S": "60", "AGENT_SHUTDOWN_GRACE_S": "0"}  # fmt: skip
    a, b = two_servers(**env)
    conversation_id, cookie = new_conversation(a)

    async def ask() -> None:
        async with asking(b, conversation_id, cookie, TRAVEL) as tab:
            await tab.wait_for(WAITING, "the run waiting for approval, on B")

    asyncio.run(ask())
    for server in (a, b):
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(WAIT_S)
    run = AgentRun.objects.get(conversation_id=conversation_id)
    approval = run.approvals.get()
    store.approval_decide(conversation_id=conversation_id, step_id=approval.step_id,
                          outcome=Outcome.APPROVED, at=run.paused_at,
                          by=User.objects.create_user("reviewer", is_staff=True))  # fmt: skip
    assert AgentRun.objects.get(pk=run.pk).status == "waiting"

    two_servers(**env)  # no request, no socket: only their start
    wait_for_status(run.pk, "succeeded", "the decided run after the servers started")
    approved_and_run(conversation_id)


def test_a_run_whose_process_died_is_marked_interrupted_with_no_page_open(two_servers):
    """B dies mid-run (kill -9: no graceful stop) and its tab closes with it; nobody opens
    the conversation again. A's run owner sweeps from its start, not from a socket: it
    finds B's heartbeat stale and marks the run interrupted."""
    a, b = two_servers(DEMO_TOOL_DELAY_MS="600000", AGENT_TOOL_TIMEOUT_S="900",
                       AGENT_HEARTBEAT_S="0.5", AGENT_STALE_AFTER_S="3")  # fmt: skip
    conversation_id, cookie = new_conversation(a)

    async def ask_then_kill_b() -> None:
        async with asking(b, conversation_id, cookie, EXAMPLES[0]) as tab:
            await tab.wait_for(RUNNING_TOOL_CALL, "a running tool call on B")
            b.process.kill()
            await asyncio.to_thread(b.process.wait, WAIT_S)

    asyncio.run(ask_then_kill_b())
    run = AgentRun.objects.get(conversation_id=conversation_id)
    wait_for_status(run.pk, "interrupted", "the dead process's run, with no page open")
