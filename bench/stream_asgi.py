"""The app as Daphne serves it, plus what only ``bench/stream.py`` needs (never the app's).

Served by ``bench/stream.py`` as ``bench.stream_asgi:application``:

- every run's model is :class:`TimestampModel`: it streams ``STREAM_BENCH_CHUNKS`` chunks,
  one every ``STREAM_BENCH_CHUNK_MS`` ms, each chunk's text the time it was produced
  (``time.time()``, seconds with 6 decimals, and a space), so a client can tell each
  chunk's latency from the text it receives, however the chunks were coalesced;
- ``/ws/bare/<name>/``, a bare Channels consumer: sent any text frame, it produces the
  same chunks on the same schedule in a task and relays each through the channel layer
  (``group_send`` per chunk to a group of its own), sent to the socket as a plain text
  frame; then a frame ``done``. It relays the way ``chat.consumers.ChatConsumer`` does
  (no ``close_old_connections`` hop per message), so what differs is our runtime,
  recorder and publisher;
- everything else goes to ``project.asgi.application``'s websocket router and HTTP app.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path, re_path
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

# isort: off
from project.asgi import application as project_application  # sets Django up first
import chat.catalog  # after: it imports models
# isort: on

CHUNKS = int(os.environ.get("STREAM_BENCH_CHUNKS", "100"))
CHUNK_S = float(os.environ.get("STREAM_BENCH_CHUNK_MS", "15")) / 1000
BARE_CHUNK_TYPE = "bare.chunk"
DONE = "done"


def stamp() -> str:
    """Return a chunk's text: the time now (Unix seconds, 6 decimals) and a space."""
    return f"{time.time():.6f} "


async def stamps() -> AsyncIterator[str]:
    """Yield :data:`CHUNKS` chunk texts, one every :data:`CHUNK_S` seconds (the first too)."""
    for _ in range(CHUNKS):
        await asyncio.sleep(CHUNK_S)
        yield stamp()


class TimestampModel(BaseChatModel):
    """A chat model whose every reply streams :func:`stamps` and asks for no tool."""

    @property
    def _llm_type(self) -> str:
        return "stream-bench"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = "".join(stamp() for _ in range(CHUNKS))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        raise NotImplementedError("the stream bench model streams asynchronously only")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        async for text in stamps():
            yield ChatGenerationChunk(message=AIMessageChunk(content=text))


def bench_model(run: Any = None) -> BaseChatModel:
    """Return the bench's model for any run (replaces ``chat.catalog.chat_model_for``)."""
    return TimestampModel()


chat.catalog.chat_model_for = bench_model  # the seam the tests use too


class BareConsumer(AsyncWebsocketConsumer):
    """Relay :func:`stamps` through the channel layer, one ``group_send`` per chunk."""

    group = ""
    producer: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.group = f"bare-{self.scope['url_route']['kwargs']['name']}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.producer is not None:
            self.producer.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        self.producer = asyncio.get_running_loop().create_task(self.produce())

    async def produce(self) -> None:
        async for text in stamps():
            await self.channel_layer.group_send(self.group, {"type": BARE_CHUNK_TYPE, "text": text})
        await self.channel_layer.group_send(self.group, {"type": BARE_CHUNK_TYPE, "text": DONE})

    async def dispatch(self, message: dict[str, Any]) -> None:
        if message.get("type") == BARE_CHUNK_TYPE:  # as ChatConsumer relays its fragments
            await self.send(text_data=message["text"])
            return
        await super().dispatch(message)


application = ProtocolTypeRouter(
    {
        "http": project_application.application_mapping["http"],
        "websocket": URLRouter(
            [
                path("ws/bare/<str:name>/", BareConsumer.as_asgi()),
                re_path(r"", project_application.application_mapping["websocket"]),
            ]
        ),
    }
)
