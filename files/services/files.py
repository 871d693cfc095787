"""Writes on files: what the API, the Django admin and the tasks change."""

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from bots.models import Bot
from files.content_types import content_type_for_key
from files.models import File
from files.passage_data import PassageData
from files.services.file_status import (
    file_status_indexing_completed,
    file_status_indexing_pending,
    file_status_upload_pending,
)
from files.storage import blob_delete_on_commit
from platform_site.foundation.domain_errors import InvalidValue
from platform_site.foundation.tags import tags_changed


@transaction.atomic
def file_upsert(
    *,
    bot: Bot,
    key: str,
    size: int,
    content_type: str | None = None,
    index: bool = False,
    tags: dict[str, str] | None = None,
    access_policies: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
    max_chunk_length: int | None = None,
    public_content_immediately_accessible: bool = False,
) -> File:
    """Create the file with `key`, or start it over: its content and passages
    are erased and it waits for an upload to a new upload URL (an older URL
    no longer works)."""
    file, _ = File.objects.select_for_update().get_or_create(
        bot=bot, key=key, defaults={"size": size}
    )
    blob_delete_on_commit(file.storage_name)
    file_status_upload_pending(file=file)
    file.size = size
    file.content_type = content_type or content_type_for_key(key)
    file.index = index
    file.tags = tags or {}
    file.access_policies = list(access_policies)
    file.metadata = metadata or {}
    file.expires_at = expires_at
    file.max_chunk_length = max_chunk_length
    file.public_content_immediately_accessible = public_content_immediately_accessible
    file.storage_name = ""
    file.upload_id = secrets.token_urlsafe(16)
    file.revision += 1
    file.save()
    return file


@transaction.atomic
def file_delete(*, file: File) -> None:
    """Delete a file, its passages and, once that commits, its bytes."""
    locked = File.objects.select_for_update().filter(id=file.id).first()
    if locked is None:
        return
    blob_delete_on_commit(locked.storage_name)
    locked.delete()


@transaction.atomic
def file_metadata_update(*, file: File, changes: dict[str, Any]) -> File:
    """Change a file's tags (merged; a tag set to None is removed), metadata,
    access policies or expiry, leaving its content and passages as they are."""
    locked = File.objects.select_for_update().get(id=file.id)
    if "tags" in changes:
        locked.tags = tags_changed(locked.tags, changes.pop("tags"), field="tags")
    for field, value in changes.items():
        setattr(locked, field, value)
    locked.save()
    return locked


def files_delete_expired(*, limit: int = 500) -> int:
    """Delete files whose expiresAt has passed; answers how many."""
    expired = File.objects.filter(expires_at__lte=timezone.now()).order_by("expires_at")[:limit]
    count = 0
    for file in expired:
        file_delete(file=file)
        count += 1
    return count


@transaction.atomic
def file_passages_set(*, file: File, passages: Sequence[PassageData]) -> File:
    """Set a file's passages directly. The file passes through
    indexing_pending to indexing_completed inside this transaction, so a
    reader sees the old passages or the new ones; an indexing run of the
    previous content that is still going finds the file changed and drops
    its result."""
    locked = File.objects.select_for_update().get(id=file.id)
    locked.revision += 1
    file_status_indexing_completed(file=locked, passages=passages)
    locked.save()
    return locked


@transaction.atomic
def file_reindex(*, file: File, enqueue: bool = True) -> File:
    """Index a file's content again (after a parser upgrade, or with another
    chunk length). Its current passages stay readable until the new set
    replaces them. With `enqueue=False` no task is sent: the caller runs
    files.services.file_index.file_index on the answer itself (housekeeping
    queues the file should it never do so)."""
    locked = File.objects.select_for_update().get(id=file.id)
    if not locked.has_content:
        raise InvalidValue(f"File {locked.id!r} has no content to index yet: upload it first")
    locked.index = True
    locked.revision += 1
    file_status_indexing_pending(file=locked, enqueue=enqueue)
    locked.save()
    return locked
