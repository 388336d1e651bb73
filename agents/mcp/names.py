"""Tool names the model APIs accept, for MCP tool names they refuse.

OpenAI-style APIs accept a function name matching ``^[a-zA-Z0-9_-]{1,64}$``; an MCP server
may name a tool with dots, spaces, any unicode and any length (the MCP SDK only warns,
``mcp.shared.tool_name_validation``), and the adapter's ``<server>_<tool>`` prefix can
make two servers' names meet (server ``a_b`` tool ``c``, server ``a`` tool ``b_c``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

MODEL_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_CHARS = 8


def _hashed(name: str, clean: str, salt: int = 0) -> str:
    digest = hashlib.sha256(f"{name}\0{salt}".encode()).hexdigest()[:_HASH_CHARS]
    return f"{clean[: MAX_NAME - _HASH_CHARS - 1]}_{digest}"


def model_tool_names(names: Sequence[str]) -> list[str]:
    """Return a name the model APIs accept for each of ``names``, in order, all distinct.

    A valid name is kept as it is (the first of several equal ones); any other has each
    refused character replaced by ``_`` and, when that is too long or already taken, ends
    in ``_`` and 8 hex digits of a SHA-256 of the original name: the same names give the
    same result on every call.
    """
    result: list[str | None] = [None] * len(names)
    taken: set[str] = set()
    for i, name in enumerate(names):
        if MODEL_TOOL_NAME.match(name) and name not in taken:
            result[i] = name
            taken.add(name)
    for i, name in enumerate(names):
        if result[i] is not None:
            continue
        clean = _INVALID.sub("_", name) or "_"
        if len(clean) > MAX_NAME or clean in taken:
            clean = _hashed(name, clean)
        salt = 0
        while clean in taken:  # a digest that meets another name: vanishingly rare
            salt += 1
            clean = _hashed(name, clean, salt)
        result[i] = clean
        taken.add(clean)
    return [name for name in result if name is not None]
