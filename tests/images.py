"""Real image bytes for tests: a PNG drawn with the standard library only."""

from __future__ import annotations

import base64
import random
import struct
import zlib


def png_bytes(width: int = 48, height: int = 48, *, seed: int = 0) -> bytes:
    """Return a valid RGB PNG of ``width`` x ``height`` random pixels (they do not
    compress, so 48 x 48 is about 9,300 characters of base64)."""
    noise = random.Random(seed)
    rows = b"".join(b"\x00" + noise.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def png_base64(width: int = 48, height: int = 48, *, seed: int = 0) -> str:
    """Return :func:`png_bytes` as base64 text."""
    return base64.b64encode(png_bytes(width, height, seed=seed)).decode()
