"""Find the Markdown code in a model's reply, so the text strategies read it as content.

A final answer may hold code that shows the format itself (a ReAct transcript, a JSON
blob, XML tags): "Final Answer: run this:" then a fenced block with an ``Action:`` line.
The text strategies look for their delimiters in :func:`mask_code`'s copy of the reply,
in which every character of code is replaced, and cut the original text at the offsets
they find (the copy has the same length and keeps its line breaks).

Code is what CommonMark calls a fenced code block (https://spec.commonmark.org/0.31.2/,
4.5): a line starting with at least three backticks or tildes (an info string may
follow; after backticks it may hold no backtick), up to a line of the same character at
least as long with nothing else on it, or to the end of the reply (a reply cut by its
token limit keeps its unclosed block as code). Two departures, both because a reply is
not a document: a fence may be indented any amount (code inside a list item of an
answer), and ``breaks`` can name a strategy's own delimiters, each of which ends a line
for fences (``<final_answer>```python``, ``Action Input: ```json``). Inline code spans
(a run of backticks up to the next run of the same length) count too, but only within
one line, so a stray backtick cannot hide the rest of a reply.

Everything here takes time linear in the text: one pass over its lines, and each run of
backticks is paired once.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass

MASK = "\x00"
"""What every character of code except a line break becomes in :func:`mask_code`."""

_OPEN = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)")
_CLOSE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})[ \t\r]*")
_TICKS = re.compile(r"`+")
_NOT_NEWLINE = re.compile(r"[^\n]")


@dataclass(frozen=True)
class Block:
    """One fenced code block: offsets into the text it was found in.

    ``start``: the opening fence line's first character; ``body_start`` and ``body_end``:
    the code between the fence lines; ``end``: past the closing fence (its line break
    not included), or the text's length when the block never closes (``closed`` False).
    ``info``: the info string after the opening fence, stripped (``json``, ``python``).
    """

    start: int
    body_start: int
    body_end: int
    end: int
    closed: bool
    info: str


def _segments(text: str, breaks: re.Pattern[str] | None) -> Iterator[tuple[int, int, bool]]:
    """Yield ``(start, end, is_break)``: the lines of ``text`` cut also around each break.

    A line's ``end`` excludes its line break. Breaks (non-empty matches of ``breaks``)
    must not hold a line break; one that does is ignored.
    """
    tokens = []
    if breaks is not None:
        tokens = [m.span() for m in breaks.finditer(text) if m.end() > m.start()]
        tokens = [(s, e) for s, e in tokens if "\n" not in text[s:e]]
    size, pos, index = len(text), 0, 0
    while pos <= size:
        newline = text.find("\n", pos)
        line_end = size if newline < 0 else newline
        while index < len(tokens) and tokens[index][0] < pos:
            index += 1
        if index < len(tokens) and tokens[index][0] < line_end:
            start, end = tokens[index]
            yield pos, start, False
            yield start, end, True
            pos, index = end, index + 1
            continue
        yield pos, line_end, False
        pos = line_end + 1


def scan(
    text: str, *, breaks: re.Pattern[str] | None = None, inline: bool = True
) -> tuple[list[Block], list[tuple[int, int]]]:
    """Return the fenced blocks of ``text`` and the spans of all its code, in order.

    The spans are ``(start, end)`` offsets: each block from its opening fence to its
    end, and (with ``inline``) each inline code span, backticks included. ``breaks``: a
    pattern of the strategy's delimiters, each a line of its own for fences (see the
    module docstring).
    """
    blocks: list[Block] = []
    spans: list[tuple[int, int]] = []
    if "`" not in text and "~~~" not in text:  # no code: skip the pass over its lines
        return blocks, spans
    fence: tuple[str, int, int, int, str] | None = None  # char, length, start, body, info
    # Inline spans are paired over a whole line when no fence touches it, so a delimiter
    # inside one (`</final_answer>` shown in an answer) stays code: the line's segments
    # (cut around breaks) wait in ``line`` until the line ends.
    line: list[tuple[int, int]] = []
    line_plain = True
    line_start = 0

    def end_line() -> None:
        if inline and line:
            if line_plain:
                spans.extend(_inline_spans(text, line_start, line[-1][1]))
            else:
                for seg_start, seg_end in line:
                    spans.extend(_inline_spans(text, seg_start, seg_end))
        line.clear()

    for start, end, is_break in _segments(text, breaks):
        if start == 0 or text[start - 1] == "\n":
            end_line()
            line_plain, line_start = True, start
        if fence is not None:
            line_plain = False
            closing = None if is_break else _CLOSE.fullmatch(text, start, end)
            char, length, opened, body, info = fence
            if closing and closing["fence"][0] == char and len(closing["fence"]) >= length:
                blocks.append(Block(opened, body, start, end, True, info))
                spans.append((opened, end))
                fence = None
            continue
        if is_break:
            line.append((start, end))
            continue
        opening = _OPEN.match(text, start, end)
        if opening and not (opening["fence"][0] == "`" and "`" in opening["info"]):
            body = end + 1 if end < len(text) and text[end] == "\n" else end
            info = opening["info"].strip()
            fence = (opening["fence"][0], len(opening["fence"]), start, min(body, len(text)), info)
            line_plain = False
        else:
            line.append((start, end))
    end_line()
    if fence is not None:
        _, _, opened, body, info = fence
        blocks.append(Block(opened, body, len(text), len(text), False, info))
        spans.append((opened, len(text)))
    spans.sort()
    return blocks, spans


def _inline_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Return the inline code spans in ``text[start:end]`` (one line).

    CommonMark 6.1: a run of n backticks opens a span that the next run of exactly n
    closes; a run with no such partner is literal. Runs are queued by length, so each is
    looked at once (a naive search forward from every run is quadratic).
    """
    runs = [m.span() for m in _TICKS.finditer(text, start, end)]
    by_length: defaultdict[int, deque[int]] = defaultdict(deque)
    for i, (s, e) in enumerate(runs):
        by_length[e - s].append(i)
    spans, i = [], 0
    while i < len(runs):
        s, e = runs[i]
        queue = by_length[e - s]
        while queue and queue[0] <= i:
            queue.popleft()
        if queue:
            closer = queue.popleft()
            spans.append((s, runs[closer][1]))
            i = closer + 1
        else:
            i += 1
    return spans


def mask_code(text: str, *, breaks: re.Pattern[str] | None = None, inline: bool = True) -> str:
    """Return ``text`` with every character of code but line breaks replaced by :data:`MASK`.

    Same length as ``text``, so an offset found in the copy cuts the original. See
    :func:`scan` for ``breaks`` and ``inline``.
    """
    _, spans = scan(text, breaks=breaks, inline=inline)
    pieces, pos = [], 0
    for start, end in spans:
        if end <= pos:
            continue
        start = max(start, pos)
        pieces.append(text[pos:start])
        pieces.append(_NOT_NEWLINE.sub(MASK, text[start:end]))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def sole_block(text: str, *, breaks: re.Pattern[str] | None = None) -> Block | None:
    """Return the fenced block that is the whole of ``text`` (white space aside), else None.

    A model that wraps its whole reply in a fence (```` ``` ```` ... ```` ``` ````, or
    an opening fence and no close) meant the format inside it, not code in an answer.
    """
    blocks, _ = scan(text, breaks=breaks, inline=False)
    if len(blocks) != 1:
        return None
    block = blocks[0]
    if text[: block.start].strip() or text[block.end :].strip():
        return None
    return block
