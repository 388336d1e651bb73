"""What strict model servers refuse, in each server's own words: rules for fake servers.

Each rule takes a chat-completions request body and returns the :class:`Refusal` the
real server answers it with, or None. The refusals are the ones public bug reports show:

- :func:`mistral_ids`: Mistral's API (and vLLM with a Mistral tokenizer) takes only
  tool-call ids of nine letters and digits, HTTP 400 ``{"object": "error", "message":
  "Tool call id was call_98660886 but must be a-z, A-Z, 0-9, with a length of 9."}``.
- :func:`unique_ids`: templates that refuse an id used twice in one request.
- :func:`reasoning_back`: DeepSeek's thinking mode with tools, HTTP 400 "Missing
  `reasoning_content` field in the assistant message at message index N".
- :func:`refuses`: a parameter the model does not take, in OpenAI's body
  (``"param"``, ``"code": "unsupported_parameter"``) or a pydantic 422's
  (``{"detail": [{"loc": ["body", name], "msg": "Extra inputs are not permitted"}]}``).
- :func:`role_order`: vLLM's and Mistral's templates, "Conversation roles must
  alternate" (:func:`agents.history.role_order_problems`).

:data:`RULES` names them for ``scripts/fake_provider.py --strict``; tests use them
through ``tests/strict_servers.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from langchain_core.messages import convert_to_messages

from agents.history import role_order_problems


class Refusal(NamedTuple):
    """An HTTP error answer: its ``status`` and JSON ``body``."""

    status: int
    body: dict[str, Any]

    @property
    def words(self) -> str:
        """Return the refusal's message, wherever the body's shape keeps it."""
        error = self.body.get("error", self.body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        return str(self.body)


Rule = Callable[[dict[str, Any]], Refusal | None]

_ALNUM9 = re.compile(r"[A-Za-z0-9]{9}")


def _openai_error(status: int, message: str, **fields: Any) -> Refusal:
    return Refusal(
        status,
        {"error": {"message": message, "type": "invalid_request_error", "code": status, **fields}},
    )


def _ids(body: dict[str, Any]) -> Iterator[str]:
    """Yield every tool-call id of a request: the calls' and the results'."""
    for message in body.get("messages") or []:
        for call in message.get("tool_calls") or []:
            yield str(call.get("id"))
        if message.get("role") == "tool":
            yield str(message.get("tool_call_id"))


def mistral_ids(body: dict[str, Any]) -> Refusal | None:
    """Refuse an id that is not nine letters and digits, as Mistral does."""
    for call_id in _ids(body):
        if not _ALNUM9.fullmatch(call_id):
            message = f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
            return Refusal(
                400,
                {
                    "object": "error",
                    "message": message,
                    "type": "invalid_request_error",
                    "code": 3280,
                },
            )
    return None


def unique_ids(body: dict[str, Any]) -> Refusal | None:
    """Refuse a call id that two assistant messages of the request share."""
    seen: set[str] = set()
    for message in body.get("messages") or []:
        for call in message.get("tool_calls") or []:
            if call.get("id") in seen:
                return _openai_error(400, f"Duplicate tool call id {call['id']!r}")
            seen.add(call.get("id"))
    return None


def reasoning_back(body: dict[str, Any]) -> Refusal | None:
    """Refuse an assistant message with tool calls and no ``reasoning_content``."""
    for index, message in enumerate(body.get("messages") or []):
        wanted = message.get("role") == "assistant" and message.get("tool_calls")
        if wanted and "reasoning_content" not in message:
            return _openai_error(
                400,
                (
                    f"Missing `reasoning_content` field in the assistant message at message "
                    f"index {index}. For more information, please refer to "
                    "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
                ),
            )
    return None


def refuses(name: str, *, shape: str = "openai") -> Rule:
    """Return a rule refusing a request that carries the field ``name``, in OpenAI's
    words (``shape="openai"``) or a pydantic server's (``"pydantic"``, HTTP 422)."""

    def rule(body: dict[str, Any]) -> Refusal | None:
        if name not in body:
            return None
        if shape == "pydantic":
            return Refusal(
                422,
                {
                    "detail": [
                        {
                            "type": "extra_forbidden",
                            "loc": ["body", name],
                            "msg": "Extra inputs are not permitted",
                            "input": body[name],
                        }
                    ]
                },
            )
        return _openai_error(
            400,
            f"Unsupported parameter: '{name}' is not supported with this model.",
            param=name,
            code="unsupported_parameter",
        )

    return rule


def role_order(body: dict[str, Any]) -> Refusal | None:
    """Refuse roles out of order, as vLLM's and Mistral's templates do."""
    problems = role_order_problems(convert_to_messages(body["messages"]))
    if problems:
        return _openai_error(
            400,
            "Conversation roles must alternate "
            f"user/assistant/user/assistant/... ({'; '.join(problems)})",
        )
    return None


RULES: dict[str, Rule] = {
    "mistral-ids": mistral_ids,
    "unique-ids": unique_ids,
    "reasoning-back": reasoning_back,
    "no-parallel-tool-calls": refuses("parallel_tool_calls"),
    "roles": role_order,
}
"""The rules by the names ``scripts/fake_provider.py --strict`` takes."""


def first_refusal(rules: list[Rule], body: dict[str, Any]) -> Refusal | None:
    """Return the first of ``rules``' refusals of ``body``, or None."""
    for rule in rules:
        refusal = rule(body)
        if refusal is not None:
            return refusal
    return None
