"""What tools return, through the loop: the text the model reads, the blocks and artifact
kept beside it, for every shape a tool may return (agents/tool_output.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, ToolException, tool

from agents.events import RunStatus, StepStatus, ToolCallFinished
from agents.runtime import RunLimits, run
from agents.strategies import get_strategy
from agents.tool_output import (
    MAX_BLOCK_DATA_CHARS,
    NOTHING_RETURNED,
    json_safe,
    stored_artifact,
    stored_blocks,
    view_block,
)
from tests.fakes import ScriptedChatModel, tool_call
from tests.images import png_base64

PNG = png_base64()  # over 8,000 characters of base64
CHART = [
    {"type": "text", "text": "Rainfall in Suzhou, by month:"},
    {"type": "image", "base64": PNG, "mime_type": "image/png"},
]
CHART_NOTE = f"[image: image/png, {len(PNG) * 3 // 4 - PNG[-2:].count('='):,} bytes]"


def returning(value, *, name="probe", **options):
    """Return a tool named ``name`` that returns ``value`` (sync)."""

    def probe(town: str) -> object:
        return value

    return StructuredTool.from_function(probe, name=name, description="Probe.", **options)


async def one_call(tool_, args=None):
    """Run one native call of ``tool_`` and an answer; return (its end event, the
    ToolMessage the model read, the run's end)."""
    model = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[tool_call(tool_.name, args or {"town": "Suzhou"}, "c1")]),
        AIMessage("Done."),
    ])  # fmt: skip
    events = [e async for e in run(model, [tool_], [HumanMessage("q")], limits=RunLimits())]
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    sent = model.prompts[1][-1]
    assert isinstance(sent, ToolMessage) and sent.tool_call_id == "c1"
    assert isinstance(sent.content, str) and sent.content.strip()
    return finished, sent, events[-1]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("Sunny, 18 °C.", "Sunny, 18 °C."),
        (None, NOTHING_RETURNED),
        ("", NOTHING_RETURNED),
        ("  \n", NOTHING_RETURNED),
        ([], NOTHING_RETURNED),
        ({"town": "苏州", "high_c": 18}, '{"town": "苏州", "high_c": 18}'),
        ([1, 2, 3], "[1, 2, 3]"),
        (["first line", "second line"], "first line\nsecond line"),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
    ],
    ids=["str", "None", "empty", "blank", "empty-list", "dict", "list", "strings", "text-blocks"],
)
async def test_each_plain_shape_reaches_the_model_as_text_that_is_never_empty(value, text):
    finished, sent, end = await one_call(returning(value))

    assert finished.status is StepStatus.SUCCESS
    assert (finished.result, finished.observation, sent.content) == (text, text, text)
    assert (finished.blocks, finished.artifact) == ((), None)
    assert end.status is RunStatus.SUCCEEDED


async def test_an_image_block_is_a_note_for_the_model_and_kept_whole_for_the_card():
    finished, sent, _ = await one_call(returning(CHART))

    assert finished.status is StepStatus.SUCCESS
    assert sent.content == f"Rainfall in Suzhou, by month:\n{CHART_NOTE}"
    assert finished.result == finished.observation == sent.content
    assert PNG not in finished.result and PNG[:100] not in sent.content
    assert finished.blocks == tuple(CHART)


async def test_an_openai_image_url_block_with_a_data_url_is_read_the_same():
    block = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    finished, sent, _ = await one_call(returning([block]))

    assert sent.content == CHART_NOTE
    assert finished.blocks == (block,)


async def test_a_remote_image_is_named_by_its_url_and_a_file_by_its_name_and_size():
    blocks = [
        {"type": "image", "url": "https://example.com/map.png"},
        {"type": "file", "base64": "JVBERi0xLjQK", "mime_type": "application/pdf",
         "extras": {"filename": "plan.pdf"}},
    ]  # fmt: skip
    _, sent, _ = await one_call(returning(blocks))

    assert sent.content == (
        "[image: https://example.com/map.png]\n[file: plan.pdf, application/pdf, 9 bytes]"
    )


