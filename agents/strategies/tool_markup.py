"""Tool calls written into a reply's text as markup, by servers whose tool parser is off.

A chat template teaches the model to write its calls in a markup of its family; the
server's tool parser (vLLM's ``--tool-call-parser``, llama.cpp's ``--jinja``, Ollama's
template) turns that into ``tool_calls``. Without it the markup arrives in ``content``
with ``finish_reason`` "stop". The families read here (see vLLM's tool parsers
``hermes``, ``qwen3_coder``, ``llama3_json``/``pythonic`` and ``mistral``):

- Hermes, Qwen2.5, Qwen3: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  several in one reply (or a JSON array of them in one tag), the last one sometimes left
  unclosed;
- Llama 3.1's custom format and Qwen3-Coder: ``<function=name>{...}</function>`` or
  ``<function=name><parameter=town>Suzhou</parameter></function>`` (also inside a
  ``<tool_call>``);
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` or the newer
  ``[TOOL_CALLS]name[ARGS]{...}`` (``name[CALL_ID]id[ARGS]{...}`` with an id);
- Llama 3.1's built-in format: ``<|python_tag|>{"name": ..., "parameters": {...}}``
  (several separated by ``;``); ``<function_call>{...}</function_call>`` (older
  fine-tunes, Hermes' kin);
- DeepSeek-V3's own tokens: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
  <｜tool▁sep｜>name`` and the arguments in a fenced ``json`` block;
- bare calls, with no tag at all, read only when the caller passes the run's tool names
  (``tool_names``), since without them they cannot be told from an answer: a reply that is
  entirely (white space and one surrounding ```` ``` ```` fence aside) Llama 3.x's
  ``llama3_json`` form ``{"name": ..., "parameters" | "arguments": {...}}`` (or a JSON
  list of such objects; no other keys but ``type`` and ``id``), or a pythonic call list
  ``[name(key=literal, ...), ...]`` (vLLM's ``pythonic`` parser; Llama 3.2, Llama 4),
  whose every name is one of the tools. ``{"name": "Alice", "age": 3}``, ``[len(s)]`` or
  ``[print(x) for x in y]`` stay answers. Only replies under :data:`BARE_CALL_LIMIT`
  characters are tried (``ast.parse`` and the JSON decoder are linear, but a call list
  that long is no call).

Markup inside a fenced code block or an inline code span is content (an answer that
shows the format), not a call (a bare call's own surrounding fence aside). Every scan
here is linear in the text: ``str.find`` from a moving position (each needle's next index
kept) and ``json.JSONDecoder.raw_decode``, no backtracking pattern over the whole reply.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from agents.strategies import strict_json
from agents.strategies.code_blocks import mask_code

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
PARAMETER_OPEN = "<parameter="
PARAMETER_CLOSE = "</parameter>"
MISTRAL = "[TOOL_CALLS]"
MISTRAL_ARGS = "[ARGS]"
MISTRAL_CALL_ID = "[CALL_ID]"
FUNCTION_CALL_OPEN = "<function_call>"
FUNCTION_CALL_CLOSE = "</function_call>"
PYTHON_TAG = "<|python_tag|>"
DEEPSEEK_CALLS = "<｜tool▁calls▁begin｜>"
DEEPSEEK_CALLS_END = "<｜tool▁calls▁end｜>"
DEEPSEEK_CALL = "<｜tool▁call▁begin｜>"
DEEPSEEK_CALL_END = "<｜tool▁call▁end｜>"
DEEPSEEK_SEP = "<｜tool▁sep｜>"
# A tag and its closing tag around one JSON call (or a <function=...>).
_WRAPPED = {TOOL_CALL_OPEN: TOOL_CALL_CLOSE, FUNCTION_CALL_OPEN: FUNCTION_CALL_CLOSE}
_MARKERS = (TOOL_CALL_OPEN, FUNCTION_OPEN, MISTRAL, FUNCTION_CALL_OPEN, PYTHON_TAG, DEEPSEEK_CALLS)
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"\s*")
_FUNCTION_HEAD = re.compile(r"<function=[\w.\-]{1,200}>")
# Replies at least this long (characters, stripped) are never tried as bare calls.
BARE_CALL_LIMIT = 20_000
# The keys a bare llama3_json call may have: a tool's schema, which has "description"
# (render_tools writes it), is an answer that shows a tool, not a call.
_BARE_KEYS = frozenset({"name", "parameters", "arguments", "type", "id"})


@dataclass(frozen=True)
class MarkupCall:
    """One call read from markup: ``name``, ``args`` (a dict, or None when they do not
    parse), the markup as written (``raw``) and, for a call that cannot run, ``error``."""

    name: str
    args: dict[str, Any] | None
    raw: str
    error: str = ""


@dataclass
class MarkupCalls:
    """The calls a reply wrote as markup, and its ``text`` outside the markup (stripped)."""

    calls: list[MarkupCall] = field(default_factory=list)
    text: str = ""


def find_tool_markup(text: str, tool_names: Collection[str] | None = None) -> MarkupCalls | None:
    """Return the tool calls written into ``text`` as markup, or None when it has none.

    Markup inside fenced code blocks (```` ``` ````) or inline code spans is ignored, and
    so is a tag in prose: a ``<tool_call>`` counts when a JSON object or a
    ``<function=`` follows it, a ``<function=`` when a tool name and ``>`` do. A call
    whose JSON does not parse, or that names no tool, is still returned, with ``error``
    saying why. With ``tool_names`` (the run's tools), a reply with no tagged markup that
    is entirely a bare call naming only those tools (:func:`find_bare_calls`) counts too;
    without them nothing bare does.
    """
    masked = mask_code(text)
    spans: list[tuple[int, int]] = []
    calls: list[MarkupCall] = []
    pos = 0
    nexts: dict[str, int] = {}
    while True:
        found = _next_marker(masked, pos, nexts)
        if found is None:
            break
        start, marker = found
        if marker == MISTRAL:
            end = len(text)
            calls.extend(_mistral(text[start + len(marker) : end], text[start:end]))
        elif marker == PYTHON_TAG:
            end = len(text)
            calls.extend(_python_tag(text[start + len(marker) : end], text[start:end]))
        elif marker == DEEPSEEK_CALLS:
            close = text.find(DEEPSEEK_CALLS_END, start)
            end = len(text) if close < 0 else close + len(DEEPSEEK_CALLS_END)
            calls.extend(_deepseek(text[start + len(marker) : end], text[start:end]))
        elif marker in _WRAPPED:
            first = _SPACE.match(masked, start + len(marker)).end()
            if not masked.startswith(("{", "[", FUNCTION_OPEN), first):  # prose naming the tag
                pos = start + len(marker)
                continue
            close = _find(masked, _WRAPPED[marker], start, nexts)
            end = len(text) if close < 0 else close + len(_WRAPPED[marker])
            body = text[first : close if close >= 0 else len(text)].strip()
            calls.extend(_tool_call_body(body, text[start:end]))
        elif not _FUNCTION_HEAD.match(masked, start):  # "<function=" in prose
            pos = start + len(marker)
            continue
        else:
            close = _find(masked, FUNCTION_CLOSE, start, nexts)
            end = len(text) if close < 0 else close + len(FUNCTION_CLOSE)
            calls.append(_function(text[start:end], text[start:end]))
        spans.append((start, end))
        pos = end
    if not calls:
        return find_bare_calls(text, tool_names) if tool_names else None
    outside, last = [], 0
    for start, end in spans:
        outside.append(text[last:start])
        last = end
    outside.append(text[last:])
    return MarkupCalls(calls=calls, text="".join(outside).strip())


def find_bare_calls(text: str, tool_names: Collection[str]) -> MarkupCalls | None:
    """Return the calls of a reply that is entirely a bare call list, else None.

    ``text`` stripped (and out of one surrounding ```` ``` ```` fence, its info string
    dropped) must be, whole, either llama3_json (a JSON object ``{"name", "parameters" |
    "arguments"}`` or a non-empty JSON list of them, keys among ``name``, ``parameters``,
    ``arguments``, ``type``, ``id``) or a pythonic call list ``[f(a=1), g(b="x")]`` (an
    ``ast.List`` of ``ast.Call`` on plain names, keyword arguments only, each value one
    ``ast.literal_eval`` accepts), and every name must be in ``tool_names``. Anything else
    (prose, other JSON, a comprehension, an unknown name, a text of
    :data:`BARE_CALL_LIMIT` characters or more) returns None. The calls' ``raw`` is the
    whole reply and the text outside them is empty.
    """
    body = text.strip()
    if not body or len(body) >= BARE_CALL_LIMIT:
        return None
    if body.startswith("```"):
        newline = body.find("\n")
        if newline < 0 or not body.endswith("```") or len(body) < newline + 4:
            return None
        body = body[newline + 1 : -3].strip()
        if "```" in body:  # more than one fence: prose with code, not a bare call
            return None
    if not body.startswith(("{", "[")):
        return None
    calls = _bare_json(body, text, tool_names)
    if calls is None and body.startswith("[") and body.endswith("]"):
        calls = _pythonic(body, text, tool_names)
    return MarkupCalls(calls=calls, text="") if calls else None


def _bare_json(body: str, raw: str, tool_names: Collection[str]) -> list[MarkupCall] | None:
    """Return the calls of a whole-body llama3_json call (or list), else None."""
    try:
        value = strict_json.loads(body)
    except (ValueError, RecursionError):
        return None
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    for item in items:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and item["name"] in tool_names
            and ("parameters" in item or "arguments" in item)
            and item.keys() <= _BARE_KEYS
        ):
            return None
    return [_from_object(item, raw) for item in items]


def _pythonic(body: str, raw: str, tool_names: Collection[str]) -> list[MarkupCall] | None:
    """Return the calls of a whole-body pythonic call list, else None (after vLLM's
    ``pythonic`` tool parser, which also reads it with :mod:`ast`)."""
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return None
    calls: list[MarkupCall] = []
    for node in tree.body.elts:
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in tool_names
            and not node.args
        ):
            return None
        args: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:  # **kwargs
                return None
            try:
                args[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return None
        try:  # the arguments go on as JSON (tuples become lists; sets, bytes do not go)
            args = json.loads(json.dumps(args))
        except (TypeError, ValueError):
            return None
        calls.append(MarkupCall(name=node.func.id, args=args, raw=raw))
    return calls


def _next_marker(masked: str, pos: int, nexts: dict[str, int]) -> tuple[int, str] | None:
    """Return the first markup opening at or after ``pos``: its index and which one.

    ``nexts`` keeps each marker's next index between calls, so a marker that is far
    ahead (or absent) is not searched for again from every call's position.
    """
    best: tuple[int, str] | None = None
    for marker in _MARKERS:
        index = _find(masked, marker, pos, nexts)
        if index >= 0 and (best is None or index < best[0]):
            best = (index, marker)
    return best


def _find(masked: str, needle: str, pos: int, nexts: dict[str, int]) -> int:
    """Return ``masked.find(needle, pos)``, searching again only when the last answer
    (kept in ``nexts``) lies before ``pos``: -1 stays -1, so each needle is looked for
    across the text about once, however many openings precede it."""
    index = nexts.get(needle)
    if index is None or 0 <= index < pos:
        index = nexts[needle] = masked.find(needle, pos)
    return index


def _tool_call_body(body: str, raw: str) -> list[MarkupCall]:
    """Return the calls in a ``<tool_call>`` body: a JSON object, a JSON array of them
    (some Hermes-style fine-tunes put parallel calls in one tag) or a ``<function=>``."""
    if body.startswith(FUNCTION_OPEN):
        return [_function(body, raw)]
    try:
        value = strict_json.loads(body)
    except ValueError as exc:
        return [MarkupCall(name=_guess_name(body), args=None, raw=raw, error=str(exc))]
    if isinstance(value, list):
        return [_from_object(item, raw) for item in value] or [
            MarkupCall(name="", args=None, raw=raw, error="an empty list of calls")
        ]
    return [_from_object(value, raw)]


def _from_object(value: Any, raw: str) -> MarkupCall:
    """Return the call a decoded ``{"name", "arguments" | "parameters"}`` object makes."""
    if not isinstance(value, dict):
        return MarkupCall(name="", args=None, raw=raw,
                          error=f"a JSON {type(value).__name__}, not an object")  # fmt: skip
    name = value.get("name")
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):  # some templates write the arguments as a JSON string
        try:
            args = strict_json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return MarkupCall(name=str(name or ""), args=None, raw=raw, error=str(exc))
    if not isinstance(name, str) or not name:
        return MarkupCall(name="", args=None, raw=raw, error='no "name" of a tool')
    if not isinstance(args, dict):
        return MarkupCall(name=name, args=None, raw=raw, error=_not_object(args))
    return MarkupCall(name=name, args=args, raw=raw)


def _function(markup: str, raw: str) -> MarkupCall:
    """Return the call of ``<function=name>BODY</function>`` (JSON or parameters)."""
    head_end = markup.find(">")
    if head_end < 0:
        return MarkupCall(name="", args=None, raw=raw, error="the <function=...> tag is not closed")
    name = markup[len(FUNCTION_OPEN) : head_end].strip()
    body_end = markup.find(FUNCTION_CLOSE, head_end)
    body = markup[head_end + 1 : body_end if body_end >= 0 else len(markup)].strip()
    if not name:
        return MarkupCall(name="", args=None, raw=raw, error="no tool name after <function=")
    if body.startswith(PARAMETER_OPEN) or not body:
        return MarkupCall(name=name, args=_parameters(body), raw=raw)
    try:
        args = strict_json.loads(body)
    except ValueError as exc:
        return MarkupCall(name=name, args=None, raw=raw, error=str(exc))
    if not isinstance(args, dict):
        return MarkupCall(name=name, args=None, raw=raw, error=_not_object(args))
    return MarkupCall(name=name, args=args, raw=raw)


def _parameters(body: str) -> dict[str, Any]:
    """Return Qwen3-Coder's ``<parameter=k>v</parameter>`` pairs (JSON values decoded)."""
    args: dict[str, Any] = {}
    pos = 0
    while True:
        start = body.find(PARAMETER_OPEN, pos)
        if start < 0:
            return args
        head_end = body.find(">", start)
        if head_end < 0:
            return args
        close = body.find(PARAMETER_CLOSE, head_end)
        end = close if close >= 0 else len(body)
        value = body[head_end + 1 : end].strip()
        try:
            args[body[start + len(PARAMETER_OPEN) : head_end].strip()] = strict_json.loads(value)
        except ValueError:
            args[body[start + len(PARAMETER_OPEN) : head_end].strip()] = value
        pos = end + len(PARAMETER_CLOSE)


