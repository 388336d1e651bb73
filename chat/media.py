"""How a tool's images and files show in its card: drawn, linked, or a note.

Tool output is untrusted. An image is drawn as a ``data:`` URL only when its bytes are
png, jpeg, gif or webp (by their signature, whatever the block declared), formats every
browser decodes and none of which runs script; a remote URL (http or https only) is a
link, never loaded, since loading it would tell a third party who is looking; anything
else is the note the model read (:func:`agents.tool_output.view_block`).
"""

from __future__ import annotations

import binascii
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from agents.tool_output import view_block

IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
LINK_SCHEMES = ("http", "https")


class MediaShown(NamedTuple):
    """A tool's image or file as its card shows it: ``img_src``, a ``data:`` URL of an
    image to draw (png, jpeg, gif, webp whose base64 decodes); ``link``, an http(s) URL
    shown as a link, never loaded; ``note``, what the model was sent in its place."""

    kind: str
    note: str
    img_src: str = ""
    link: str = ""


def image_type(data: bytes) -> str:
    """Return the MIME type of image bytes the card may draw, or "" for any other."""
    for signature, mime_type in IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""


def media_shown(block: Any) -> MediaShown | None:
    """Return a stored content block as the card shows it, or None for a text block
    (its text is in the result)."""
    view = view_block(block)
    if view.kind == "text":
        return None
    img_src = link = ""
    if view.kind == "image" and view.base64:
        try:
            data = binascii.a2b_base64(view.base64, strict_mode=True)
        except (binascii.Error, ValueError):
            data = b""
        mime_type = image_type(data)
        if mime_type:
            img_src = f"data:{mime_type};base64,{view.base64}"
    if view.url and urlsplit(view.url).scheme.lower() in LINK_SCHEMES:
        link = view.url
    return MediaShown(view.kind, view.note, img_src, link)