async def test_blocks_langchain_core_encoded_whole_as_json_are_read_back_as_blocks():
    # An audio block is not in langchain-core's TOOL_MESSAGE_BLOCK_TYPES: the whole list
    # comes back as one JSON string, base64 and all.
    blocks = [{"type": "audio", "base64": PNG, "mime_type": "audio/wav"}, *CHART]
    finished, sent, _ = await one_call(returning(blocks))

    assert PNG[:100] not in sent.content
    assert sent.content.startswith("[audio: audio/wav, ") and sent.content.endswith(CHART_NOTE)
    assert finished.blocks == tuple(blocks)
    _, sent, _ = await one_call(returning([{"type": "hotel", "name": "Inn"}]))
    assert sent.content == '[{"type": "hotel", "name": "Inn"}]'  # data, not blocks


async def test_a_content_and_artifact_tool_keeps_its_artifact_off_the_model():
    @tool(response_format="content_and_artifact")
    def rooms(town: str) -> tuple[str, dict]:
        """Find rooms."""
        return "2 rooms free.", {"listings": [{"id": "sz-1", "price": 430}], "raw": object()}

    finished, sent, _ = await one_call(rooms)

    assert sent.content == finished.result == "2 rooms free."
    assert finished.artifact["listings"] == [{"id": "sz-1", "price": 430}]
    assert finished.artifact["raw"].startswith("<object object at")  # not JSON: as str
    assert sent.artifact is None  # the scratchpad's message carries only the text


async def test_a_tool_that_returns_a_tool_message_gives_its_content_status_and_artifact():
    def answer(town: str) -> ToolMessage:
        return ToolMessage([{"type": "text", "text": "Booked."}], tool_call_id="own-id",
                           artifact={"booking": "BK-42"})  # fmt: skip

    finished, sent, _ = await one_call(
        StructuredTool.from_function(answer, name="book", description="Book.")
    )
    assert (finished.status, sent.content, finished.artifact) == (
        StepStatus.SUCCESS, "Booked.", {"booking": "BK-42"},
    )  # fmt: skip
    assert sent.tool_call_id == "c1"  # paired with the call, not the tool's own id


async def test_a_returned_tool_message_with_status_error_is_an_error_outcome():
    def fail(town: str) -> ToolMessage:
        return ToolMessage("The booking site is down.", tool_call_id="x", status="error")

    finished, sent, _ = await one_call(
        StructuredTool.from_function(fail, name="book", description="Book.")
    )
    assert finished.status is StepStatus.ERROR
    assert (finished.error_type, finished.error) == (
        "ToolException", "ToolException: The booking site is down."
    )  # fmt: skip
    assert (sent.status, sent.content) == ("error", "The booking site is down.")


async def test_a_handle_tool_error_string_is_an_error_not_a_success():
    def flaky(town: str) -> str:
        raise ToolException("upstream answered 503")

    for handler, text in (
        (True, "upstream answered 503"),
        ("The forecast service is down; try later.", "The forecast service is down; try later."),
        (lambda exc: f"Failed: {exc}", "Failed: upstream answered 503"),
    ):
        probe = StructuredTool.from_function(flaky, name="forecast", description="F.",
                                             handle_tool_error=handler)  # fmt: skip
        finished, sent, end = await one_call(probe)
        assert finished.status is StepStatus.ERROR
        assert finished.error_type == "ToolException"
        assert finished.error == f"ToolException: {text}"
        assert (sent.status, sent.content, finished.result) == ("error", text, text)
        assert end.status is RunStatus.SUCCEEDED


async def test_a_handled_validation_error_is_named_so():
    probe = returning("ok", handle_validation_error="Give a town as text.")
    finished, sent, _ = await one_call(probe, {"town": ["not", "text"]})

    assert (finished.status, finished.error_type) == (StepStatus.ERROR, "ValidationError")
    assert (sent.status, sent.content) == ("error", "Give a town as text.")


async def test_sync_and_async_tools_give_the_same_outcome():
    async def chart_async(town: str) -> list:
        await asyncio.sleep(0)
        return CHART

    def chart_sync(town: str) -> list:
        return CHART

    outcomes = []
    for probe in (
        StructuredTool.from_function(coroutine=chart_async, name="chart", description="C."),
        StructuredTool.from_function(chart_sync, name="chart", description="C."),
    ):
        finished, sent, _ = await one_call(probe)
        outcomes.append((finished.status, finished.result, finished.blocks, sent.content))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3].endswith(CHART_NOTE)


