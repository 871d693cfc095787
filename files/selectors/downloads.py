"""Reading a file's content at its signed `url`."""

from dataclasses import dataclass
from typing import IO

from files.content_types import media_type
from files.selectors.files import live_file_find
from files.signed_urls import DownloadGrant
from files.storage import files_storage
from platform_site.foundation.domain_errors import NotFound, NotPermitted

# Shown in the browser; anything else is a download. Bytes a bot uploaded
# share their origin with the Django admin: an HTML or SVG page shown from
# here could act with a staff member's session.
INLINE_TYPES = frozenset(
    {"application/pdf", "text/plain", "image/png", "image/jpeg", "image/gif", "image/webp"}
)


@dataclass(frozen=True)
class Download:
    content: IO[bytes]
    content_type: str
    filename: str
    inline: bool


def file_download_open(*, grant: DownloadGrant) -> Download:
    """The content `grant` gives, open for reading (the caller closes it)."""
    file = live_file_find(file_id=grant.file_id)
    if file is None:
        raise NotFound("The file of this URL no longer exists")
    if grant.storage_name is None and "public_content" not in file.access_policies:
        raise NotPermitted("The file is no longer public: ask its bot for a new URL")
    if grant.storage_name is not None and grant.storage_name != file.storage_name:
        raise NotFound("The file's content changed since this URL was made: get a new one")
    if not file.has_content:
        raise NotFound(f"File {file.id!r} has no content yet")
    try:
        content = files_storage().open(file.storage_name, "rb")
    except FileNotFoundError:
        raise NotFound(f"The content of file {file.id!r} is missing") from None
    return Download(
        content=content,
        content_type=file.content_type,
        filename=file.key.rsplit("/", 1)[-1],
        inline=media_type(file.content_type) in INLINE_TYPES,
    )
