"""A fake OpenAI-compatible chat-completions server for tests, and the shapes real servers send.

:class:`FakeOpenAI` is a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) that answers
each ``POST .../chat/completions`` with the next :class:`Reply` of its ``script`` and
keeps every request body in ``requests``, so a test drives the real client (the OpenAI
SDK under langchain-openai's ``ChatOpenAI``) over HTTP with no network. Streams are sent
the way servers send them: server-sent events in a chunked HTTP/1.1 body, ending with
``data: [DONE]``; a reply can instead break the connection off mid-body, end without
``[DONE]``, pause before each event, or never answer.

The builders return the streamed events of one reply in the shapes documented servers
and the ones in public bug reports send: :func:`text_turn`, :func:`tool_call_turn`
(arguments split over chunks, parallel calls), :func:`args_object_turn` (arguments as a
JSON object, some llama.cpp builds), :func:`repeated_name_turn` (the tool name on every
chunk, llama.cpp's server), :func:`reasoning_turn` (``reasoning_content`` or
``reasoning`` deltas, DeepSeek / vLLM / Ollama), :func:`markup_turn` (a tool call written
into the content, a server whose tool parser is off), :func:`usage_every_chunk_turn`
(running usage totals on every chunk). Usage::

    with FakeOpenAI() as server:
        server.script = [Reply(events=tool_call_turn(...)), Reply(events=text_turn("Hi"))]
        model = build_model(ModelConfig(provider="openai", base_url=server.base_url, ...))
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.timing import WAIT_S

MODEL = "fake-model"


@dataclass
class Reply:
    """One answer of the fake server.

    ``status`` 200 streams ``events`` (chunk dicts; a ``str`` is sent as the raw data
    line), then ``data: [DONE]`` unless ``done`` is False; ``drop_after`` breaks the
    connection off after that many events (mid-body, as a crashed server does);
    ``stall_after`` stops sending after that many events, the connection left open until
    the test ends (a server stuck mid-reply); ``delay_s`` pauses before each event.
    Another status answers with an OpenAI-style error body carrying ``message`` (or
    ``body`` as it is, in another server's shape) and ``retry-after-ms: 10``, so the
    client's retries do not wait their usual backoff.
    ``hang`` never answers, until the test ends.
    """

    status: int = 200
    events: list[dict[str, Any] | str] = field(default_factory=list)
    message: str = ""
    done: bool = True
    drop_after: int | None = None
    stall_after: int | None = None
    delay_s: float = 0.0
    hang: bool = False
    body: dict[str, Any] | None = None


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        reply = self.server.take(body)
        self.close_connection = True
        if reply.hang:
            self.server.ended.wait(WAIT_S)
            return
        if reply.status != 200:
            self._error(reply)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        for sent, event in enumerate(reply.events):
            if reply.drop_after is not None and sent >= reply.drop_after:
                self._drop()
                return
            if reply.stall_after is not None and sent >= reply.stall_after:
                self.server.ended.wait(WAIT_S)
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
            self._chunk(f"data: {data}\n\n".encode())
        if reply.drop_after is not None:
            self._drop()
            return
        if reply.done:
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the socket without the chunked body's end: a connection broken off."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _error(self, reply: Reply) -> None:
        body = reply.body or {
            "error": {"message": reply.message, "type": "fake_error", "code": reply.status}
        }
        payload = json.dumps(body).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("retry-after-ms", "10")
        self.send_header("content-length", str(len(payload)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(payload)


class FakeOpenAI(ThreadingHTTPServer):
    """The server: ``script`` (a list of :class:`Reply`, taken in order) and ``requests``.

    Use it as a context manager (it serves on a thread until the block ends). A request
    with the script used up is a test's mistake: it gets HTTP 599 and is kept in
    ``unscripted``.
    """

    daemon_threads = True

    def __init__(self, script: list[Reply] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[Reply] = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.unscripted: list[dict[str, Any]] = []
        self.ended = threading.Event()
        self._lock = threading.Lock()
        # serve_forever notices shutdown() once per poll interval: its default of 0.5 s
        # was half a second of every test that used this server, waiting at its end.
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """Return the server's base URL, ``http://127.0.0.1:<port>/v1``."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def take(self, body: dict[str, Any]) -> Reply:
        """Record a request's ``body``; return the reply the script has for it."""
        with self._lock:
            self.requests.append(body)
            if self.script:
                return self.script.pop(0)
            self.unscripted.append(body)
            return Reply(status=599, message="The test's script has no reply for this request.")

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended.set()
        self.shutdown()
        self.server_close()


# Builders ---------------------------------------------------------------------------


def chunk(
    delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    """Return one ``chat.completion.chunk`` with ``delta`` (and ``finish_reason``, usage)."""
    event: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        event["usage"] = usage
    return event


def usage(prompt: int = 40, completion: int = 8) -> dict[str, int]:
    """Return a ``usage`` object (OpenAI's field names)."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def usage_chunk(prompt: int = 40, completion: int = 8) -> dict[str, Any]:
    """Return the last chunk OpenAI sends with ``stream_options.include_usage``: no choices."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [],
        "usage": usage(prompt, completion),
    }


def text_turn(*pieces: str, with_usage: bool = True) -> list[dict[str, Any]]:
    """Return a streamed text reply in ``pieces``, ``finish_reason`` "stop", then usage."""
    events = [chunk({"role": "assistant", "content": pieces[0]})]
    events += [chunk({"content": piece}) for piece in pieces[1:]]
    events.append(chunk({}, finish="stop"))
    return events + ([usage_chunk()] if with_usage else [])


def split(text: str, parts: int) -> list[str]:
    """Return ``text`` cut into ``parts`` pieces (the last takes what is left)."""
    size = max(1, len(text) // parts)
    pieces = [text[i * size : (i + 1) * size] for i in range(parts - 1)]
    return [*pieces, text[(parts - 1) * size :]]


def tool_call_turn(
    *calls: tuple[str, str, dict[str, Any]], pieces: int = 3, content: str | None = None
) -> list[dict[str, Any]]:
    """Return a reply making ``calls`` (``(id, name, args)``), each one's JSON arguments
    streamed in ``pieces``, calls one after the other (index 0, 1, ...), as OpenAI does."""
    events = [chunk({"role": "assistant", "content": content})]
    for index, (call_id, name, args) in enumerate(calls):
        text = json.dumps(args, ensure_ascii=False)
        events.append(chunk({"tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}))  # fmt: skip
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in split(text, pieces)
        ]
    return [*events, chunk({}, finish="tool_calls"), usage_chunk()]


def args_object_turn(*calls: tuple[str, str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Return a reply making ``calls`` whose ``arguments`` is a JSON object, not a string
    (some llama.cpp builds, ggml-org/llama.cpp#20198)."""
    events = [chunk({"role": "assistant", "content": None})]
    events += [
        chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                               "function": {"name": name, "arguments": args}}]})
        for index, (call_id, name, args) in enumerate(calls)
    ]  # fmt: skip
    return [*events, chunk({}, finish="tool_calls")]


def repeated_name_turn(call_id: str, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """Return one tool call whose name and id are repeated on every chunk of its arguments,
    as llama.cpp's and llama-cpp-python's servers stream them (and no usage)."""
    text = json.dumps(args, ensure_ascii=False)
    events = [chunk({"role": "assistant", "content": None})]
    events += [
        chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                               "function": {"name": name, "arguments": piece}}]})
        for piece in split(text, 4)
    ]  # fmt: skip
    return [*events, chunk({}, finish="tool_calls")]


