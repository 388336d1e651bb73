"""Reasoning ("thinking") text: where models put it, and how it is kept out of the answer.

Three places, all read by :class:`agents.model_turn.ModelTurn`:

- ``additional_kwargs["reasoning_content"]`` of each streamed chunk: DeepSeek's thinking
  mode and vLLM's reasoning parsers send a ``reasoning_content`` field beside
  ``content`` (langchain-deepseek's ``ChatDeepSeek`` puts it there; so does our
  OpenAI-compatible client for servers that send it);
- reasoning content blocks in a chunk whose ``content`` is a list (langchain-core's
  standard ``{"type": "reasoning", "reasoning": ...}``, Anthropic's ``{"type":
  "thinking", "thinking": ...}``), which ``.text`` already leaves out;
- markup inline in the text: ``<think>...</think>`` (Qwen3, DeepSeek-R1 and its
  distills, SmolLM3) or ``<thinking>...</thinking>``, in any letter case, also a reply
  with only the closing tag, because the chat template opened it in the prompt
  (DeepSeek-R1's and Qwen3's thinking templates end the prompt with ``<think>\\n``).

:class:`ThinkSplitter` separates the inline kind while the text streams, tags split
across chunks included, in time linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

OPEN_TAGS = ("<think>", "<thinking>")
CLOSE_TAGS = ("</think>", "</thinking>")
_TAGS = OPEN_TAGS + CLOSE_TAGS
_LONGEST = max(len(tag) for tag in _TAGS)

PieceKind = Literal["text", "reasoning", "moved"]
"""``text``: answer text; ``reasoning``: thinking; ``moved``: text already given out as
``text`` that a closing tag without an opening one showed to be thinking."""

# Where the splitter is in the reply.
_START = "start"  # only white space so far: an opening tag may come, or a lone closing one
_TEXT_OPEN = "text_open"  # text given out, no tag seen yet: a lone closing tag moves it
_REASONING = "reasoning"  # inside <think>...
_AFTER = "after"  # after </think>: white space before the answer is dropped
_TEXT = "text"  # plain text from here on: tags are text


def reasoning_of_chunk(chunk: Any) -> str:
    """Return the reasoning a streamed chunk carries outside its text ("" for none).

    ``chunk`` is an ``AIMessageChunk`` (or ``AIMessage``): its
    ``additional_kwargs["reasoning_content"]`` and its content blocks of type
    ``reasoning`` / ``thinking``.
    """
    parts: list[str] = []
    extra = getattr(chunk, "additional_kwargs", None) or {}
    value = extra.get("reasoning_content")
    if isinstance(value, str):
        parts.append(value)
    content = getattr(chunk, "content", "")
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind in ("reasoning", "thinking") and isinstance(block.get(kind), str):
                parts.append(block[kind])
    return "".join(parts)


class ThinkSplitter:
    """Split streamed reply text into answer text and inline ``<think>`` reasoning.

    Feed it each text piece with :meth:`feed`, then call :meth:`finish`; each returns
    ``(kind, text)`` pieces (see :data:`PieceKind`) in order, empty pieces left out.
    ``text`` and ``reasoning`` hold the totals so far. Only a reply's first thinking
    block counts, and only at its start (after white space): a ``<think>`` later in an
    answer makes the rest of the reply plain text, tags and all. A closing tag before any
    other tag makes everything before it thinking (``moved``). A reply with an unclosed
    ``<think>`` is all thinking. Each character is looked at a bounded number of times
    (a tag is at most :data:`_LONGEST` characters, the most ever held back).
    """

    def __init__(self) -> None:
        self.state = _START
        self._held = ""  # a possible tag's beginning, or the white space of _START
        self._held_space: list[str] = []  # white space pieces while in _START
        self._text_parts: list[str] = []
        self._reasoning_parts: list[str] = []

    def feed(self, piece: str) -> list[tuple[PieceKind, str]]:
        """Return the pieces ``piece`` completes (a tag split across calls waits)."""
        out: list[tuple[PieceKind, str]] = []
        if self.state == _TEXT:
            self._emit(out, "text", piece)
            return self._done(out)
        if self.state in (_START, _AFTER) and not piece.strip():
            # White space before a tag or the answer: wait (kept in parts, not re-joined).
            if self.state == _START:
                self._held_space.append(piece)
            return out
        buf = "".join(self._held_space) + self._held + piece
        self._held = ""
        self._held_space = []
        pos = 0
        while pos < len(buf):
            if self.state == _TEXT:
                self._emit(out, "text", buf[pos:])
                pos = len(buf)
                break
            if self.state in (_START, _AFTER):
                stripped = len(buf) - len(buf[pos:].lstrip())
                if stripped == len(buf):  # all white space so far: wait and see
                    self._held = buf[pos:] if self.state == _START else ""
                    return self._done(out)
                if self.state == _AFTER:
                    pos = stripped
                    self.state = _TEXT
                    continue
                lead = buf[pos:stripped]
                tag = _tag_at(buf, stripped)
                if tag is None and _could_be_tag(buf, stripped):
                    self._held = buf[pos:]
                    return self._done(out)
                if tag in OPEN_TAGS:
                    self.state = _REASONING
                    pos = stripped + len(tag)
                    continue
                if tag in CLOSE_TAGS:  # thinking opened by the prompt, all of it white space
                    self.state = _AFTER
                    pos = stripped + len(tag)
                    continue
                self.state = _TEXT_OPEN
                self._emit(out, "text", lead)
                pos = stripped
                continue
            # _TEXT_OPEN or _REASONING: look for the next tag.
            lt = buf.find("<", pos)
            if lt < 0:
                self._emit(out, self._kind(), buf[pos:])
                pos = len(buf)
                break
            tag = _tag_at(buf, lt)
            if tag is None and _could_be_tag(buf, lt):
                self._emit(out, self._kind(), buf[pos:lt])
                self._held = buf[lt:]
                return self._done(out)
            if tag in CLOSE_TAGS:
                if self.state == _TEXT_OPEN:
                    self._emit(out, "text", buf[pos:lt])
                    self._move_text(out)
                else:
                    self._emit(out, "reasoning", buf[pos:lt])
                self.state = _AFTER
                pos = lt + len(tag)
                continue
            if tag in OPEN_TAGS and self.state == _TEXT_OPEN:
                # An opening tag inside the answer: the reply is plain text, tags and all.
                self._emit(out, "text", buf[pos:])
                self.state = _TEXT
                pos = len(buf)
                break
            self._emit(out, self._kind(), buf[pos : lt + 1])
            pos = lt + 1
        return self._done(out)

    def finish(self) -> list[tuple[PieceKind, str]]:
        """Return what was held back at the end of the reply (never a whole tag)."""
        out: list[tuple[PieceKind, str]] = []
        held = "".join(self._held_space) + self._held
        self._held, self._held_space = "", []
        if held:
            self._emit(out, "reasoning" if self.state == _REASONING else "text", held)
        return self._done(out)

    @property
    def text(self) -> str:
        """Return the answer text so far."""
        return "".join(self._text_parts)

    @property
    def reasoning(self) -> str:
        """Return the reasoning so far."""
        return "".join(self._reasoning_parts)

    def _kind(self) -> PieceKind:
        return "reasoning" if self.state == _REASONING else "text"

    def _emit(self, out: list[tuple[PieceKind, str]], kind: PieceKind, text: str) -> None:
        if not text:
            return
        out.append((kind, text))
        (self._reasoning_parts if kind == "reasoning" else self._text_parts).append(text)

    def _move_text(self, out: list[tuple[PieceKind, str]]) -> None:
        moved = "".join(self._text_parts)
        self._text_parts = []
        # What this call gave out as text is not given out at all; earlier calls' is moved.
        given_now = "".join(text for kind, text in out if kind == "text")
        out[:] = [piece for piece in out if piece[0] != "text"]
        self._reasoning_parts.append(moved)
        earlier = moved[: len(moved) - len(given_now)]
        if earlier:
            out.append(("moved", earlier))
        if given_now:
            out.append(("reasoning", given_now))

    def _done(self, out: list[tuple[PieceKind, str]]) -> list[tuple[PieceKind, str]]:
        """Return ``out`` with neighbouring pieces of one kind joined (one join each)."""
        merged: list[tuple[PieceKind, str]] = []
        run: list[str] = []
        for index, (kind, text) in enumerate(out):
            run.append(text)
            if index + 1 == len(out) or out[index + 1][0] != kind:
                merged.append((kind, "".join(run)))
                run = []
        return merged


def split_think(text: str) -> tuple[str, str]:
    """Return ``(reasoning, answer_text)`` of a whole reply, both stripped.

    The same rules as :class:`ThinkSplitter`; a reply without markup comes back as
    ``("", text)`` unchanged.
    """
    if "<" not in text:  # every tag starts with "<": no markup, nothing to split
        return "", text
    splitter = ThinkSplitter()
    splitter.feed(text)
    splitter.finish()
    if not splitter.reasoning and splitter.state in (_START, _TEXT_OPEN, _TEXT):
        return "", text
    return splitter.reasoning.strip(), splitter.text.strip()


def join_reasoning(parts: Iterable[str]) -> str:
    """Return the non-empty reasoning ``parts``, stripped, one blank line between them."""
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def _tag_at(buf: str, i: int) -> str | None:
    """Return the tag that starts at ``buf[i]``, if one does, in any case (``<THINK>``).

    The tag is returned as :data:`_TAGS` spells it (lower case); its length is the same.
    """
    if buf.startswith("<", i):
        head = buf[i : i + _LONGEST].lower()
        for tag in _TAGS:
            if head.startswith(tag):
                return tag
    return None


def _could_be_tag(buf: str, i: int) -> bool:
    """Return True if ``buf[i:]`` is the beginning of a tag cut off by the buffer's end."""
    if len(buf) - i >= _LONGEST:  # checked first: slicing the rest would copy it all
        return False
    rest = buf[i:].lower()
    return any(tag.startswith(rest) for tag in _TAGS)
