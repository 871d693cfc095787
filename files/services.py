"""Writes on files and passages. The API views, the Django admin and the
tasks all go through these."""

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from bots.models import Bot
from files.content_types import content_type_for_key
from files.models import File, FileStatus, Passage
from files.passage_data import PassageData
from files.passage_rows import passages_insert
from files.storage import blob_delete_on_commit
from platform_site.api.errors import InvalidPayload
from platform_site.api.fields import TAGS_MAX_COUNT


def indexing_grace() -> timedelta:
    """How long a queued or running indexing may take before it counts as lost."""
    return timedelta(seconds=settings.FILE_INDEXING_TIME_LIMIT + 60)


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
    passages_clear(file)
    file.size = size
    file.content_type = content_type or content_type_for_key(key)
    file.index = index
    file.tags = tags or {}
    file.access_policies = list(access_policies)
    file.metadata = metadata or {}
    file.expires_at = expires_at
    file.max_chunk_length = max_chunk_length
    file.public_content_immediately_accessible = public_content_immediately_accessible
    file.status = FileStatus.UPLOAD_PENDING
    file.failed_status_reason = ""
    file.storage_name = ""
    file.upload_id = secrets.token_urlsafe(16)
    file.revision += 1
    indexing_clear(file)
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
        tags = {**locked.tags, **changes.pop("tags")}
        locked.tags = {key: value for key, value in tags.items() if value is not None}
        if len(locked.tags) > TAGS_MAX_COUNT:
            raise InvalidPayload(f"tags: At most {TAGS_MAX_COUNT} tags.")
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
    passages_replace(file=locked, passages=passages)
    locked.revision += 1
    locked.status = FileStatus.INDEXING_COMPLETED
    locked.failed_status_reason = ""
    indexing_clear(locked)
    locked.save()
    return locked


@transaction.atomic
def file_reindex(*, file: File, enqueue: bool = True) -> File:
    """Index a file's content again (after a parser upgrade, or with another
    chunk length). Its current passages stay readable until the new set
    replaces them. With `enqueue=False` no task is sent: the caller runs
    files.indexing.file_index on the answer itself (housekeeping queues the
    file should it never do so)."""
    locked = File.objects.select_for_update().get(id=file.id)
    if not locked.has_content:
        raise InvalidPayload(f"File {locked.id!r} has no content to index yet: upload it first")
    locked.index = True
    locked.revision += 1
    indexing_queue(locked, enqueue=enqueue)
    locked.save()
    return locked


def indexing_queue(file: File, *, enqueue: bool = True) -> None:
    """Mark `file` (locked, saved by the caller) as waiting for indexing, and
    enqueue the run once the transaction commits (unless `enqueue=False`).
    Should that message be lost, housekeeping queues the file again when its
    due time passes."""
    from files.tasks import index_file  # the task module imports the indexing service

    file.status = FileStatus.INDEXING_PENDING
    file.failed_status_reason = ""
    file.indexing_lease = 0
    file.indexing_attempts = 0
    file.indexing_due_at = timezone.now() + indexing_grace()
    if enqueue:
        transaction.on_commit(partial(index_file.delay, file.id, file.revision))


def indexing_clear(file: File) -> None:
    """No indexing pending for `file` (saved by the caller)."""
    file.indexing_lease = 0
    file.indexing_attempts = 0
    file.indexing_due_at = None


@transaction.atomic
def passages_replace(*, file: File, passages: Sequence[PassageData]) -> int:
    """Replace every passage of `file` in one transaction: a reader sees the
    old set or the new one, never a mix. The caller saves `file` (its
    passages_version changed)."""
    passages_clear(file)
    passages_insert(file=file, passages=passages)
    return len(passages)


def passages_clear(file: File) -> None:
    """Delete the passages of `file` (saved by the caller)."""
    if file.pk is not None:
        Passage.objects.filter(file=file).delete()
    file.passages_version += 1
