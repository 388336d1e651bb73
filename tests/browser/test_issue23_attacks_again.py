"""Issue 23 attacked a second time in headless Chromium (after
tests/browser/test_issue23_attacks.py): each test names the fault it found."""

from __future__ import annotations

import pytest

from chat import fragments
from chat.recorder import utf16_length

pytestmark = pytest.mark.browser

# What chat.js does with a text delta (htmx parses the socket's HTML, then the page
# appends a delta only where its element's text ends), and with a whole-text snapshot.
APPLY = """fragments => {
    const target = document.getElementById('step-7-text');
    const dropped = [];
    fragments.forEach((html, n) => {
        const template = document.createElement('template');
        template.innerHTML = html;
        const element = template.content.firstElementChild;
        const offset = element.getAttribute('data-offset');
        if (offset === null) { target.textContent = element.textContent; return; }
        if (target.textContent.length !== Number(offset)) { dropped.push(n); return; }
        target.append(...element.childNodes);
    });
    return {dropped, text: target.textContent};
}"""


def test_a_reply_with_crlf_line_ends_streams_every_delta(browser_page):
    """Found: with CRLF line ends (or a lone CR) in a model's reply, the page's text was
    shorter than the server's count after the first CR (the HTML parser makes "\\r\\n"
    one "\\n"), so every later delta was dropped until a snapshot: 5 updates in 4 s
    instead of 34, the answer appearing in jumps."""
    pieces = ["Line one\r", "\nLine two\r\n", "\r\n- item\r", "done 😀", " and\r\nmore"]
    html, offset = [], 0
    for n, piece in enumerate(pieces):
        html.append(fragments.text_delta(7, piece, offset))
        offset += utf16_length(piece)
        if n == 2:  # a snapshot between the deltas, as the recorder sends every 0.75 s
            html.append(fragments.text_replaced(7, "".join(pieces[: n + 1])))
    browser_page.set_content('<div id="step-7-text"></div>')

    shown = browser_page.evaluate(APPLY, html)

    assert shown == {"dropped": [], "text": "".join(pieces)}
