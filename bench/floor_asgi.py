"""The stack's floor for one of ``bench/load.py``'s visitors: the same work with no code of ours.

Served by ``bench/load.py --app floor`` as ``bench.floor_asgi:application``, under
``bench.floor_settings`` (the project's settings, with Django's ``startproject``
middleware and this module as the URLconf). A visitor of the load benchmark gets from it
what it gets from the app, through Django, Channels and Daphne:

- ``GET /``: a new visitor is given a guest key in its session and sent round the cookie
  check (``/?welcome=1``), which stores a new conversation row and redirects to
  ``/c/<id>/``; that page reads the row (the session's own) and renders a template about
  as long as the app's page;
- ``/ws/chat/<id>/`` (Channels' session middleware behind its origin check): the socket
  reads the conversation (the session's own) and joins its group;
- a message (the app's JSON frame): the user message and a running run are stored, and a
  task in this process plays a run of the demo's shape: a model turn, two or three tool
  calls (:data:`TOOL_CALLS`), the answer, each step's row stored at its start and updated
  at its end; :data:`FRAMES_PER_RUN` frames of :data:`FRAME_BYTES` each go through the
  channel layer to the conversation's group and are relayed to the socket as they are,
  over a run as long as the demo's; then the run's row ends as succeeded, the answer is
  stored, and the last frame carries the final status. Frames mark the run and its steps
  in the markup ``bench/load.py`` reads, so the floor's events are checked and timed as
  the app's are.

No model, no agent loop, no recorder, no fragment drawn: what is left is the rows an
audit trail needs at least, the framework's requests and the frames' relay, so its CPU
per conversation estimates what a run costs here before anything of ours. It is lean
where the app is: the middleware chain runs in one thread
(``project.middleware.SyncMiddlewareChain``) and a relayed frame takes no hop to the
database thread (Channels' ``dispatch`` would); its connect, message and close still take
that hop, which the app's consumer skips (three a visitor). The shape is the app's at 200
conversations (docs/benchmarks.md, "The stack's floor"): 4.5 steps, 36-50 frames and
43-46 KiB of them a run, a page of 11.8 KB (the floor's: 12.0 KB). Under lighter load the
app streams in more, smaller frames (143 a run at 3 conversations), so compare the two at
200.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.floor_settings")
django_asgi_app = get_asgi_application()

from channels.db import database_sync_to_async  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from channels.sessions import SessionMiddlewareStack  # noqa: E402
from django.http import Http404, HttpRequest, HttpResponse  # noqa: E402
from django.shortcuts import redirect  # noqa: E402
from django.template import engines  # noqa: E402
from django.urls import path  # noqa: E402
from django.utils import timezone  # noqa: E402

from chat.models import AgentRun, AgentStep, Conversation, Message  # noqa: E402

logger = logging.getLogger(__name__)

GUEST = "floor_guest"
TOKEN_S = float(os.environ.get("DEMO_TOKEN_DELAY_MS", "15")) / 1000
TOOL_S = float(os.environ.get("DEMO_TOOL_DELAY_MS", "400")) / 1000
TOOL_CALLS = (2, 3)  # by the run id's parity: the demo's 4.5 steps a run
FRAMES_PER_RUN = 38
FRAME_BYTES = 1180  # each frame's UTF-8 length: 38 of them, the app's 44 KiB a run
PAGE_BYTES = 11_800  # the filler; with the markup, 12.0 KB (the app's page: 11.8 KB)
# Chunks streamed, one per TOKEN_S: with the tools' waits, a run as long as the demo's
# unloaded (3.8 s at 5 conversations).
CHUNKS_PER_RUN = 190
TEXT = "The weather in Lisbon is sunny, 22 degrees. " * 4
PAGE = engines["django"].from_string(
    "<!doctype html><html><head><title>{{ conversation.title|default:'New chat' }}</title>"
    '</head><body><main data-ws="/ws/chat/{{ conversation.pk }}/">'
    "<h1>{{ conversation.title|default:'New chat' }}</h1><form><textarea name=content>"
    "</textarea><button>Send</button></form><!--"
    + "-" * PAGE_BYTES  # about as long as the app's page: its bytes cost the server too
    + "--></main></body></html>"
)


def _guest(request: HttpRequest) -> str:
    return request.session.get(GUEST, "")


def home(request: HttpRequest) -> HttpResponse:
    """A new visitor gets a guest key and the cookie check; a known one, a conversation."""
    if not _guest(request):
        if request.GET.get("welcome"):
            return HttpResponse("Cookies needed", status=403)
        request.session[GUEST] = secrets.token_urlsafe(24)
        return redirect("/?welcome=1")
    conversation = Conversation.objects.create(guest_key=_guest(request), strategy="tool_calling")
    return redirect(f"/c/{conversation.pk}/")


def page(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The conversation's page, if the session owns it."""
    conversation = Conversation.objects.filter(
        pk=conversation_id, guest_key=_guest(request)
    ).first()
    if conversation is None or not _guest(request):
        raise Http404
    return HttpResponse(PAGE.render({"conversation": conversation}, request))


urlpatterns = [path("", home), path("c/<int:conversation_id>/", page)]


