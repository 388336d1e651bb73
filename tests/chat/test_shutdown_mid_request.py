"""A graceful stop (chat.owner) that lands mid-request leaves no run going, and
Daphne exits with sockets open and page requests in flight.

On SIGTERM the graceful stop takes the process's run tasks, then Daphne cancels every
consumer. A consumer cancelled after it stored a message's run but before it started the
run's task (while it publishes the run's first fragment, or while the store call is in
the ORM thread: a queue of about 0.5 s p95 under load, docs/benchmarks.md) leaves a run
row ``running`` that no task will end: the conversation refuses new messages ("still
working") until another process's sweep, 61-70 s later, which is what the graceful stop
was built to avoid. The consumer now ends such a run as cancelled itself.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from langchain_core.messages import AIMessage

from chat import owner
from chat.models import AgentRun
from chat.runs import CANCELLED
from tests.chat.test_consumer import connect, make_conversation
from tests.timing import WAIT_S

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_consumer_killed_between_storing_a_run_and_starting_it_leaves_no_run_going(
    scripted_model, monkeypatch
):
    scripted_model.script = [AIMessage("Hello.")]
    reached = asyncio.Event()

    async def stuck_publish(self, html: str) -> None:
        if not reached.is_set():
            reached.set()  # the run row is stored; its task is not started yet
            await asyncio.Event().wait()

    monkeypatch.setattr("chat.live.GroupPublisher.publish", stuck_publish)
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "Hi"}))
    await asyncio.wait_for(reached.wait(), WAIT_S)

    # SIGTERM: the graceful stop looks at the run tasks, then Daphne kills the consumers.
    stopping = asyncio.ensure_future(owner.current().finish_runs(grace_s=0))
    communicator.future.cancel()
    await asyncio.wait_for(asyncio.gather(communicator.future, return_exceptions=True), WAIT_S)
    await asyncio.wait_for(stopping, WAIT_S)

    statuses = await database_sync_to_async(
        lambda: list(AgentRun.objects.values_list("status", flat=True))
    )()
    assert statuses and "running" not in statuses


async def test_a_consumer_killed_while_its_run_is_being_stored_leaves_no_run_going(
    scripted_model, monkeypatch
):
    import threading

    from chat import consumers

    scripted_model.script = [AIMessage("Hello.")]
    in_thread, go_on = threading.Event(), threading.Event()
    real = consumers._accept_message

    def slow_accept(**kwargs):
        in_thread.set()
        go_on.wait(WAIT_S)  # the ORM thread's queue, under load
        return real(**kwargs)

    monkeypatch.setattr("chat.consumers._accept_message", slow_accept)
    user, conversation = await make_conversation()
    communicator = await connect(conversation.pk, user)
    await communicator.connect()
    await communicator.send_to(text_data=json.dumps({"content": "Hi"}))
    await asyncio.get_running_loop().run_in_executor(None, in_thread.wait, WAIT_S)

    stopping = asyncio.ensure_future(owner.current().finish_runs(grace_s=0))
    communicator.future.cancel()
    await asyncio.sleep(0)  # the cancel reaches the consumer while the store call runs
    go_on.set()
    await asyncio.wait_for(asyncio.gather(communicator.future, return_exceptions=True), WAIT_S)
    await asyncio.wait_for(stopping, WAIT_S)

    statuses = await database_sync_to_async(
        lambda: list(AgentRun.objects.values_list("status", "error"))
    )()
    assert statuses == [("cancelled", CANCELLED)]


def _migrated_env(tmp_path) -> dict[str, str]:
    """Return the environment of a Daphne on a scratch SQLite file, migrated, with the
    in-memory layer and the demo model."""
    import os
    import subprocess
    import sys

    from scripts.serving import ROOT

    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "REDIS_URL": "",
    }
    env.pop("OPENAI_API_KEY", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                   cwd=ROOT, env=env, check=True, timeout=2 * WAIT_S)  # fmt: skip
    return env


@pytest.mark.xfail(
    strict=False,  # the crash is in the collector at exit: most runs, not all (6 of 7)
    reason="Daphne exits with SIGSEGV (-11) on SIGTERM whenever a socket is open: CPython "
    "3.11.7 crashes garbage-collecting the in-memory channel layer's pending "
    "asyncio.Queue.get at exit (faulthandler: Garbage-collecting, asyncio/queues.py get; "
    "likely python/cpython#113566); so before the graceful stop too (e00dfa9). Needs a "
    "newer Python or the layer's receives ended before exit",
)
def test_daphne_exits_cleanly_on_sigterm_with_a_socket_open(tmp_path):
    import signal

    import httpx
    from websockets.sync.client import connect as ws_connect

    from scripts.serving import daphne

    env = _migrated_env(tmp_path)
    with daphne(env, timeout_s=2 * WAIT_S, log=tmp_path / "daphne.log") as (process, port):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(follow_redirects=True, timeout=WAIT_S) as http:
            page = http.get(f"{base}/")
            cookie = "; ".join(f"{k}={v}" for k, v in http.cookies.items())
        socket = ws_connect(
            f"ws://127.0.0.1:{port}{page.url.path.replace('/c/', '/ws/chat/')}",
            origin=base, additional_headers={"Cookie": cookie}, open_timeout=WAIT_S,
        )  # fmt: skip
        with socket:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=2 * WAIT_S)
    assert code == 0, (tmp_path / "daphne.log").read_text()[-2000:]


@pytest.mark.xfail(
    # Needs a request in flight at the SIGTERM: 5 of 5 runs, then 1 of 4 once Django's
    # middleware ran sync in the request's thread (849f785, project.middleware).
    strict=False,
    reason="Daphne never exits after SIGTERM with page requests in flight: a request's "
    "thread (WhiteNoise's sync middleware) waits in async_to_sync for the event loop that "
    "has stopped, and interpreter exit joins it for ever (faulthandler: threading._shutdown "
    "in concurrent.futures _python_exit; systemd SIGKILLs after TimeoutStopSec). So "
    "before the graceful stop too (e00dfa9)",
)
def test_daphne_exits_after_sigterm_with_page_requests_in_flight(tmp_path):
    import signal
    import subprocess
    import threading

    import httpx

    from scripts.serving import daphne

    env = _migrated_env(tmp_path)
    answered = threading.Semaphore(0)
    stop = threading.Event()
    with daphne(env, timeout_s=2 * WAIT_S, log=tmp_path / "daphne.log") as (process, port):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(follow_redirects=True, timeout=WAIT_S) as http:
            url = str(http.get(f"{base}/").url)
            cookies = dict(http.cookies.items())

        def load_pages() -> None:  # a reader reloading, as many do on a busy site
            with httpx.Client(cookies=cookies, timeout=WAIT_S) as client:
                while not stop.is_set():
                    try:
                        client.get(url)
                        answered.release()
                    except httpx.HTTPError:
                        pass

        readers = [threading.Thread(target=load_pages, daemon=True) for _ in range(3)]
        for reader in readers:
            reader.start()
        for _ in range(30):  # the pages are being served
            assert answered.acquire(timeout=WAIT_S)
        process.send_signal(signal.SIGTERM)
        try:  # an idle server exits in well under a second; this one never does
            code = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            code = None
            process.kill()  # not SIGTERM again and 10 s more, as leaving daphne() would
        stop.set()
    assert code is not None, "Daphne did not exit after SIGTERM"
