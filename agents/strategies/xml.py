"""XML tags: ``<tool>``, ``<tool_input>``, ``<observation>``, ``<final_answer>``.

After LangChain's ``create_xml_agent`` and ``XMLAgentOutputParser`` (Anthropic's models
were trained on this shape): the model writes ``<tool>name</tool><tool_input>...`` and is
stopped at ``</tool_input>``; the result comes back as ``<observation>...</observation>``;
``<final_answer>...</final_answer>`` ends the run. Tags are found with regular
expressions, not an XML parser, so content is taken as written: ``<``, ``&`` and quotes
inside a tag need no escaping and entities are not decoded.
"""

from __future__ import annotations

import json
import re

from agents.strategies.base import (
    EMPTY_FINAL_ANSWER,
    EMPTY_REPLY,
    ParseError,
    TextStrategy,
    ToolAgentAction,
    parse_tool_input,
)
from agents.strategies.code_blocks import mask_code, sole_block

INSTRUCTIONS = """\
You have access to the following tools, one JSON object per line (name, description and \
the JSON schema of its arguments):

{tools}

To use a tool, write its name in <tool></tool> tags and its arguments, as one JSON \
object, in <tool_input></tool_input> tags. You will get back the result in \
<observation></observation> tags. For example, to use a tool called 'search' with the \
argument "query", you would reply:

<tool>search</tool><tool_input>{{"query": "weather in SF"}}</tool_input>

Use one tool per reply; the valid tool names are: {tool_names}. When you know the \
answer, reply with it between <final_answer></final_answer> tags, for example:

<final_answer>The weather in SF is 64 degrees</final_answer>

Never write a <tool> and a <final_answer> in the same reply."""

FORMAT_HINT = (
    "Reply with <tool>name</tool><tool_input>{JSON arguments}</tool_input> to use a tool, "
    "or with <final_answer>...</final_answer> to answer."
)
BOTH = (
    "Your reply has both a <tool> and a <final_answer>. Either use one tool (and wait "
    "for its <observation>) or give the final answer, not both."
)
NO_TAGS = "Your reply has no <tool> or <final_answer> tag. " + FORMAT_HINT
MISSING_INPUT = (
    "Your reply names the tool {tool!r} but has no <tool_input> tag after it. Put the "
    "arguments, as one JSON object, in <tool_input></tool_input>."
)
MISSING_TOOL = "Your reply has a <tool_input> but no <tool> name before it. " + FORMAT_HINT
SEVERAL_TOOLS = "Your reply has {count} <tool> tags. Use one tool per reply."
UNCLOSED_TOOL = "Your <tool> tag is not closed. " + FORMAT_HINT
TRAILING = (
    "Your reply goes on after </final_answer> ({extra!r}). Put the whole answer inside the tags."
)

SEVERAL_FINALS = "Your reply has more than one <final_answer> tag. Give one final answer."
SEVERAL_INPUTS = "Your reply has more than one <tool_input> tag. Use one tool per reply."
AFTER_INPUT = (
    "Your reply goes on after </tool_input> ({extra!r}). Stop after the tool input; the "
    "<observation> comes back to you."
)

STOP = ["</tool_input>"]
_TOOL = re.compile(r"<tool>(.*?)</tool>", re.DOTALL)
_INPUT = re.compile(r"<tool_input>(.*?)(?:</tool_input>|$)", re.DOTALL)
_FINAL = re.compile(r"<final_answer>(.*?)(?:</final_answer>|$)", re.DOTALL)
_HALLUCINATED = re.compile(r"<observation>")
# The tags that hold content: each ends a line for code fences, so the fence in
# "<final_answer>```python" opens and the one in "```</final_answer>" closes.
BREAKS = re.compile(r"</?(?:final_answer|tool_input)>")
_CLOSE_FINAL = "</final_answer>"
_TAG = re.compile(r"</?(?:tool|tool_input|final_answer|observation)>")


def outside_code(text: str) -> str:
    """Return ``text`` with its code masked (:func:`~.code_blocks.mask_code`).

    Tags are looked for in this copy: ``<tool>`` in a code block (fenced or inline) of a
    final answer is content, not a tag.
    """
    return mask_code(text, breaks=BREAKS)


def cut_observation(text: str) -> str:
    """Return ``text`` up to an ``<observation>`` the model wrote itself, outside code."""
    match = _HALLUCINATED.search(outside_code(text))
    return text[: match.start()] if match else text


def parse_xml(text: str) -> tuple[str, str | dict] | str:
    """Return ``(tool, tool_input)`` for a ``<tool>`` call, or the final answer text.

    Tags inside code (a fenced block, an inline span) are content: a final answer may
    show the format in a code block. A reply that is one fenced block with the tags
    inside it is read inside the fence. ``</tool_input>`` may be missing (the stop
    sequence removes it), and so may ``</final_answer>`` (a reply cut short). Raises
    :class:`ParseError` for an empty reply, no tags, several tools, a tool without input
    or input without a tool, a tool and a final answer together, text after the final
    answer or an empty one.
    """
    text = cut_observation(text)
    if not text.strip():
        raise ParseError(EMPTY_REPLY.format(format_hint=FORMAT_HINT), llm_output=text)
    masked = outside_code(text)
    if not _TAG.search(masked) and (block := sole_block(text, breaks=BREAKS)):
        inner = cut_observation(text[block.body_start : block.body_end])
        return _parse(inner, outside_code(inner), reply=text)
    return _parse(text, masked, reply=text)


