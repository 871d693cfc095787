"""A file's status: the one place it changes.

Each transition takes the file locked by the caller's transaction, sets its
status and reason, what indexing bookkeeping goes with that status, and the
passages it has in that status; the caller saves the file. Uploads
(files/services/file_uploads.py), indexing (files/services/file_index.py) and the
writes of the API (files/services/files.py) all go through these.
"""

from collections.abc import Sequence
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from files.models import File, FileStatus
from files.passage_data import PassageData
from files.services.embeddings import (
    PassageVectors,
    file_embeddings_due,
    file_embeddings_write,
)
from files.services.passages import passages_clear, passages_replace
from platform_site.foundation.jobs import job_send

# The indexing task, named rather than imported: files.tasks sits on top of
# the services (its tasks call them), as platform_site.foundation.jobs says.
INDEX_FILE_TASK = "files.tasks.index_file"


def indexing_grace() -> timedelta:
    """How long a queued or running indexing may take before it counts as lost."""
    return timedelta(seconds=settings.FILE_INDEXING_TIME_LIMIT + 60)


def file_status_upload_pending(*, file: File) -> None:
    """Waiting for its bytes at its upload URL: no passages."""
    passages_clear(file=file)
    _status_set(file, FileStatus.UPLOAD_PENDING)


def file_status_upload_failed(*, file: File, reason: str) -> None:
    """The bytes sent did not fit what the file announced: no passages."""
    passages_clear(file=file)
    _status_set(file, FileStatus.UPLOAD_FAILED, reason=reason)


def file_status_upload_completed(*, file: File) -> None:
    """Content its client keeps unindexed: no passages."""
    passages_clear(file=file)
    _status_set(file, FileStatus.UPLOAD_COMPLETED)


def file_status_indexing_pending(*, file: File, enqueue: bool = True) -> None:
    """Waiting for indexing, the run enqueued once the transaction commits
    (unless `enqueue=False`). The current passages stay readable until the
    new set replaces them. Should the message be lost, housekeeping queues
    the file again when its due time passes."""
    file.status = FileStatus.INDEXING_PENDING
    file.failed_status_reason = ""
    file.indexing_lease = 0
    file.indexing_attempts = 0
    file.indexing_due_at = timezone.now() + indexing_grace()
    if enqueue:
        job_send(INDEX_FILE_TASK, file.id, file.revision)


def file_status_indexing_completed(
    *, file: File, passages: Sequence[PassageData], vectors: PassageVectors | None = None
) -> None:
    """Indexed, or given its passages directly: `passages` replace the old
    set, with their `vectors` (files/services/embeddings.py), or due for
    them when they come without."""
    passages_replace(file=file, passages=passages)
    if vectors is not None:
        file_embeddings_write(file=file, vectors=vectors)
    elif passages:
        file_embeddings_due(file=file)
    _status_set(file, FileStatus.INDEXING_COMPLETED)


def file_status_indexing_failed(*, file: File, reason: str) -> None:
    """The content could not be indexed, for `reason`: no passages."""
    passages_clear(file=file)
    _status_set(file, FileStatus.INDEXING_FAILED, reason=reason[:2000])


def _status_set(file: File, status: FileStatus, *, reason: str = "") -> None:
    """A status with no indexing pending."""
    file.status = status
    file.failed_status_reason = reason
    file.indexing_lease = 0
    file.indexing_attempts = 0
    file.indexing_due_at = None
