"""files.0003 makes the passages stored before it searchable, in batches on
PostgreSQL, and goes back and forth on both databases; files.0005 keys the
PostgreSQL index by file, and back; files.0006 makes PostgreSQL's vectors of
every word again, and back. Searches run the code as it is now, so they
follow the migrations to the last one."""

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from files.models import File, Passage
from files.selectors.search_lexical import passages_ranked_lexically
from files.selectors.searched_files import SearchedFiles
from tests.factories import BotFactory, FileFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("files", "0002_upload_and_indexing")]


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def migrate(targets: list[tuple[str, str]]) -> None:
    MigrationExecutor(connection).migrate(targets)


@pytest.fixture
def migrated_back() -> Any:
    migrate(BEFORE)
    yield
    migrate(latest())


def test_passages_stored_before_are_searchable_after(migrated_back, monkeypatch):
    migration = MigrationExecutor(connection).loader.get_migration("files", "0003_passage_search")
    module = __import__(migration.__module__, fromlist=["BATCH"])
    monkeypatch.setattr(module, "BATCH", 7)  # several batches, the last one short
    # The file as files.0002 knows it (later migrations add columns).
    old_file = (
        MigrationExecutor(connection).loader.project_state(BEFORE).apps.get_model("files", "File")
    )
    bot = BotFactory()
    file = old_file.objects.create(
        bot_id=bot.id, key="ferries.txt", size=1, content_type="text/plain"
    )
    Passage.objects.bulk_create(
        Passage(file_id=file.id, position=n, content=f"Ferry number {n} leaves hourly")
        for n in range(20)
    )
    Passage.objects.create(file_id=file.id, position=20, content="Bicycles ride free")

    migrate(latest())

    files = SearchedFiles(File.objects.filter(id=file.id))
    ranked = passages_ranked_lexically(files=files, query="ferries", limit=50)
    assert len(ranked) == 20
    assert passages_ranked_lexically(files=files, query="bicycle", limit=50) == [
        Passage.objects.get(position=20).id
    ]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT i.indisvalid FROM pg_index AS i JOIN pg_class AS c"
                " ON c.oid = i.indexrelid WHERE c.relname = 'passage_search_file_idx'"
            )
            assert cursor.fetchone() == (True,)

    # Back, then forth again: the same.
    migrate(BEFORE)
    migrate(latest())
    assert len(passages_ranked_lexically(files=files, query="ferries", limit=50)) == 20


def index_validity() -> dict[str, bool]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index AS i JOIN pg_class AS c"
            " ON c.oid = i.indexrelid WHERE c.relname IN ('passage_search_idx',"
            " 'passage_search_file_idx')"
        )
        return dict(cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's index")
def test_files_0005_keys_the_search_index_by_file_and_goes_back():
    assert index_validity() == {"passage_search_file_idx": True}
    try:
        migrate([("files", "0004_semantic_search")])
        assert index_validity() == {"passage_search_idx": True}
    finally:
        migrate(latest())
    assert index_validity() == {"passage_search_file_idx": True}


def words_of(passage: Passage) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tsvector_to_array(search_vector) FROM files_passage WHERE id = %s", [passage.id]
        )
        return set(cursor.fetchone()[0])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's vectors")
def test_files_0006_makes_the_stored_vectors_of_every_word_and_goes_back(monkeypatch):
    migration = MigrationExecutor(connection).loader.get_migration(
        "files", "0006_passage_search_every_word"
    )
    module = __import__(migration.__module__, fromlist=["BATCH"])
    monkeypatch.setattr(module, "BATCH", 2)  # several batches, the last one short
    try:
        migrate([("files", "0005_passage_search_by_file")])
        file = FileFactory()
        passages = [
            Passage.objects.create(file=file, position=n, content=content)
            for n, content in enumerate(
                ["Join paths with os.path.join.", "Ferries are not free.", "Bicycles ride free."]
            )
        ]
        # english's vectors: no stop words, a dotted name as one word.
        assert words_of(passages[0]) == {"join", "path", "os.path.join"}
        migrate(latest())
        assert words_of(passages[0]) == {"join", "path", "with", "os"}
        assert words_of(passages[1]) == {"ferri", "are", "not", "free"}
        files = SearchedFiles(File.objects.filter(id=file.id))
        assert passages_ranked_lexically(files=files, query="os", limit=5) == [passages[0].id]
        assert passages_ranked_lexically(files=files, query="not free", limit=5)[0] == (
            passages[1].id
        )
        # A passage written now gets the same vector from the trigger.
        written = Passage.objects.create(file=file, position=3, content="Use str.format with care")
        assert words_of(written) == {"use", "str", "format", "with", "care"}
        migrate([("files", "0005_passage_search_by_file")])
        assert words_of(passages[0]) == {"join", "path", "os.path.join"}
    finally:
        migrate(latest())
