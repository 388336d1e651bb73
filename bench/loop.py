"""Time the agent loop per tool-call step against LangChain's own loops, model time excluded.

One process, one scripted chat model (:class:`ScriptedLoopModel`: it answers at once, N
turns each asking for one ``add`` call and then a final answer, streamed; its
``bind_tools`` converts the tools' schemas as ``ChatOpenAI.bind_tools`` does), the same
three async tools, run by:

- **ours**: :func:`agents.runtime.run` as the app calls it (a :class:`ContextWindow`,
  ``RunLimits``) with the native ``tool_calling`` strategy, and with the text strategies
  (``react``, ``structured_chat``, ``xml``: the model then writes that format's text);
- **bare**: the minimal tool loop of LangChain's docs ("How to pass tool outputs to chat
  models"): ``bind_tools`` once, then model, append the AIMessage, ``tool.ainvoke(call)``
  per call, append the ToolMessage, repeat. ``bare`` streams (``astream``, chunks merged
  with ``+``), as ours does, and is the reference of every ratio; ``bare-ainvoke`` is the
  same loop with ``ainvoke``;
- **create_agent**: ``langchain.agents.create_agent`` (LangChain v1, on LangGraph), by
  ``ainvoke`` and by ``astream_events(version="v2")``;
- **AgentExecutor**: langchain-classic's ``create_tool_calling_agent`` in an
  ``AgentExecutor``, by ``ainvoke``.

Peers come from requirements-bench.txt; a peer that is not installed is reported as
``skipped: not installed``; ours and bare always run. For each N (``--sizes``, default 10,
50, 200 tool-call steps) the runners take turns (round-robin, the order rotated every
round), ``--repeats`` rounds; a sample runs a runner enough times to make at least
``--min-steps`` steps. Per step = (time of the runs - the model's own time) / steps, where
the model's time is what :class:`ScriptedLoopModel` spends building its replies (timed
inside it; about 2% of the bare loop's). Both CPU time of the process (``process_time``,
the main figure: other processes on a shared machine do not inflate it) and wall time are
kept; a runner's ratio is the median over rounds of its time / bare's in the same round;
growth is the per-step time at the largest N / at the smallest.

Every run is checked: the model verifies on each turn that the last message carries the
previous call's result (native: a ToolMessage paired by ``tool_call_id``), every call ran
once and the final answer is the expected text. Exit status 1 if any runner raised or
answered wrong.

    .venv/bin/python bench/loop.py                   # N = 10, 50, 200; about 2 minutes
    .venv/bin/python bench/loop.py --tiny            # seconds (CI)
    .venv/bin/python bench/loop.py --json > loop.json
    .venv/bin/python bench/loop.py --profile ours:200 # cProfile of one runner at N=200
    .venv/bin/python bench/loop.py --split --runners ours,bare  # where the time goes
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import io
import json
import math
import os
import platform
import pstats
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from agents.context import ContextWindow
from agents.events import RunFinished, RunStatus
from agents.runtime import RunLimits, run
from agents.strategies import get_strategy
from agents.strategies.react import format_react, format_react_final
from agents.strategies.structured_chat import format_structured, format_structured_final
from agents.strategies.xml import format_xml, format_xml_final

REPO = Path(__file__).resolve().parent.parent
OFFSET = 1000  # add(a=k, b=OFFSET): each step's result tells which call it answers
SYSTEM = "You are a careful assistant. Use the tools to add numbers."
QUESTION = "Add each number to a thousand, one call at a time, then say the last sum."
REFERENCE = "bare"
TEXT_FORMATS = {
    "react": (format_react, format_react_final),
    "structured_chat": (format_structured, format_structured_final),
    "xml": (format_xml, lambda answer, *_: format_xml_final(answer)),
}
USAGE = {"input_tokens": 40, "output_tokens": 8, "total_tokens": 48}


def expected_answer(steps: int) -> str:
    """Return the final answer a run of ``steps`` tool calls must end with."""
    return f"The last sum was {steps - 1 + OFFSET}."


class ScriptedLoopModel(BaseChatModel):
    """Answer at once: ``steps`` turns each asking for one ``add`` call, then the answer.

    ``text_format``: ``native`` (``tool_calls``, streamed as one chunk of
    ``tool_call_chunks``) or a text strategy's name (the reply written with that
    strategy's own writer, streamed word by word). The final answer is streamed word by
    word in every format. From the second turn on, the last message must carry the
    previous call's result (native: a ToolMessage whose ``tool_call_id`` is that call's);
    otherwise ``mismatches`` counts it. ``model_cpu_s`` / ``model_wall_s`` add up the time
    spent building replies, which the benchmark subtracts. ``bind_tools`` converts each
    tool with ``convert_to_openai_tool``, as ``ChatOpenAI.bind_tools`` does, so a loop
    that binds every turn pays what it would with a real provider. Call :meth:`reset`
    before each run.
    """

    steps: int = 10
    text_format: str = "native"
    _turn: int = PrivateAttr(default=0)
    mismatches: int = 0
    model_cpu_s: float = 0.0
    model_wall_s: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "scripted-loop"

    def reset(self, steps: int) -> None:
        """Start a new run of ``steps`` tool calls."""
        self.steps, self._turn, self.mismatches = steps, 0, 0
        self.model_cpu_s = self.model_wall_s = 0.0

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """Return the model bound to the tools' OpenAI schemas (as ChatOpenAI does)."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _reply(self, messages: Sequence[BaseMessage]) -> list[AIMessageChunk]:
        cpu, wall = time.process_time(), time.perf_counter()
        turn = self._turn
        self._turn += 1
        if turn > 0 and not self._answers(messages[-1], turn - 1):
            self.mismatches += 1
        if turn >= self.steps:
            text = expected_answer(self.steps)
            if self.text_format != "native":
                text = TEXT_FORMATS[self.text_format][1](text, "I know what to respond")
            chunks = _words(text)
        elif self.text_format == "native":
            call = {"name": "add", "args": json.dumps({"a": turn, "b": OFFSET}),
                    "id": f"call_{turn}", "index": 0}  # fmt: skip
            chunks = [AIMessageChunk(content="", tool_call_chunks=[call])]
        else:
            writer = TEXT_FORMATS[self.text_format][0]
            chunks = _words(writer("add", {"a": turn, "b": OFFSET}, "I add the next number."))
        chunks[-1].usage_metadata = dict(USAGE)  # type: ignore[assignment]
        self.model_cpu_s += time.process_time() - cpu
        self.model_wall_s += time.perf_counter() - wall
        return chunks

    def _answers(self, message: BaseMessage, call: int) -> bool:
        expected = str(call + OFFSET)
        if self.text_format == "native":
            return (
                isinstance(message, ToolMessage)
                and message.tool_call_id == f"call_{call}"
                and message.text == expected
            )
        return expected in message.text

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:  # fmt: skip
        merged = _merge(self._reply(messages))
        return ChatResult(generations=[ChatGeneration(message=merged)])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:  # fmt: skip
        return self._generate(messages, stop, **kwargs)

    async def _astream(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:  # fmt: skip
        for chunk in self._reply(messages):
            yield ChatGenerationChunk(message=chunk)


def _words(text: str) -> list[AIMessageChunk]:
    pieces = text.split(" ")
    return [AIMessageChunk(content=p + (" " if i < len(pieces) - 1 else ""))
            for i, p in enumerate(pieces)]  # fmt: skip


def _merge(chunks: list[AIMessageChunk]) -> AIMessage:
    from langchain_core.messages import message_chunk_to_message

    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    message = message_chunk_to_message(merged)
    assert isinstance(message, AIMessage)
    return message


@dataclass
class Counter:
    """How many times each tool ran in the current run."""

    calls: int = 0


def make_tools(counter: Counter) -> list[BaseTool]:
    """Return three trivial async tools; only ``add`` is called, the others are offered."""

    async def add(a: int, b: int) -> int:
        """Add two integers and return the sum."""
        counter.calls += 1
        return a + b

    async def multiply(a: int, b: int) -> int:
        """Multiply two integers and return the product."""
        return a * b

    async def echo(text: str) -> str:
        """Return the text as it was given."""
        return text

    return [StructuredTool.from_function(coroutine=f) for f in (add, multiply, echo)]


Runner = Callable[[ScriptedLoopModel, list[BaseTool], int], Awaitable[str]]
"""Run one conversation of N steps and return its final answer text."""


def prompt() -> list[BaseMessage]:
    """Return the conversation every runner starts from."""
    return [SystemMessage(SYSTEM), HumanMessage(QUESTION)]


def ours(strategy_name: str) -> Runner:
    """Return a runner of :func:`agents.runtime.run` with the named strategy."""

    async def go(model: ScriptedLoopModel, tools: list[BaseTool], steps: int) -> str:
        strategy = get_strategy(strategy_name)
        limits = RunLimits(max_iterations=steps + 1)
        context = ContextWindow(max_tokens=10_000_000)
        last = None
        async for event in run(model, tools, prompt(), strategy=strategy, limits=limits,
                               context=context):  # fmt: skip
            last = event
        if not isinstance(last, RunFinished) or last.status is not RunStatus.SUCCEEDED:
            raise RuntimeError(f"run ended {last!r}")
        return last.output

    return go


def ours_at(commit: str, strategy_name: str, root: Path) -> Runner:
    """Return a runner of ``agents.runtime.run`` as it was at ``commit``.

    ``agents/`` at that commit is extracted (``git archive``) under ``root`` as the
    package ``agents_at_<commit>`` with its imports renamed, so both versions run in this
    process, interleaved, against the same model and tools.
    """
    package = f"agents_at_{commit}"
    if not (root / package).exists():
        archive = subprocess.run(["git", "archive", commit, "agents"], cwd=REPO, check=True,
                                 capture_output=True).stdout  # fmt: skip
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(root, filter="data")
        (root / "agents").rename(root / package)
        for path in (root / package).rglob("*.py"):
            text = re.sub(r"\b(from|import) agents\b", rf"\1 {package}", path.read_text())
            path.write_text(text)
        sys.path.insert(0, str(root))
    runtime = importlib.import_module(f"{package}.runtime")
    strategies = importlib.import_module(f"{package}.strategies")
    context = importlib.import_module(f"{package}.context")

    async def go(model: ScriptedLoopModel, tools: list[BaseTool], steps: int) -> str:
        last = None
        async for event in runtime.run(
            model, tools, prompt(), strategy=strategies.get_strategy(strategy_name),
            limits=runtime.RunLimits(max_iterations=steps + 1),
            context=context.ContextWindow(max_tokens=10_000_000),
        ):  # fmt: skip
            last = event
        if getattr(getattr(last, "status", None), "value", None) != "succeeded":
            raise RuntimeError(f"run ended {last!r}")
        return last.output  # type: ignore[union-attr]

    return go


async def bare(model: ScriptedLoopModel, tools: list[BaseTool], steps: int) -> str:
    """Run the minimal streaming tool loop of LangChain's docs."""
    llm_with_tools = model.bind_tools(tools)
    by_name = {tool.name: tool for tool in tools}
    messages = prompt()
    while True:
        ai_msg = None
        async for chunk in llm_with_tools.astream(messages):
            ai_msg = chunk if ai_msg is None else ai_msg + chunk
        assert ai_msg is not None
        messages.append(ai_msg)
        if not ai_msg.tool_calls:
            return ai_msg.text
        for tool_call in ai_msg.tool_calls:
            messages.append(await by_name[tool_call["name"]].ainvoke(tool_call))


async def bare_ainvoke(model: ScriptedLoopModel, tools: list[BaseTool], steps: int) -> str:
    """Run the minimal tool loop of LangChain's docs with ``ainvoke``."""
    llm_with_tools = model.bind_tools(tools)
    by_name = {tool.name: tool for tool in tools}
    messages = prompt()
    while True:
        ai_msg = await llm_with_tools.ainvoke(messages)
        messages.append(ai_msg)
        if not ai_msg.tool_calls:
            return ai_msg.text
        for tool_call in ai_msg.tool_calls:
            messages.append(await by_name[tool_call["name"]].ainvoke(tool_call))


def create_agent_runner(*, events: bool) -> Runner:
    """Return a runner of LangChain v1's ``create_agent`` (``ainvoke`` or ``astream_events``)."""
    from langchain.agents import create_agent

    async def go(model: ScriptedLoopModel, tools: list[BaseTool], steps: int) -> str:
        agent = create_agent(model, tools, system_prompt=SYSTEM)
        config = {"recursion_limit": 2 * steps + 10}
        inputs = {"messages": [HumanMessage(QUESTION)]}
        if not events:
            state = await agent.ainvoke(inputs, config=config)
            return state["messages"][-1].text
        output = ""
        async for event in agent.astream_events(inputs, config=config, version="v2"):
            if event["event"] == "on_chain_end" and event["name"] == "LangGraph":
                output = event["data"]["output"]["messages"][-1].text
        return output

    return go


def agent_executor_runner() -> Runner:
    """Return a runner of langchain-classic's tool-calling ``AgentExecutor``."""
    from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
    from langchain_core.prompts import ChatPromptTemplate

    template = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), ("human", "{input}"), ("placeholder", "{agent_scratchpad}")]
    )

    async def go(model: ScriptedLoopModel, tools: list[BaseTool], steps: int) -> str:
        agent = create_tool_calling_agent(model, tools, template)
        executor = AgentExecutor(agent=agent, tools=tools, max_iterations=steps + 5)
        result = await executor.ainvoke({"input": QUESTION})
        return result["output"]

    return go


