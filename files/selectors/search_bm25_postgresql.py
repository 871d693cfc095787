"""BM25 over PostgreSQL's full-text search: the lexical ranking on PostgreSQL.

`ts_rank` counts how often a query's words are in a passage, not how rare
they are among passages, and a common word then outranks the word that
matters (0.94 of bm25s's nDCG@10, BENCHMARKS.md §22). Here each word
weighs by its inverse document frequency and its count in the passage
saturates as in bm25 (k1 1.5, b 0.75, a passage's length being its number
of distinct lexemes, against the mean over the passages that match).

How rare a word is comes from PostgreSQL's own statistics of the column
(`pg_stats.most_common_elems`, kept by ANALYZE, which autovacuum runs as
passages are written): the share of passages holding each common lexeme,
over every bot's passages. A word not among them is rarer than all that
are. Without statistics yet (a table never analysed) every word weighs
the same.

The same statistics bound the work: the passages ranked are those holding
one of the query's rarest words, adding words from the rarest while the
passages they would bring (a word's share of all passages times the
searched files' passages) stay under CANDIDATE_PASSAGES. Ranking a matched
passage reads its row (about 10 µs when the table is bigger than
PostgreSQL's buffers), so the bound is what keeps a search of a big bot
short; a small bot's questions draw every word. When even the rarest word
would bring more (a question of common words only), the candidates are the
passages holding the rarest words together, as few as bring fewer than the
bound: the passages that rank best hold several of the words. A passage
holding only the common words of a question is not ranked: with their
weight next to nothing, it would rank below those holding a rare one. The
common words still count in the ranking of the passages found, and draw
too (within a wider bound) when the rare ones find fewer passages than
asked for."""

import math
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

from django.db import connection, transaction

# Words drawn into the candidate match while the passages they would bring
# add up to at most this. On 200,000 passages of prose it ranks a search in
# 16 ms where every word drawing takes 2 s (BENCHMARKS.md §22, second pass).
CANDIDATE_PASSAGES = 2_000
# When the words drawn find fewer passages than asked for, words draw again
# within this many times the bound: the most common words of a question
# (`what`, `the`) never draw on a big bot, where they would bring most of
# its passages.
FALLBACK_FACTOR = 5
# Seconds the column's statistics are kept by a process before reading again.
STATISTICS_TTL = 600.0
_K1 = 1.5
_B = 0.75
# ts_rank of a one-word query over a passage holding the word n times is
# 0.1 (its default weight) x (1 + 1/4 + ... + 1/n^2) / (pi^2 / 6); as the
# sum is close to pi^2/6 - 1/(n + 0.5), the count is read back from it
# (exact to 0.05), where no function of PostgreSQL's answers it cheaply.
_PI2_6 = math.pi**2 / 6

# The question's words as a passage's are made (files.0006), and those of
# them that are not stop words.
_LEXEMES = (
    "SELECT tsvector_to_array(files_passage_words(%s)),"
    " tsvector_to_array(files_passage_words(%s, false))"
)
_STATISTICS = """
SELECT most_common_elems::text::text[], most_common_elem_freqs
FROM pg_stats
WHERE schemaname = current_schema() AND tablename = 'files_passage'
    AND attname = 'search_vector'
"""
# Each matched passage's count of every word first (its vector read once,
# here), then bm25 with the passages' length against the mean over the
# matches; the mean's window holds numbers only, not the vectors.
_RANKED = f"""
SELECT m.id, (
    SELECT sum(w.idf * w.tf * {_K1 + 1} / (w.tf + {_K1} * ({1 - _B} + {_B} * m.dl / m.avgdl)))
    FROM unnest(m.tfs, %s::float8[]) AS w(tf, idf)
) AS rank
FROM (
    SELECT c.id, c.dl, c.tfs, avg(c.dl) OVER () AS avgdl
    FROM (
        SELECT p.id, length(p.search_vector) AS dl, ARRAY(
            SELECT CASE WHEN once.r > 0
                THEN 1 / ({_PI2_6} - once.r * {_PI2_6 / 0.1}) - 0.5 ELSE 0 END
            FROM unnest(%s::text[]::tsquery[]) WITH ORDINALITY AS t(word, n),
                LATERAL (SELECT ts_rank(p.search_vector, t.word, 0) AS r) AS once
            ORDER BY t.n
        ) AS tfs
        FROM files_passage AS p
        WHERE p.search_vector @@ %s::tsquery AND p.file_id IN ({{files}}) {{body}}
    ) AS c
) AS m
ORDER BY rank DESC, m.id
LIMIT %s
"""


