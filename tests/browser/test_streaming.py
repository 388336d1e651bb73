"""A streaming answer in headless Chromium: rendered as Markdown while it streams, in the
style it ends in, with nothing live from the model's HTML, and no jump when it ends.

The fake provider (scripts/fake_provider.py) streams a Markdown answer and holds it
halfway until the test releases it, so the page is looked at mid-stream by construction.
"""

from __future__ import annotations

import pytest

from chat.markdown import render_markdown
from scripts.fake_provider import held_text
from tests.browser.conftest import ARTIFACTS
from tests.browser.test_accessibility import assert_accessible

pytestmark = pytest.mark.browser

LIVE = ".turn[data-status=running] [data-markdown-from]"

# What the model's HTML would do if it ever ran: set window.__pwned.
NOTHING_LIVE = """() => ({
    pwned: window.__pwned === undefined ? null : window.__pwned,
    scripts: document.querySelectorAll('#messages script').length,
    images: document.querySelectorAll('#messages img').length,
    handlers: [...document.querySelectorAll('#messages *')].filter(
        e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
    javascript_links: document.querySelectorAll('#messages a[href^="javascript" i]').length,
})"""

# What a text's look is made of: its size, colour, box and spacing.
STYLE = """e => { const s = getComputedStyle(e); return [s.fontSize, s.color, s.backgroundColor,
    s.borderTopWidth, s.borderTopColor, s.paddingLeft, s.paddingTop, s.lineHeight]; }"""


def start_streaming(fake_provider, start_app, page, script: str = "markdown+hold"):
    """Open a chat on the fake provider and send a question; return the provider."""
    provider = fake_provider(script, word_delay_ms=5)
    app = start_app(env=provider.env)
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", "Plan a day in Suzhou")
    page.press("#composer-input", "Enter")
    return provider


def test_an_answer_renders_as_markdown_while_it_streams_and_its_html_is_never_live(
    fake_provider, start_app, browser_page
):
    page = browser_page
    provider = start_streaming(fake_provider, start_app, page)
    # Held halfway: the list, the bold, the code block and the hostile HTML have come.
    page.wait_for_function(
        "sel => { const e = document.querySelector(sel);"
        " return e && e.textContent.includes('quiet after dark'); }",
        arg=LIVE,
    )
    live = page.locator(LIVE)
    assert live.locator("strong").inner_text() == "the plan"
    assert live.locator("li").all_inner_texts() == [
        "Morning: the Humble Administrator's Garden", "Afternoon: Pingjiang Road",
    ]  # fmt: skip
    assert live.locator("pre code").inner_text().strip() == "total = 17 * 23"
    # The model's HTML shows as the text it is; the link it wrote is no link.
    assert "<script>window.__pwned = 1</script>" in live.inner_text()
    assert live.locator("a").count() == 0
    assert page.evaluate(NOTHING_LIVE) == {
        "pwned": None, "scripts": 0, "images": 0, "handlers": 0, "javascript_links": 0,
    }  # fmt: skip
    # The escaped source the deltas go to is kept, hidden; the reader sees the render.
    source_id = live.get_attribute("data-markdown-from")
    assert not page.locator(f"#{source_id}").is_visible()
    assert "**the plan**" in page.locator(f"#{source_id}").text_content()
    # In the answer's style already: its box, its size, its colour.
    style = live.evaluate(STYLE)
    page.screenshot(path=str(ARTIFACTS / "browser-streaming-markdown.png"), full_page=True)
    assert_accessible(page, "an answer rendered as Markdown as it streams")
    height = live.evaluate("e => e.getBoundingClientRect().height")
    turn_id = page.locator(".turn[data-status=running]").get_attribute("id")

    provider.release()
    page.wait_for_selector(f"#{turn_id}[data-status=success]")
    answer = page.locator(f"#{turn_id}-answer")
    assert answer.evaluate(STYLE) == style
    # The final render holds the whole answer: it only grows, never shrinks or jumps.
    final_height = answer.evaluate("e => e.getBoundingClientRect().height")
    assert final_height >= height - 2
    assert answer.locator("strong").inner_text() == "the plan"
    assert page.evaluate(NOTHING_LIVE)["pwned"] is None


