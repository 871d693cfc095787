"""Full-text search over passages (GET /v1/files/search), kept by the
database itself so that every way a passage is written (the indexer's COPY,
bulk inserts, setFilePassages) and deleted (a file's deletion cascades) is
searchable, or gone, at once.

PostgreSQL: a `search_vector` tsvector column on files_passage, set by a
trigger from `content` (english stemming and stop words), and a GIN index
built concurrently (files_passage is a big table). Adding a column with no
default is a catalog change; passages already stored are filled in batches
of their own transactions, so nothing holds the table for long.

SQLite: a contentless FTS5 table (bm25 ranking) whose rows are numbered by
files_passage_search_row (SQLite may renumber a plain table's rowid on
VACUUM, so the passages' own rowid cannot name them), kept by triggers."""

from django.db import migrations, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

# Passages filled per transaction when the migration backfills.
BATCH = 5_000

POSTGRESQL_FORWARDS = [
    "SET lock_timeout = '5s'",
    "ALTER TABLE files_passage ADD COLUMN IF NOT EXISTS search_vector tsvector",
    """
    CREATE OR REPLACE FUNCTION files_passage_search_vector() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        NEW.search_vector := to_tsvector('pg_catalog.english', NEW.content);
        RETURN NEW;
    END
    $$
    """,
    "DROP TRIGGER IF EXISTS files_passage_search_vector ON files_passage",
    """
    CREATE TRIGGER files_passage_search_vector
    BEFORE INSERT OR UPDATE OF content ON files_passage
    FOR EACH ROW EXECUTE FUNCTION files_passage_search_vector()
    """,
    "RESET lock_timeout",
]
POSTGRESQL_INDEX = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS passage_search_idx"
    " ON files_passage USING gin (search_vector)"
)
POSTGRESQL_BACKFILL = """
UPDATE files_passage SET search_vector = to_tsvector('pg_catalog.english', content)
WHERE id IN (SELECT id FROM files_passage WHERE search_vector IS NULL LIMIT %s)
"""
POSTGRESQL_BACKWARDS = [
    "DROP INDEX CONCURRENTLY IF EXISTS passage_search_idx",
    "DROP TRIGGER IF EXISTS files_passage_search_vector ON files_passage",
    "DROP FUNCTION IF EXISTS files_passage_search_vector()",
    "ALTER TABLE files_passage DROP COLUMN IF EXISTS search_vector",
]

SQLITE_FORWARDS = [
    "CREATE TABLE files_passage_search_row ("
    " rowid INTEGER PRIMARY KEY, passage_id varchar(40) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE files_passage_search USING fts5("
    " content, content='', tokenize='porter unicode61 remove_diacritics 2')",
    """
    CREATE TRIGGER files_passage_search_insert AFTER INSERT ON files_passage BEGIN
        INSERT INTO files_passage_search_row (passage_id) VALUES (new.id);
        INSERT INTO files_passage_search (rowid, content) VALUES (last_insert_rowid(), new.content);
    END
    """,
    # A contentless table forgets a row given the values it was made of.
    """
    CREATE TRIGGER files_passage_search_delete AFTER DELETE ON files_passage BEGIN
        INSERT INTO files_passage_search (files_passage_search, rowid, content)
            SELECT 'delete', rowid, old.content FROM files_passage_search_row
            WHERE passage_id = old.id;
        DELETE FROM files_passage_search_row WHERE passage_id = old.id;
    END
    """,
    """
    CREATE TRIGGER files_passage_search_update AFTER UPDATE OF content ON files_passage BEGIN
        INSERT INTO files_passage_search (files_passage_search, rowid, content)
            SELECT 'delete', rowid, old.content FROM files_passage_search_row
            WHERE passage_id = old.id;
        INSERT INTO files_passage_search (rowid, content)
            SELECT rowid, new.content FROM files_passage_search_row WHERE passage_id = new.id;
    END
    """,
    "INSERT INTO files_passage_search_row (passage_id) SELECT id FROM files_passage ORDER BY id",
    "INSERT INTO files_passage_search (rowid, content)"
    " SELECT r.rowid, p.content FROM files_passage_search_row AS r"
    " JOIN files_passage AS p ON p.id = r.passage_id",
]
SQLITE_BACKWARDS = [
    "DROP TRIGGER IF EXISTS files_passage_search_update",
    "DROP TRIGGER IF EXISTS files_passage_search_delete",
    "DROP TRIGGER IF EXISTS files_passage_search_insert",
    "DROP TABLE IF EXISTS files_passage_search",
    "DROP TABLE IF EXISTS files_passage_search_row",
]


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            for statement in SQLITE_FORWARDS:
                cursor.execute(statement)
        return
    with connection.cursor() as cursor:
        for statement in POSTGRESQL_FORWARDS:
            cursor.execute(statement)
        # New passages carry their vector from here on (the trigger); those
        # stored before are filled a batch a transaction (autocommit: the
        # migration is not atomic).
        while True:
            cursor.execute(POSTGRESQL_BACKFILL, [BATCH])
            if cursor.rowcount < BATCH:
                break
        # A concurrent build interrupted leaves its index invalid: build again.
        cursor.execute(
            "SELECT NOT i.indisvalid FROM pg_index AS i"
            " JOIN pg_class AS c ON c.oid = i.indexrelid WHERE c.relname = 'passage_search_idx'"
        )
        invalid = cursor.fetchone()
        if invalid is not None and invalid[0]:
            cursor.execute("DROP INDEX CONCURRENTLY passage_search_idx")
        cursor.execute(POSTGRESQL_INDEX)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    statements = POSTGRESQL_BACKWARDS if connection.vendor == "postgresql" else SQLITE_BACKWARDS
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("files", "0002_upload_and_indexing")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
