"""Semantic ranking of a bot's passages for a natural-language query: the
query's sentence embedding against the passages' (files/embeddings/), by
cosine, exhaustively (no approximate index: every embedded passage of the
searched files is scored, so nothing is missed).

Scoring a bot's passages reads all their vectors, and memory bandwidth is
the cost (float32: 12-24 ms per 200,000 passages on one core). Each web
process keeps a file's vectors as int8 codes (vectors_quantize), which
SimSIMD's kernels score in a quarter of the reads (3 ms), beside the
float16 vectors as stored: the best SHORTLIST × limit of all by the codes
are scored again from those, and ordered by them. A code's score is
within 0.003 of the exact one, so a passage of the exact top `limit`
misses the shortlist only when (SHORTLIST - 1) × limit passages score
within 0.006 of it.

Entries are keyed by the file and its passages_version (a file whose
passages change is read again; the old entry ages out), least recently
used first out beyond FILE_SEARCH_VECTOR_CACHE_MB. A file without current
vectors (its passages not embedded yet) is left to the lexical ranking."""

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection

from files.embeddings.model import MODEL_ID, model
from files.embeddings.vectors import vectors_quantize, vectors_stored
from files.models import FileEmbeddings, Passage
from files.selectors.passage_places import places_condition
from files.selectors.searched_files import FileKey, SearchedFiles

if TYPE_CHECKING:
    import numpy as np

# Passages rescored from the stored vectors, per passage asked for.
SHORTLIST = 4


@dataclass(frozen=True, slots=True)
class FileVectors:
    """A file's embedded passages, as a search scores them."""

    positions: "np.ndarray"  # uint32, n
    codes: "np.ndarray"  # int8, n × DIMENSIONS
    scales: "np.ndarray"  # float32, n: codes[i] × scales[i] ≈ the vector
    stored: "np.ndarray"  # float16, n × DIMENSIONS: the vectors as stored

    @property
    def nbytes(self) -> int:
        return self.positions.nbytes + self.codes.nbytes + self.scales.nbytes + self.stored.nbytes

    @classmethod
    def of(cls, positions: bytes, vectors: bytes) -> "FileVectors":
        import numpy as np

        unpacked_positions, stored = vectors_stored(positions, vectors)
        codes, scales = vectors_quantize(stored.astype(np.float32))
        return cls(unpacked_positions, codes, scales, stored)

    def approximate(self, question_codes: "np.ndarray") -> "np.ndarray":
        """Every passage's score by the codes (float32, n)."""
        import numpy as np
        import simsimd

        scores = np.asarray(
            simsimd.cdist(
                question_codes[None, :], self.codes, metric="dot", threads=1, out_dtype="float32"
            )
        )[0]
        scores *= self.scales
        return scores


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
        size = entry.nbytes
        limit = settings.FILE_SEARCH_VECTOR_CACHE_MB * 1024 * 1024
        with self._lock:
            if size > limit or key in self._entries:
                return
            while self._entries and self._bytes + size > limit:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= dropped.nbytes
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
                found[key] = FileVectors.of(bytes(positions), bytes(vectors))
                vector_cache.put(key, found[key])
    return found


def _nearest(
    vectors: Sequence[tuple[FileKey, FileVectors]], question: "np.ndarray", limit: int
) -> list[tuple[str, int]]:
    """(file id, position) of the `limit` passages nearest `question`, best
    first: the best SHORTLIST × limit by the codes, ordered by the stored
    vectors."""
    import numpy as np

    # A file of headings alone has no vectors (SimSIMD refuses an empty matrix).
    vectors = [(key, entry) for key, entry in vectors if len(entry.positions)]
    if not vectors:
        return []
    question_codes = vectors_quantize(question[None, :])[0][0]
    approximate = np.concatenate([entry.approximate(question_codes) for _, entry in vectors])
    keep = limit * SHORTLIST
    if len(approximate) > keep:
        rows = np.argpartition(-approximate, keep)[:keep]
    else:
        rows = np.arange(len(approximate))
    starts = np.cumsum([0] + [len(entry.positions) for _, entry in vectors])
    owners = np.searchsorted(starts, rows, side="right") - 1
    best: list[tuple[float, str, int]] = []
    for row, owner in zip(rows.tolist(), owners.tolist(), strict=True):
        (file_id, _), entry = vectors[owner]
        at = row - int(starts[owner])
        exact = float(entry.stored[at].astype(np.float32) @ question)
        best.append((exact, file_id, int(entry.positions[at])))
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
        condition, params = places_condition(nearest)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT file_id, position, id FROM {Passage._meta.db_table} WHERE {condition}",
                params,
            )
            ids = {(file_id, position): passage_id for file_id, position, passage_id in cursor}
        return [ids[place] for place in nearest if place in ids]


def semantic_ranking_start(
    *, files: SearchedFiles, query: str, limit: int
) -> SemanticRanking | None:
    """Rank the passages of `files` by how near they are to `query` in
    meaning, the best `limit`, in the background; None when semantic
    search is off or none of `files` has vectors yet (the ranking does not
    take part). The database is read here, in the caller's thread."""
    embedding_model = model()
    if embedding_model is None:
        return None
    vectors = _files_vectors(files.keys)
    if not vectors:
        return None

    def nearest() -> list[tuple[str, int]]:
        return _nearest(list(vectors.items()), embedding_model.embed([query])[0], limit)

    return SemanticRanking(_scoring.submit(nearest))


def passages_ranked_semantically(
    *, files: SearchedFiles, query: str, limit: int
) -> list[str] | None:
    """The ids of the `limit` passages of `files` nearest `query` in
    meaning, best first; None when the ranking does not take part."""
    ranking = semantic_ranking_start(files=files, query=query, limit=limit)
    return None if ranking is None else ranking.passage_ids()
