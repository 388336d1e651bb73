"""Check that the strategies' parsers and the demo model take time linear in their input.

A model's reply is untrusted text parsed inside the server's event loop, so a regular
expression that backtracks (quadratic or worse on some input) would stall every run and
socket of the process: before the fix, "Action" followed by 30,000 spaces took 7 s in the
ReAct parser and "<tool>x " repeated 20,000 times 15 s in the XML one. For each hostile
input family this prints the parse's CPU time at two sizes and the ratio: about 10x for ten
times the input is linear; about 100x is quadratic. Exit status 1 if any family grows
faster than ``--max-ratio`` (default 30). The code-heavy families time the scan that
finds code in a reply (:mod:`agents.strategies.code_blocks`), alone and inside each
parser. The offline demo model answers inside the event loop too: its triggers are
regular expressions over the question (before the fix, 8,000 "(" took about a second per
model turn), so its reply is timed the same way.

    .venv/bin/python bench/parsers.py [--small 20000] [--large 200000] [--max-ratio 30]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib

from langchain_core.messages import HumanMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.demo.model import reply
from agents.reasoning import ThinkSplitter, split_think
from agents.strategies import ParseError
from agents.strategies.code_blocks import mask_code
from agents.strategies.react import parse_react
from agents.strategies.structured_chat import parse_structured
from agents.strategies.tool_markup import find_tool_markup
from agents.strategies.xml import parse_xml

Family = tuple[str, Callable[[str], object], Callable[[int], str]]


def demo_reply(question: str) -> object:
    """Return the demo model's reply to ``question``, with the bundled tools bound."""
    from agents.tools import default_tools

    return reply([HumanMessage(question)], [convert_to_openai_tool(t) for t in default_tools()])


BARE_NAMES = frozenset({"calculator", "weather_forecast"})


def bare_calls(text: str) -> object:
    """Return :func:`find_tool_markup` of ``text`` with tool names, so bare calls are tried."""
    return find_tool_markup(text, tool_names=BARE_NAMES)


def think_streamed(text: str) -> object:
    """Return ``text`` split by a :class:`ThinkSplitter` fed one character at a time."""
    splitter = ThinkSplitter()
    for char in text:
        splitter.feed(char)
    splitter.finish()
    return splitter.reasoning


