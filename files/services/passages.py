"""Writes on a file's passages: replaced as a set, in bulk, or cleared. A
file's status says which passages it has, so these are called through the
status transitions (files/services/file_status.py)."""

from collections.abc import Sequence

from django.db import transaction

from files.models import File, FileEmbeddings, Passage
from files.passage_data import PassageData
from platform_site.foundation.ids import new_id
from platform_site.foundation.sql.bulk_insert import rows_insert

_FIELDS = (
    "id",
    "file_id",
    "position",
    "content",
    "type",
    "subtype",
    "page_number",
    "source_url",
)


@transaction.atomic
def passages_replace(*, file: File, passages: Sequence[PassageData]) -> int:
    """Replace every passage of `file` in one transaction: a reader sees the
    old set or the new one, never a mix. The caller saves `file` (its
    passages_version changed)."""
    passages_clear(file=file)
    passages_insert(file=file, passages=passages)
    return len(passages)


def passages_clear(*, file: File) -> None:
    """Delete the passages of `file` and their vectors (saved by the caller)."""
    if file.pk is not None:
        Passage.objects.filter(file=file).delete()
        FileEmbeddings.objects.filter(file=file).delete()
    file.passages_version += 1
    file.embeddings_due_at = None


def passages_insert(*, file: File, passages: Sequence[PassageData]) -> None:
    """Insert `passages` of `file` (positions in order from 0 where a
    passage names none). The caller holds the transaction."""
    rows = [
        (
            new_id("psg"),
            file.pk,
            index if data.position is None else data.position,
            data.content,
            data.type,
            data.subtype,
            data.page_number,
            data.source_url,
        )
        for index, data in enumerate(passages)
    ]
    rows_insert(Passage, _FIELDS, rows)
