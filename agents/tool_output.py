"""What a tool returned, read once: the text the model reads, the blocks, the artifact.

``tool.ainvoke(tool_call)`` returns a ``ToolMessage`` (langchain-core's
``tools/base.py``, ``_format_output``): its ``content`` is a string or a list of content
blocks, its ``artifact`` what a ``response_format="content_and_artifact"`` tool kept
for the app, its ``status`` ``"error"`` when ``handle_tool_error`` (or
``handle_validation_error``) turned an exception into content. :func:`read_output`
turns that into a :class:`ToolOutput`:

- ``text``: what the model reads, never empty and never base64: text blocks joined, each
  image or file replaced by a short note (:data:`IMAGE_NOTE`, :data:`FILE_NOTE`), since
  OpenAI-compatible servers refuse images in tool messages and base64 would fill the
  context window;
- ``blocks``: the content blocks, JSON-safe, kept for the card and storage when any of
  them is more than text, each payload over :data:`MAX_BLOCK_DATA_CHARS` replaced by a
  note;
- ``artifact``: JSON-safe (anything else as ``str``), replaced by a note over
  :data:`MAX_ARTIFACT_CHARS` of JSON.

:func:`view_block` reads one block the same way for the notes here and the card
(:mod:`chat.display`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import ToolMessage
from pydantic import BaseModel

NOTHING_RETURNED = "(the tool returned nothing)"
"""The observation of a tool that returned ``None``, ``""``, ``[]`` or only whitespace:
strict servers refuse an empty tool message. (``None`` reaches us as ``"null"``:
langchain-core JSON-encodes it, so a tool returning the string ``"null"`` reads the same.)"""
IMAGE_NOTE = "[image: {what}]"
FILE_NOTE = "[{kind}: {what}]"
OTHER_NOTE = "[{kind} block]"
TEXT_NOT_STORED = "[the rest of the text blocks not stored: over the cap of all their text]"
DATA_NOT_STORED = "[{size:,} bytes of {mime_type} not stored: over the {cap:,}-character cap]"
ARTIFACT_NOT_STORED = (
    "[artifact not stored: {chars:,} characters of JSON, over the {cap:,}-character cap]"
)
HANDLED_ERROR = "ToolException"
"""``error_type`` of a ``ToolMessage`` with ``status="error"``: the tool's
``handle_tool_error`` turned a ``ToolException`` into content, or the tool returned such a
message itself (``ValidationError`` when only ``handle_validation_error`` is set)."""

MAX_BLOCK_DATA_CHARS = 4_000_000
"""Longest inline payload (base64 or a ``data:`` URL, characters) of one block that is
kept for the card and storage: about 3 MB of image. A longer one is replaced by a note."""
MAX_BLOCKS_DATA_CHARS = 8_000_000
"""Longest inline payload kept over all the blocks of one call; later ones become notes."""
MAX_ARTIFACT_CHARS = 1_000_000
"""Longest artifact kept, in characters of JSON; a longer one is replaced by a note."""
MAX_BLOCK_TEXT_CHARS = 1_000_000
"""Most text kept among the blocks, all text blocks together (the text is in the result
too, clipped as every result is)."""
URL_NOTE_CHARS = 200  # of a remote image's URL in the model's note

MEDIA_KINDS = frozenset({"image", "image_url", "file", "audio", "video", "document"})
# A string this long of base64's alphabet in an unknown block is data, not text.
_DATA_LIKE = re.compile(r"[A-Za-z0-9+/=\s]{200,}\Z")
_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*?(?P<b64>;base64)?,", re.I)
# json.dumps with options builds an encoder per call; one is kept instead.
_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


class ToolOutput(NamedTuple):
    """A tool's output, read: see the module docstring. ``failed``: the ToolMessage's
    ``status`` was ``"error"``; ``error_type`` then names what kind."""

    text: str
    blocks: tuple[dict[str, Any], ...] = ()
    artifact: Any = None
    failed: bool = False
    error_type: str = ""


class BlockView(NamedTuple):
    """One content block as the model's note and the card read it.

    ``kind``: ``text``, ``image``, ``file``, ``audio``, ``video``, ``document`` or the
    block's own type; ``text``: a text block's text; ``mime_type``; ``base64``: inline
    data (whitespace removed); ``url``: where the data is, when not inline; ``size``: bytes
    of inline data; ``name``: a file's name; ``note``: what stands for the block in the
    model's text.
    """

    kind: str
    text: str = ""
    mime_type: str = ""
    base64: str = ""
    url: str = ""
    size: int = 0
    name: str = ""
    note: str = ""


def read_output(output: Any, *, validation_only: bool = False) -> ToolOutput:
    """Return ``output`` (what ``tool.ainvoke(tool_call)`` returned) read as a
    :class:`ToolOutput`. ``validation_only``: the tool handles only validation errors,
    so an error message is a ``ValidationError``'s."""
    if isinstance(output, ToolMessage):
        text, blocks = content_text(output.content)
        artifact = stored_artifact(output.artifact)
        if output.status == "error":
            kind = "ValidationError" if validation_only else HANDLED_ERROR
            return ToolOutput(text, blocks, artifact, failed=True, error_type=kind)
        return ToolOutput(text, blocks, artifact)
    # Not a message: a tool called without an id, or a ToolOutputMixin of another kind.
    text, blocks = content_text(output)
    return ToolOutput(text, blocks)


