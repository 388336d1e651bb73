"""What a server taught the app by refusing a request, remembered for its model.

A provider's :class:`~agents.providers.base.Quirks` profile says what the app knows
beforehand; a server behind the generic OpenAI-compatible entry (someone set only
``OPENAI_BASE_URL``) may need more, and says so only by refusing: HTTP 400 "Unsupported
parameter: 'parallel_tool_calls' is not supported with this model." (OpenAI's reasoning
models), "Missing `reasoning_content` field in the assistant message" (DeepSeek's
thinking mode with tools), "Tool call id was call_… but must be a-z, A-Z, 0-9, with a
length of 9." (Mistral). :func:`lesson_from` reads such a refusal into a
:class:`Lesson`; :class:`agents.providers.compatible.CompatibleChatOpenAI` learns it
(:func:`learn`), sends the request again once with it, and every later request to that
server and model is sent with it (:func:`learned`), so a chat whose settings the server
refuses still works and the refusal costs one request per process.

Lessons live in the process (a restart learns again with one refused request) and are
logged at WARNING, once each, naming the server's host, the model and what changed. Reasoning
is learned from the refusal only, never from replies that carry it: DeepSeek's
``deepseek-reasoner`` refused ``reasoning_content`` sent back, while its thinking mode
with tools requires it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from agents.providers.base import MAX_TOKENS_FIELDS
from agents.providers.call_ids import ALNUM9

logger = logging.getLogger(__name__)

OPTIONAL_PARAMETERS = (
    "parallel_tool_calls", "tool_choice", "stop", "stream_options", "temperature",
)  # fmt: skip
"""Request fields the app may send that a request can do without: a server that refuses
one is sent the request without it (a refused ``stream_options`` costs the streamed token
counts; a refused ``parallel_tool_calls`` or ``tool_choice`` leaves how many calls a turn
makes, and whether it must make one, to the model; without ``stop`` a text strategy cuts
the reply at an observation the model wrote itself, as it does anyway)."""
MAX_SERVERS = 256
"""Servers remembered per process, the least recently taught forgotten first."""

_ID_RULE = re.compile(
    r"tool.?call.?id.{0,200}(a-z, ?A-Z, ?0-9|length of 9|alphanumeric)", re.IGNORECASE | re.DOTALL
)
# A refusal of a field as such, not of its value.
_FIELD_REFUSED = re.compile(
    r"unsupported|not supported|does not support|unrecogni[sz]ed|unknown (parameter|field|"
    r"argument)|extra (inputs|fields)|not permitted|not allowed",
    re.IGNORECASE,
)
_REASONING_MISSING = re.compile(
    r"(missing|required|must).{0,80}reasoning_content|reasoning_content.{0,80}(missing|required)",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True)
class Learned:
    """What the app learned about one server and model.

    ``dropped``: request fields no longer sent; ``send_reasoning_content``: assistant
    messages carry their reasoning back; ``tool_call_ids``: the id style to send (""
    for the profile's); ``max_tokens_field``: the output cap's field ("" for the
    profile's).
    """

    dropped: frozenset[str] = frozenset()
    send_reasoning_content: bool = False
    tool_call_ids: str = ""
    max_tokens_field: str = ""


@dataclass(frozen=True)
class Lesson:
    """What a refusal taught: ``changes`` are :class:`Learned` fields to set (a
    ``dropped`` value is a set of field names, added to those dropped before);
    ``reason`` says why, for the log."""

    changes: tuple[tuple[str, Any], ...]
    reason: str

    def applied(self, known: Learned) -> Learned:
        """Return ``known`` with this lesson learned."""
        fields = dict(self.changes)
        if "dropped" in fields:
            fields["dropped"] = known.dropped | fields["dropped"]
        return replace(known, **fields)


ALNUM9_SEEN = Lesson(
    (("tool_call_ids", ALNUM9),),
    "tool-call ids are now sent as nine letters and digits, as the server's own are",
)
"""Learned from a reply whose tool-call ids were all nine letters and digits."""

_lock = threading.Lock()
_learned: OrderedDict[str, Learned] = OrderedDict()


def server_key(base_url: str, model: str) -> str:
    """Return the key lessons are remembered by: the server's base URL and the model."""
    return f"{base_url.rstrip('/')}|{model}"


def learned(key: str) -> Learned:
    """Return what was learned about server ``key`` (nothing yet: an empty :class:`Learned`)."""
    with _lock:
        return _learned.get(key, Learned())


def learn(key: str, lesson: Lesson) -> bool:
    """Remember ``lesson`` for server ``key``; return False when it changes nothing."""
    with _lock:
        known = _learned.get(key, Learned())
        taught = lesson.applied(known)
        if taught == known:
            return False
        _learned[key] = taught
        _learned.move_to_end(key)
        while len(_learned) > MAX_SERVERS:
            _learned.popitem(last=False)
    server, _, model = key.rpartition("|")
    # Only the host: a base URL may carry credentials (https://user:key@host/v1).
    host = urlsplit(server).netloc.rpartition("@")[2] or server
    logger.warning("Learned about the model server at %s (model %r): %s", host, model,
                   lesson.reason)  # fmt: skip
    return True


def forget() -> None:
    """Forget every lesson (tests; a restart does the same)."""
    with _lock:
        _learned.clear()


def lesson_from(exc: BaseException, sent: dict[str, Any]) -> Lesson | None:
    """Return what the refusal ``exc`` of request body ``sent`` teaches, or None.

    Only a refusal of the request as such counts (HTTP 400 or 422). Its words are the
    error body's (OpenAI's ``{"error": {"message", "param"}}``, vLLM's and Mistral's
    ``{"object": "error", "message"}``, a pydantic 422's ``{"detail": [{"loc", "msg"}]}``,
    also nested in a proxy's ``metadata.raw``) and the exception's message.
    """
    if getattr(exc, "status_code", None) not in (400, 422):
        return None
    body = getattr(exc, "body", None)
    words = f"{json.dumps(body, default=str) if body is not None else ''} {exc}"
    if _REASONING_MISSING.search(words) and any(
        m.get("role") == "assistant" for m in sent.get("messages") or []
    ):
        return Lesson(
            (("send_reasoning_content", True),),
            "assistant messages now carry their reasoning_content back "
            "(the server refused a request without it)",
        )
    if _ID_RULE.search(words):
        return Lesson(
            (("tool_call_ids", ALNUM9),),
            "tool-call ids are now sent as nine letters and digits (the server refused other ids)",
        )
    refused = [name for name in _refused_fields(body, words) if name in sent]
    changes: list[tuple[str, Any]] = []
    dropped = frozenset(name for name in refused if name in OPTIONAL_PARAMETERS)
    if dropped:
        changes.append(("dropped", dropped))
    cap = next((name for name in refused if name in MAX_TOKENS_FIELDS), "")
    if cap:
        changes.append(("max_tokens_field", next(f for f in MAX_TOKENS_FIELDS if f != cap)))
    if not changes:
        return None
    said = ", ".join(sorted(dropped))
    reason = "; ".join(
        [*([f"{said} no longer sent"] if dropped else []),
         *([f"the output cap sent as {dict(changes)['max_tokens_field']}"] if cap else [])]
    )  # fmt: skip
    return Lesson(tuple(changes), f"{reason} (the server refused {', '.join(refused)})")


def _refused_fields(body: Any, words: str) -> list[str]:
    """Return the request fields a refusal says the server does not take (any field, not
    only ours), in the order named.

    A field the server does not take, not a value it found wrong ("max_tokens is too
    large" names a field whose value is out of range): pydantic's ``detail`` items of
    ``type`` "extra_forbidden" (or a ``msg`` that says so) name it by their ``loc``;
    OpenAI's ``param`` names it when the words say it is not supported; with neither,
    each field the words quote, when they say so.
    """
    details = list(_details(body))
    if details:
        return [
            str(item["loc"][-1]) for item in details
            if isinstance(item.get("loc"), list) and item["loc"]
            and (item.get("type") == "extra_forbidden"
                 or _FIELD_REFUSED.search(str(item.get("msg", ""))))
        ]  # fmt: skip
    if not _FIELD_REFUSED.search(words):
        return []
    param = _param(body)
    if param:
        return [param]
    return [name for name in (*OPTIONAL_PARAMETERS, *MAX_TOKENS_FIELDS)
            if re.search(rf"\b{name}\b", words)]  # fmt: skip


def _details(body: Any, depth: int = 4) -> Iterator[dict[str, Any]]:
    """Yield the items of every pydantic ``detail`` list in an error body: at its top
    (FastAPI, vLLM), under ``message`` (Mistral) or in a proxy's JSON text (OpenRouter's
    ``metadata.raw``)."""
    if depth <= 0:
        return
    if isinstance(body, str) and body.lstrip().startswith("{"):
        try:
            body = json.loads(body)
        except ValueError:
            return
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, list):
            yield from (item for item in detail if isinstance(item, dict))
        for key, value in body.items():
            if key != "detail":
                yield from _details(value, depth - 1)


def _param(body: Any) -> str:
    """Return the field an error body names (OpenAI's ``param``), or ""."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("param"), str):
            return error["param"]
    return ""