@dataclass
class Spec:
    """A runner, the format the model writes for it, and whether it can run here."""

    name: str
    make: Callable[[], Runner]
    text_format: str = "native"
    peer: str = ""  # the import a peer needs; "" for ours and bare


SPECS = [
    Spec("ours", lambda: ours("tool_calling")),
    Spec(REFERENCE, lambda: bare),
    Spec("bare-ainvoke", lambda: bare_ainvoke),
    Spec("ours-react", lambda: ours("react"), "react"),
    Spec("ours-structured_chat", lambda: ours("structured_chat"), "structured_chat"),
    Spec("ours-xml", lambda: ours("xml"), "xml"),
    Spec("create_agent", lambda: create_agent_runner(events=False), peer="langchain.agents"),
    Spec("create_agent-events", lambda: create_agent_runner(events=True), peer="langchain.agents"),
    Spec("AgentExecutor", agent_executor_runner, peer="langchain_classic.agents"),
]


def installed(module: str) -> bool:
    """Return True if ``module`` imports."""
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@dataclass
class Sample:
    """One timed sample: ``runs`` runs of ``steps`` steps, model time taken out."""

    cpu_s: float
    wall_s: float
    model_cpu_s: float
    model_wall_s: float
    runs: int
    steps: int

    @property
    def cpu_us_per_step(self) -> float:
        return (self.cpu_s - self.model_cpu_s) / (self.runs * self.steps) * 1e6

    @property
    def wall_us_per_step(self) -> float:
        return (self.wall_s - self.model_wall_s) / (self.runs * self.steps) * 1e6