def _mistral(rest: str, raw: str) -> list[MarkupCall]:
    """Return the calls after ``[TOOL_CALLS]``: a JSON array, or ``name[ARGS]{...}``."""
    body = rest.lstrip()
    if body.startswith(("[", "{")):
        try:
            value, _ = _DECODER.raw_decode(body)
        except ValueError as exc:
            return [MarkupCall(name=_guess_name(body), args=None, raw=raw, error=str(exc))]
        items = value if isinstance(value, list) else [value]
        return [_from_object(item, raw) for item in items] or [
            MarkupCall(name="", args=None, raw=raw, error="an empty list of calls")
        ]
    calls: list[MarkupCall] = []
    for part in body.split(MISTRAL):
        name, sep, args_text = part.partition(MISTRAL_ARGS)
        # Newer Mistral tokenizers write the call's id too: name[CALL_ID]id[ARGS]{...}.
        name = name.partition(MISTRAL_CALL_ID)[0]
        if not sep:
            calls.append(MarkupCall(name=name.strip(), args=None, raw=raw, error="no [ARGS]"))
            continue
        try:
            args, _ = _DECODER.raw_decode(args_text.lstrip())
        except ValueError as exc:
            calls.append(MarkupCall(name=name.strip(), args=None, raw=raw, error=str(exc)))
            continue
        calls.append(_from_object({"name": name.strip(), "arguments": args}, raw))
    return calls


