"""A file's content streamed to an ASGI server."""

from collections.abc import AsyncIterator
from typing import IO

from asgiref.sync import sync_to_async

# What a download served over ASGI holds in memory at a time.
ASYNC_CHUNK_SIZE = 256 * 1024


async def content_chunks(content: IO[bytes]) -> AsyncIterator[bytes]:
    """The content for an ASGI server, a chunk at a time: given a file,
    Django would read it whole into memory first (it cannot iterate a
    synchronous file from the event loop). Each read runs in the request's
    thread, as does the close: the response closes the file it was made with,
    at the end and when the client hangs up mid-way."""
    read = sync_to_async(content.read)
    while chunk := await read(ASYNC_CHUNK_SIZE):
        yield chunk