@dataclass
class Bench:
    """The runners, one model per text format, and the errors seen."""

    specs: list[Spec]
    runners: dict[str, Runner] = field(default_factory=dict)
    models: dict[str, ScriptedLoopModel] = field(default_factory=dict)
    counter: Counter = field(default_factory=Counter)
    tools: list[BaseTool] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tools = make_tools(self.counter)
        for spec in self.specs:
            self.runners[spec.name] = spec.make()
            self.models.setdefault(
                spec.text_format, ScriptedLoopModel(text_format=spec.text_format)
            )

    async def once(self, spec: Spec, steps: int) -> tuple[float, float]:
        """Run ``spec`` once, check it, and return the model's (cpu, wall) seconds."""
        model = self.models[spec.text_format]
        model.reset(steps)
        self.counter.calls = 0
        answer = await self.runners[spec.name](model, self.tools, steps)
        problems = []
        if answer.strip() != expected_answer(steps):
            problems.append(f"answered {answer[:200]!r}, expected {expected_answer(steps)!r}")
        if self.counter.calls != steps:
            problems.append(f"ran {self.counter.calls} tool calls of {steps}")
        if model.mismatches:
            problems.append(f"{model.mismatches} turns did not see the previous call's result")
        if problems:
            raise AssertionError("; ".join(problems))
        return model.model_cpu_s, model.model_wall_s

    async def sample(self, spec: Spec, steps: int, runs: int) -> Sample:
        """Time ``runs`` runs of ``spec`` at ``steps`` steps."""
        gc.collect()
        model_cpu = model_wall = 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(runs):
            c, w = await self.once(spec, steps)
            model_cpu, model_wall = model_cpu + c, model_wall + w
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return Sample(cpu, wall, model_cpu, model_wall, runs, steps)