# Markdown whose live render must equal the server's (chat/markdown.py), tag for tag.
SAMPLES = [
    "**bold**, *em*, ~~struck~~ and `code`\nwith a line break",
    "- one\n- two\n\n3. three\n4. four",
    "```js\nalert(1)\n```",
    "| left | centre | right |\n|:--|:-:|--:|\n| a | b | c |",
    '[ok](https://example.com "title") [rel](/local) <https://auto.example> '
    "[bad](javascript:alert(1)) [data](data:text/html,<b>x</b>) [mail](mailto:a@b.c)",
    "<script>alert(1)</script><img src=x onerror=alert(1)> ![img](https://x.example/i.png)",
    "> quoted\n\n# Title\n\n---\n\nafter \u202eevil\u202c text",
]


def assert_live_renders_as_the_server(page, samples: list[str]) -> None:
    """Once the ``markdown+hold`` stream holds, put each of ``samples`` in the streaming
    answer's source, as a whole-text snapshot from the server would, and check the live
    render equals ``render_markdown``'s, tag for tag, and that nothing in them ran."""
    page.wait_for_function(
        "sel => { const e = document.querySelector(sel); return e && e.textContent; }",
        arg=LIVE,
    )
    source_id = page.locator(LIVE).get_attribute("data-markdown-from")
    # Held: no delta comes after this (nor a whole-text re-send, which rides on a delta),
    # so the text put in below stays until its render. Before it, the stream could replace
    # that text and its render never come (seen on a loaded machine: a 300 s time-out).
    page.wait_for_function(
        "([id, held]) => document.getElementById(id).textContent.trimEnd() === held",
        arg=[source_id, held_text("markdown").rstrip()],
    )
    for sample in samples:
        shown = page.evaluate(
            # Rendered once the live element holds this text (markdown-live.js spaces
            # its renders by their cost, so not always in the next frame).
            """([id, text]) => new Promise(resolve => {
                document.getElementById(id).textContent = text;
                document.dispatchEvent(new CustomEvent('htmx:wsAfterMessage'));
                const live = document.querySelector('[data-markdown-from="' + id + '"]');
                const done = () => live._markdownSource === text
                    ? resolve(live.innerHTML) : requestAnimationFrame(done);
                requestAnimationFrame(done);
            })""",
            [source_id, sample],
        )
        expected = page.evaluate(
            "html => { const d = document.createElement('div'); d.innerHTML = html;"
            " return d.innerHTML; }",
            render_markdown(sample),
        )
        assert shown == expected, sample
    assert page.evaluate(NOTHING_LIVE)["pwned"] is None


def test_the_live_render_equals_the_servers_render(fake_provider, start_app, browser_page):
    provider = start_streaming(fake_provider, start_app, browser_page)
    assert_live_renders_as_the_server(browser_page, SAMPLES)
    provider.release()


