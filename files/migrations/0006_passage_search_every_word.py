"""PostgreSQL: the passages' search vectors keep every word, and split
dotted and slashed names into their parts, as SQLite's FTS5 table does.

`english` drops its stop words, and in technical text they are often the
words that matter (Python's `with`, `not`, `is`, `for`; "IT"); bm25's
inverse document frequency already weighs a common word next to nothing
(Elasticsearch's default analyser keeps them for that reason). And
PostgreSQL's parser reads `os.path.join`, `str.format` or
`config/settings.yaml` as one token, so a question about `join` or
`format` missed them. Search quality on the collection of Python's
documentation (BENCHMARKS.md §22): hybrid nDCG@10 1.088 → 1.127 of bm25s's.

`files_passage_words(text)` makes the vector, for the trigger and for a
search's question alike: the `files_english` configuration (english's
Snowball stemmer without its stop-word list) over the text with `.` and
`/` between letters or digits made spaces. `files_passage_words(text,
false)` leaves the stop words out, as `english` does: a question's stop
words rank the passages found, but find none (files/selectors/search_bm25_postgresql.py).

Every stored passage is vectorised again, a batch of 5,000 a transaction
(the migration is not atomic; writes go on, new passages get the new
vectors from the trigger at once): about 95 s a million passages
(docs/upgrading.md). Until it ends a search may find an old passage by
fewer of its words. SQLite: nothing (FTS5 keeps every word, and its
tokenizer splits those names)."""

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

BATCH = 5_000

CONFIGURATION = [
    "DROP TEXT SEARCH CONFIGURATION IF EXISTS files_english",
    "DROP TEXT SEARCH DICTIONARY IF EXISTS files_english_stem",
    "CREATE TEXT SEARCH DICTIONARY files_english_stem (TEMPLATE = snowball, LANGUAGE = english)",
    "CREATE TEXT SEARCH CONFIGURATION files_english (COPY = pg_catalog.english)",
    "ALTER TEXT SEARCH CONFIGURATION files_english"
    " ALTER MAPPING REPLACE english_stem WITH files_english_stem",
    # every_word false: english's own list drops the stop words (a search's
    # question: they rank, but draw no candidates).
    r"""
    CREATE OR REPLACE FUNCTION files_passage_words(content text, every_word boolean DEFAULT true)
    RETURNS tsvector LANGUAGE sql STABLE PARALLEL SAFE AS $$
        SELECT to_tsvector(
            CASE WHEN every_word THEN 'files_english' ELSE 'pg_catalog.english' END::regconfig,
            regexp_replace(content, '([[:alnum:]])[./](?=[[:alnum:]])', '\1 ', 'g')
        )
    $$
    """,
]


def _trigger(expression: str) -> str:
    return f"""
    CREATE OR REPLACE FUNCTION files_passage_search_vector() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        NEW.search_vector := {expression};
        RETURN NEW;
    END
    $$
    """


def _vectorised_again(cursor: Any, expression: str) -> None:
    """Every stored passage's vector made again, by id, a batch a transaction."""
    last = ""
    while True:
        cursor.execute(
            "SELECT max(id) FROM (SELECT id FROM files_passage WHERE id > %s ORDER BY id LIMIT %s)"
            " AS batch",
            [last, BATCH],
        )
        (upto,) = cursor.fetchone()
        if upto is None:
            break
        cursor.execute(
            f"UPDATE files_passage SET search_vector = {expression} WHERE id > %s AND id <= %s",
            [last, upto],
        )
        last = upto
    # The words' shares of passages (a search's idf) from the new vectors.
    cursor.execute("ANALYZE files_passage")


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for statement in CONFIGURATION:
            cursor.execute(statement)
        cursor.execute(_trigger("files_passage_words(NEW.content)"))
        _vectorised_again(cursor, "files_passage_words(content)")


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(_trigger("to_tsvector('pg_catalog.english', NEW.content)"))
        _vectorised_again(cursor, "to_tsvector('pg_catalog.english', content)")
        cursor.execute("DROP FUNCTION IF EXISTS files_passage_words(text, boolean)")
        cursor.execute("DROP TEXT SEARCH CONFIGURATION IF EXISTS files_english")
        cursor.execute("DROP TEXT SEARCH DICTIONARY IF EXISTS files_english_stem")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("files", "0005_passage_search_by_file")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
