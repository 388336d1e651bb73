"""Structured chat: one JSON blob per reply, ``{"action": ..., "action_input": ...}``.

After LangChain's ``create_structured_chat_agent`` and ``StructuredChatOutputParser``: the
model writes a Thought, then the blob in a Markdown code fence, and stops at
``\\nObservation``; ``"action": "Final Answer"`` ends the run with ``action_input`` as the
answer. Tool arguments are a JSON object, which is why the prompt shows every tool's
argument schema. Unlike the classic parser, text with no blob is not taken as the final
answer: it is a format error the model is told about.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agents.strategies import strict_json
from agents.strategies.base import (
    EMPTY_FINAL_ANSWER,
    EMPTY_REPLY,
    FINAL_ANSWER,
    ParseError,
    TextStrategy,
)
from agents.strategies.code_blocks import mask_code, scan
from agents.strategies.react import LABEL, OBSERVATION_PREFIX, STOP, cut_observation

INSTRUCTIONS = """\
You have access to the following tools, one JSON object per line (name, description and \
the JSON schema of its arguments):

{tools}

Use a JSON blob to choose a tool: an "action" key (the tool's name) and an "action_input" \
key (the tool's arguments as a JSON object that fits its schema).

Valid "action" values: "Final Answer" or {tool_names}

Give only ONE action per JSON blob, as shown:

```json
{{
  "action": $TOOL_NAME,
  "action_input": $ARGUMENTS
}}
```

Follow this format:

Thought: what you should do next and why
Action:
```json
$JSON_BLOB
```

Then stop: the result comes back to you as "Observation: ...". Repeat Thought/Action as \
often as you need. When you know the answer:

Thought: I know what to respond
Action:
```json
{{
  "action": "Final Answer",
  "action_input": "the answer to the user's question"
}}
```

