"""The bytes of files, through Django's storage API (settings.STORAGES["files"]):
a local folder by default, an S3-compatible bucket when configured."""

import logging
from typing import IO

from django.core.files import File as DjangoFile
from django.core.files.storage import Storage, storages
from django.db import transaction
from ulid import ULID

logger = logging.getLogger(__name__)


def files_storage() -> Storage:
    return storages["files"]


def blob_save(*, bot_id: str, file_id: str, content: IO[bytes]) -> str:
    """Store `content` under a name of its own (never overwriting the bytes a
    reader may still be using); answers the stored name."""
    name = f"{bot_id}/{file_id}/{ULID()}"
    return files_storage().save(name, DjangoFile(content, name=name))


def blob_read(name: str) -> bytes:
    with files_storage().open(name, "rb") as blob:
        data: bytes = blob.read()
        return data


def blob_delete_on_commit(name: str) -> None:
    """Delete the bytes once the transaction that stopped using them commits;
    a failure leaves an orphan behind, never a file without its bytes."""
    if name:
        transaction.on_commit(lambda: _delete_quietly(name))


def _delete_quietly(name: str) -> None:
    try:
        files_storage().delete(name)
    except Exception:
        # The storage is outside this service (a bucket may be unreachable):
        # the row is already gone, so the orphan is logged, not raised.
        logger.warning("Could not delete stored bytes %s", name, exc_info=True)
