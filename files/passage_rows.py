"""Writing a document's passages in bulk."""

from collections.abc import Sequence

from files.models import File, Passage
from files.passage_data import PassageData
from platform_site.api.ids import new_id
from platform_site.bulk_insert import rows_insert

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
