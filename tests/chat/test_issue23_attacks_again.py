"""Issue 23 attacked a second time (after tests/chat/test_issue23_attacks.py): each test
names the fault it found."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from chat import fragments, store
from chat.compare import align_steps
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


def test_a_call_made_twice_in_one_run_and_once_in_the_other_is_marked_moved_once():
    """Found: "made it elsewhere" was marked on every lone call whose twin stood alone
    in the other run, however many there were: run A calling x(a=1) twice where run B,
    in another order, called it once said of both of A's calls that B made it
    elsewhere. Each twin now answers for one call on each side."""
    from tests.chat.test_run_comparison_alignment import call, shape, turn

    x = {"a": 1}
    left = (turn(1), call(2, "x", x), call(3, "x", x), call(4, "y"), call(5, "y"),
            turn(6, "A", answer=True))  # fmt: skip
    right = (turn(1), call(2, "y"), call(3, "y"), call(4, "x", x), turn(5, "A", answer=True))

    rows = align_steps(left, right)

    assert shape(rows) == [(1, 1), (2, None), (3, None), (4, 2), (5, 3), (None, 4), (6, 5)]
    assert [row.moved for row in rows] == [False, True, False, False, False, True, False]


def test_a_pasted_snippet_keeps_the_indentation_of_its_first_line():
    """Found: a message was stripped of all surrounding white space, so code pasted from
    inside a function or class lost its first line's indentation and no longer lined up
    with the lines under it (issue 23: "pasted code lost its indentation"). Only blank
    lines before it and white space after it go."""
    from chat.validation import clean_message

    snippet = "    def total(self, rows):\n        return sum(rows)"

    assert clean_message(f"\n  \n{snippet}\n\n  ", max_chars=100) == snippet
    assert clean_message("\t\tx = 1\n\ty = 2\n", max_chars=100) == "\t\tx = 1\n\ty = 2"


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ("**Title:** Three Days in Suzhou", "Three Days in Suzhou"),
        ("## Title: Suzhou Trip", "Suzhou Trip"),
        ("*Title*: Suzhou Trip", "Suzhou Trip"),
        ("Sure! Here is a title:\n\n**Suzhou Garden Trip**", "Suzhou Garden Trip"),
        ("Title:\nSuzhou Garden Trip", "Suzhou Garden Trip"),
        ("**标题：** 苏州园林之旅", "苏州园林之旅"),
        ("Suzhou: Three Days", "Suzhou: Three Days"),  # a colon inside a title stays
    ],
)
def test_a_models_title_in_markdown_or_after_a_preamble_is_cleaned(reply, title):
    """Found: a model that answers in Markdown ("**Title:** Three Days in Suzhou", the
    way many chat models label things) named the chat "Title:** Three Days in Suzhou" in
    the sidebar, and one that wrote a line before the title ("Sure! Here is a title:")
    named it by that line. The label is found inside the Markdown around it, and a line
    that only introduces the next is skipped."""
    from chat.titles import clean_model_title

    assert clean_model_title(reply) == title
