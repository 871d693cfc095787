"""Lexical ranking of a bot's passages for a natural-language query, by the
database's full-text search (files/migrations/0003_passage_search.py):
PostgreSQL's tsvector ranked by bm25 (files/selectors/search_bm25_postgresql.py),
SQLite's FTS5 with its bm25.

A question's words are alternatives, not all required: a passage holding
some of them ranks by how many, how often and how rare they are."""

import re
from pathlib import Path

from django.db import connection

from files.models import HEADING_SUBTYPES
from files.selectors.passage_counts import passages_counted
from files.selectors.search_bm25_postgresql import passages_ranked_bm25
from files.selectors.searched_files import SearchedFiles

# Words a query contributes at most (a 2,000-character query holds fewer).
QUERY_TERMS_MAX = 64

# bm25() is lower for a better match. Every word of the question ranks;
# only its words that are not stop words draw (the second MATCH).
_SQLITE = """
SELECT r.passage_id, -bm25(files_passage_search) AS rank
FROM files_passage_search
JOIN files_passage_search_row AS r ON r.rowid = files_passage_search.rowid
JOIN files_passage AS p ON p.id = r.passage_id
WHERE files_passage_search MATCH %s AND p.file_id IN ({files}) {body}
    AND files_passage_search.rowid IN (
        SELECT rowid FROM files_passage_search WHERE files_passage_search MATCH %s
    )
ORDER BY rank DESC, r.passage_id
LIMIT %s
"""
# Snowball's english stop words, the list of PostgreSQL's `english`
# configuration (english.stop beside this module): a passage holding only
# a question's stop words ("the", "my") is no answer, yet fused by rank it
# would pass one found by meaning alone. They rank the passages found but
# draw none, on both databases (unless the question has nothing else).
STOP_WORDS = frozenset(Path(__file__).with_name("english.stop").read_text().split())
_WORD = re.compile(r"\w+")
# Headings are not ranked themselves: a heading of one word would outrank
# every passage under it (the shorter a passage, the more a word weighs),
# yet it answers nothing. They come with the passages under them, as their
# breadcrumb or in a consolidated passage.
_BODY = "AND p.subtype NOT IN ({})".format(", ".join(f"'{s}'" for s in HEADING_SUBTYPES))


def _fts5_queries(query: str) -> tuple[str, str]:
    """The MATCH of every word and the MATCH of those that draw: each word
    quoted (FTS5 reads `-`, `:`, `AND` and quotes as syntax), joined by OR;
    empty when the query has no word."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))
    # Past QUERY_TERMS_MAX the stop words are the words left out.
    words = sorted(words, key=lambda word: word in STOP_WORDS)[:QUERY_TERMS_MAX]
    drawing = [word for word in words if word not in STOP_WORDS] or words
    return (
        " OR ".join(f'"{word}"' for word in words),
        " OR ".join(f'"{word}"' for word in drawing),
    )


def passages_ranked_lexically(*, files: SearchedFiles, query: str, limit: int) -> list[str]:
    """The ids of the best `limit` passages of `files` for `query`, best first."""
    files_sql, files_params = files.files.values("id").query.sql_with_params()
    if connection.vendor == "postgresql":
        return passages_ranked_bm25(
            files_sql=files_sql, files_params=files_params, passages=passages_counted(files.keys),
            body=_BODY, query=query, limit=limit, terms_max=QUERY_TERMS_MAX,
        )  # fmt: skip
    every, drawing = _fts5_queries(query)
    if not every:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            _SQLITE.format(files=files_sql, body=_BODY), [every, *files_params, drawing, limit]
        )
        return [passage_id for passage_id, _ in cursor.fetchall()]
