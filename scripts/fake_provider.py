"""A fake OpenAI-compatible chat server that fails on cue, to watch the app handle faults.

Each request to ``POST /v1/chat/completions`` takes the next step of ``--script`` (the
last one repeats): ``ok`` streams a short text answer, ``long`` a longer one, ``markdown``
one in Markdown with hostile HTML in its first half, ``tools`` a
sentence and two tool calls (the bundled ``weather_forecast`` and ``calculator``),
``429``/``401``/``500``/``503``/... answer with that HTTP status and an OpenAI-style error
body (``Retry-After: 1`` on 429 and 5xx), and ``hang`` never answers (for client
time-outs). A text step ending in ``+hold`` (``long+hold``) stops halfway through its text
until someone posts to ``/release``: each post lets one held stream (the first held
first) go on, so a test decides when the model finishes, not the machine's speed.
``--word-delay-ms`` paces the streamed words. No network beyond 127.0.0.1.

Steps in the shapes real servers send (each a whole reply; see tests/fake_openai.py for
the same shapes in unit tests): ``args-object`` the two tool calls with ``arguments`` as
a JSON object, not a string (some llama.cpp builds); ``repeated-names`` one tool call
whose name is repeated on every chunk (llama.cpp's server); ``reasoning`` the short
answer after ``delta.reasoning_content`` thinking (DeepSeek, vLLM); ``markup`` a
``<tool_call>{...}</tool_call>`` written into the content with ``finish_reason`` "stop"
(a server whose tool parser is off); ``usage-every-chunk`` the short answer with the
running usage totals on every chunk (713 prompt tokens); ``empty`` HTTP 200 and a stream
with no chunk (llama.cpp when the prompt overflows its context); ``drop`` half the short
answer, then the connection breaks off.

    .venv/bin/python scripts/fake_provider.py --port 9999 --script 429,ok
    OPENAI_API_KEY=unused OPENAI_BASE_URL=http://127.0.0.1:9999/v1 OPENAI_MODEL=fake-model make run

``--strict`` makes it as strict as a real server (rules of ``scripts/strict_rules.py``,
comma-separated: ``mistral-ids``, ``unique-ids``, ``reasoning-back``,
``no-parallel-tool-calls``, ``roles``): a request a rule refuses is answered with that
server's own refusal and takes no step of the script; with ``--strict mistral-ids`` the
``tools`` step's calls bear Mistral's nine-character ids.

With ``429,ok`` the first request is rate-limited, the OpenAI client retries after the
``Retry-After`` second and the run succeeds; with ``401`` the run fails with a message
about the API key. The server prints one line per request it answers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

from scripts.strict_rules import RULES, first_refusal

ANSWER = "This answer comes from the fake provider (scripts/fake_provider.py)."
LONG_ANSWER = (
    "Suzhou is mild this week, with light rain on the second day and sun after it. "
    "The product of seventeen and twenty-three is 391. The classical gardens are at "
    "their best in the morning, before the tour groups arrive, and the canals are "
    "quiet after dark. This longer answer comes from the fake provider."
)
# Markdown with hostile HTML before its middle (where ``markdown+hold`` holds) and plain
# prose after it: the page must render the first half as it streams, and nothing live.
MARKDOWN_ANSWER = (
    "Here is **the plan** for Suzhou:\n\n"
    "- Morning: the *Humble Administrator's Garden*\n"
    "- Afternoon: Pingjiang Road\n\n"
    "```python\ntotal = 17 * 23\n```\n\n"
    '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> '
    "[click](javascript:window.__pwned=3)\n\n"
    "The canals are quiet after dark, the gardens are best in the morning before the tour "
    "groups arrive, and the tea houses on Shantang Street stay open late for a last cup. "
    "Take the train from Shanghai, which is quicker than the road at most hours of the day, "
    "and walk or cycle between the sights. This Markdown answer comes from the fake provider."
)
TOOLS_TEXT = "Let me look up the weather in Suzhou and work out 17*23 for you."
TOOL_CALLS = [
    ("call_weather", "weather_forecast", {"town": "Suzhou"}),
    ("call_calculator", "calculator", {"expression": "17*23"}),
]
# How the app's title request (chat.titles.TITLE_PROMPT) starts, and the title it gets.
TITLE_REQUEST = b"Write a title of at most six words for a chat"
FAKE_TITLE = "Fake provider chat"
TEXT_STEPS = {"ok": ANSWER, "long": LONG_ANSWER, "tools": TOOLS_TEXT, "markdown": MARKDOWN_ANSWER}


def _held_at(words: list[str]) -> int:
    """Return the index of the word a ``+hold`` text step holds before: halfway."""
    return len(words) // 2


def held_text(kind: str) -> str:
    """Return the text a ``<kind>+hold`` step (``markdown+hold``) has streamed when it holds."""
    words = TEXT_STEPS[kind].split(" ")
    return "".join(word + " " for word in words[: _held_at(words)])


SHAPE_STEPS = ("args-object", "repeated-names", "reasoning", "markup", "usage-every-chunk",
               "empty", "drop")  # fmt: skip
REASONING = "The user asked something simple; a short answer will do."
MESSAGES = {
    400: "The request was rejected by the fake provider.",
    401: "Incorrect API key provided (fake provider).",
    403: "This key may not use this model (fake provider).",
    404: "The model does not exist (fake provider).",
    429: "Rate limit reached (fake provider).",
    500: "The fake provider had an internal error.",
    503: "The fake provider is overloaded.",
}


def _chunk(
    delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None
) -> bytes:
    event: dict[str, Any] = {
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
        "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }  # fmt: skip
    if usage is not None:
        event["usage"] = usage
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()


def _shape(step: str) -> list[bytes] | None:
    """Return the events of a shape step (None: ``drop``'s first half, then a break)."""
    words = [word + " " for word in ANSWER.split(" ")]
    words[-1] = words[-1].rstrip()
    role = {"role": "assistant", "content": None}
    if step == "args-object":
        return [_chunk(role), *(
            _chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                    "function": {"name": name, "arguments": args}}]})
            for index, (call_id, name, args) in enumerate(TOOL_CALLS)
        ), _chunk({}, finish="tool_calls")]  # fmt: skip
    if step == "repeated-names":
        call_id, name, args = TOOL_CALLS[1]
        text = json.dumps(args)
        pieces = [text[:5], text[5:12], text[12:]]
        return [_chunk(role), *(
            _chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                    "function": {"name": name, "arguments": piece}}]})
            for piece in pieces
        ), _chunk({}, finish="tool_calls")]  # fmt: skip
    if step == "reasoning":
        thinking = [word + " " for word in REASONING.split(" ")]
        return [_chunk({"role": "assistant", "content": None, "reasoning_content": thinking[0]}),
                *(_chunk({"reasoning_content": piece}) for piece in thinking[1:]),
                *(_chunk({"content": word}) for word in words),
                _chunk({}, finish="stop")]  # fmt: skip
    if step == "markup":
        call = json.dumps({"name": TOOL_CALLS[0][1], "arguments": TOOL_CALLS[0][2]})
        return [_chunk({"role": "assistant", "content": "<tool_call>\n"}),
                _chunk({"content": call}), _chunk({"content": "\n</tool_call>"}),
                _chunk({}, finish="stop")]  # fmt: skip
    if step == "usage-every-chunk":

        def usage(count: int) -> dict[str, int]:
            return {"prompt_tokens": 713, "completion_tokens": count,
                    "total_tokens": 713 + count}  # fmt: skip

        return [_chunk({"role": "assistant", "content": words[0]}, usage=usage(1)),
                *(_chunk({"content": word}, usage=usage(count))
                  for count, word in enumerate(words[1:], start=2)),
                _chunk({}, finish="stop", usage=usage(len(words)))]  # fmt: skip
    if step == "empty":
        return []
    return [_chunk({"role": "assistant", "content": ""}),
            *(_chunk({"content": word}) for word in words[: len(words) // 2])]  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    """Answer each chat-completions request with the script's next step."""

    server: FakeProvider

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if TITLE_REQUEST in body:
            # The app's request for a chat's title (chat/titles.py), made in the background
            # after a first run whenever it likes: answered aside, so it takes no step and
            # a script stays the order of the runs' requests its test wrote.
            print("request title", flush=True)
            self._send_title()
            return
        if self.path.rstrip("/").endswith("/release"):
            self.server.holds.release()
            print("release", flush=True)
            self.send_response(204)
            self.end_headers()
            return
        refusal = first_refusal(self.server.rules, json.loads(body or b"{}"))
        if refusal is not None:
            print(f"refused: {refusal.words}", flush=True)
            payload = json.dumps(refusal.body).encode()
            self.send_response(refusal.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        step = self.server.next_step()
        print(f"request {self.server.count}: {step}", flush=True)
        if step == "hang":
            time.sleep(3600)
            return
        if step.isdigit():
            status = int(step)
            body = json.dumps({"error": {"message": MESSAGES.get(status, f"HTTP {status}"),
                                         "type": "fake_error"}}).encode()  # fmt: skip
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            if status == 429 or status >= 500:
                self.send_header("retry-after", "1")
            self.end_headers()
            self.wfile.write(body)
            return
        if step in SHAPE_STEPS:
            self._send_shape(step)
            return
        kind, _, hold = step.partition("+")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(_chunk({"role": "assistant", "content": ""}))
        words = TEXT_STEPS[kind].split(" ")
        for index, word in enumerate(words):
            if hold and index == _held_at(words):
                self.wfile.flush()
                print(f"request {self.server.count}: held", flush=True)
                self.server.holds.acquire()
            if self.server.word_delay_s:
                time.sleep(self.server.word_delay_s)
            self.wfile.write(_chunk({"content": word + (" " if index < len(words) - 1 else "")}))
            self.wfile.flush()
        if kind == "tools":
            for index, (call_id, name, args) in enumerate(self.server.tool_calls):
                self.wfile.write(_chunk({"tool_calls": [
                    {"index": index, "id": call_id, "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}}]}))  # fmt: skip
            self.wfile.write(_chunk({}, finish="tool_calls"))
        else:
            self.wfile.write(_chunk({}, finish="stop"))
        self.wfile.write(b"data: [DONE]\n\n")

    def _send_title(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(_chunk({"role": "assistant", "content": FAKE_TITLE}))
        self.wfile.write(_chunk({}, finish="stop"))
        self.wfile.write(b"data: [DONE]\n\n")

    def _send_shape(self, step: str) -> None:
        """Stream a shape step; ``drop`` ends the connection mid-body (chunked HTTP/1.1)."""
        self.protocol_version = "HTTP/1.1"
        self.close_connection = True
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        events = _shape(step)
        for event in events:
            if self.server.word_delay_s:
                time.sleep(self.server.word_delay_s)
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
        if step == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        done = b"data: [DONE]\n\n"
        self.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")


class FakeProvider(ThreadingHTTPServer):
    """The server: ``script`` is the list of steps; the last one repeats."""

    daemon_threads = True

    def __init__(
        self, port: int, script: list[str], word_delay_s: float = 0.0, strict: str = ""
    ) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.script = script
        self.rules = [RULES[name] for name in parse_strict(strict)]
        # A server with Mistral's rule makes Mistral's ids.
        self.tool_calls = (
            [(f"Mstrl{i:04d}", name, args) for i, (_, name, args) in enumerate(TOOL_CALLS)]
            if "mistral-ids" in strict
            else TOOL_CALLS
        )
        self.word_delay_s = word_delay_s
        self.count = 0
        self.holds = threading.Semaphore(0)
        self._lock = threading.Lock()

    def next_step(self) -> str:
        """Return the step for the next request."""
        with self._lock:
            step = self.script[min(self.count, len(self.script) - 1)]
            self.count += 1
            return step


def parse_script(text: str) -> list[str]:
    """Return the steps of ``--script``: a text step (``ok``, ``long``, ``tools``, each
    maybe with ``+hold``), a shape step (``args-object``, ``reasoning``, ...), ``hang`` or
    an HTTP status (400-599)."""
    steps = [step.strip().lower() for step in text.split(",") if step.strip()]
    known = [*TEXT_STEPS, *(f"{kind}+hold" for kind in TEXT_STEPS), *SHAPE_STEPS]
    for step in steps:
        if step not in (*known, "hang") and not (step.isdigit() and 400 <= int(step) <= 599):
            raise argparse.ArgumentTypeError(
                f"{step!r}: use {', '.join(known)}, hang or an HTTP status 400-599"
            )
    if not steps:
        raise argparse.ArgumentTypeError("the script is empty")
    return steps


def parse_strict(text: str) -> list[str]:
    """Return the rule names of ``--strict`` (comma-separated names of :data:`RULES`)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in RULES]
    if unknown:
        raise argparse.ArgumentTypeError(f"{unknown}: use {', '.join(RULES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--script", type=parse_script, default=["ok"],
                        help="comma-separated steps, e.g. 429,ok (the last repeats)")  # fmt: skip
    parser.add_argument("--word-delay-ms", type=float, default=0.0,
                        help="pause before each streamed word")  # fmt: skip
    parser.add_argument("--strict", default="", type=lambda text: ",".join(parse_strict(text)),
                        help=f"refuse as real servers do: {', '.join(RULES)}")  # fmt: skip
    args = parser.parse_args(argv)
    server = FakeProvider(args.port, args.script, args.word_delay_ms / 1000, args.strict)
    print(f"fake provider on http://127.0.0.1:{args.port}/v1, script {','.join(args.script)}",
          flush=True)  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
