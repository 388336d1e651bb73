"""Fit a request into the model's context window: drop the oldest history first.

Each model turn of a run sends the system message, the earlier exchanges
(:mod:`agents.history`), the new question and the run's scratchpad so far, which grows
every turn; :meth:`ContextWindow.fit` trims the earlier exchanges with langchain-core's
``trim_messages`` (strategy ``"last"``, ``include_system=True``, ``start_on="human"``,
``allow_partial=False``) and then to the start of a whole exchange, so an action is never
sent without its observation nor a ``ToolMessage`` without its call. The system message,
the question and the scratchpad are always kept: when they alone do not fit,
:class:`ContextOverflow` says by how much, and the run ends.

Tokens are counted by :func:`approximate_tokens`, langchain-core's
``count_tokens_approximately`` (about 4 characters a token, 3 tokens a message) plus the
difference for CJK text, which tokenizers split into about one token a character.
Models' own counters are not used: ``ChatOpenAI.get_num_tokens_from_messages`` needs
tiktoken's encoding files, which tiktoken downloads on first use (no network here, and
often none where the app runs), and its OpenAI encodings do not match the tokenizers of
the local servers (llama.cpp, Ollama, vLLM) users point the app at; ``BaseChatModel``'s
default needs a Hugging Face GPT-2 tokenizer, downloaded too. A counter that works offline
can be passed as ``ContextWindow.counter``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool

from agents.history import QUESTION_ID_PREFIX

TokenCounter = Callable[[BaseMessage], int]
"""Tokens one message takes in a request (its text, calls, role and framing)."""

REPLY_FRACTION = 4
"""Without a configured reply size, a quarter of the window (at most
:data:`REPLY_TOKENS_CAP`) is kept free for the reply."""
REPLY_TOKENS_CAP = 4_096

OVERFLOW = (
    "The request does not fit the model's context window: the system prompt, the "
    "question and this run's work so far need about {needed:,} tokens, and the model "
    "has {available:,} for them ({window:,} tokens, {reply:,} of them kept for the "
    "reply). Ask a shorter question, or start a new chat."
)

# Wide scripts whose characters tokenizers split into about one token each (CJK
# ideographs, kana, hangul, full-width forms), where 4 characters a token undercounts 4x.
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u9fff\ua960-\ua97f\uac00-\ud7ff"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]"
)


def approximate_tokens(message: BaseMessage) -> int:
    """Return about how many tokens ``message`` takes.

    ``count_tokens_approximately`` of langchain-core (content, tool calls, role, name:
    4 characters a token; 3 tokens of framing a message), plus three quarters of a token
    for each CJK character (counted one token each, not a quarter) and the reasoning sent
    back in ``additional_kwargs["reasoning_content"]``.
    """
    content = message.content
    calls = (
        repr(message.tool_calls) if isinstance(message, AIMessage) and message.tool_calls else ""
    )
    role = _ROLES.get(type(message))
    if role is not None and type(content) is str:
        # count_tokens_approximately([message])'s arithmetic for the usual message (plain
        # text, a role of its own), without its conversion of the list and with the tool
        # calls' repr made once for both counts (the loop counts every message it adds).
        chars = len(content) + len(calls) + len(role) + len(message.name or "")
        if isinstance(message, ToolMessage):
            chars += len(message.tool_call_id)
        tokens = math.ceil(chars / 4) + 3
    else:
        tokens = count_tokens_approximately([message])
    text = (content if isinstance(content, str) else repr(content)) + calls
    reasoning = message.additional_kwargs.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        text += reasoning
        tokens += math.ceil(len(reasoning) / 4)
    wide = 0 if text.isascii() else len(_WIDE.findall(text))
    return tokens + math.ceil(wide * 3 / 4)


# The roles count_tokens_approximately gives these classes (exactly these: a subclass,
# or a SystemMessage that may carry another role, is counted by the function itself).
_ROLES: dict[type, str] = {AIMessage: "assistant", HumanMessage: "user", ToolMessage: "tool"}


def tools_tokens(tools: Sequence[BaseTool]) -> int:
    """Return about how many tokens the tools' JSON schemas take in a request."""
    if not tools:
        return 0
    return count_tokens_approximately([], tools=list(tools))


class ContextOverflow(Exception):
    """The parts of a request that cannot be dropped do not fit the context window.

    ``needed``: tokens of the system message, the question, the scratchpad and the tool
    schemas; ``available``: the window less the reply's room; ``str()`` says so in plain
    words (:data:`OVERFLOW`).
    """

    def __init__(self, *, needed: int, available: int, window: int, reply: int) -> None:
        self.needed, self.available = needed, available
        super().__init__(
            OVERFLOW.format(needed=needed, available=available, window=window, reply=reply)
        )