async def measure(bench: Bench, sizes: list[int], repeats: int, min_steps: int
                  ) -> dict[int, dict[str, list[Sample]]]:  # fmt: skip
    """Return the samples per size and runner, the runners taking turns each round."""
    live = [s for s in bench.specs if s.name not in bench.errors]
    for spec in live:  # warm-up: imports, caches, first-call costs
        try:
            await bench.once(spec, 2)
        except Exception as exc:  # reported; the exit status says so
            bench.errors[spec.name] = f"{type(exc).__name__}: {exc}"
    samples: dict[int, dict[str, list[Sample]]] = {}
    for steps in sizes:
        runs = max(1, math.ceil(min_steps / steps))
        samples[steps] = {}
        for round_ in range(repeats):
            live = [s for s in bench.specs if s.name not in bench.errors]
            shift = round_ % max(1, len(live))
            for spec in live[shift:] + live[:shift]:
                try:
                    sample = await bench.sample(spec, steps, runs)
                except Exception as exc:  # reported; the exit status says so
                    bench.errors[spec.name] = f"N={steps}: {type(exc).__name__}: {exc}"
                    continue
                samples[steps].setdefault(spec.name, []).append(sample)
    return samples


def summarise(samples: dict[int, dict[str, list[Sample]]]) -> list[dict[str, Any]]:
    """Return a row per size and runner: medians, ratios to bare and growth per step."""
    rows = []
    sizes = sorted(samples)
    for steps in sizes:
        by_runner = samples[steps]
        ref = by_runner.get(REFERENCE, [])
        for name, runs in by_runner.items():
            cpu = statistics.median(s.cpu_us_per_step for s in runs)
            wall = statistics.median(s.wall_us_per_step for s in runs)
            pairs = list(zip(runs, ref, strict=False))
            ratio = statistics.median(s.cpu_us_per_step / r.cpu_us_per_step for s, r in pairs)
            wall_ratio = statistics.median(
                s.wall_us_per_step / r.wall_us_per_step for s, r in pairs
            )
            rows.append({
                "steps": steps, "runner": name, "cpu_us_per_step": round(cpu, 1),
                "wall_us_per_step": round(wall, 1), "ratio_to_bare": round(ratio, 3),
                "wall_ratio_to_bare": round(wall_ratio, 3), "rounds": len(runs),
                "runs_per_sample": runs[0].runs,
                "model_share": round(
                    statistics.median(s.model_cpu_s / s.cpu_s for s in runs if s.cpu_s), 4
                ),
            })  # fmt: skip
    first, last = sizes[0], sizes[-1]
    per = {(r["steps"], r["runner"]): r["cpu_us_per_step"] for r in rows}
    for row in rows:
        base = per.get((first, row["runner"]))
        end = per.get((last, row["runner"]))
        row["growth"] = round(end / base, 2) if base and end and first != last else None
    return rows


