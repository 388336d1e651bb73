"""Stream a download of text chunks in flat memory, under WSGI and ASGI alike.

Every file format (CSV, JSONL, OTLP JSON; :mod:`chat.traces.formats`) produces an
iterator of text pieces; this module turns one into a streaming HTTP response.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator, Iterable, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

CHUNK_CHARS = 65536


def encoded_chunks(pieces: Iterable[str], *, size: int = CHUNK_CHARS) -> Iterator[bytes]:
    """Yield ``pieces`` as UTF-8 bytes, joined into chunks of about ``size`` characters.

    One chunk per piece would make a response of millions of tiny writes; one chunk for
    everything would hold the whole file in memory. The last chunk may be empty.
    """
    buffer: list[str] = []
    held = 0
    encoder = codecs.getincrementalencoder("utf-8")()
    for piece in pieces:
        buffer.append(piece)
        held += len(piece)
        if held >= size:
            yield encoder.encode("".join(buffer))
            buffer, held = [], 0
    yield encoder.encode("".join(buffer), final=True)


async def aencoded_chunks(pieces: Iterable[str]) -> AsyncIterator[bytes]:
    """Yield :func:`encoded_chunks`' chunks asynchronously, each read in the ORM's thread.

    Under ASGI, Django reads a *sync* iterator of a streaming response to the end before it
    sends a byte (``StreamingHttpResponse.__aiter__``), which would hold the whole export
    in memory; an async iterator is sent chunk by chunk.
    """
    chunks = encoded_chunks(pieces)
    read = sync_to_async(lambda: next(chunks, None), thread_sensitive=True)
    while (chunk := await read()) is not None:
        yield chunk


def streaming_download(
    pieces: Iterable[str],
    *,
    request: HttpRequest | None,
    content_type: str,
    filename: str,
) -> StreamingHttpResponse:
    """Return an attachment download of ``pieces``, streamed in chunks of about 64 KiB.

    For a request served over ASGI (Daphne) the content is an async iterator, so it
    streams in flat memory there too. The caller checks permissions.
    """
    content = (
        aencoded_chunks(pieces) if isinstance(request, ASGIRequest) else encoded_chunks(pieces)
    )
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
