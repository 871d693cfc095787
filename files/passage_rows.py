"""Writing a document's passages in bulk."""

from collections.abc import Sequence

from django.db import connection

from files.models import File, Passage
from files.passage_data import PassageData
from platform_site.api.ids import new_id

_FIELDS = ("id", "file", "position", "content", "type", "subtype", "page_number", "source_url")


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
    if connection.vendor == "postgresql":
        _copy(rows)
    else:
        Passage.objects.bulk_create(
            (Passage(**dict(zip(_field_names(), row, strict=True))) for row in rows),
            batch_size=1000,
        )


def _field_names() -> list[str]:
    return ["file_id" if name == "file" else name for name in _FIELDS]


def _copy(rows: Sequence[tuple[object, ...]]) -> None:
    # COPY, not multi-row INSERTs: a 50 MB document makes some 70,000
    # passages, and building INSERTs with 8 parameters a row costs several
    # times what COPY does (bench/indexing.py).
    meta = Passage._meta
    quote = connection.ops.quote_name
    column_of = {field.name: field.column for field in meta.concrete_fields}
    columns = ", ".join(quote(column_of[name]) for name in _FIELDS)
    statement = f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