class _Statistics:
    """The share of passages holding each common lexeme, read from pg_stats
    at most every STATISTICS_TTL seconds per process."""

    def __init__(self) -> None:
        self._shares: dict[str, float] = {}
        self._rare = 0.0
        self._read_at = -math.inf
        self._lock = threading.Lock()

    def shares(self, words: Sequence[str]) -> list[float] | None:
        """Each word's share of passages; None without statistics."""
        with self._lock:
            if time.monotonic() - self._read_at > STATISTICS_TTL:
                self._read()
            if not self._shares:
                return None
            return [self._shares.get(word, self._rare) for word in words]

    def _read(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_STATISTICS)
            row = cursor.fetchone()
        self._shares, self._rare = {}, 0.0
        if row is not None and row[0]:
            elements, frequencies = row
            # The frequencies end with their minimum, maximum and the null share.
            self._shares = dict(zip(elements, frequencies, strict=False))
            self._rare = frequencies[len(elements)] / 2
        self._read_at = time.monotonic()

    def forget(self) -> None:
        with self._lock:
            self._read_at = -math.inf


statistics = _Statistics()


def _quoted(word: str) -> str:
    """`word` as a lexeme of tsquery's text form."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _idf(shares: Sequence[float] | None, count: int) -> list[float]:
    """Each word's idf (bm25's, of its share); all alike without statistics."""
    if shares is None:
        return [1.0] * count
    return [math.log(1 + (1 - share) / max(share, 1e-9)) for share in shares]


def _candidates(
    words: Sequence[str],
    shares: Sequence[float] | None,
    passages: int,
    bound: int,
    drawable: Collection[str],
) -> str:
    """The match (tsquery text) that draws the candidates among `passages`,
    of the `drawable` words: the words from the rarest, any of them, while
    the passages they would bring stay under `bound`; when even the rarest
    would bring more, the passages holding the fewest rarest words together
    that stay under it (all of the words at most). Every drawable word
    without statistics."""
    if shares is None:
        return " | ".join(_quoted(word) for word in words if word in drawable)
    rarest = sorted(
        (share, word) for share, word in zip(shares, words, strict=True) if word in drawable
    )
    if rarest[0][0] * passages > bound:
        together: list[str] = []
        expected = float(passages)
        for share, word in rarest:
            together.append(word)
            expected *= share
            if expected <= bound:
                break
        return " & ".join(map(_quoted, together))
    drawing: list[str] = []
    drawn = 0.0
    for share, word in rarest:
        if drawing and (drawn + share) * passages > bound:
            break
        drawing.append(word)
        drawn += share
    return " | ".join(map(_quoted, drawing))


def passages_ranked_bm25(
    *, files_sql: str, files_params: Sequence[Any], passages: int, body: str, query: str,
    limit: int, terms_max: int,
) -> list[str]:  # fmt: skip
    """The ids of the best `limit` passages of the files `files_sql` selects
    (`passages` of them) for `query`, by bm25, best first."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LEXEMES, [query, query])
        every, content = cursor.fetchone()
        # A passage holding only a question's stop words ("the", "my") is no
        # answer, yet fused by rank it would pass one found by meaning alone:
        # they rank the passages found, but draw none (unless there is
        # nothing else). Past terms_max they are the words left out.
        drawable = set(content)
        words: list[str] = sorted(every, key=lambda word: word not in drawable)[:terms_max]
        if not words:
            return []
        drawable = drawable or set(words)
        shares = statistics.shares(words)
        idf = _idf(shares, len(words))
        match = _candidates(words, shares, passages, CANDIDATE_PASSAGES, drawable)
        sql = _RANKED.format(files=files_sql, body=body)
        quoted = [_quoted(word) for word in words]
        # The planner prices matching a word in a passage next to nothing,
        # so for a bot of many passages it walks the file's passages by
        # the file's index and matches each (330 ms on a bot of 200,000
        # passages among 2M) rather than asking the index of words and
        # files for the matches alone (38 ms): plain index scans are off
        # for this statement. And the matches' lengths and counts, held
        # for their mean, in memory. (One round trip for both.)
        cursor.execute("SET LOCAL enable_indexscan = off; SET LOCAL work_mem = '64MB'")
        try:
            cursor.execute(sql, [idf, quoted, match, *files_params, limit])
            ranked = [passage_id for passage_id, _ in cursor.fetchall()]
            wider = _candidates(
                words, shares, passages, CANDIDATE_PASSAGES * FALLBACK_FACTOR, drawable
            )
            if len(ranked) < limit and wider != match:
                # The rare words are rare here too, or not here at all: the
                # commoner ones draw as well, within a wider bound.
                cursor.execute(sql, [idf, quoted, wider, *files_params, limit])
                ranked = [passage_id for passage_id, _ in cursor.fetchall()]
        finally:
            cursor.execute("RESET enable_indexscan; RESET work_mem")
        return ranked