def content_text(content: Any) -> tuple[str, tuple[dict[str, Any], ...]]:
    """Return ``(text, blocks)`` of a message's content or a tool's bare output.

    A string is the text (``"null"``, langchain-core's ``None``, and blank text are
    :data:`NOTHING_RETURNED`); a list of content blocks is read block by block, and kept
    as ``blocks`` when any is more than text; anything else is JSON.
    """
    if content is None:
        return NOTHING_RETURNED, ()
    if isinstance(content, str):
        if not content.strip() or content == "null":
            return NOTHING_RETURNED, ()
        blocks = _encoded_blocks(content)
        if blocks is None:
            return content, ()
        content = blocks
    if isinstance(content, list | tuple) and all(_is_block(item) for item in content):
        views = [view_block(item) for item in content]
        text = "\n".join(view.text if view.kind == "text" else view.note for view in views)
        if not text.strip():
            text = NOTHING_RETURNED
        if all(view.kind == "text" for view in views):
            return text, ()
        return text, stored_blocks(content)
    encoded = to_json(content)
    return (encoded if encoded.strip() else NOTHING_RETURNED), ()


def _encoded_blocks(text: str) -> list[Any] | None:
    """Return the blocks of a list langchain-core JSON-encoded whole, or None.

    ``_format_output`` keeps a list as blocks only when every type is in its
    ``TOOL_MESSAGE_BLOCK_TYPES``; with one more (``audio``, ``video``) it sends the whole
    list as a JSON string, base64 and all. Such a string is read back as blocks when one
    of them is media; any other JSON list stays the tool's text.
    """
    if not text.startswith('[{"type": '):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(_is_block(item) for item in value):
        return None
    if not any(isinstance(item, dict) and item["type"] in MEDIA_KINDS for item in value):
        return None
    return value


def _is_block(item: Any) -> bool:
    return isinstance(item, str) or (isinstance(item, Mapping) and "type" in item)


def view_block(block: Any) -> BlockView:
    """Return ``block`` (a string or a content block of any common shape) read as a
    :class:`BlockView`.

    Shapes: langchain-core's standard blocks (``{"type": "image", "base64" | "url" |
    "file_id", "mime_type"}``, and the older ``source_type`` / ``data`` form), OpenAI's
    ``{"type": "image_url", "image_url": {"url": "data:..." | "https://..."}}`` and
    ``{"type": "file", "file": {"file_data", "filename"}}``, Anthropic's ``{"type":
    "image", "source": {"type": "base64", "media_type", "data"}}``; ``json`` blocks are
    their JSON; any other type is its JSON with long data strings left out.
    """
    if isinstance(block, str):
        return BlockView("text", text=block)
    kind = str(block.get("type", ""))
    if kind == "text":
        return BlockView("text", text=str(block.get("text", "")))
    if kind == "json":
        return BlockView("text", text=to_json(block.get("json")))
    if kind not in MEDIA_KINDS:
        return BlockView(kind, note=_other_note(kind, block))
    media = "image" if kind == "image_url" else kind
    mime_type, data, url, name = _payload(block)
    if data.startswith("data:"):
        mime_type, data, url = _from_data_url(data, mime_type)
    elif url.startswith("data:"):
        mime_type, data, url = _from_data_url(url, mime_type)
    data = "".join(data.split())
    size = base64_size(data)
    file_id = str(block.get("file_id") or block.get("id") or "") if not (data or url) else ""
    parts = [part for part in (name, mime_type) if part]
    if data:
        parts.append(f"{size:,} bytes")
    elif url:
        parts.append(url if len(url) <= URL_NOTE_CHARS else url[: URL_NOTE_CHARS - 1] + "…")
    elif file_id:
        parts.append(f"file id {file_id}")
    what = ", ".join(parts) or "no data"
    if media == "image":
        note = IMAGE_NOTE.format(what=what)
    else:
        note = FILE_NOTE.format(kind=media, what=what)
    return BlockView(media, mime_type=mime_type, base64=data, url=url, size=size, name=name,
                     note=note)  # fmt: skip


