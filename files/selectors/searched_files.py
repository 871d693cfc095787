"""The files a search ranks, as both rankers read them: the query that
selects them (the lexical ranking joins it) and their (id,
passages_version) keys (the semantic ranking's vectors and the lexical
ranking's passage count on PostgreSQL are kept by them), read once a
search, when a ranker first asks."""

from dataclasses import dataclass
from functools import cached_property

from django.db.models import QuerySet

from files.models import File

FileKey = tuple[str, int]  # (file id, passages_version)


@dataclass(frozen=True)
class SearchedFiles:
    files: QuerySet[File]

    @cached_property
    def keys(self) -> list[FileKey]:
        return list(self.files.values_list("id", "passages_version"))