@dataclass
class ContextWindow:
    """A model's context window and how to fit a request into it.

    ``max_tokens``: the window, tokens; ``reply_tokens``: kept free for the reply, at
    most half the window (0: a quarter of the window, at most :data:`REPLY_TOKENS_CAP`);
    ``counter``: tokens of one message (default :func:`approximate_tokens`). Counts are
    kept per message object for the life of the instance (one run), so each turn counts
    only its new messages.
    """

    max_tokens: int
    reply_tokens: int = 0
    counter: TokenCounter = approximate_tokens
    _counts: dict[int, tuple[BaseMessage, int]] = field(default_factory=dict, repr=False)
    _prompt: tuple[Sequence[BaseMessage], tuple[int, int, int]] | None = field(
        default=None, repr=False
    )

    @property
    def reply(self) -> int:
        """Return the tokens kept free for the reply."""
        if self.reply_tokens > 0:
            return min(self.reply_tokens, self.max_tokens // 2)
        return min(self.max_tokens // REPLY_FRACTION, REPLY_TOKENS_CAP)

    @property
    def budget(self) -> int:
        """Return the tokens a request may take: the window less the reply's room."""
        return max(0, self.max_tokens - self.reply)

    def count(self, message: BaseMessage) -> int:
        """Return the tokens of ``message`` (counted once per message object)."""
        # The message is kept with its count, so its id() cannot be reused meanwhile.
        cached = self._counts.get(id(message))
        if cached is None:
            cached = self._counts[id(message)] = (message, self.counter(message))
        return cached[1]

    def total(self, messages: Sequence[BaseMessage]) -> int:
        """Return the tokens of ``messages``."""
        return sum(self.count(message) for message in messages)

    def fit(
        self, prompt: Sequence[BaseMessage], scratchpad: Sequence[BaseMessage], *,
        extra_tokens: int = 0, scratchpad_tokens: int | None = None,
    ) -> list[BaseMessage]:  # fmt: skip
        """Return ``prompt + scratchpad`` with the oldest earlier exchanges dropped to fit.

        ``prompt`` is what a strategy built (:meth:`agents.strategies.Strategy.build_prompt`):
        the system message if any, the earlier exchanges, the new question last;
        ``extra_tokens`` what the request adds besides the messages (the tool schemas of
        a native request). The system message, the question and the scratchpad are kept;
        the history is trimmed by ``trim_messages`` and then to the next exchange start
        (a question of :mod:`agents.history`; any ``HumanMessage`` in a history built
        without them). Raises :class:`ContextOverflow` when the kept parts alone exceed
        :attr:`budget`.

        ``scratchpad_tokens``: the scratchpad's tokens when the caller keeps the count
        (the loop counts each new message once as it appends it), else they are counted
        here. The prompt's counts are kept for the next call with the same ``prompt``
        object, so a run's turns do not sum its history again.
        """
        system_tokens, history_tokens, question_tokens = self._prompt_tokens(prompt)
        if scratchpad_tokens is None:
            scratchpad_tokens = self.total(scratchpad)
        tail_tokens = question_tokens + scratchpad_tokens
        fixed = system_tokens + tail_tokens + extra_tokens
        if fixed > self.budget:
            raise ContextOverflow(needed=fixed, available=self.budget,
                                  window=self.max_tokens, reply=self.reply)  # fmt: skip
        if fixed + history_tokens <= self.budget:
            return [*prompt, *scratchpad]
        system = list(prompt[:1]) if prompt and isinstance(prompt[0], SystemMessage) else []
        history = list(prompt[len(system) : -1])
        tail = [*prompt[-1:], *scratchpad]
        kept = trim_messages(
            [*system, *history], max_tokens=self.budget - tail_tokens - extra_tokens,
            token_counter=self.total, strategy="last", include_system=True,
            start_on="human", allow_partial=False,
        )  # fmt: skip
        kept_history = _from_exchange_start(kept[len(system) :], history)
        return [*system, *kept_history, *tail]

    def _prompt_tokens(self, prompt: Sequence[BaseMessage]) -> tuple[int, int, int]:
        """Return the tokens of ``prompt``'s system message, history and question.

        Kept for the last prompt object (held, so its id() is not reused), which the
        loop passes again every turn.
        """
        if self._prompt is not None and self._prompt[0] is prompt:
            return self._prompt[1]
        has_system = bool(prompt) and isinstance(prompt[0], SystemMessage)
        start = 1 if has_system else 0
        parts = (
            self.total(prompt[:start]),
            self.total(prompt[start:-1]),
            self.total(prompt[-1:]) if len(prompt) > start else 0,
        )
        self._prompt = (prompt, parts)
        return parts


def _from_exchange_start(
    kept: list[BaseMessage], history: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """Return ``kept`` from its first message that starts an exchange of ``history``."""
    marked = any(_is_question(message) for message in history)
    for index, message in enumerate(kept):
        if _is_question(message) if marked else isinstance(message, HumanMessage):
            return kept[index:]
    return []


def _is_question(message: Any) -> bool:
    return isinstance(message, HumanMessage) and str(message.id or "").startswith(
        QUESTION_ID_PREFIX
    )