def _parse(text: str, masked: str, *, reply: str) -> tuple[str, str | dict] | str:
    """Parse ``text`` (all of ``reply`` or the inside of its one fence) by tags in ``masked``.

    Errors carry ``reply``. Tags are counted and matched in ``masked``; content is cut
    from ``text`` at the same offsets.
    """
    # Counted before any regular expression runs: "<tool>" repeated without a closing tag
    # would make a lazy match scan to the end from each one (quadratic time).
    opened, closed = masked.count("<tool>"), masked.count("</tool>")
    final = _FINAL.search(masked)
    if opened and final:
        raise ParseError(BOTH, llm_output=reply)
    if masked.count("<final_answer>") > 1:
        raise ParseError(SEVERAL_FINALS, llm_output=reply)
    if final:
        extra = masked[final.end() :].strip()
        if extra:
            raise ParseError(TRAILING.format(extra=text[final.end() :].strip()[:80]),
                             llm_output=reply)  # fmt: skip
        answer = text[final.start(1) : final.end(1)]
        if final.end() == len(text) and answer.rstrip().endswith(_CLOSE_FINAL):
            # An answer whose code block never closed, then the closing tag: the tag is
            # the reply's last word, so it ends the answer rather than being code.
            answer = answer.rstrip().removesuffix(_CLOSE_FINAL)
        answer = answer.strip()
        if not answer:
            raise ParseError(EMPTY_FINAL_ANSWER.format(format_hint=FORMAT_HINT), llm_output=reply)
        return answer
    if opened > closed:
        raise ParseError(UNCLOSED_TOOL, llm_output=reply)
    if opened > 1:
        raise ParseError(SEVERAL_TOOLS.format(count=opened), llm_output=reply)
    if masked.count("<tool_input>") > 1:
        raise ParseError(SEVERAL_INPUTS, llm_output=reply)
    tool = _TOOL.search(masked)
    tool_input = _INPUT.search(masked)
    if not tool:
        raise ParseError(MISSING_TOOL if tool_input else NO_TAGS, llm_output=reply)
    name = text[tool.start(1) : tool.end(1)].strip()
    if not name:
        raise ParseError(MISSING_TOOL, llm_output=reply)
    if tool_input is None or tool_input.start() < masked.find("</tool>"):
        raise ParseError(MISSING_INPUT.format(tool=name), llm_output=reply, tool=name)
    extra = text[tool_input.end() :].strip()
    if extra:
        raise ParseError(AFTER_INPUT.format(extra=extra[:80]), llm_output=reply, tool=name)
    arguments = text[tool_input.start(1) : tool_input.end(1)]
    return name, parse_tool_input(arguments, tool=name, llm_output=reply)


class XmlStrategy(TextStrategy):
    """XML tags; see the module docstring."""

    name = "xml"
    label = "XML tags"
    stop = STOP
    instructions = INSTRUCTIONS
    observation_template = "<observation>{observation}</observation>"
    parse_text = staticmethod(parse_xml)
    cut_observation = staticmethod(cut_observation)

    def format_log(self, action: ToolAgentAction) -> str:
        """Return the model's text with the ``</tool_input>`` the stop sequence cut off."""
        if "<tool_input>" in action.log and "</tool_input>" not in action.log:
            return action.log + "</tool_input>"
        return action.log


def _thought(text: str) -> str:
    # One line with no "<": a tag in the thought would count as the reply's own.
    return " ".join(text.replace("<", "").replace(">", "").split())


def format_xml(tool: str, tool_input: str | dict, thought: str) -> str:
    """Return a reply calling ``tool`` that :func:`parse_xml` reads back.

    The thought on one line (``<`` and ``>`` left out), then
    ``<tool>name</tool><tool_input>{JSON}</tool_input>``; every ``<`` in the JSON is
    written ``\\u003c``, which JSON reads back as ``<``, so a value holding
    ``</tool_input>`` (the stop sequence) or ``<tool>`` cannot end or open a tag. Raises
    ValueError for NaN or infinity and TypeError for a value JSON cannot hold.
    """
    arguments = json.dumps(tool_input, ensure_ascii=False, allow_nan=False)
    arguments = arguments.replace("<", "\\u003c")
    return f"{_thought(thought)}\n<tool>{tool}</tool><tool_input>{arguments}</tool_input>"


def format_xml_final(answer: str) -> str:
    """Return ``answer`` in ``<final_answer>`` tags, as :func:`parse_xml` reads it back.

    Tags are not escaped in this format: ``<`` and ``&`` are fine, and so are the
    format's own tags inside code (a fenced block or an inline span), but one outside
    code (``<tool>``, ``<final_answer>``, ``<observation>``...) would be read as that tag.
    """
    return f"<final_answer>{answer}</final_answer>"


XmlStrategy.final_answer_example = format_xml_final("(your answer)")


def format_xml_malformed(tool: str, tool_input: str | dict, thought: str) -> str:
    """Return a reply :func:`parse_xml` rejects: the call with no ``<tool_input>`` tag."""
    return f"{_thought(thought)}\n<tool>{tool}</tool>"