def reasoning_turn(
    reasoning: list[str],
    then: list[dict[str, Any]],
    *,
    field: str = "reasoning_content",
) -> list[dict[str, Any]]:
    """Return ``reasoning`` streamed as ``delta.<field>`` pieces before the reply ``then``
    (a builder's events): ``reasoning_content`` (DeepSeek, vLLM < 0.9, DashScope) or
    ``reasoning`` (newer vLLM, Ollama, OpenRouter). The role moves to the first chunk."""
    first = chunk({"role": "assistant", "content": None, field: reasoning[0]})
    rest = [chunk({field: piece}) for piece in reasoning[1:]]
    body = [dict(event) for event in then]
    if body and body[0]["choices"]:
        delta = {k: v for k, v in body[0]["choices"][0]["delta"].items() if k != "role"}
        body[0] = chunk(delta)
    return [first, *rest, *body]


def markup_turn(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """Return a tool call written into the content as Hermes/Qwen markup, ``finish_reason``
    "stop" and no ``tool_calls``: a server whose tool parser is off."""
    markup = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return text_turn("<tool_call>\n", markup, "\n</tool_call>")


def usage_every_chunk_turn(*pieces: str, prompt: int = 713) -> list[dict[str, Any]]:
    """Return a text reply whose every chunk carries the running usage totals (some
    servers do): the reply's figures are the last ones, never their sum."""
    events = []
    for count, piece in enumerate(pieces, start=1):
        delta = {"role": "assistant", "content": piece} if count == 1 else {"content": piece}
        events.append(chunk(delta, usage=usage(prompt, count)))
    events.append(chunk({}, finish="stop", usage=usage(prompt, len(pieces))))
    return events
