"""Indexing a file: its bytes become passages.

A run claims the file with a lease (so two runs of one file never both
work), reads the bytes, parses them, and replaces the passages in the same
transaction that marks the file indexing_completed, fenced by the lease and
the file's revision: a run whose file was upserted, deleted or re-indexed
meanwhile throws its result away. A document that cannot be indexed ends
indexing_failed with a reason a person can act on."""

import logging
import secrets
import time
from enum import StrEnum

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from files.models import File, FileStatus
from files.parsing import UnreadableDocument, extract_passages
from files.passage_data import PassageData
from files.services.embeddings import PassageVectors, passages_embed
from files.services.file_status import (
    file_status_indexing_completed,
    file_status_indexing_failed,
    indexing_grace,
)
from files.storage import blob_read
from platform_site.observability import metrics

logger = logging.getLogger(__name__)


class IndexingOutcome(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"  # another run holds the file, or it changed


def file_index(*, file_id: str, revision: int) -> IndexingOutcome:
    started = time.perf_counter()
    outcome = _file_index(file_id, revision)
    if outcome is not IndexingOutcome.SKIPPED:
        metrics.indexing_observe(
            outcome=f"indexing_{outcome}", seconds=time.perf_counter() - started
        )
    return outcome


def _file_index(file_id: str, revision: int) -> IndexingOutcome:
    lease = _claim(file_id, revision)
    if lease is None:
        return IndexingOutcome.SKIPPED
    file = File.objects.get(id=file_id)
    try:
        passages = _passages_of(file)
        # Embedded in the same pass, so that the file is searchable by
        # meaning once indexing_completed; a longer file would not fit in
        # the time limit (about 85 passages/s on 2 cores): the worker
        # embeds it afterwards, a slice a run.
        inline = len(passages) <= settings.FILE_EMBEDDING_INLINE_MAX
        vectors = passages_embed(passages) if inline else None
    except UnreadableDocument as unreadable:
        return _finish(file, lease, failure=str(unreadable))
    except SoftTimeLimitExceeded:
        return _finish(
            file,
            lease,
            failure=f"Indexing took longer than {settings.FILE_INDEXING_TIME_LIMIT} seconds"
            " and was stopped: split the document into smaller files",
        )
    return _finish(file, lease, passages=passages, vectors=vectors)


def _claim(file_id: str, revision: int) -> int | None:
    now = timezone.now()
    lease = secrets.randbits(62) + 1
    claimed = (
        File.objects.filter(
            id=file_id,
            revision=revision,
            status=FileStatus.INDEXING_PENDING,
            indexing_attempts__lt=settings.FILE_INDEXING_MAX_ATTEMPTS,
        )
        .filter(Q(indexing_lease=0) | Q(indexing_due_at__lte=now))
        .update(
            indexing_lease=lease,
            indexing_due_at=now + indexing_grace(),
            indexing_attempts=F("indexing_attempts") + 1,
        )
    )
    return lease if claimed else None


def _passages_of(file: File) -> list[PassageData]:
    if file.size > settings.FILE_INDEXING_MAX_SIZE:
        raise UnreadableDocument(
            f"The file is {_megabytes(file.size)}; indexing reads files up to"
            f" {_megabytes(settings.FILE_INDEXING_MAX_SIZE)}: split it into smaller files"
        )
    try:
        data = blob_read(file.storage_name)
    except FileNotFoundError:
        raise UnreadableDocument(
            "The file's content is missing from storage: upload it again"
        ) from None
    return extract_passages(
        data,
        content_type=file.content_type,
        max_length=file.max_chunk_length or settings.FILE_PASSAGE_MAX_LENGTH,
        source_url=_source_url(file),
    )


def _source_url(file: File) -> str:
    url = file.metadata.get("sourceUrl") if isinstance(file.metadata, dict) else None
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else ""


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


@transaction.atomic
def _finish(
    file: File,
    lease: int,
    *,
    passages: list[PassageData] | None = None,
    vectors: PassageVectors | None = None,
    failure: str | None = None,
) -> IndexingOutcome:
    locked = File.objects.select_for_update().filter(id=file.id).first()
    if locked is None or locked.indexing_lease != lease or locked.revision != file.revision:
        return IndexingOutcome.SKIPPED
    if failure is not None:
        logger.info("Indexing of %s failed: %s", locked.id, failure, extra={"file_id": locked.id})
        file_status_indexing_failed(file=locked, reason=failure)
    else:
        file_status_indexing_completed(file=locked, passages=passages or [], vectors=vectors)
    locked.save()
    return IndexingOutcome.FAILED if failure is not None else IndexingOutcome.COMPLETED


def files_requeue_stalled(*, limit: int = 500) -> list[tuple[str, int]]:
    """Files whose indexing was queued or started long enough ago to count as
    lost (a broker or worker that died): answers those to queue again, with
    their revision, and fails those that used up their attempts."""
    now = timezone.now()
    requeued: list[tuple[str, int]] = []
    with transaction.atomic():
        stalled = list(
            File.objects.select_for_update(skip_locked=True)
            .filter(status=FileStatus.INDEXING_PENDING, indexing_due_at__lte=now)
            .order_by("indexing_due_at")[:limit]
        )
        for file in stalled:
            if file.indexing_attempts >= settings.FILE_INDEXING_MAX_ATTEMPTS:
                file_status_indexing_failed(
                    file=file,
                    reason=(
                        f"Indexing was interrupted {file.indexing_attempts} times (its worker"
                        " stopped, ran out of memory or out of time): the document may be too"
                        " large or complex; split it into smaller files"
                    ),
                )
                transaction.on_commit(metrics.indexing_given_up)
            else:
                file.indexing_lease = 0
                file.indexing_due_at = now + indexing_grace()
                requeued.append((file.id, file.revision))
            file.save()
    return requeued
