"""Text ReAct: Thought / Action / Action Input / Observation, stopped at ``\\nObservation``.

After Yao et al., "ReAct: Synergizing Reasoning and Acting in Language Models" (2022), as
LangChain's ``create_react_agent`` and ``ReActSingleInputOutputParser`` run it, with the
scratchpad kept as messages (``format_log_to_messages``): the model's text as an
AIMessage, then ``Observation: ...`` as a HumanMessage. The Action Input is a JSON object
of arguments (or plain text for a tool with one argument). One action per reply.
"""

from __future__ import annotations

import json
import re

from agents.strategies.base import (
    EMPTY_FINAL_ANSWER,
    EMPTY_REPLY,
    ParseError,
    TextStrategy,
    parse_tool_input,
)
from agents.strategies.code_blocks import mask_code, sole_block

STOP = ["\nObservation"]
OBSERVATION_PREFIX = "Observation: "

INSTRUCTIONS = """\
You have access to the following tools, one JSON object per line (name, description and \
the JSON schema of its arguments):

{tools}

To use a tool, reply in exactly this format:

Thought: what you should do next and why
Action: the tool's name, one of [{tool_names}]
Action Input: the arguments as one JSON object, e.g. {{"argument": "value"}}

Then stop. The result comes back to you as "Observation: ...". Use one tool per reply and \
repeat Thought/Action/Action Input as often as you need. When you know the answer, reply:

Thought: I now know the final answer
Final Answer: the answer to the user's question

Never write an Action and a Final Answer in the same reply."""

FORMAT_HINT = (
    "Reply with 'Thought:', 'Action:' and 'Action Input:' lines to use a tool, or with "
    "'Thought:' and 'Final Answer:' lines to answer."
)
BOTH = (
    "Your reply has both an Action and a Final Answer. Either use one tool (and wait for "
    "its Observation) or give the Final Answer, not both."
)
MISSING_ACTION = "Invalid format: missing 'Action:' after 'Thought:'. " + FORMAT_HINT
MISSING_INPUT = (
    "Invalid format: missing 'Action Input:' after 'Action: {tool}'. Give the tool's "
    "arguments on an 'Action Input:' line as one JSON object."
)
MISSING_TOOL = "Invalid format: 'Action:' has no tool name. " + FORMAT_HINT
SEVERAL_ACTIONS = (
    "Your reply has {count} actions. Use one tool per reply, then wait for its Observation."
)

SEVERAL_FINALS = (
    "Your reply has {count} 'Final Answer:' lines. Give one Final Answer, with the whole "
    "answer after it."
)

# Labels start a line, may be numbered ("Action 2:") or bold ("**Action:**", the closing
# "**" then belongs to the label). Only [ \t] between the words, never two adjacent
# open-ended runs of white space: "Action" + 30,000 spaces would take seconds otherwise
# (so "**" and the blanks after it are one optional group: "[ \t]*(\*\*)?[ \t]*" made
# a line of 20,000 spaces take 6 s).
_BOLD = r"^[ \t]*(?:(?P<bold>\*\*)[ \t]*)?"
_NUMBER = r"[ \t]*(?:\d+[ \t]*)?"
_END = r":(?(bold)\*\*)"
_FLAGS = re.MULTILINE | re.IGNORECASE
_ACTION = re.compile(_BOLD + "Action" + _NUMBER + _END, _FLAGS)
_ACTION_INPUT = re.compile(_BOLD + "Action" + _NUMBER + "Input" + _NUMBER + _END, _FLAGS)
_FINAL = re.compile(_BOLD + r"Final[ \t]+Answer[ \t]*" + _END, _FLAGS)
# Any label: each ends a line for code fences ("Final Answer: ```python" opens one).
LABEL = re.compile(
    _BOLD + r"(?:Thought[ \t]*|Observation[ \t]*|Final[ \t]+Answer[ \t]*|Action" + _NUMBER
    + r"(?:Input" + _NUMBER + r")?)" + _END, _FLAGS,
)  # fmt: skip
_HALLUCINATED = re.compile(r"\n[ \t*]*Observation[ \t]*:", re.IGNORECASE)
_NAME_JUNK = "`'\"*[] \t"


def outside_code(text: str) -> str:
    """Return ``text`` with its code masked (:func:`~.code_blocks.mask_code`), labels as breaks.

    Labels are looked for in this copy: a line of code in a final answer
    (``Action: search`` in a fenced block) is content, not a label.
    """
    return mask_code(text, breaks=LABEL)


def cut_observation(text: str) -> str:
    """Return ``text`` up to an Observation the model wrote itself (the stop was ignored).

    An ``Observation:`` line inside a code block is content and is kept.
    """
    match = _HALLUCINATED.search(outside_code(text))
    return text[: match.start()] if match else text