async def test_a_tool_that_asks_for_its_tool_call_id_gets_it():
    @tool
    def whoami(town: str, call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Say the call's id."""
        return f"{town} {call_id}"

    _, sent, _ = await one_call(whoami)
    assert sent.content == "Suzhou c1"


async def test_exceptions_time_outs_and_unknown_tools_are_still_error_observations():
    def broken(town: str) -> str:
        raise RuntimeError("boom")

    async def slow(town: str) -> str:
        await asyncio.sleep(5)
        return "late"

    finished, sent, _ = await one_call(
        StructuredTool.from_function(broken, name="broken", description="B.")
    )
    assert (finished.error_type, sent.status) == ("RuntimeError", "error")
    model = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[tool_call("slow", {"town": "x"}, "c1"),
                                  tool_call("nope", {}, "c2")]),
        AIMessage("Done."),
    ])  # fmt: skip
    probe = StructuredTool.from_function(coroutine=slow, name="slow", description="S.")
    events = [
        e async for e in run(model, [probe], [HumanMessage("q")],
                             limits=RunLimits(tool_timeout_s=0.05))
    ]  # fmt: skip
    ends = {e.tool_call_id: e for e in events if isinstance(e, ToolCallFinished)}
    assert (ends["c1"].error_type, ends["c2"].error_type) == ("TimeoutError", "UnknownTool")


TEXT_CALL = {
    "react": 'Thought: chart it\nAction: chart\nAction Input: {"town": "Suzhou"}',
    "structured_chat": '```json\n{"action": "chart", "action_input": {"town": "Suzhou"}}\n```',
    "xml": '<tool>chart</tool><tool_input>{"town": "Suzhou"}',
}
TEXT_ANSWER = {
    "react": "Thought: done\nFinal Answer: Wet summers.",
    "structured_chat": '```json\n{"action": "Final Answer", "action_input": "Wet summers."}\n```',
    "xml": "<final_answer>Wet summers.</final_answer>",
}


@pytest.mark.parametrize("name", sorted(TEXT_CALL))
async def test_text_strategies_read_the_same_text_observation(name):
    probe = StructuredTool.from_function(lambda town: CHART, name="chart", description="C.")
    model = ScriptedChatModel(script=[AIMessage(TEXT_CALL[name]), AIMessage(TEXT_ANSWER[name])])
    messages = [SystemMessage("You are a travel assistant."), HumanMessage("Rain in Suzhou?")]
    events = [
        e async for e in run(model, [probe], messages, strategy=get_strategy(name),
                             limits=RunLimits())
    ]  # fmt: skip

    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.observation == f"Rainfall in Suzhou, by month:\n{CHART_NOTE}"
    assert finished.blocks == tuple(CHART)
    read = model.prompts[1][-1].text
    assert finished.observation in read and PNG[:100] not in read
    assert events[-1].status is RunStatus.SUCCEEDED


async def test_a_text_strategys_one_string_input_runs_the_tool_with_its_call_id():
    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return f"echo: {text}"

    model = ScriptedChatModel(script=[
        AIMessage("Thought: echo\nAction: echo\nAction Input: hello"),
        AIMessage("Thought: done\nFinal Answer: hello"),
    ])  # fmt: skip
    events = [
        e async for e in run(model, [echo], [HumanMessage("q")], strategy=get_strategy("react"),
                             limits=RunLimits())
    ]  # fmt: skip
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert (finished.status, finished.result) == (StepStatus.SUCCESS, "echo: hello")


# The reading itself, shape by shape.