def _python_tag(rest: str, raw: str) -> list[MarkupCall]:
    """Return the calls after Llama 3.1's ``<|python_tag|>``: JSON objects
    (``{"name": ..., "parameters": ...}``), several separated by ``;``."""
    calls: list[MarkupCall] = []
    body = rest.strip()
    while body:
        try:
            value, used = _DECODER.raw_decode(body)
        except ValueError as exc:
            calls.append(MarkupCall(name=_guess_name(body), args=None, raw=raw, error=str(exc)))
            break
        calls.append(_from_object(value, raw))
        body = body[used:].lstrip().removeprefix(";").lstrip()
    return calls or [MarkupCall(name="", args=None, raw=raw, error="no call after the tag")]


def _deepseek(rest: str, raw: str) -> list[MarkupCall]:
    """Return DeepSeek-V3's calls: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME``, then
    the arguments as JSON (in a fenced ``json`` block), then ``<｜tool▁call▁end｜>``."""
    calls: list[MarkupCall] = []
    for part in rest.split(DEEPSEEK_CALL)[1:]:
        part = part.split(DEEPSEEK_CALL_END, 1)[0]
        _, sep, after = part.partition(DEEPSEEK_SEP)
        name, _, args_text = after.partition("\n")
        name = name.strip()
        args_text = args_text.strip().removeprefix("```json").removeprefix("```")
        args_text = args_text.removesuffix("```").strip()
        if not sep or not name:
            calls.append(MarkupCall(name="", args=None, raw=raw, error="no tool name"))
            continue
        calls.append(_from_object({"name": name, "arguments": args_text or "{}"}, raw))
    return calls or [MarkupCall(name="", args=None, raw=raw, error="no call in the markup")]


def _not_object(args: Any) -> str:
    return f"arguments are a JSON {type(args).__name__}, not an object"


def _guess_name(body: str) -> str:
    """Return the ``"name"`` value of broken JSON when it can be read, else ""."""
    key = body.find('"name"')
    if key < 0:
        return ""
    try:
        colon = body.index(":", key)
        value, _ = _DECODER.raw_decode(body[colon + 1 :].lstrip())
    except ValueError:
        return ""
    return value if isinstance(value, str) else ""
