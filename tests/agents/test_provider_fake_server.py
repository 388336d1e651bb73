"""scripts/fake_provider.py's shape steps, driven through the real client: what the
browser tests and a person trying the app get from ``--script args-object,ok`` and the
like is the shape its docstring names, and the client handles it."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage

from agents.model_errors import DROPPED, EMPTY_REPLY, describe_model_error
from agents.providers import ModelConfig, build_model

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fake_provider.py"
spec = importlib.util.spec_from_file_location("fake_provider", SCRIPT)
assert spec is not None and spec.loader is not None
fake_provider = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake_provider)


@pytest.fixture
def serve() -> Iterator:
    servers = []

    def start(script: str):
        server = fake_provider.FakeProvider(0, fake_provider.parse_script(script))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        host, port = server.server_address[:2]
        config = ModelConfig(provider="llamacpp", base_url=f"http://{host}:{port}/v1",
                             max_retries=0, timeout_s=30)  # fmt: skip
        return build_model(config)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


async def reply(model) -> AIMessageChunk:
    merged = None
    async for chunk in model.astream([HumanMessage("hi")]):
        merged = chunk if merged is None else merged + chunk
    assert isinstance(merged, AIMessageChunk)
    return merged


async def test_args_object_and_repeated_names_steps_give_whole_tool_calls(serve):
    model = serve("args-object,repeated-names")
    calls = (await reply(model)).tool_calls
    assert [(c["name"], c["args"]) for c in calls] == [
        ("weather_forecast", {"town": "Suzhou"}), ("calculator", {"expression": "17*23"}),
    ]  # fmt: skip
    calls = (await reply(model)).tool_calls
    assert [(c["name"], c["args"], c["id"]) for c in calls] == [
        ("calculator", {"expression": "17*23"}, "call_calculator")
    ]


async def test_reasoning_markup_and_usage_steps_have_their_shapes(serve):
    model = serve("reasoning,markup,usage-every-chunk")
    message = await reply(model)
    assert message.additional_kwargs["reasoning_content"] == fake_provider.REASONING + " "
    assert message.content == fake_provider.ANSWER
    message = await reply(model)
    assert message.content.startswith("<tool_call>") and not message.tool_calls
    markup = message.content.removeprefix("<tool_call>").removesuffix("</tool_call>")
    assert json.loads(markup) == {"name": "weather_forecast", "arguments": {"town": "Suzhou"}}
    message = await reply(model)
    assert message.content == fake_provider.ANSWER
    assert message.usage_metadata is not None  # on every chunk: summed until part B's fix


@pytest.mark.parametrize(("step", "expected"), [("empty", EMPTY_REPLY), ("drop", DROPPED)])
async def test_empty_and_drop_steps_fail_with_their_reasons(serve, step, expected):
    model = serve(step)
    with pytest.raises(Exception) as caught:
        await reply(model)
    assert describe_model_error(caught.value) == expected


def test_an_unknown_step_names_the_shape_steps():
    with pytest.raises(Exception, match="args-object"):
        fake_provider.parse_script("args_object")
