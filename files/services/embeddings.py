"""Sentence embeddings of a file's passages, written beside them.

Indexing embeds a file's passages in the same pass as it extracts them and
writes both in one transaction (files/services/file_index.py). Passages set
through the API, those of a file too long to embed in indexing's pass, and
those indexed before semantic search are embedded afterwards: their file
gets an `embeddings_due_at`, a task embeds it (a slice a run) after the
write commits, and beat queues again what is still due past that time (a
lost message, a worker that stopped). Until then the file is searched by
its words alone.

Headings are not embedded, as they are not ranked (files/selectors/search_lexical.py)."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from bots.models import Bot
from files.embeddings.model import MODEL_ID, model
from files.embeddings.vectors import positions_count, vectors_pack, vectors_unpack
from files.models import HEADING_SUBTYPES, File, FileEmbeddings, FileStatus, Passage
from files.passage_data import PassageData
from platform_site.foundation.jobs import job_send

if TYPE_CHECKING:
    import numpy as np

# Named rather than imported, as INDEX_FILE_TASK (files/services/file_status.py).
EMBED_FILE_TASK = "files.tasks.embed_file"
# Passages a run of the task embeds (about 25 s on 2 cores), so that a file
# of any size is embedded within the task's time limit, slice after slice.
SLICE = 2_000


def _grace() -> timedelta:
    """How long a queued or running embedding may take before it counts as
    lost (its task's time limit, as indexing's)."""
    return timedelta(seconds=settings.FILE_INDEXING_TIME_LIMIT + 60)


@dataclass(frozen=True)
class PassageVectors:
    """The embedded passages of a file: their positions and vectors."""

    positions: list[int]
    vectors: "np.ndarray"


def passages_embed(passages: Sequence[PassageData]) -> PassageVectors | None:
    """The vectors of `passages` (positions as passages_insert gives them);
    None when semantic search is off."""
    embedding_model = model()
    if embedding_model is None:
        return None
    positions: list[int] = []
    texts: list[str] = []
    for index, data in enumerate(passages):
        if data.subtype not in HEADING_SUBTYPES:
            positions.append(index if data.position is None else data.position)
            texts.append(data.content)
    return PassageVectors(positions=positions, vectors=embedding_model.embed(texts))


def file_embeddings_write(*, file: File, vectors: PassageVectors) -> None:
    """Store `vectors` as the embeddings of `file`'s current passages. The
    caller holds the transaction and the file's lock, and saves the file."""
    positions, packed = vectors_pack(vectors.positions, vectors.vectors)
    FileEmbeddings.objects.update_or_create(
        file=file,
        defaults={
            "passages_version": file.passages_version,
            "model": MODEL_ID,
            "positions": positions,
            "vectors": packed,
        },
    )
    file.embeddings_due_at = None


def file_embeddings_due(*, file: File) -> None:
    """`file`'s passages were written without vectors: embedded by a task
    once the caller's transaction commits (the caller saves the file)."""
    file.embeddings_due_at = timezone.now() + _grace()
    if settings.FILE_SEARCH_SEMANTIC:
        job_send(EMBED_FILE_TASK, file.id)


def file_embed(*, file_id: str) -> bool:
    """Embed the next SLICE of a due file's passages, after those embedded
    already; answers whether vectors were written. The file stays due (and
    its task is queued again) until the last slice is in. The passages are
    read and embedded outside any transaction; the write is dropped if
    they changed meanwhile (the file is then due for its new passages, or
    no longer due)."""
    file = File.objects.filter(id=file_id, embeddings_due_at__isnull=False).first()
    if file is None or model() is None:
        return False
    stored = _stored(file)
    after = int(stored[0][-1]) if stored is not None and len(stored[0]) else -1
    rows = (
        Passage.objects.filter(file=file, position__gt=after)
        .exclude(subtype__in=HEADING_SUBTYPES)
        .order_by("position")
        .values_list("position", "content")[: SLICE + 1]
    )
    passages = [PassageData(content=content, position=position) for position, content in rows]
    vectors = passages_embed(passages[:SLICE])
    if vectors is None:
        return False
    with transaction.atomic():
        locked = File.objects.select_for_update().filter(id=file_id).first()
        if (
            locked is None
            or locked.embeddings_due_at is None
            or locked.passages_version != file.passages_version
            # Another run (the task and beat's re-queue) wrote this slice.
            or _embedded_count(locked) != (0 if stored is None else len(stored[0]))
        ):
            return False
        if stored is not None:
            vectors = PassageVectors(
                positions=[int(p) for p in stored[0]] + vectors.positions,
                vectors=_stacked(stored[1], vectors.vectors),
            )
        file_embeddings_write(file=locked, vectors=vectors)
        if len(passages) > SLICE:
            file_embeddings_due(file=locked)
        locked.save(update_fields=["embeddings_due_at"])
    return True


def _current(file: File) -> QuerySet[FileEmbeddings]:
    """`file`'s vectors row, if of its current passages and of this model."""
    return FileEmbeddings.objects.filter(
        file=file, passages_version=file.passages_version, model=MODEL_ID
    )


def _stored(file: File) -> "tuple[np.ndarray, np.ndarray] | None":
    """The vectors `file` has of its current passages and of this model."""
    row = _current(file).values_list("positions", "vectors").first()
    return None if row is None else vectors_unpack(bytes(row[0]), bytes(row[1]))


def _embedded_count(file: File) -> int:
    """How many of `file`'s passages have vectors (their positions read, not
    their vectors: the check under the file's lock stays small)."""
    positions = _current(file).values_list("positions", flat=True).first()
    return 0 if positions is None else positions_count(bytes(positions))


def _stacked(first: "np.ndarray", second: "np.ndarray") -> "np.ndarray":
    import numpy as np

    return np.concatenate([first, second]) if len(second) else first


@transaction.atomic
def files_requeue_embeddings(*, limit: int = 100) -> list[str]:
    """Ids of files due for vectors whose run is lost or was never queued
    (marked by files_mark_embeddings_due), oldest first; each is given
    another grace period, as the caller queues it."""
    now = timezone.now()
    due = list(
        File.objects.select_for_update(skip_locked=True)
        .filter(embeddings_due_at__lte=now)
        .order_by("embeddings_due_at")
        .values_list("id", flat=True)[:limit]
    )
    File.objects.filter(id__in=due).update(embeddings_due_at=now + _grace())
    return due


def files_mark_embeddings_due(*, bot: Bot | None = None) -> int:
    """Mark the indexed files whose vectors are missing, stale or of another
    model as due now (after an upgrade, or once the `semantic` extra is
    installed); answers how many."""
    current = FileEmbeddings.objects.filter(
        file=OuterRef("pk"), passages_version=OuterRef("passages_version"), model=MODEL_ID
    )
    files = File.objects.filter(
        status=FileStatus.INDEXING_COMPLETED, embeddings_due_at__isnull=True
    )
    if bot is not None:
        files = files.filter(bot=bot)
    stale = files.filter(~Exists(current), Exists(Passage.objects.filter(file=OuterRef("pk"))))
    return stale.update(embeddings_due_at=timezone.now())
