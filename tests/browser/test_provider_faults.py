"""A real model provider failing, in headless Chromium: scripts/fake_provider.py serves the
OpenAI protocol on 127.0.0.1 and fails on cue; the app talks to it through ChatOpenAI."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def open_chat(start_app, page, env: dict[str, str]):
    """Start the app with ``env``, open a new chat in ``page`` and wait for its socket."""
    app = start_app(env=env)
    page.goto(app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    return page


def ask(page, question: str) -> None:
    page.fill("#composer-input", question)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(".run-status:not([data-status=running])")


@pytest.mark.parametrize(
    ("script", "status", "says"),
    [
        ("429,ok", "succeeded", "This answer comes from the fake provider"),
        ("401", "failed", "The model provider refused the credentials (HTTP 401)"),
        ("503", "failed", "server error (HTTP 503) and still did after retries"),
    ],
)
def test_provider_faults_are_retried_or_explained(fake_provider, start_app, browser_page,
                                                  script, status, says):  # fmt: skip
    page = open_chat(start_app, browser_page,
                     {**fake_provider(script).env, "OPENAI_MAX_RETRIES": "1"})  # fmt: skip
    assert "fake-model" in page.inner_text("#model-badge")
    ask(page, "Hello?")

    run = page.locator(".run").first
    assert run.locator(".run-status").get_attribute("data-status") == status
    text = run.inner_text()
    assert says in text
    for raw in ("fake_error", "Error code", "Traceback", "{"):
        assert raw not in text  # no payload, no stack in the page
    page.screenshot(path=str(ARTIFACTS / f"browser-provider-{script.replace(',', '-')}.png"),
                    full_page=True)  # fmt: skip


def test_reasoning_is_folded_as_thinking_and_never_the_answer(fake_provider, start_app,
                                                             browser_page):  # fmt: skip
    # DeepSeek's and vLLM's reasoning_content, streamed before the answer.
    page = open_chat(start_app, browser_page, fake_provider("reasoning").env)
    ask(page, "Hello?")

    run = page.locator(".run").first
    assert run.locator(".run-status").get_attribute("data-status") == "succeeded"
    thinking = run.locator("details.reasoning").first
    assert thinking.get_attribute("open") is None  # folded
    assert "a short answer will do" in thinking.locator(".reasoning-text").text_content()
    assert "a short answer will do" not in answer_text(run)
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    folded = page.locator(".run").first.locator("details.reasoning").first
    assert "a short answer will do" in folded.locator(".reasoning-text").text_content()
    page.screenshot(path=str(ARTIFACTS / "browser-provider-reasoning.png"), full_page=True)


@pytest.mark.parametrize(
    ("provider", "script", "first_step"),
    [
        # llama.cpp's profile reads tool calls written into the text as tool calls...
        ("llamacpp", "markup,ok", "success"),
        # ...OpenAI's does not: a format error the model is told about, never the answer.
        ("openai", "markup,ok", "error"),
        # Arguments sent as a JSON object instead of a string, for every provider.
        ("openai", "args-object,ok", "success"),
    ],
)
def test_tool_calls_in_the_shapes_real_servers_send_reach_the_tools(
    fake_provider, start_app, browser_page, provider, script, first_step
):
    env = {**fake_provider(script).env, "AGENT_PROVIDER": provider}
    page = open_chat(start_app, browser_page, env)
    ask(page, "Weather in Suzhou?")

    run = page.locator(".run").first
    assert run.locator(".run-status").get_attribute("data-status") == "succeeded"
    cards = run.locator(".tool-card")
    assert cards.count() >= 1
    assert cards.first.get_attribute("data-status") == first_step
    assert "<tool_call>" not in answer_text(run)
    if first_step == "success":  # read as a call: the markup is no text of the turn
        assert "<tool_call>" not in run.locator("[data-kind=model_turn]").first.inner_text()
    name = f"browser-provider-{provider}-{script.replace(',', '-')}.png"
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)
    # At the end of each model turn the live page showed what a reload shows.
    live = run.locator(".steps").inner_text()
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert page.locator(".run").first.locator(".steps").inner_text() == live


def answer_text(run) -> str:
    """Return the text of the run's last model turn (its answer), thinking left out."""
    return run.locator("[data-kind=model_turn]").last.locator(".turn-text").first.inner_text()
