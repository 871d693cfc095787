"""Lexical ranking of a bot's passages for a natural-language query, by the
database's full-text search (files/migrations/0003_passage_search.py):
PostgreSQL's tsvector with ts_rank, SQLite's FTS5 with bm25.

A question's words are alternatives, not all required: a passage holding
some of them ranks by how many, how often and how rare they are."""

import re

from django.db import connection
from django.db.models import QuerySet

from files.models import File

# Words a query contributes at most (a 2,000-character query holds fewer).
QUERY_TERMS_MAX = 64

# The query's lexemes (english stemming, stop words left out) joined by OR.
_POSTGRESQL = """
SELECT p.id, ts_rank(p.search_vector, q.query, 1) AS rank
FROM files_passage AS p,
    (SELECT replace(plainto_tsquery('pg_catalog.english', %s)::text, ' & ', ' | ')::tsquery
        AS query) AS q
WHERE p.search_vector @@ q.query AND p.file_id IN ({files}) {body}
ORDER BY rank DESC, p.id
LIMIT %s
"""
# bm25() is lower for a better match.
_SQLITE = """
SELECT r.passage_id, -bm25(files_passage_search) AS rank
FROM files_passage_search
JOIN files_passage_search_row AS r ON r.rowid = files_passage_search.rowid
JOIN files_passage AS p ON p.id = r.passage_id
WHERE files_passage_search MATCH %s AND p.file_id IN ({files}) {body}
ORDER BY rank DESC, r.passage_id
LIMIT %s
"""
_WORD = re.compile(r"\w+")
# Headings are not ranked themselves: a heading of one word would outrank
# every passage under it (the shorter a passage, the more a word weighs),
# yet it answers nothing. They come with the passages under them, as their
# breadcrumb or in a consolidated passage.
_BODY = "AND p.subtype NOT IN ('title', 'subtitle')"


def _fts5_query(query: str) -> str:
    """Each word quoted (FTS5 reads `-`, `:`, `AND` and quotes as syntax),
    joined by OR; empty when the query has no word."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))[:QUERY_TERMS_MAX]
    return " OR ".join(f'"{word}"' for word in words)


def passages_ranked_lexically(*, files: QuerySet[File], query: str, limit: int) -> list[str]:
    """The ids of the best `limit` passages of `files` for `query`, best first."""
    files_sql, files_params = files.values("id").query.sql_with_params()
    if connection.vendor == "postgresql":
        sql, query_param = _POSTGRESQL, query
    else:
        sql, query_param = _SQLITE, _fts5_query(query)
        if not query_param:
            return []
    with connection.cursor() as cursor:
        cursor.execute(sql.format(files=files_sql, body=_BODY), [query_param, *files_params, limit])
        return [passage_id for passage_id, _ in cursor.fetchall()]
