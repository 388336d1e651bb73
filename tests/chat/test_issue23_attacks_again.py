"""Issue 23 attacked a second time (after tests/chat/test_issue23_attacks.py): each test
names the fault it found."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from chat import fragments, store
from chat.models import Conversation, StepKind

pytestmark = pytest.mark.django_db

# A carriage return written raw into HTML: the browser's parser turns "\r\n" and "\r" into
# "\n" before anything else, so the element's text is shorter than the server counted.
RAW_CR = re.compile("\r")


def test_streamed_text_writes_carriage_returns_so_the_page_keeps_them():
    """Found: a model that writes CRLF line ends (or a lone CR) streamed in jumps every
    0.75 s instead of word by word. The server counts each delta's offset in the text as
    sent, but the browser's HTML parser turns "\\r\\n" into "\\n", so after the first CR
    every delta's data-offset was past the element's text and chat.js dropped it until
    the next whole-text snapshot (which, written raw too, was short again). A CR is
    written as "&#13;", which the parser keeps as a CR."""
    pieces = ["Line one\r", "\nLine two\r\n", "\r\n- item\rdone"]
    offset, html = 0, []
    for piece in pieces:
        html.append(fragments.text_delta(7, piece, offset))
        html.append(fragments.text_delta(7, piece, offset, target="reasoning"))
        offset += len(piece)
    text = "".join(pieces)
    html += [fragments.text_replaced(7, text), fragments.reasoning_replaced(7, text)]
    # The page's own render of a step still streaming (a page opened mid-run).
    conversation = Conversation.objects.create()
    run = store.run_start(conversation_id=conversation.pk, content="Q?", provider="demo",
                          model_name="demo-scripted", started_at=timezone.now())  # fmt: skip
    turn = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=1,
                            started_at=timezone.now())  # fmt: skip
    store.step_save_text(step_id=turn.pk, text=text, reasoning=text)
    turn.refresh_from_db()
    html.append(fragments.step_appended(turn))

    for fragment in html:
        assert not RAW_CR.search(fragment), fragment
        assert "&#13;" in fragment
