"""Semantic ranking of a bot's passages for a natural-language query: the
query's sentence embedding against the passages' (files/embeddings/), by
cosine, exhaustively (no approximate index: every embedded passage of the
searched files is scored, so nothing is missed).

Each web process keeps files' vectors in memory as float32, keyed by the
file and its passages_version (a file whose passages change is read again;
the old entry ages out), least recently used first out beyond
FILE_SEARCH_VECTOR_CACHE_MB. A file without current vectors (its passages
not embedded yet) is left to the lexical ranking."""

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Q, QuerySet

from files.embeddings.model import MODEL_ID, model
from files.embeddings.vectors import vectors_unpack
from files.models import File, FileEmbeddings, Passage

if TYPE_CHECKING:
    import numpy as np

FileKey = tuple[str, int]  # (file id, passages_version)
FileVectors = tuple["np.ndarray", "np.ndarray"]  # (positions, vectors)


class _VectorCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[FileKey, FileVectors] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: FileKey) -> FileVectors | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: FileKey, entry: FileVectors) -> None:
        size = entry[0].nbytes + entry[1].nbytes
        limit = settings.FILE_SEARCH_VECTOR_CACHE_MB * 1024 * 1024
        with self._lock:
            if size > limit or key in self._entries:
                return
            while self._entries and self._bytes + size > limit:
                _, (positions, vectors) = self._entries.popitem(last=False)
                self._bytes -= positions.nbytes + vectors.nbytes
            self._entries[key] = entry
            self._bytes += size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


vector_cache = _VectorCache()


def _files_vectors(keys: Sequence[FileKey]) -> dict[FileKey, FileVectors]:
    """The current vectors of the files named by `keys` (those that have)."""
    found: dict[FileKey, FileVectors] = {}
    missing: dict[str, int] = {}
    for key in keys:
        entry = vector_cache.get(key)
        if entry is None:
            missing[key[0]] = key[1]
        else:
            found[key] = entry
    if missing:
        stored = FileEmbeddings.objects.filter(file_id__in=missing, model=MODEL_ID).values_list(
            "file_id", "passages_version", "positions", "vectors"
        )
        for file_id, version, positions, vectors in stored.iterator(chunk_size=20):
            if missing[file_id] == version:
                key = (file_id, version)
                found[key] = vectors_unpack(bytes(positions), bytes(vectors))
                vector_cache.put(key, found[key])
    return found


def _best(
    scored: Iterable[tuple[FileKey, "np.ndarray", "np.ndarray"]], limit: int
) -> list[tuple[str, int]]:
    """(file id, position) of the `limit` highest scores over all files."""
    import numpy as np

    best: list[tuple[float, str, int]] = []
    for (file_id, _), positions, scores in scored:
        if len(scores) > limit:
            top = np.argpartition(-scores, limit)[:limit]
        else:
            top = np.arange(len(scores))
        best.extend((float(scores[i]), file_id, int(positions[i])) for i in top)
    best.sort(key=lambda item: (-item[0], item[1], item[2]))
    return [(file_id, position) for _, file_id, position in best[:limit]]


# The scoring runs here while the calling thread waits on the lexical
# ranking's statement: numpy and onnxruntime let go of the GIL, so the two
# rankings take the longer of their times, not the sum.
_scoring = ThreadPoolExecutor(max_workers=2, thread_name_prefix="semantic-search")


class SemanticRanking:
    """A ranking by meaning under way (semantic_ranking_start)."""

    def __init__(self, nearest: "Future[list[tuple[str, int]]]") -> None:
        self._nearest = nearest

    def passage_ids(self) -> list[str]:
        """The ids of the nearest passages, best first."""
        nearest = self._nearest.result()
        if not nearest:
            return []
        by_file: dict[str, list[int]] = {}
        for file_id, position in nearest:
            by_file.setdefault(file_id, []).append(position)
        where = Q()
        for file_id, positions_of_file in by_file.items():
            where |= Q(file_id=file_id, position__in=positions_of_file)
        ids = {
            (file_id, position): passage_id
            for file_id, position, passage_id in Passage.objects.filter(where).values_list(
                "file_id", "position", "id"
            )
        }
        return [ids[place] for place in nearest if place in ids]


def semantic_ranking_start(
    *, files: QuerySet[File], query: str, limit: int
) -> SemanticRanking | None:
    """Rank the passages of `files` by how near they are to `query` in
    meaning, the best `limit`, in the background; None when semantic
    search is off or none of `files` has vectors yet (the ranking does not
    take part). The database is read here, in the caller's thread."""
    embedding_model = model()
    if embedding_model is None:
        return None
    keys: list[FileKey] = list(files.values_list("id", "passages_version"))
    vectors = _files_vectors(keys)
    if not vectors:
        return None

    def nearest() -> list[tuple[str, int]]:
        question = embedding_model.embed([query])[0]
        return _best(
            ((key, positions, matrix @ question) for key, (positions, matrix) in vectors.items()),
            limit,
        )

    return SemanticRanking(_scoring.submit(nearest))


def passages_ranked_semantically(
    *, files: QuerySet[File], query: str, limit: int
) -> list[str] | None:
    """The ids of the `limit` passages of `files` nearest `query` in
    meaning, best first; None when the ranking does not take part."""
    ranking = semantic_ranking_start(files=files, query=query, limit=limit)
    return None if ranking is None else ranking.passage_ids()
