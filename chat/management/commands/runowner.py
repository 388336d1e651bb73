"""``python manage.py runowner``: run agents in a process of its own, beside the web.

With ``CHAT_RUN_WORKERS`` on, the web processes (Daphne) serve pages and sockets only
and send each new run's start, and a conversation's next queued message, to the run
owners' group on the channel layer (Redis). This command is such a run owner: a
:class:`chat.owner.RunOwner` in a process with no web server, which claims and runs those
runs, resumes runs whose tool calls were decided, and sweeps (stale runs, expired
approvals, queued messages, runs whose start no owner heard). Start one or more; each
run goes to the first owner to claim it. It is Channels' worker pattern (``runworker``)
for our owner's own channel and group. On SIGTERM or Ctrl-C it stops taking runs, lets
its runs go on for ``AGENT_SHUTDOWN_GRACE_S`` and ends the rest as ``cancelled``
(docs/deploy.md, "Runs in processes of their own").
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chat import owner
from chat.traces import live as telemetry


class Command(BaseCommand):
    help = (
        "Run agents in a process of its own: claim the runs the web processes start "
        "(CHAT_RUN_WORKERS), resume decided runs and sweep, until SIGTERM or Ctrl-C."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.CHAT_RUN_WORKERS:
            raise CommandError(
                "CHAT_RUN_WORKERS is off: the web processes run their own runs, and would "
                "send this process none. Set CHAT_RUN_WORKERS=1 for both (docs/deploy.md)."
            )
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        run_owner = owner.current()
        telemetry.start()
        channel = await run_owner.channel()
        database = settings.DATABASES["default"]
        where = f"{database.get('HOST') or 'local'}/{database['NAME']}"
        self.stdout.write(
            f"Run owner listening on {channel} (group {owner.OWNERS_GROUP}, Redis prefix "
            f"{settings.REDIS_PREFIX!r}, database {where}): the web processes must name the "
            "same DATABASE_URL, REDIS_URL and REDIS_PREFIX."
        )
        self.stdout.flush()
        await stop.wait()
        finished, cut = await run_owner.finish_runs(grace_s=settings.AGENT_SHUTDOWN_GRACE_S)
        await run_owner.close()
        self.stdout.write(f"Run owner stopped: {finished} run(s) finished, {cut} cancelled.")