def _owned(session: Any, conversation_id: int) -> bool:
    guest = session.get(GUEST, "") if session is not None else ""
    return bool(guest) and Conversation.objects.filter(pk=conversation_id, guest_key=guest).exists()


def _store_message(conversation_id: int, content: str) -> int:
    now = timezone.now()
    message = Message.objects.create(
        conversation_id=conversation_id, role=Message.Role.USER, content=content
    )
    run = AgentRun.objects.create(
        conversation_id=conversation_id, user_message=message, strategy="tool_calling",
        provider="floor", model_name="floor", started_at=now, heartbeat_at=now,
    )  # fmt: skip
    return run.pk


def _step_start(run_id: int, ordinal: int, kind: str) -> int:
    step = AgentStep.objects.create(
        run_id=run_id, ordinal=ordinal, iteration=ordinal, kind=kind, status="running",
        tool_name="get_weather" if kind == "tool_call" else "", started_at=timezone.now(),
    )  # fmt: skip
    return step.pk


def _step_finish(step_id: int, text: str) -> None:
    AgentStep.objects.filter(pk=step_id).update(
        status="success", text=text, finished_at=timezone.now(), duration_ms=1
    )


def _run_finish(run_id: int, conversation_id: int, answer: str) -> None:
    AgentRun.objects.filter(pk=run_id).update(
        status="succeeded", output=answer, finished_at=timezone.now(), duration_ms=1
    )
    Message.objects.create(conversation_id=conversation_id, role=Message.Role.ASSISTANT,
                           content=answer)  # fmt: skip


def frame(head: str, tail: str = "</div>") -> str:
    """Return ``head`` and ``tail`` with filler between: :data:`FRAME_BYTES` long in all."""
    return head + "x" * max(0, FRAME_BYTES - len(head) - len(tail)) + tail


def shape(run_id: int) -> list[str]:
    """Return the kinds of a run's steps: a model turn, its tool calls, the answer."""
    calls = TOOL_CALLS[run_id % len(TOOL_CALLS)]
    return ["model_turn", *["tool_call"] * calls, "model_turn"]


class FloorConsumer(AsyncWebsocketConsumer):
    """Join the conversation's group; store a message's run and play it (one task)."""

    conversation_id = 0
    group = ""
    run: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        owned = await database_sync_to_async(_owned)(self.scope.get("session"), conversation_id)
        if not owned:
            await self.close()
            return
        self.conversation_id = conversation_id
        self.group = f"floor-{conversation_id}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.run is not None and not self.run.done():
            return
        content = json.loads(text_data or "{}").get("content", "")
        run_id = await database_sync_to_async(_store_message)(self.conversation_id, content)
        self.run = asyncio.get_running_loop().create_task(self.play(run_id))
        self.run.add_done_callback(_log_failure)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Relay a frame with no hop to the database thread, as the app's consumer does."""
        if message["type"] == "floor.frame":
            await self.send(text_data=message["text"])
            return
        await super().dispatch(message)

    async def play(self, run_id: int) -> None:
        """Play a run of :func:`shape` (see the module's docstring)."""
        sent = 0

        async def send(head: str, tail: str = "</div>") -> None:
            nonlocal sent
            sent += 1
            message = {"type": "floor.frame", "text": frame(head, tail)}
            await self.channel_layer.group_send(self.group, message)

        await send(f'<section class="run" id="run-{run_id}">', "</section>")
        kinds = shape(run_id)
        # The frames left after each step's start and end frames and the status line.
        text_frames = FRAMES_PER_RUN - 2 - 2 * len(kinds)
        turns = kinds.count("model_turn")
        for ordinal, kind in enumerate(kinds, 1):
            step_id = await database_sync_to_async(_step_start)(run_id, ordinal, kind)
            await send(f'<article id="step-{step_id}" data-status="running">', "</article>")
            if kind == "model_turn":
                chunks = CHUNKS_PER_RUN // turns
                wanted = text_frames // turns + (ordinal == len(kinds)) * (text_frames % turns)
                for i in range(chunks):
                    await asyncio.sleep(TOKEN_S)
                    if (i + 1) * wanted // chunks > i * wanted // chunks:  # coalesced chunks
                        await send(f'<div id="step-{step_id}-text" data-chunk="{i}">')
            else:
                await asyncio.sleep(TOOL_S)
            await database_sync_to_async(_step_finish)(step_id, TEXT)
            await send(f'<article id="step-{step_id}" data-status="success">', "</article>")
        await database_sync_to_async(_run_finish)(run_id, self.conversation_id, TEXT)
        await send(f'<p id="run-{run_id}-status" data-status="succeeded">', "</p>")
        assert sent == FRAMES_PER_RUN, sent


def _log_failure(task: asyncio.Task[None]) -> None:
    """Log a run that failed: its client would otherwise only time out."""
    if not task.cancelled() and task.exception() is not None:
        logger.error("floor run failed", exc_info=task.exception())


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            SessionMiddlewareStack(
                URLRouter([path("ws/chat/<int:conversation_id>/", FloorConsumer.as_asgi())])
            )
        ),
    }
)
