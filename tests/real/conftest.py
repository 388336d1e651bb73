"""A real local model for tests/real: one llama-cpp-python server per session, the app wired to it.

The server is started with ``scripts/local_model.py`` (``.venv-real``, ``make install-real``)
on a free loopback port; the session waits for ``GET /v1/models`` and stops the server at
the end, whatever happened. Each test points ``settings.AGENT_MODEL`` at it, as
``make run-local`` points the app, with small limits so a model that rambles or loops
ends its run quickly: every outcome must still be a defined one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts import local_model
from scripts.serving import ServerDidNotStart, free_port, stop_session

PROVIDER = "llamacpp"
# Small enough for a 135M model on 2 cores to finish each reply in a second or two; large
# enough for an answer or one tool call in any strategy's format.
MAX_TOKENS = 96
MAX_ITERATIONS = 3
# Nothing arrives while the server reads a prompt: a text strategy's first prompt (2,000-4,300
# tokens) takes the model, on one thread of a busy 2-core machine, one to two minutes. Only
# a safety net that turns a hang into a failure, as tests/timing.py's WAIT_S.
FRAME_WAIT_S = 600.0


@dataclasses.dataclass(frozen=True)
class LlamaServer:
    """A running model server: its OpenAI-compatible base URL and its log file."""

    base_url: str
    log: Path


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """Start the local model server once for the session; fail with its log if it cannot."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        process = local_model.start_server(port, log)
    except ServerDidNotStart as exc:
        pytest.fail(str(exc))
    try:
        try:
            models = local_model.wait_ready(process, base_url, log)
        except ServerDidNotStart as exc:
            pytest.fail(str(exc))
        assert local_model.MODEL_ALIAS in models, models
        yield LlamaServer(base_url=base_url, log=log)
    finally:
        stop_session(process)


@pytest.fixture(autouse=True)
def real_model(settings, llama_server: LlamaServer) -> LlamaServer:
    """Point the app at the local server with the ``llamacpp`` provider and small limits."""
    settings.AGENT_MODEL = dataclasses.replace(
        settings.AGENT_MODEL,
        provider=PROVIDER,
        model=local_model.MODEL_ALIAS,
        base_url=llama_server.base_url,
        api_key="unused",
        temperature=0.0,  # greedy decoding: the same replies on every run
        max_tokens=MAX_TOKENS,
        max_retries=0,  # a local server's failure is not a passing rate limit
        timeout_s=FRAME_WAIT_S,
    )
    settings.AGENT_MAX_ITERATIONS = MAX_ITERATIONS
    settings.AGENT_MODEL_TIMEOUT_S = FRAME_WAIT_S
    settings.DEMO_TOOL_DELAY_MS = 0
    settings.CHAT_RUNS_PER_MINUTE = 0
    return llama_server