@pytest.mark.parametrize(
    ("block", "kind", "mime_type"),
    [
        ({"type": "image", "base64": PNG, "mime_type": "image/png"}, "image", "image/png"),
        ({"type": "image", "source_type": "base64", "data": PNG, "mime_type": "image/png"},
         "image", "image/png"),
        ({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
         "image", "image/png"),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
         "image", "image/png"),
        ({"type": "file", "file": {"file_data": f"data:image/png;base64,{PNG}",
                                   "filename": "a.png"}}, "file", "image/png"),
    ],
    ids=["standard", "standard-0.3", "openai", "anthropic", "openai-file"],
)  # fmt: skip
def test_every_common_shape_of_an_inline_image_is_read_with_its_data(block, kind, mime_type):
    view = view_block(block)
    assert (view.kind, view.mime_type, view.base64) == (kind, mime_type, PNG)
    assert PNG[:50] not in view.note and f"{view.size:,} bytes" in view.note


def test_an_unknown_block_is_its_json_without_its_data():
    view = view_block({"type": "audio_clip", "data": PNG, "seconds": 3})
    assert view.note == '{"type": "audio_clip", "data": "[9,372 characters of data]", "seconds": 3}'


def test_an_image_over_the_cap_is_stored_as_a_note():
    huge = "A" * (MAX_BLOCK_DATA_CHARS + 4)
    kept = stored_blocks([{"type": "image", "base64": huge, "mime_type": "image/png"}])
    assert len(kept) == 1 and kept[0]["type"] == "text" and huge[:100] not in kept[0]["text"]
    assert "not stored" in kept[0]["text"]


def test_artifacts_are_made_json_safe_and_capped():
    assert json_safe({1: (1.5, float("nan")), "s": {"a"}}) == {"1": [1.5, "nan"], "s": "{'a'}"}
    assert stored_artifact(None) is None
    assert stored_artifact("x" * 2_000_000).startswith("[artifact not stored: 2,000,002")


def test_text_blocks_beside_an_image_are_capped_all_together():
    from agents.tool_output import MAX_BLOCK_TEXT_CHARS, TEXT_NOT_STORED

    blocks = [{"type": "text", "text": "x" * 900_000} for _ in range(30)] + CHART[1:]
    kept = stored_blocks(blocks)

    text = sum(len(block["text"]) for block in kept if block["type"] == "text")
    assert text <= MAX_BLOCK_TEXT_CHARS + len(TEXT_NOT_STORED)
    assert {"type": "text", "text": TEXT_NOT_STORED} in kept
    assert kept[-1]["type"] == "image"  # the image is kept whole all the same


class Abort(BaseException):
    """What a library might raise that is not an Exception."""


@pytest.mark.parametrize("raised", [SystemExit(2), KeyboardInterrupt(), GeneratorExit(),
                                    Abort("library aborted")])  # fmt: skip
@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_a_tool_raising_a_base_exception_is_an_error_observation(raised, sync):
    def boom(town: str) -> str:
        """Raise."""
        raise raised

    async def aboom(town: str) -> str:
        """Raise."""
        raise raised

    tool_ = StructuredTool.from_function(**({"func": boom} if sync else {"coroutine": aboom}),
                                         name="boom", description="Raise.")  # fmt: skip
    finished, sent, end = await one_call(tool_)

    assert finished.status == StepStatus.ERROR
    assert finished.error_type == type(raised).__name__
    assert sent.status == "error"
    assert end.status == RunStatus.SUCCEEDED  # the model read it and answered


async def test_sync_tools_run_in_their_own_threads_not_the_event_loops_executor():
    from agents.tool_calls import SYNC_TOOL_THREADS

    release = __import__("threading").Event()
    threads: list[str] = []

    def stuck(town: str) -> str:
        """Block until released."""
        threads.append(__import__("threading").current_thread().name)
        release.wait(30)
        return "late"

    tool_ = StructuredTool.from_function(stuck, name="stuck", description="Block.")
    calls = [tool_call("stuck", {"town": str(i)}, f"c{i}") for i in range(SYNC_TOOL_THREADS)]
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), AIMessage("Done.")])
    limits = RunLimits(tool_timeout_s=0.5)
    try:
        events = [e async for e in run(model, [tool_], [HumanMessage("q")], limits=limits)]
        # Every sync-tool thread is still blocked; the loop's own executor is free.
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(10):
            await loop.getaddrinfo("localhost", 80)
    finally:
        release.set()
    assert events[-1].status == RunStatus.SUCCEEDED
    assert threads and all(name.startswith("sync-tool") for name in threads)