@pytest.mark.parametrize("how", ["hover", "focus", "scrolled"])
def test_cards_fold_when_the_answer_starts_without_moving_the_card_the_reader_is_on(
    fake_provider, start_app, browser_page, how
):
    # Three earlier answers give the page room to scroll; then a turn asks for the weather
    # (held for approval, so the test can settle the reader on a card first) and the
    # calculator (runs at once), and the answer after them holds halfway.
    provider = fake_provider("long,long,long,tools,markdown+hold", word_delay_ms=1)
    app = start_app(env={**provider.env, "AGENT_TOOL_POLICIES": "weather_forecast=ask"})
    page = browser_page
    page.set_viewport_size({"width": 1000, "height": 560})
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    for number in range(3):
        page.fill("#composer-input", f"Question {number}")
        page.press("#composer-input", "Enter")
        page.wait_for_function(
            "n => document.querySelectorAll('.run-status[data-status=succeeded]').length === n",
            arg=number + 1,
        )
    page.fill("#composer-input", "Weather in Suzhou and 17*23?")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".tool-card[data-tool=weather_forecast][data-status=pending]")
    calculator = page.locator(".tool-card[data-tool=calculator][data-status=success]")
    calculator.wait_for()
    weather = page.locator(".tool-card[data-tool=weather_forecast]")
    assert weather.evaluate("c => c.open") and calculator.evaluate("c => c.open")

    # The reader is on the calculator's result: the pointer over it, the focus in it, or
    # (pointer elsewhere) scrolled up from the newest text so that it tops the view.
    calculator.locator("summary").scroll_into_view_if_needed()
    if how == "hover":
        calculator.locator("pre.result").hover()
    elif how == "focus":
        calculator.locator("summary").focus()
    else:
        # Room below, so that the page is not following the bottom (as with a longer run).
        page.evaluate(
            "() => { document.getElementById('messages').style.paddingBottom = '2000px'; }"
        )
        calculator.evaluate("c => c.scrollIntoView({block: 'start'})")
        page.mouse.move(5, 300)  # over the conversation list
    top = calculator.evaluate("c => c.getBoundingClientRect().top")
    # Approve from the page's own form, without moving the pointer or the focus.
    page.evaluate(
        "() => { const f = document.querySelector('[data-approval-form]');"
        " f.requestSubmit(f.querySelector('button.approve')); }"
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-markdown-from]')]"
        ".some(e => e.textContent.includes('the plan'))"
    )
    # The weather card above it folded; the card the reader is on stayed in place, and
    # open when they hold it.
    assert not weather.evaluate("c => c.open")
    assert calculator.evaluate("c => c.open") is (how != "scrolled")
    assert abs(calculator.evaluate("c => c.getBoundingClientRect().top") - top) < 2
    # The sentence before the calls ended in the style the answer streams in: one box.
    preamble = page.locator(".run").last.locator(".turn[data-iteration='1'] .turn-text")
    streaming = page.locator(".turn[data-status=running] [data-markdown-from]")
    assert "look up the weather" in preamble.inner_text()
    assert preamble.evaluate(STYLE) == streaming.evaluate(STYLE)
    provider.release()


def test_times_that_say_so_far_count_live_and_a_turn_waits_for_its_first_token_by_name(
    fake_provider, start_app, browser_page
):
    # The first turn holds mid-sentence; then its tool calls take an hour.
    provider = fake_provider("tools+hold", word_delay_ms=1)
    app = start_app(tool_delay_ms=3_600_000, env=provider.env)
    page = browser_page
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.fill("#composer-input", "Weather in Suzhou and 17*23?")
    page.press("#composer-input", "Enter")

    # The held turn's row says it is streaming (its text came), and gives no time to first
    # token until one is measured; the summary's "so far" counts on with no redraw.
    flag = page.locator(".tl-row.running.kind-model_turn .tl-flag")
    flag.filter(has_text="streaming").wait_for(state="attached")
    assert "first token" not in page.locator(".tl-row.running").text_content()
    counter = page.locator(".tl-summary [data-so-far-ms]")
    shown = counter.text_content()
    page.wait_for_function("([e, t]) => e.textContent !== t", arg=[counter.element_handle(), shown])

    # The tool calls run: each card's "so far" counts on.
    provider.release()
    running = page.locator(".tool-card[data-status=running] .pending [data-so-far-ms]")
    running.first.wait_for()
    shown = running.first.text_content()
    page.wait_for_function(
        "([e, t]) => e.textContent !== t", arg=[running.first.element_handle(), shown]
    )
    assert running.first.text_content().endswith((" ms", " s"))
    assert (
        page.locator(".tool-card[data-status=running] .pending")
        .first.inner_text()
        .endswith(" so far")
    )
