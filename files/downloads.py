"""Serving a file's content at its signed `url`."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import IO

from asgiref.sync import sync_to_async
from django.utils import timezone

from files.content_types import media_type
from files.models import File
from files.signed_urls import DownloadGrant
from files.storage import files_storage
from platform_site.api.errors import Forbidden, ResourceNotFound

# Shown in the browser; anything else is a download. Bytes a bot uploaded
# share their origin with the Django admin: an HTML or SVG page shown from
# here could act with a staff member's session.
INLINE_TYPES = frozenset(
    {"application/pdf", "text/plain", "image/png", "image/jpeg", "image/gif", "image/webp"}
)
# What a download served over ASGI holds in memory at a time.
ASYNC_CHUNK_SIZE = 256 * 1024


@dataclass(frozen=True)
class Download:
    content: IO[bytes]
    content_type: str
    filename: str
    inline: bool


def file_download_open(*, grant: DownloadGrant) -> Download:
    file = File.objects.filter(id=grant.file_id).first()
    if file is None or (file.expires_at is not None and file.expires_at <= timezone.now()):
        raise ResourceNotFound("The file of this URL no longer exists")
    if grant.storage_name is None and "public_content" not in file.access_policies:
        raise Forbidden("The file is no longer public: ask its bot for a new URL")
    if grant.storage_name is not None and grant.storage_name != file.storage_name:
        raise ResourceNotFound("The file's content changed since this URL was made: get a new one")
    if not file.has_content:
        raise ResourceNotFound(f"File {file.id!r} has no content yet")
    try:
        content = files_storage().open(file.storage_name, "rb")
    except FileNotFoundError:
        raise ResourceNotFound(f"The content of file {file.id!r} is missing") from None
    return Download(
        content=content,
        content_type=file.content_type,
        filename=file.key.rsplit("/", 1)[-1],
        inline=media_type(file.content_type) in INLINE_TYPES,
    )


async def content_chunks(content: IO[bytes]) -> AsyncIterator[bytes]:
    """The content for an ASGI server, a chunk at a time: given a file,
    Django would read it whole into memory first (it cannot iterate a
    synchronous file from the event loop). Each read runs in the request's
    thread, as does the close: the response closes the file it was made with,
    at the end and when the client hangs up mid-way."""
    read = sync_to_async(content.read)
    while chunk := await read(ASYNC_CHUNK_SIZE):
        yield chunk