def parse_react(text: str) -> tuple[str, str | dict] | str:
    """Return ``(tool, tool_input)`` for an action, or the final answer text.

    Labels inside code (a fenced block, an inline code span) are content: a final answer
    may show a ReAct transcript in a code block. A reply that is one fenced block with
    the labels inside it is read inside the fence. Raises :class:`ParseError` for an
    empty reply, no format, an action without input, several actions, an action and a
    final answer together (outside code), or an empty final answer.
    """
    text = cut_observation(text)
    if not text.strip():
        raise ParseError(EMPTY_REPLY.format(format_hint=FORMAT_HINT), llm_output=text)
    masked = outside_code(text)
    if not LABEL.search(masked) and (block := sole_block(text, breaks=LABEL)):
        return _parse(text[block.body_start : block.body_end], reply=text)
    return _parse(text, reply=text, masked=masked)


def _parse(text: str, *, reply: str, masked: str | None = None) -> tuple[str, str | dict] | str:
    """Parse ``text`` (all of ``reply``, or the inside of its one fence); errors carry ``reply``."""
    text = cut_observation(text) if masked is None else text
    masked = outside_code(text) if masked is None else masked
    actions = list(_ACTION.finditer(masked))
    inputs = list(_ACTION_INPUT.finditer(masked))
    finals = list(_FINAL.finditer(masked))
    if actions and finals:
        raise ParseError(BOTH, llm_output=reply)
    if len(finals) > 1:
        raise ParseError(SEVERAL_FINALS.format(count=len(finals)), llm_output=reply)
    if finals:
        answer = text[finals[0].end() :].strip()
        if not answer:
            raise ParseError(EMPTY_FINAL_ANSWER.format(format_hint=FORMAT_HINT), llm_output=reply)
        return answer
    if not actions:
        raise ParseError(MISSING_ACTION, llm_output=reply)
    if len(actions) > 1 or len(inputs) > 1:
        raise ParseError(SEVERAL_ACTIONS.format(count=max(len(actions), len(inputs))),
                         llm_output=reply)  # fmt: skip
    action = actions[0]
    end = inputs[0].start() if inputs and inputs[0].start() > action.end() else len(text)
    tool = text[action.end() : end].strip().splitlines()[0:1]
    name = tool[0].strip(_NAME_JUNK) if tool else ""
    if not name:
        raise ParseError(MISSING_TOOL, llm_output=reply)
    if not inputs or inputs[0].start() < action.end():
        raise ParseError(MISSING_INPUT.format(tool=name), llm_output=reply, tool=name)
    return name, parse_tool_input(text[inputs[0].end() :], tool=name, llm_output=reply)


class ReActStrategy(TextStrategy):
    """Text ReAct; see the module docstring."""

    name = "react"
    label = "ReAct (text)"

    stop = STOP
    instructions = INSTRUCTIONS
    observation_template = OBSERVATION_PREFIX + "{observation}"
    parse_text = staticmethod(parse_react)
    cut_observation = staticmethod(cut_observation)


FINAL_THOUGHT = "I now know the final answer"


def _thought(text: str) -> str:
    # One line: a line break in the thought could start a label of its own.
    return " ".join(text.split())


def format_react(tool: str, tool_input: str | dict, thought: str) -> str:
    """Return a reply calling ``tool`` with ``tool_input`` that :func:`parse_react` reads back.

    The thought goes on one line. The input is one line of JSON (a string input too, so
    text that looks like JSON stays text); raises ValueError for NaN or infinity, which
    the parser refuses, and TypeError for a value JSON cannot hold.
    """
    arguments = json.dumps(tool_input, ensure_ascii=False, allow_nan=False)
    return f"Thought: {_thought(thought)}\nAction: {tool}\nAction Input: {arguments}"


def format_react_final(answer: str, thought: str = FINAL_THOUGHT) -> str:
    """Return a reply whose Final Answer is ``answer``, as :func:`parse_react` reads it back.

    ``answer`` may span lines and hold code blocks with any label in them (code is
    content); the format has no escape, so a line outside code that starts with a label
    (``Action:``, ``Final Answer:``, ``Observation:``) would be read as one.
    """
    return f"Thought: {_thought(thought)}\nFinal Answer: {answer}"


ReActStrategy.final_answer_example = format_react_final("(your answer)")


def format_react_malformed(tool: str, tool_input: str | dict, thought: str) -> str:
    """Return a reply :func:`parse_react` rejects: the call with no ``Action Input:`` line."""
    return f"Thought: {_thought(thought)}\nAction: {tool}"