def _payload(block: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """Return ``(mime_type, inline data, url, file name)`` from a media block's fields."""
    mime_type = str(block.get("mime_type") or "")
    data = block.get("base64") or ""
    url = block.get("url") or ""
    extras = block.get("extras") if isinstance(block.get("extras"), Mapping) else {}
    name = block.get("filename") or block.get("name") or extras.get("filename") or ""
    if not data and block.get("source_type") == "base64":  # langchain-core 0.3's form
        data = block.get("data") or ""
    image_url = block.get("image_url")
    if isinstance(image_url, Mapping):
        url = image_url.get("url") or url
    elif isinstance(image_url, str):
        url = image_url
    source = block.get("source")
    if isinstance(source, Mapping):  # Anthropic's
        mime_type = mime_type or str(source.get("media_type") or "")
        if source.get("type") == "base64":
            data = source.get("data") or data
        url = source.get("url") or url
    file = block.get("file")
    if isinstance(file, Mapping):  # OpenAI's file block
        data = file.get("file_data") or data
        name = name or file.get("filename") or ""
    return mime_type, str(data), str(url), str(name)


def _from_data_url(url: str, mime_type: str) -> tuple[str, str, str]:
    """Return ``(mime_type, base64, url)`` of a ``data:`` URL: its base64 apart, or the
    URL itself kept when it is not base64."""
    match = _DATA_URL.match(url)
    if match is None or not match.group("b64"):
        return mime_type, "", ""
    return (match.group("mime") or mime_type).lower(), url[match.end() :], ""


def base64_size(data: str) -> int:
    """Return how many bytes the base64 text ``data`` (no whitespace) decodes to."""
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _other_note(kind: str, block: Mapping[str, Any]) -> str:
    """Return an unknown block's JSON with strings that look like data left out."""

    def scrubbed(value: Any) -> Any:
        if isinstance(value, str) and _DATA_LIKE.match(value):
            return f"[{len(value):,} characters of data]"
        if isinstance(value, Mapping):
            return {str(key): scrubbed(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [scrubbed(item) for item in value]
        return value

    text = to_json(scrubbed(block))
    return text if text else OTHER_NOTE.format(kind=kind or "unknown")


def to_json(value: Any) -> str:
    """Return ``value`` as JSON text, Chinese kept, anything else as ``str``."""
    try:
        return _JSON.encode(value)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def json_safe(value: Any, depth: int = 0) -> Any:
    """Return ``value`` as data every JSON column takes: dicts (string keys), lists,
    strings, finite numbers, booleans and None; a pydantic model as its JSON dump;
    anything else (and NaN, infinities, nesting over 100 deep) as ``str``."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 100:
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item, depth + 1) for item in value]
    if isinstance(value, BaseModel):
        try:
            return json_safe(value.model_dump(mode="json"), depth + 1)
        except Exception:  # a model that cannot dump itself is still shown
            return str(value)
    return str(value)


def stored_blocks(blocks: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Return ``blocks`` JSON-safe, strings as text blocks, each payload over
    :data:`MAX_BLOCK_DATA_CHARS` (or past :data:`MAX_BLOCKS_DATA_CHARS` in all) replaced
    by a text block with a note, and the text past :data:`MAX_BLOCK_TEXT_CHARS` (all
    text blocks together) left out with :data:`TEXT_NOT_STORED`."""
    kept: list[dict[str, Any]] = []
    total = 0
    text_left = MAX_BLOCK_TEXT_CHARS  # for all text blocks together, not each
    for block in blocks:
        view = view_block(block)
        if view.kind == "text":
            if text_left > 0:
                kept.append({"type": "text", "text": view.text[:text_left]})
                text_left -= len(view.text)
                if text_left < 0:
                    kept.append({"type": "text", "text": TEXT_NOT_STORED})
            continue
        chars = len(view.base64)
        if chars and (chars > MAX_BLOCK_DATA_CHARS or total + chars > MAX_BLOCKS_DATA_CHARS):
            note = DATA_NOT_STORED.format(size=view.size, mime_type=view.mime_type or view.kind,
                                          cap=MAX_BLOCK_DATA_CHARS)  # fmt: skip
            kept.append({"type": "text", "text": f"{view.note} {note}"})
            continue
        total += chars
        kept.append(json_safe(block))
    return tuple(kept)


def stored_artifact(artifact: Any) -> Any:
    """Return ``artifact`` JSON-safe (:func:`json_safe`), or a note in its place when its
    JSON is over :data:`MAX_ARTIFACT_CHARS`; None stays None."""
    if artifact is None:
        return None
    safe = json_safe(artifact)
    chars = len(to_json(safe))
    if chars > MAX_ARTIFACT_CHARS:
        return ARTIFACT_NOT_STORED.format(chars=chars, cap=MAX_ARTIFACT_CHARS)
    return safe
