"""Streamed text reaches every tab whole and in order: the publisher against a layer whose
sends take a random while, with a tab that opens mid-stream."""

from __future__ import annotations

import re
from html import unescape

import pytest


class RandomLayer:
    """A channel layer whose ``group_send`` yields to the loop a random number of times
    (a slow socket, a busy Redis): no clock, a seeded order of events."""

    def __init__(self, rng) -> None:
        self.rng = rng
        self.sent: list[str] = []

    async def group_send(self, group: str, message: dict) -> None:
        import asyncio

        for _ in range(self.rng.randrange(4)):
            await asyncio.sleep(0)
        self.sent.append(message["html"])


class Page:
    """What chat.js does with the fragments: a delta is appended only where its element's
    text ends (``data-offset``), a whole-text fragment replaces the element."""

    DELTA = re.compile(
        r'beforeend:#step-(\d+)-(text|reasoning)" data-offset="(\d+)">(.*)</div>$', re.S
    )
    WHOLE = re.compile(r'id="step-(\d+)-(text|reasoning)" hx-swap-oob="true">(.*)</div>$', re.S)

    def __init__(self, texts: dict[str, str] | None = None) -> None:
        self.texts = dict(texts or {})

    def apply(self, html: str) -> None:
        if match := self.DELTA.search(html):
            _, target, offset, text = match.groups()
            current = self.texts.get(target, "")
            if len(current.encode("utf-16-le")) // 2 == int(offset):  # as JS counts
                self.texts[target] = self.texts.get(target, "") + unescape(text)
        elif match := self.WHOLE.search(html):
            _, target, text = match.groups()
            self.texts[target] = unescape(text)


@pytest.mark.parametrize("flush_ms", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(40))
async def test_streamed_text_is_never_lost_duplicated_or_reordered(seed, flush_ms):
    import asyncio
    import random

    from agents.events import ReasoningDelta, TextDelta
    from chat import fragments
    from chat.live import GroupPublisher
    from chat.recorder import StreamedText, Update

    rng = random.Random(seed)
    layer = RandomLayer(rng)
    publisher = GroupPublisher(layer, 1, flush_s=flush_ms / 1000)
    truth = {"text": "", "reasoning": ""}
    late_tab_at = rng.randrange(60)
    late_tab: Page | None = None
    pages_at_start = Page()
    for n in range(80):
        target = rng.choice(["text", "reasoning"])
        kind = rng.random()
        if kind < 0.75:
            piece = rng.choice(["a", "b<", "&c", "é", "😀", " ", "d\n"])
            event = (ReasoningDelta if target == "reasoning" else TextDelta)(
                iteration=1, text=piece
            )
            offset = len(truth[target].encode("utf-16-le")) // 2
            truth[target] += piece
            update = Update(event=event, run_id=1, conversation_id=1,
                            streamed=StreamedText(7, piece, offset, target=target))  # fmt: skip
        elif kind < 0.9:
            whole = fragments.text_replaced(7, truth["text"])
            if target == "reasoning":
                whole = fragments.reasoning_replaced(7, truth["reasoning"])
            update = Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1,
                            html=whole, streamed=StreamedText(7, truth[target], whole=True,
                                                              target=target))  # fmt: skip
        else:
            update = Update(event=TextDelta(iteration=1, text=""), run_id=1, conversation_id=1,
                            html="<div id='other'></div>")  # fmt: skip
        await publisher(update)
        if n == late_tab_at:  # a tab opened now is drawn from the text so far
            late_tab = Page(dict(truth))
            late_from = len(layer.sent)
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
    await publisher.drain()

    def utf16(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    for html in layer.sent:
        pages_at_start.apply(html)
        for target in ("text", "reasoning"):  # never ahead of, or apart from, the truth
            assert truth[target].startswith(pages_at_start.texts.get(target, ""))
    assert pages_at_start.texts.get("text", "") == truth["text"]
    assert pages_at_start.texts.get("reasoning", "") == truth["reasoning"]
    assert late_tab is not None
    for html in layer.sent[late_from:]:
        late_tab.apply(html)
        for target in ("text", "reasoning"):
            assert truth[target].startswith(late_tab.texts.get(target, "")), utf16(truth[target])