Always reply with exactly one valid JSON blob and nothing after it."""

FORMAT_HINT = (
    'Reply with a Thought, then "Action:" and one JSON blob {"action": ..., '
    '"action_input": ...} in a ```json code fence, and nothing after it.'
)
NO_BLOB = "Your reply has no JSON blob."
BAD_JSON = "Your JSON blob does not parse ({error})."
NOT_OBJECT = "Your JSON blob is a JSON {kind}, not an object."
MISSING_KEYS = "Your JSON blob lacks {keys}."
TRAILING = (
    "Your reply goes on after the JSON blob ({extra!r}). Write one JSON blob per reply and "
    "nothing after it; the Observation comes back to you."
)
FINAL_NOT_TEXT = (
    'The "action_input" of a "Final Answer" must be the answer as a JSON string, not a JSON {kind}.'
)
BAD_INPUT = (
    'The "action_input" for tool {name!r} must be a JSON object of arguments, not a JSON {kind}.'
)

_FENCE_CLOSE = re.compile(r"\s*(?:`{3,}|~{3,})\s*$")
_ACTION_NAME = re.compile(r'"action"\s*:\s*"([^"\\]*)"')
_ACTION_LABEL = re.compile(r"^[ \t*]*Action[ \t]*:", re.MULTILINE | re.IGNORECASE)
_LINE_BLOB = re.compile(r"^[ \t]*[{\[]", re.MULTILINE)
_KINDS = {str: "string", list: "array", int: "number", float: "number", bool: "boolean"}


def _kind(value: Any) -> str:
    return "null" if value is None else _KINDS.get(type(value), type(value).__name__)


def find_blob(text: str) -> tuple[Any, int, int]:
    """Return ``(value, start, end)`` of the action blob in ``text``, fence included.

    The blob is the first fenced code block (``` or ~~~, at the start of a line or after
    ``Action:``) whose code starts with ``{`` or ``[``: the format asks for a fence, so
    brackets and other code blocks in the Thought before it do not count. Without one,
    outside code blocks: the first ``{`` or ``[`` after an ``Action:`` label; else the
    first one that starts a line; else the first one. ``end`` is past the closing fence
    (a lone closing fence after an unfenced blob is taken as its own). The JSON must be
    strict (:mod:`.strict_json`). Raises :class:`ParseError` if there is no blob or it
    does not parse.
    """
    blocks, _ = scan(text, breaks=LABEL, inline=False)
    for block in blocks:
        code = text[block.body_start : block.body_end]
        body = block.body_start + len(code) - len(code.lstrip())
        if body < block.body_end and text[body] in "{[":
            value, end = _decode(text, body)
            if not text[end : block.body_end].strip():
                end = block.end
            return value, block.start, end
    # Fenced code is content here; inline spans are not masked: "Action: ```json {...}```"
    # on one line is the blob in backticks.
    masked = mask_code(text, breaks=LABEL, inline=False)
    label = _ACTION_LABEL.search(masked)
    line_start = _LINE_BLOB.search(masked)
    if label:
        start = _first_bracket(masked, label.end())
    elif line_start:
        start = line_start.end() - 1
    else:
        start = _first_bracket(masked, 0)
    if start < 0:
        raise ParseError(f"{NO_BLOB} {FORMAT_HINT}", llm_output=text)
    value, end = _decode(text, start)
    close = _FENCE_CLOSE.match(text, end)
    return value, start, close.end() if close else end


def _first_bracket(text: str, start: int) -> int:
    found = [i for i in (text.find("{", start), text.find("[", start)) if i >= 0]
    return min(found) if found else -1


def _decode(text: str, start: int) -> tuple[Any, int]:
    try:
        return strict_json.raw_decode(text, start)
    except ValueError as exc:
        name = _ACTION_NAME.search(text)
        tool = name[1] if name and name[1] != FINAL_ANSWER else ""
        raise ParseError(
            f"{BAD_JSON.format(error=exc)} {FORMAT_HINT}", llm_output=text, tool=tool
        ) from exc


def parse_structured(text: str) -> tuple[str, str | dict[str, Any]] | str:
    """Return ``(tool, arguments)`` for an action blob, or the final answer text.

    Raises :class:`ParseError` for an empty reply, no blob, JSON that does not parse, a
    blob that is not an object or lacks a key, text after the blob (a second blob
    included), a final answer that is not a non-empty string, or arguments that are not
    an object (a string is accepted, for a tool with one argument).
    """
    text = cut_observation(text)
    if not text.strip():
        raise ParseError(EMPTY_REPLY.format(format_hint=FORMAT_HINT), llm_output=text)
    value, _, end = find_blob(text)
    if not isinstance(value, dict):
        raise ParseError(f"{NOT_OBJECT.format(kind=_kind(value))} {FORMAT_HINT}", llm_output=text)
    missing = [key for key in ("action", "action_input") if key not in value]
    tool = value.get("action")
    if missing or not isinstance(tool, str) or not tool.strip():
        keys = " and ".join(f'"{k}"' for k in missing) or 'an "action" name'
        raise ParseError(f"{MISSING_KEYS.format(keys=keys)} {FORMAT_HINT}", llm_output=text,
                         tool=tool if isinstance(tool, str) else "")  # fmt: skip
    extra = text[end:].strip()
    if extra:
        raise ParseError(TRAILING.format(extra=extra[:80]), llm_output=text, tool=tool)
    tool_input = value["action_input"]
    if tool.strip() == FINAL_ANSWER:
        if not isinstance(tool_input, str):
            raise ParseError(FINAL_NOT_TEXT.format(kind=_kind(tool_input)), llm_output=text)
        if not tool_input.strip():
            raise ParseError(EMPTY_FINAL_ANSWER.format(format_hint=FORMAT_HINT), llm_output=text)
        return tool_input.strip()
    if not isinstance(tool_input, dict | str):
        raise ParseError(BAD_INPUT.format(name=tool, kind=_kind(tool_input)), llm_output=text,
                         tool=tool, tool_input=json.dumps(tool_input))  # fmt: skip
    return tool.strip(), tool_input


class StructuredChatStrategy(TextStrategy):
    """Structured chat (a JSON blob per reply); see the module docstring."""

    name = "structured_chat"
    label = "Structured chat (JSON)"

    stop = STOP
    instructions = INSTRUCTIONS
    observation_template = OBSERVATION_PREFIX + "{observation}"
    parse_text = staticmethod(parse_structured)
    cut_observation = staticmethod(cut_observation)
    quote_tool_names = True


FINAL_THOUGHT = "I know what to respond"


def _blob_reply(thought: str, action: str, action_input: object, *, broken: bool) -> str:
    blob = json.dumps(
        {"action": action, "action_input": action_input},
        ensure_ascii=False, allow_nan=False, indent=2,
    )  # fmt: skip
    if broken:  # a trailing comma: JSON that does not parse
        blob = blob.removesuffix("\n}") + ",\n}"
    # A backtick in the thought could open a fence before the blob's.
    thought = " ".join(thought.replace("`", "'").split())
    return f"Thought: {thought}\nAction:\n```json\n{blob}\n```"


def format_structured(tool: str, tool_input: str | dict, thought: str) -> str:
    """Return a reply calling ``tool`` that :func:`parse_structured` reads back.

    A Thought on one line (backticks become quotes), then ``{"action", "action_input"}``
    as indented JSON in a ```` ```json ```` fence. Raises ValueError for NaN or infinity
    and TypeError for a value JSON cannot hold.
    """
    return _blob_reply(thought, tool, tool_input, broken=False)


def format_structured_final(answer: str, thought: str = FINAL_THOUGHT) -> str:
    """Return a reply whose final answer is ``answer`` (any text: it is a JSON string)."""
    return _blob_reply(thought, FINAL_ANSWER, answer, broken=False)


StructuredChatStrategy.final_answer_example = format_structured_final("(your answer)")


def format_structured_malformed(tool: str, tool_input: str | dict, thought: str) -> str:
    """Return a reply :func:`parse_structured` rejects: the blob with a trailing comma."""
    return _blob_reply(thought, tool, tool_input, broken=True)
