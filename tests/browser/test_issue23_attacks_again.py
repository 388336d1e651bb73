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


# Stream a long table into a live element as the socket would: a piece of the text
# appended to its hidden source and htmx's "wsAfterMessage" every 10 ms, for ``seconds``;
# then wait for the renders to settle. Returns the share of the time the page's main
# thread was busy in long tasks (over 50 ms) while it streamed, and the rows shown.
STREAM_A_TABLE = """async ({rows, seconds}) => {
    const lines = ['| # | city | note |', '|---|---|---|'];
    for (let n = 0; n < rows; n++) lines.push(`| ${n} | Suzhou ${n} | a note on row ${n} |`);
    const text = 'A table:\\n\\n' + lines.join('\\n') + '\\n\\nDone.';
    const box = document.getElementById('messages');
    box.insertAdjacentHTML('beforeend', '<div class="turn-text markdown" id="step-9-live" ' +
        'data-markdown-from="step-9-text"></div><div id="step-9-text" hidden></div>');
    const source = document.getElementById('step-9-text');
    let busy = 0;
    new PerformanceObserver(list => {
        for (const task of list.getEntries()) busy += task.duration;
    }).observe({type: 'longtask'});
    const sleep = ms => new Promise(done => setTimeout(done, ms));
    const pieces = Math.round(seconds * 100), size = Math.ceil(text.length / pieces);
    const started = performance.now();
    for (let at = 0; at < text.length; at += size) {
        source.append(text.slice(at, at + size));
        document.dispatchEvent(new CustomEvent('htmx:wsAfterMessage'));
        await sleep(10);
    }
    const elapsed = performance.now() - started;
    const share = busy / elapsed;
    const live = document.getElementById('step-9-live');
    for (let n = 0; n < 200 && live.querySelectorAll('tr').length < rows + 1; n++) await sleep(50);
    return {share, rows: live.querySelectorAll('tbody tr').length};
}"""


def test_a_long_table_streaming_leaves_the_page_usable(live_app, browser_page):
    """Found: the live render parses, sanitizes and lays out the whole answer again on
    every frame a delta arrives in, so its cost grows with the answer: a 1,500-row table
    streamed from a model kept the main thread busy 19 s of its 27 (frames of 700 ms),
    Stop, typing and scrolling frozen with it. Renders are now spaced by their own cost
    (at most a quarter of the main thread); the last delta still renders."""
    browser_page.goto(live_app.url + "/")
    browser_page.wait_for_selector("#connection[data-state=open]")

    streamed = browser_page.evaluate(STREAM_A_TABLE, {"rows": 1500, "seconds": 8})

    assert streamed["rows"] == 1500  # the whole table, once the deltas stop
    assert streamed["share"] < 0.5, streamed


# The page's socket sends each frame a second late (a slow uplink): the frame has left the
# composer (htmx's wsAfterSend) well before the server reads it.
SLOW_UPLINK = """(() => {
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) { setTimeout(() => send.call(this, data), 1000); };
})()"""


def test_another_tabs_message_accepted_leaves_this_tabs_text_to_be_refused_or_sent(
    fake_provider, start_app, browser_page
):
    """Found: the server tells every tab that a message was accepted, and each tab that
    had a message of its own on the way emptied its composer on hearing it. Two tabs
    sending at once while the queue had one place left: the first was queued, the
    second tab's composer emptied, then its message was refused (the queue full) and its
    text was gone. The notice names the message it accepts (its client_id)."""
    from tests.browser.test_queue import QUESTION, send

    provider = fake_provider("ok+hold,ok")
    app = start_app(env={**provider.env, "CHAT_MAX_QUEUED": "1"})
    first = browser_page
    first.goto(app.url + "/")
    first.wait_for_selector("#connection[data-state=open]")
    send(first, QUESTION)
    first.wait_for_selector(".run-status[data-status=running]")
    second = first.context.new_page()
    second.add_init_script(SLOW_UPLINK)
    second.goto(first.url)
    second.wait_for_selector("#connection[data-state=open]")
    kept = "A careful question typed in the second tab, which must not be lost"

    send(second, kept)  # leaves now, read by the server a second later
    send(first, "Queued from the first tab")
    first.wait_for_selector("#queued-messages .queued-text:text-is('Queued from the first tab')")
    second.wait_for_selector("#chat-error.visible:has-text('the most a chat may queue')")

    assert second.input_value("#composer-input") == kept
    assert first.input_value("#composer-input") == ""
    provider.release()