def table(rows: list[dict[str, Any]], skipped: dict[str, str], load: Sequence[float]) -> str:
    """Return the results as a Markdown table with the skipped runners and load below."""
    sizes = sorted({r["steps"] for r in rows}) or [0]
    lines = [
        "| N | runner | CPU µs/step | wall µs/step | ratio to bare (CPU) | wall ratio "
        f"| per step N={sizes[-1]} / N={sizes[0]} |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        growth = f"{r['growth']:.2f}x" if r["growth"] is not None else "-"
        lines.append(
            f"| {r['steps']} | {r['runner']} | {r['cpu_us_per_step']:,.0f} | "
            f"{r['wall_us_per_step']:,.0f} | {r['ratio_to_bare']:.2f}x | "
            f"{r['wall_ratio_to_bare']:.2f}x | {growth} |"
        )
    for name, reason in skipped.items():
        lines.append(f"| - | {name} | {reason} | | | | |")
    lines.append(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load)}")
    return "\n".join(lines)


def profile(bench: Bench, target: str, out: Path | None) -> None:
    """Print a cProfile of ``target`` (``runner:N``) run ``--min-steps`` steps' worth."""
    name, _, steps_text = target.partition(":")
    steps = int(steps_text or 200)
    spec = next(s for s in bench.specs if s.name == name)
    asyncio.run(bench.once(spec, 2))
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(bench.sample(spec, steps, max(1, 1000 // steps)))
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative")
    if out:
        stats.dump_stats(out)
    stats.print_stats(45)
    stats.sort_stats("tottime").print_stats(25)


class Split:
    """CPU time of the thread spent inside the model's ``astream`` and the tools'
    ``ainvoke``, by wrapping ``RunnableBinding.astream`` and ``StructuredTool.ainvoke``
    (every runner calls the bound model and the tools through them); the rest is the
    loop's own. Each wrapper reads the clock twice (a system call, under 1 µs), the same
    number of times per step for every runner."""

    def __init__(self) -> None:
        self.model_ns = self.tool_ns = 0

    def install(self) -> None:
        """Wrap the two methods (for the rest of the process)."""
        from langchain_core.runnables.base import RunnableBinding

        clock, split = time.thread_time_ns, self
        astream, ainvoke = RunnableBinding.astream, StructuredTool.ainvoke

        def timed_astream(binding: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            chunks = astream(binding, *args, **kwargs)

            async def gen() -> AsyncIterator[Any]:
                while True:
                    start = clock()
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        split.model_ns += clock() - start
                        return
                    split.model_ns += clock() - start
                    yield chunk

            return gen()

        async def timed_ainvoke(tool: Any, *args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return await ainvoke(tool, *args, **kwargs)
            finally:
                split.tool_ns += clock() - start

        RunnableBinding.astream = timed_astream  # type: ignore[method-assign]
        StructuredTool.ainvoke = timed_ainvoke  # type: ignore[method-assign]


async def measure_split(bench: Bench, sizes: list[int], repeats: int, min_steps: int
                        ) -> list[dict[str, Any]]:  # fmt: skip
    """Return a row per size and runner: CPU µs per step in the model's ``astream``, in
    the tools and in the loop itself (medians over interleaved rounds)."""
    split = Split()
    split.install()
    for spec in bench.specs:
        await bench.once(spec, 2)
    rows = []
    for steps in sizes:
        runs = max(1, math.ceil(min_steps / steps))
        parts: dict[str, list[tuple[float, float, float]]] = {}
        for round_ in range(repeats):
            shift = round_ % len(bench.specs)
            for spec in bench.specs[shift:] + bench.specs[:shift]:
                gc.collect()
                split.model_ns = split.tool_ns = 0
                start = time.thread_time_ns()
                for _ in range(runs):
                    await bench.once(spec, steps)
                total = time.thread_time_ns() - start
                per = runs * steps * 1000
                own = total - split.model_ns - split.tool_ns
                parts.setdefault(spec.name, []).append(
                    (split.model_ns / per, split.tool_ns / per, own / per)
                )
        for name, got in parts.items():
            rows.append({
                "steps": steps, "runner": name,
                "model_astream_us": round(statistics.median(g[0] for g in got), 1),
                "tools_us": round(statistics.median(g[1] for g in got), 1),
                "loop_own_us": round(statistics.median(g[2] for g in got), 1),
            })  # fmt: skip
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Return the command line's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,50,200", help="tool-call steps per run")
    parser.add_argument("--repeats", type=int, default=7, help="rounds per size")
    parser.add_argument("--min-steps", type=int, default=400, help="steps per sample at least")
    parser.add_argument("--runners", default=",".join(s.name for s in SPECS))
    parser.add_argument("--tiny", action="store_true", help="N = 3, 10; 2 rounds (CI)")
    parser.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    parser.add_argument("--profile", metavar="RUNNER:N", help="print a cProfile and exit")
    parser.add_argument("--profile-out", type=Path, help="also dump the profile's stats here")
    parser.add_argument(
        "--split", action="store_true",
        help="print CPU µs per step inside the model's astream, the tools and the loop",
    )  # fmt: skip
    parser.add_argument(
        "--against", metavar="COMMIT", help="also run agents/ as at COMMIT, interleaved"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.sizes, args.repeats, args.min_steps = "3,10", 2, 20
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return 1 if a runner failed or answered wrong."""
    args = parse_args(argv)
    wanted = [n.strip() for n in args.runners.split(",") if n.strip()]
    unknown = sorted(set(wanted) - {s.name for s in SPECS})
    if unknown:
        print(f"unknown runners: {', '.join(unknown)}", file=sys.stderr)
        return 2
    skipped = {s.name: "skipped: not installed" for s in SPECS
                if s.name in wanted and s.peer and not installed(s.peer)}  # fmt: skip
    specs = [s for s in SPECS if s.name in wanted and s.name not in skipped]
    if REFERENCE not in [s.name for s in specs]:
        specs.insert(0, next(s for s in SPECS if s.name == REFERENCE))
    if args.against:
        root = Path(tempfile.mkdtemp(prefix="loop-bench-"))
        for spec in [s for s in specs if s.name.startswith("ours")]:
            strategy = "tool_calling" if spec.text_format == "native" else spec.text_format
            make = lambda s=strategy: ours_at(args.against, s, root)  # noqa: E731
            specs.append(Spec(f"{spec.name}@{args.against}", make, spec.text_format))
    bench = Bench(specs)
    if args.profile:
        profile(bench, args.profile, args.profile_out)
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.split:
        rows = asyncio.run(measure_split(bench, sizes, args.repeats, args.min_steps))
        print("| N | runner | in astream µs/step | in tools µs/step | loop's own µs/step |")
        print("|---:|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r['steps']} | {r['runner']} | {r['model_astream_us']:,.0f} | "
                  f"{r['tools_us']:,.0f} | {r['loop_own_us']:,.0f} |")  # fmt: skip
        print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    load_before = os.getloadavg()
    started = time.perf_counter()
    samples = asyncio.run(measure(bench, sizes, args.repeats, args.min_steps))
    load = os.getloadavg()
    rows = summarise(samples)
    report = table(rows, {**skipped, **{k: f"FAILED: {v}" for k, v in bench.errors.items()}}, load)
    out = sys.stderr if args.json else sys.stdout
    print(report, file=out)
    print(f"load average before: {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"{time.perf_counter() - started:.1f} s", file=out)  # fmt: skip
    if args.json:
        json.dump({
            "rows": rows, "skipped": skipped, "errors": bench.errors, "sizes": sizes,
            "repeats": args.repeats, "min_steps": args.min_steps,
            "loadavg_before": load_before, "loadavg_after": load,
            "python": platform.python_version(), "cpus": os.cpu_count(),
        }, sys.stdout, indent=2)  # fmt: skip
        print()
    for name, error in bench.errors.items():
        print(f"FAILED {name}: {error}", file=sys.stderr)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
