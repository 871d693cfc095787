"""PostgreSQL: the passages' full-text index keyed by file as well, so that a
search reads the matches of the searched bot's files only, not every bot's
(GET /v1/files/search among 2M passages of 100 bots: 67 ms p50 with the
index of words alone, 27 ms with this one; BENCHMARKS.md §22).

A GIN index of two columns needs btree_gin for the file's id: a trusted
extension shipped with PostgreSQL (postgresql-contrib), which a database
owner may create. Where it cannot be created, the index of words alone
stays and searching works as before (said on the migration's output).

The new index is built concurrently (files_passage is a big table), then
the old one dropped concurrently: writes go on throughout. SQLite: nothing
(FTS5 is not keyed by file)."""

import sys
from typing import Any

from django.db import DatabaseError, migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

NEW = "passage_search_file_idx"
OLD = "passage_search_idx"


def _valid_index(cursor: Any, name: str) -> bool | None:
    """Whether index `name` is valid; None when there is none."""
    cursor.execute(
        "SELECT i.indisvalid FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
        " WHERE c.relname = %s",
        [name],
    )
    row = cursor.fetchone()
    return None if row is None else bool(row[0])


def _build(cursor: Any, name: str, columns: str) -> None:
    # A concurrent build interrupted leaves its index invalid: build again.
    if _valid_index(cursor, name) is False:
        cursor.execute(f"DROP INDEX CONCURRENTLY {name}")
    cursor.execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON files_passage USING gin ({columns})"
    )


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        except DatabaseError as refused:
            sys.stdout.write(
                f"\n  btree_gin cannot be created ({refused}): the passages' search index"
                " stays keyed by words alone (docs/upgrading.md)\n"
            )
            return
        _build(cursor, NEW, "file_id, search_vector")
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {OLD}")


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        _build(cursor, OLD, "search_vector")
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NEW}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("files", "0004_semantic_search")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
