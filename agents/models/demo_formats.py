"""Speak the four agent formats for the scripted demo model: detect, read back, write.

The demo reads the format from the system message, as a model would from its prompt (see
:mod:`agents.strategies` for the prompts): ``<tool_input>`` -> ``xml``, ``"action_input"``
-> ``structured_chat``, ``Action Input:`` -> ``react``, anything else -> ``tool_calling``
(native calls). Format names are the strategies' names. For the text formats the bound
tools are not in the request but in the prompt, as JSON Lines (``render_tools``); they
come back here as OpenAI tool dicts so routing works as it does for native calls.

Writing: :func:`render_call` and :func:`render_final` produce one reply in a text format
that the matching parser (``parse_react``, ``parse_structured``, ``parse_xml``) reads back;
:func:`render_malformed` one it rejects (the ``#malformed`` fault trigger, see
:mod:`agents.models.demo_turns`). Reading: :func:`parse_log` reads an earlier reply of the
scratchpad with the same parsers, so the demo knows which calls it has made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agents.models.demo_text import message_text
from agents.strategies import ParseError
from agents.strategies.react import parse_react
from agents.strategies.structured_chat import parse_structured
from agents.strategies.xml import parse_xml

NATIVE = "tool_calling"
REACT = "react"
STRUCTURED_CHAT = "structured_chat"
XML = "xml"
TEXT_FORMATS = (REACT, STRUCTURED_CHAT, XML)

MALFORMED_TAG = "#malformed"
"""Put in a question, makes the demo's first turn for it break the format (see demo_turns)."""

FINAL_THOUGHT = "I now know the final answer"
_OBSERVATION_PREFIX = "Observation:"
_XML_OBSERVATION = re.compile(r"^\s*<observation>(.*?)(?:</observation>\s*)?$", re.DOTALL)
_TAG = re.compile(r"(?<![\w#])#malformed\b", re.IGNORECASE)
# A thought is one line; these would start a JSON blob, a tag or a fence before the call.
_THOUGHT_JUNK = re.compile(r"[{}<>`]")
_PARSERS: dict[str, Callable[[str], tuple[str, str | dict] | str]] = {
    REACT: parse_react,
    STRUCTURED_CHAT: parse_structured,
    XML: parse_xml,
}


def detect_format(messages: Sequence[BaseMessage]) -> str:
    """Return the format the system message asks for: a strategy name (see module doc)."""
    prompt = "\n".join(message_text(m) for m in messages if isinstance(m, SystemMessage))
    if "<tool_input>" in prompt:
        return XML
    if '"action_input"' in prompt:
        return STRUCTURED_CHAT
    if "Action Input:" in prompt:
        return REACT
    return NATIVE


