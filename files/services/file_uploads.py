"""Receiving a file's bytes at its signed upload URL."""

import tempfile
from typing import IO, NoReturn

from django.db import transaction

from files.content_types import media_type, signature_mismatch
from files.models import File
from files.selectors.files import live_file_find
from files.services.file_status import (
    file_status_indexing_pending,
    file_status_upload_completed,
    file_status_upload_failed,
)
from files.signed_urls import UploadGrant
from files.storage import blob_delete_on_commit, blob_save
from platform_site.foundation.domain_errors import InvalidValue, NotFound, NotPermitted

# Uploads up to this size stay in memory on their way to the storage.
SPOOL_IN_MEMORY = 8 * 1024 * 1024
_READ_SIZE = 1024 * 1024


def file_upload_receive(
    *, grant: UploadGrant, body: IO[bytes] | None, length: int, content_type: str
) -> File:
    """Store the bytes sent to an upload URL as the file's content, then
    index them when the file asks for it. Bytes that do not match the size
    or type the file announced fail the upload (upload_failed, with the
    reason) and are not kept; the same URL can be used again until it expires."""
    file = file_upload_admit(grant=grant, length=length, content_type=content_type)
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        received = _copy(body, spool, limit=file.size + 1) if body is not None else 0
        if received != file.size:
            _upload_fail(grant, f"The upload ended after {received} of the {file.size} bytes")
        spool.seek(0)
        problem = signature_mismatch(file.content_type, spool.read(1024))
        if problem:
            _upload_fail(grant, problem)
        spool.seek(0)
        name = blob_save(bot_id=file.bot_id, file_id=file.id, content=spool)
    return _content_replace(grant, name)


def file_upload_admit(*, grant: UploadGrant, length: int, content_type: str) -> File:
    """The file an upload is for, if the request's headers agree with it:
    checked before a byte of the body is read (files/upload_admission.py).
    A size or type other than the file announced fails the upload."""
    file = _file_of(grant)
    problem = _announced_mismatch(file, length=length, content_type=content_type)
    if problem:
        _upload_fail(grant, problem)
    return file


def _file_of(grant: UploadGrant) -> File:
    file = live_file_find(file_id=grant.file_id)
    if file is None:
        raise NotFound("The file of this upload URL no longer exists")
    if file.upload_id != grant.upload_id:
        raise NotPermitted(
            "This upload URL was replaced: the file was upserted again since."
            " Upload to the uploadUrl of that answer"
        )
    return file


def _announced_mismatch(file: File, *, length: int, content_type: str) -> str | None:
    if length != file.size:
        return (
            f"The upload is {length} bytes but the file announced {file.size}"
            " (its size in PUT /v1/files)"
        )
    if media_type(content_type) != media_type(file.content_type):
        sent = f"is {content_type}" if content_type else "is missing"
        return (
            f"The upload's Content-Type {sent}; it must be the file's contentType,"
            f" {file.content_type}"
        )
    return None


def _copy(source: IO[bytes], target: IO[bytes], *, limit: int) -> int:
    """Copy at most `limit` bytes; answers how many were copied."""
    copied = 0
    while copied < limit:
        chunk = source.read(min(_READ_SIZE, limit - copied))
        if not chunk:
            break
        target.write(chunk)
        copied += len(chunk)
    return copied


def _upload_fail(grant: UploadGrant, reason: str) -> NoReturn:
    """Record why the upload failed, drop whatever content the file had (it
    is no longer what the file is), and refuse the request."""
    with transaction.atomic():
        file = File.objects.select_for_update().filter(id=grant.file_id).first()
        if file is not None and file.upload_id == grant.upload_id:
            blob_delete_on_commit(file.storage_name)
            file.storage_name = ""
            file.revision += 1
            file_status_upload_failed(file=file, reason=reason)
            file.save()
    raise InvalidValue(reason)


@transaction.atomic
def _content_replace(grant: UploadGrant, name: str) -> File:
    file = File.objects.select_for_update().filter(id=grant.file_id).first()
    if file is None or file.upload_id != grant.upload_id:
        # Deleted or upserted again while the bytes were on their way.
        blob_delete_on_commit(name)
        _file_of(grant)
        raise NotFound("The file of this upload URL no longer exists")
    blob_delete_on_commit(file.storage_name)
    file.storage_name = name
    file.revision += 1
    if file.index:
        file_status_indexing_pending(file=file)
    else:
        file_status_upload_completed(file=file)
    file.save()
    return file
