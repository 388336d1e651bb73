"""The stack's floor for one of ``bench/load.py``'s visitors: the same work with no code of ours.

Served by ``bench/load.py --app floor`` as ``bench.floor_asgi:application``, under
``bench.floor_settings`` (the project's settings with Django's ``startproject``
middleware and this module as the URLconf). A visitor of the load benchmark gets from it
what it gets from the app, through Django and Channels as they come:

- ``GET /``: a new visitor is given a guest key in its session and sent round the cookie
  check (``/?welcome=1``), which stores a new conversation row and redirects to
  ``/c/<id>/``; that page reads the row (the session's own) and renders a template;
- ``/ws/chat/<id>/`` (Channels' ``AuthMiddlewareStack`` behind its origin check): the
  socket reads the conversation (the session's own) and joins its group;
- a message: the user message and a running run are stored, and a task in this process
  plays a run of the demo's shape (:data:`RUN_SHAPE`): each step's row stored at its
  start and updated at its end, and :data:`FRAMES_PER_RUN` frames sent through the
  channel layer to the conversation's group, relayed to the socket as they are; then the
  run's row ends as succeeded, the answer is stored, and the last frame carries the final
  status in the markup ``bench/load.py`` reads (``STATUS_RE``).

No model, no agent loop, no recorder, no fragment drawn: what is left is the ORM's
writes an audit trail needs at least, the framework's requests and the frames' relay. Its
CPU per conversation is what a run costs here before anything of ours. The shape's
figures are the demo's as ``bench/load.py`` counted them at 200 conversations on
PostgreSQL + Redis (docs/benchmarks.md, "The stack's floor"): 4.5 steps and 37.6 frames a
run.
"""

from __future__ import annotations

import asyncio
import os
import secrets

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.floor_settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.db import database_sync_to_async  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.http import Http404, HttpRequest, HttpResponse  # noqa: E402
from django.shortcuts import redirect  # noqa: E402
from django.template import engines  # noqa: E402
from django.urls import path  # noqa: E402
from django.utils import timezone  # noqa: E402

from chat.models import AgentRun, AgentStep, Conversation, Message  # noqa: E402

GUEST = "floor_guest"
TOKEN_S = float(os.environ.get("DEMO_TOKEN_DELAY_MS", "15")) / 1000
TOOL_S = float(os.environ.get("DEMO_TOOL_DELAY_MS", "400")) / 1000
# A run of the demo's shape: a model turn that asks for tools, the calls, the answer.
RUN_SHAPE = ("model_turn", "tool_call", "tool_call", "model_turn")
FRAMES_PER_RUN = 38  # the frame with the run, the status line and the rest spread over steps
# Chunks streamed, one per TOKEN_S: with the tools' waits, a run as long as the demo's
# unloaded (3.8 s at 5 conversations).
CHUNKS_PER_RUN = 190
TEXT = "The weather in Lisbon is sunny, 22 degrees. " * 4
PAGE = engines["django"].from_string(
    "<!doctype html><html><head><title>{{ conversation.title|default:'New chat' }}</title>"
    '</head><body><main data-ws="/ws/chat/{{ conversation.pk }}/">'
    "<h1>{{ conversation.title|default:'New chat' }}</h1><form><textarea name=content>"
    "</textarea><button>Send</button></form></main></body></html>"
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


def _owned(session: object, conversation_id: int) -> bool:
    guest = session.get(GUEST, "") if session is not None else ""  # type: ignore[attr-defined]
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


def _frame(run_id: int, n: int, body: str) -> str:
    """A frame about as long as the app's (a step card, a delta)."""
    return f'<div id="run-{run_id}-part-{n}" hx-swap-oob="beforeend">{body}</div>'


class FloorConsumer(AsyncWebsocketConsumer):
    """Join the conversation's group; store a message's run and play it (one task)."""

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
        run_id = await database_sync_to_async(_store_message)(self.conversation_id, text_data or "")
        self.run = asyncio.get_running_loop().create_task(self.play(run_id))

    async def send_frame(self, text: str) -> None:
        await self.channel_layer.group_send(self.group, {"type": "floor.frame", "text": text})

    async def play(self, run_id: int) -> None:
        sent = 0

        async def frame(body: str) -> None:
            nonlocal sent
            sent += 1
            await self.send_frame(_frame(run_id, sent, body))

        await frame(f'<section class="run" id="run-{run_id}">{TEXT[:80]}</section>')
        # The frames left after each step's start and end frames and the status line.
        text_frames = FRAMES_PER_RUN - 2 - 2 * len(RUN_SHAPE)
        turns = RUN_SHAPE.count("model_turn")
        for ordinal, kind in enumerate(RUN_SHAPE, 1):
            step_id = await database_sync_to_async(_step_start)(run_id, ordinal, kind)
            await frame(f'<article id="step-{step_id}" data-status="running">{kind}</article>')
            if kind == "model_turn":
                chunks, frames = CHUNKS_PER_RUN // turns, text_frames // turns
                for i in range(chunks):
                    await asyncio.sleep(TOKEN_S)
                    if (i + 1) * frames // chunks > i * frames // chunks:  # coalesced
                        await frame(TEXT[i % 40 : i % 40 + 12])
            else:
                await asyncio.sleep(TOOL_S)
            await database_sync_to_async(_step_finish)(step_id, TEXT)
            await frame(f'<article id="step-{step_id}" data-status="success">{TEXT}</article>')
        await database_sync_to_async(_run_finish)(run_id, self.conversation_id, TEXT)
        sent += 1
        await self.send_frame(f'<p id="run-{run_id}-status" data-status="succeeded">done</p>')

    async def floor_frame(self, message: dict[str, str]) -> None:
        await self.send(text_data=message["text"])


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(
                URLRouter([path("ws/chat/<int:conversation_id>/", FloorConsumer.as_asgi())])
            )
        ),
    }
)