def prompt_tools(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Return the tools listed in the system message as OpenAI tool dicts.

    A tool is a line that parses as a JSON object with a string ``name`` and a
    ``parameters`` object (the JSON Lines of ``agents.strategies.base.render_tools``):
    ``{"type": "function", "function": {"name", "description", "parameters"}}``.
    """
    tools: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        for line in message_text(message).splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("name"), str)
                and isinstance(entry.get("parameters"), dict)
            ):
                description = entry.get("description")
                function = {
                    "name": entry["name"],
                    "description": description if isinstance(description, str) else "",
                    "parameters": entry["parameters"],
                }
                tools.append({"type": "function", "function": function})
    return tools


def is_observation(message: BaseMessage) -> bool:
    """Return True for a text strategy's observation (a HumanMessage the runtime wrote)."""
    if not isinstance(message, HumanMessage):
        return False
    text = message_text(message).lstrip()
    return text.startswith(_OBSERVATION_PREFIX) or text.startswith("<observation>")


def observation_text(message: BaseMessage) -> str:
    """Return an observation message's content without ``Observation:`` or its tags."""
    text = message_text(message)
    if text.lstrip().startswith(_OBSERVATION_PREFIX):
        return text.lstrip()[len(_OBSERVATION_PREFIX) :].strip()
    match = _XML_OBSERVATION.match(text)
    return match[1].strip() if match else text.strip()


def parse_log(fmt: str, text: str) -> tuple[str, dict[str, Any]] | None:
    """Return ``(tool, args)`` of an earlier reply in format ``fmt``, else None.

    None for a final answer or a reply the format's parser rejects (a parse error the
    runtime reported back: no call was made). Plain-text input becomes ``{}``.
    """
    parser = _PARSERS.get(fmt)
    if parser is None:
        return None
    try:
        parsed = parser(text)
    except ParseError:
        return None
    if isinstance(parsed, str):
        return None
    tool, tool_input = parsed
    return tool, tool_input if isinstance(tool_input, dict) else {}


def strip_tag(text: str) -> tuple[str, bool]:
    """Return ``text`` without the ``#malformed`` tag, and whether it had one."""
    stripped, count = _TAG.subn(" ", text)
    if not count:
        return text, False
    return re.sub(r"[ \t]{2,}", " ", stripped).strip(), True


def cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """Return ``text`` up to the first occurrence of any stop sequence (as a model stops)."""
    cut = len(text)
    for sequence in stop or ():
        if sequence:
            found = text.find(sequence)
            if 0 <= found < cut:
                cut = found
    return text[:cut]


_MARKDOWN_ESCAPE = re.compile(r"\\([^\w\s])")


def thought_line(text: str) -> str:
    """Return ``text`` as a one-line thought that cannot be taken for part of a call.

    The plan line is Markdown with its values escaped (``17\\*23``); a thought is shown
    as plain text, so the escapes go.
    """
    text = _MARKDOWN_ESCAPE.sub(r"\1", text)
    return " ".join(_THOUGHT_JUNK.sub("", text).split()) or "I should use a tool."


def _json_args(args: dict[str, Any], *, indent: int | None = None) -> str:
    return json.dumps(args, ensure_ascii=False, indent=indent, default=str)


def _structured(thought: str, action: str, action_input: Any, *, broken: bool = False) -> str:
    blob = _json_args({"action": action, "action_input": action_input}, indent=2)
    if broken:  # a trailing comma: JSON that does not parse
        blob = blob[: blob.rindex("}")].rstrip() + ",\n}"
    return f"Thought: {thought}\nAction:\n```json\n{blob}\n```"


def _xml_json(args: dict[str, Any]) -> str:
    # "\u003c" reads back as "<", and a "</tool_input>" in a value cannot end the tag early.
    return _json_args(args).replace("<", "\\u003c")


def render_call(fmt: str, name: str, args: dict[str, Any], thought: str) -> str:
    """Return a reply in text format ``fmt`` that calls tool ``name`` with ``args``.

    react: ``Thought:``/``Action:``/``Action Input:`` lines; structured_chat: a Thought and
    a fenced ``{"action", "action_input"}`` blob; xml: a thought line, then
    ``<tool>name</tool><tool_input>{json}</tool_input>`` (the stop sequence cuts the
    closing tag, as it would a real model's).
    """
    thought = thought_line(thought)
    if fmt == REACT:
        return f"Thought: {thought}\nAction: {name}\nAction Input: {_json_args(args)}"
    if fmt == STRUCTURED_CHAT:
        return _structured(thought, name, args)
    return f"{thought}\n<tool>{name}</tool><tool_input>{_xml_json(args)}</tool_input>"


def render_final(fmt: str, answer: str) -> str:
    """Return ``answer`` as a final answer in text format ``fmt``."""
    if fmt == REACT:
        return f"Thought: {FINAL_THOUGHT}\nFinal Answer: {answer}"
    if fmt == STRUCTURED_CHAT:
        return _structured(FINAL_THOUGHT, "Final Answer", answer)
    return f"<final_answer>{answer}</final_answer>"


def render_malformed(fmt: str, name: str, args: dict[str, Any], thought: str) -> str:
    """Return a reply in text format ``fmt`` that its parser rejects.

    react: an ``Action:`` with no ``Action Input:`` line; structured_chat: the blob with a
    trailing comma; xml: ``<tool>name</tool>`` with no ``<tool_input>``.
    """
    thought = thought_line(thought)
    if fmt == REACT:
        return f"Thought: {thought}\nAction: {name}"
    if fmt == STRUCTURED_CHAT:
        return _structured(thought, name, args, broken=True)
    return f"{thought}\n<tool>{name}</tool>"


def malformed_args(args: dict[str, Any]) -> str:
    """Return native tool-call arguments that are not JSON: the Python repr of ``args``.

    Single quotes, as a model that writes Python dicts does. A truncated object such as
    ``{"town": `` would not do: langchain-core's partial-JSON parser completes it when
    the stream is merged, so it would come back as a valid call with empty arguments.
    """
    return repr(args) if args else "{'input': None}"