FAMILIES: list[Family] = [
    ("react: Action + spaces", parse_react, lambda n: "Thought: ok\nAction" + " " * n),
    ("react: Action + newlines", parse_react, lambda n: "Action" + "\n" * n),
    ("react: Action + spaces + Input", parse_react,
     lambda n: "Action: calc\nAction" + " " * n + "Input"),
    ("react: many Action lines", parse_react, lambda n: "Action: a\n" * (n // 10)),
    ("react: Observation flood", parse_react, lambda n: "\n Observation" * (n // 12)),
    ("react: a line of spaces", parse_react, lambda n: "Thought: x\n" + " " * n + "x"),
    ("react: answer, code full of labels", parse_react,
     lambda n: "Final Answer: run\n```\n" + "Action: s\nObservation: x\n" * (n // 24) + "```"),
    ("react: answer, unclosed fence", parse_react,
     lambda n: "Final Answer: run\n```py\n" + "Action: s\n" * (n // 10)),
    ("react: fence lines, none closing", parse_react,
     lambda n: "Final Answer: x\n" + "````\n```\n" * (n // 9)),
    ("react: Final Answer: ``` flood", parse_react, lambda n: "Final Answer: ```\n" * (n // 18)),
    ("structured: braces", parse_structured, lambda n: "{" * n),
    ("structured: fences", parse_structured, lambda n: "```json\n" * (n // 8)),
    ("structured: quotes after action", parse_structured,
     lambda n: '{"action": "' + '"' * n),
    ("structured: code blocks before blob", parse_structured,
     lambda n: "```py\nx\n```\n" * (n // 13) + '```json\n{"action": "a", "action_input": {}}\n```'),
    ("structured: answer holding fences", parse_structured,
     lambda n: '{"action": "Final Answer", "action_input": "' + "```\\nAction: x\\n" * (n // 19)
     + '"}'),
    ("xml: unclosed <tool>", parse_xml, lambda n: "<tool>x " * (n // 8)),
    ("xml: unclosed <tool_input>", parse_xml,
     lambda n: "<tool>a</tool>" + "<tool_input>x" * (n // 13)),
    ("xml: unclosed <final_answer>", parse_xml, lambda n: "<final_answer>x" * (n // 15)),
    ("think: < flood in reasoning", split_think, lambda n: "<think>" + "<" * n),
    ("think: < flood in text", split_think, lambda n: "x" + "<" * n),
    ("think: cut tags", split_think, lambda n: "</thin" * (n // 6)),
    ("think: streamed by character", think_streamed,
     lambda n: "<think>" + "a<thin" * (n // 6) + "</think>b"),
    ("think: streamed white space", think_streamed, lambda n: " " * n + "x"),
    ("markup: unclosed <tool_call>", find_tool_markup, lambda n: "<tool_call>" * (n // 11)),
    ("markup: many closed calls", find_tool_markup,
     lambda n: "<tool_call>{}</tool_call>" * (n // 25)),
    ("markup: unclosed <function=", find_tool_markup, lambda n: "<function=" * (n // 10)),
    ("markup: [TOOL_CALLS] flood", find_tool_markup, lambda n: "[TOOL_CALLS]" * (n // 12)),
    ("markup: parameters", find_tool_markup,
     lambda n: "<function=f>" + "<parameter=a>1" * (n // 14)),
    ("markup: fences", find_tool_markup, lambda n: "```\n<tool_call>\n" * (n // 16)),
    # Bare calls are tried only under BARE_CALL_LIMIT characters: these families use a
    # twentieth of the size, so both sizes are parsed (ast, JSON) rather than skipped.
    ("bare: pythonic call list", bare_calls,
     lambda n: "[" + ", ".join(["calculator(expression='1+1')"] * (n // 600)) + "]"),
    ("bare: pythonic, one long literal", bare_calls,
     lambda n: "[calculator(expression=" + repr("x" * (n // 20)) + ")]"),
    ("bare: llama3_json list", bare_calls,
     lambda n: "[" + ", ".join(['{"name": "calculator", "parameters": {}}'] * (n // 840)) + "]"),
    ("bare: nested brackets", bare_calls, lambda n: "[" * (n // 40) + "]" * (n // 40)),
    ("bare: over the limit", bare_calls, lambda n: "[calculator(x='" + "y" * n + "')]"),
    ("xml: answer, code full of tags", parse_xml,

     lambda n: "<final_answer>\n```\n" + "<tool>a</tool><observation>\n" * (n // 29) + "```\n"
     "</final_answer>"),
    ("xml: <final_answer>``` flood", parse_xml, lambda n: "<final_answer>```" * (n // 17)),
    ("mask: backtick runs, none pairing", mask_code,
     lambda n: "".join("`" * k + " " for k in range(1, int((2 * n) ** 0.5)))),
    ("mask: single backticks", mask_code, lambda n: "` " * (n // 2)),
    ("mask: backtick pairs, one line", mask_code, lambda n: "`a` " * (n // 4)),
    ("mask: ~~~ fences", mask_code, lambda n: "~~~\n" * (n // 4)),
    ("demo: (((", demo_reply, lambda n: "(" * n),
    ("demo: -(-(", demo_reply, lambda n: "-(" * (n // 2)),
    ("demo: 1*(1*(", demo_reply, lambda n: "1*(" * (n // 3)),
    ("demo: weather in weather in", demo_reply, lambda n: "weather in " * (n // 11)),
    ("demo: What's 1+What's 1+", demo_reply, lambda n: "What's 1+" * (n // 9)),
]  # fmt: skip


def timed(parse: Callable[[str], object], text: str) -> float:
    """Return the CPU seconds one parse of ``text`` takes (a ParseError is a normal result).

    This thread's CPU time, not the wall clock: on a busy machine the longer parse was
    more often preempted, and its wall time grew 31-33x for 10x the input where its CPU
    time grows 10x (what CI's shared machine showed).
    """
    start = time.thread_time()
    with contextlib.suppress(ParseError):
        parse(text)
    return time.thread_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=20_000, help="characters, first size")
    parser.add_argument("--large", type=int, default=200_000, help="characters, second size")
    parser.add_argument("--max-ratio", type=float, default=30.0)
    args = parser.parse_args(argv)
    growth = args.large / args.small
    print(f"input {args.small:,} -> {args.large:,} characters ({growth:g}x); "
          f"linear ~{growth:g}x, quadratic ~{growth**2:g}x")  # fmt: skip
    print(f"{'family':36} {'small ms':>9} {'large ms':>9} {'ratio':>7}")
    worst = 0.0
    for name, parse, make in FAMILIES:
        small = min(timed(parse, make(args.small)) for _ in range(3))
        large = min(timed(parse, make(args.large)) for _ in range(3))
        # Sub-millisecond timings are noise: floor them so the ratio means something.
        ratio = max(large, 1e-3) / max(small, 1e-3)
        worst = max(worst, ratio)
        print(f"{name:36} {small * 1000:9.2f} {large * 1000:9.2f} {ratio:6.1f}x")
    verdict = "linear" if worst <= args.max_ratio else "SUPERLINEAR"
    print(f"worst ratio {worst:.1f}x (limit {args.max_ratio:g}x): {verdict}")
    return 0 if worst <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
