"""Semantic search: passages embedded by indexing in the same pass, by the
worker after the API sets them, or by `manage.py embed_files` for files
indexed before; GET /v1/files/search finding an answer that shares no word
with the question; fusion with the lexical ranking; vectors dropped with
their passages; the process cache following a file's passages; lexical
ranking alone when semantic search is off or its packages are missing."""

import logging
import re
import sys
from datetime import timedelta
from io import StringIO
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from files.embeddings import model as embedding_model
from files.embeddings.model import MODEL_ID
from files.embeddings.vectors import vectors_pack, vectors_unpack
from files.models import HEADING_SUBTYPES, File, FileEmbeddings, FileStatus, PassageSubtype
from files.passage_data import PassageData
from files.selectors.search_semantic import SHORTLIST, FileVectors, _nearest, vector_cache
from files.services import embeddings
from files.services.embeddings import file_embed, files_requeue_embeddings
from files.services.file_index import file_index
from files.services.files import file_delete, file_passages_set
from tests.factories import BotFactory, FileFactory, PassageFactory
from tests.test_indexing import uploaded

pytestmark = pytest.mark.django_db

URL = "/v1/files/search"

HANDBOOK_MD = b"""# Employee handbook

## Holidays

Every employee gets twenty-five vacation days a year.

Unused vacation days carry over until March.

## Expenses

Travel expenses are reimbursed within ten days of a claim.

Receipts must be attached to every expense claim.

# Security

Laptops are encrypted and locked when unattended.
"""
# Questions that share no word (nor stem) with the passage answering them.
PARAPHRASES = {
    "How much paid time off do staff receive?": "twenty-five vacation days",
    "Will the company pay back my trip costs?": "Travel expenses are reimbursed",
    "protecting computers": "Laptops are encrypted",
    "What proof do I need to submit for spending?": "Receipts must be attached",
}


@pytest.fixture
def client(runtime_client: Any, file_storage: Any) -> Any:
    return runtime_client()


@pytest.fixture(autouse=True)
def fresh_cache() -> Any:
    vector_cache.clear()
    yield
    vector_cache.clear()


def indexed_handbook(client: Any, key: str = "handbook.md", **fields: Any) -> File:
    file = uploaded(client, key, HANDBOOK_MD, "text/markdown", **fields)
    assert file_index(file_id=file.id, revision=file.revision) == "completed"
    return File.objects.get(id=file.id)


def search(client: Any, **params: Any) -> list[dict[str, Any]]:
    response = client.get(URL, {"contextDepth": 0, **params})
    assert response.status_code == 200, response.content
    return response.json()["passages"]


def test_indexing_embeds_the_passages_in_the_same_pass(client):
    file = indexed_handbook(client)
    assert file.status == FileStatus.INDEXING_COMPLETED
    assert file.embeddings_due_at is None
    stored = FileEmbeddings.objects.get(file=file)
    assert (stored.passages_version, stored.model) == (file.passages_version, MODEL_ID)
    positions, vectors = vectors_unpack(bytes(stored.positions), bytes(stored.vectors))
    paragraphs = file.passages.exclude(subtype__in=HEADING_SUBTYPES)
    # Headings are not embedded (they are not ranked).
    expected = paragraphs.order_by("position").values_list("position", flat=True)
    assert list(positions) == list(expected)
    assert vectors.shape == (len(positions), 384) and len(positions) >= 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-2)


@pytest.mark.parametrize("question,answer", PARAPHRASES.items())
def test_a_question_sharing_no_word_with_its_answer_finds_it_first(client, question, answer):
    indexed_handbook(client)
    [first, *_] = search(client, query=question)
    assert answer in first["content"]


@pytest.mark.parametrize("question,answer", PARAPHRASES.items())
def test_a_passage_sharing_only_common_words_with_the_question_does_not_outrank_it(
    client, question, answer
):
    # "the", "my", "do": a passage holding only such words of the question
    # is no answer, and must not pass the one found by meaning.
    indexed_handbook(client)
    notes = uploaded(
        client, "notes.md", b"# Notes\n\nThe vacation calendar lives on the intranet.\n",
        "text/markdown",
    )  # fmt: skip
    assert file_index(file_id=notes.id, revision=notes.revision) == "completed"
    [first, *_] = search(client, query=question)
    assert answer in first["content"]


def test_a_passage_found_by_meaning_alone_scores_half(client):
    indexed_handbook(client)
    [first, *_] = search(client, query="protecting computers")
    assert first["score"] == pytest.approx(0.5)  # first of one ranking, not in the other


def test_first_by_words_and_by_meaning_scores_1(client):
    indexed_handbook(client)
    [first, second, *_] = search(client, query="How many vacation days does an employee get?")
    assert "twenty-five vacation days" in first["content"]
    assert first["score"] == 1.0
    assert 0 < second["score"] < 1


def test_a_search_reads_its_files_versions_once_for_both_rankings(client):
    # The semantic ranking's vectors and, on PostgreSQL, the lexical
    # ranking's passage count are both kept by (file, passages_version).
    indexed_handbook(client)
    with CaptureQueriesContext(connection) as captured:
        [first, *_] = search(client, query="How many vacation days does an employee get?")
    assert first["score"] == 1.0  # both rankings took part
    versions_read = [
        query["sql"]
        for query in captured.captured_queries
        if re.match(
            r'SELECT "files_file"\."id"( AS "id")?, "files_file"\."passages_version"', query["sql"]
        )
    ]
    assert len(versions_read) == 1, versions_read


def test_passages_set_through_the_api_are_embedded_by_the_worker(client, bot):
    texts = ("Parking is free for visitors.", "We ship worldwide.")
    passages = [PassageData(content=text) for text in texts]
    file = file_passages_set(file=FileFactory(bot=bot, key="faq.txt"), passages=passages)
    assert file.embeddings_due_at is not None
    assert not FileEmbeddings.objects.filter(file=file).exists()
    # Until the worker has run, the file is found by its words alone.
    assert search(client, query="international delivery") == []
    assert file_embed(file_id=file.id) is True
    assert File.objects.get(id=file.id).embeddings_due_at is None
    [first, *_] = search(client, query="international delivery")
    assert first["content"] == "We ship worldwide."
    assert file_embed(file_id=file.id) is False  # no longer due


def test_an_embedding_of_passages_replaced_meanwhile_is_dropped(client, bot, monkeypatch):
    file = file_passages_set(file=FileFactory(bot=bot), passages=[PassageData(content="Old text.")])
    real = embeddings.passages_embed

    def replaced_meanwhile(passages: Any) -> Any:
        file_passages_set(file=file, passages=[PassageData(content="New text.")])
        return real(passages)

    monkeypatch.setattr(embeddings, "passages_embed", replaced_meanwhile)
    assert file_embed(file_id=file.id) is False
    assert not FileEmbeddings.objects.filter(file=file).exists()
    assert File.objects.get(id=file.id).embeddings_due_at is not None  # due for the new text


def test_new_passages_drop_the_old_vectors_and_search_follows(client, bot):
    file = indexed_handbook(client)
    search(client, query="protecting computers")  # the vectors now cached
    file_passages_set(file=file, passages=[PassageData(content="Bicycles are parked in the yard.")])
    assert not FileEmbeddings.objects.filter(file=file).exists()
    assert file_embed(file_id=file.id) is True
    [first] = search(client, query="where do I leave my bike", limit=1)
    assert first["content"] == "Bicycles are parked in the yard."


def test_a_deleted_file_leaves_semantic_search_at_once(client, bot):
    file = indexed_handbook(client)
    kept = indexed_handbook(client, key="copy.md")
    assert {h["file"]["id"] for h in search(client, query="protecting computers")} == {
        file.id,
        kept.id,
    }
    file_delete(file=file)
    assert {h["file"]["id"] for h in search(client, query="protecting computers")} == {kept.id}
    assert not FileEmbeddings.objects.filter(file_id=file.id).exists()


def test_tags_filter_the_semantic_ranking_too(client):
    indexed_handbook(client, key="en.md", tags={"lang": "en"})
    fr = indexed_handbook(client, key="fr.md", tags={"lang": "fr"})
    hits = search(client, query="protecting computers", tags='{"lang": "fr"}')
    assert hits and {h["file"]["id"] for h in hits} == {fr.id}


def test_only_the_callers_bot_is_searched(client, runtime_client, bot):
    indexed_handbook(runtime_client(for_bot=BotFactory(workspace=bot.workspace)))
    assert search(client, query="protecting computers") == []


def test_embed_files_backfills_files_indexed_before(client, bot):
    file = FileFactory(bot=bot)
    PassageFactory(file=file, position=0, content="The cafeteria opens at noon.")
    PassageFactory(file=file, position=1, subtype=PassageSubtype.TITLE, content="Lunch")
    FileFactory(bot=bot, key="empty.txt")  # no passages: nothing to embed
    out = StringIO()
    call_command("embed_files", bot.id, stdout=out)
    assert out.getvalue().strip() == "1 embedded, 0 skipped"
    positions, _ = vectors_unpack(*(bytes(v) for v in _stored(file)))
    assert list(positions) == [0]
    [first] = search(client, query="when is lunch served", limit=1)
    assert first["content"] == "The cafeteria opens at noon."
    out = StringIO()
    call_command("embed_files", stdout=out)  # every bot's; nothing stale now
    assert out.getvalue().strip() == "0 embedded, 0 skipped"


def test_embed_files_queue_marks_them_for_the_workers(bot):
    file = FileFactory(bot=bot)
    PassageFactory(file=file, content="The cafeteria opens at noon.")
    out = StringIO()
    call_command("embed_files", "--queue", stdout=out)
    assert out.getvalue().strip() == "1 due for the workers"
    assert files_requeue_embeddings() == [file.id]
    # Queued: not again until its run counts as lost.
    assert files_requeue_embeddings() == []
    File.objects.filter(id=file.id).update(embeddings_due_at=timezone.now() - timedelta(1))
    assert files_requeue_embeddings() == [file.id]


def test_embed_files_refuses_an_unknown_bot_and_semantic_search_off(settings):
    with pytest.raises(CommandError, match="No bot has the id 'bot_nope'"):
        call_command("embed_files", "bot_nope")
    settings.FILE_SEARCH_SEMANTIC = False
    with pytest.raises(CommandError, match="Semantic search is off"):
        call_command("embed_files")


def test_with_semantic_search_off_words_alone_rank(client, settings):
    indexed_handbook(client)
    settings.FILE_SEARCH_SEMANTIC = False
    assert search(client, query="protecting computers") == []
    [first, *_] = search(client, query="laptops")
    assert first["score"] == 1.0
    file = uploaded(client, "late.md", HANDBOOK_MD, "text/markdown")
    file_index(file_id=file.id, revision=file.revision)
    # Indexed without vectors: due, for when semantic search is turned on.
    assert File.objects.get(id=file.id).embeddings_due_at is not None


def test_without_the_semantic_extra_search_is_lexical_and_says_so_once(client, monkeypatch, caplog):
    indexed_handbook(client)
    embedding_model._loaded.cache_clear()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    try:
        with caplog.at_level(logging.WARNING, logger="files.embeddings.model"):
            assert search(client, query="protecting computers") == []
            assert search(client, query="laptops")
    finally:
        embedding_model._loaded.cache_clear()
    warnings = [r.getMessage() for r in caplog.records if r.name == "files.embeddings.model"]
    assert warnings == [
        "Semantic search is off: onnxruntime is not installed"
        " (pip install 'bot-platform[semantic]'); files are searched by their words alone"
    ]


def test_a_query_of_no_word_finds_nothing_by_meaning_either(client):
    indexed_handbook(client)
    assert search(client, query="?!") == []


def _stored(file: File) -> tuple[Any, Any]:
    stored = FileEmbeddings.objects.get(file=file)
    return stored.positions, stored.vectors


def test_a_long_file_is_embedded_after_indexing_a_slice_a_run(client, settings, monkeypatch):
    settings.FILE_EMBEDDING_INLINE_MAX = 2
    monkeypatch.setattr(embeddings, "SLICE", 2)
    file = indexed_handbook(client)
    # Indexed, searchable by its words; its vectors come from the worker.
    assert file.status == FileStatus.INDEXING_COMPLETED
    assert file.embeddings_due_at is not None
    assert not FileEmbeddings.objects.filter(file=file).exists()
    paragraphs = list(
        file.passages.exclude(subtype__in=HEADING_SUBTYPES)
        .order_by("position")
        .values_list("position", flat=True)
    )
    runs = 0
    while File.objects.get(id=file.id).embeddings_due_at is not None:
        assert file_embed(file_id=file.id) is True
        runs += 1
        positions, vectors = vectors_unpack(*(bytes(v) for v in _stored(file)))
        assert list(positions) == paragraphs[: 2 * runs]
        assert vectors.shape == (len(positions), 384)
    assert runs == (len(paragraphs) + 1) // 2
    [first, *_] = search(client, query="protecting computers")
    assert "Laptops are encrypted" in first["content"]


def test_two_runs_of_one_slice_write_it_once(client, settings, monkeypatch):
    settings.FILE_EMBEDDING_INLINE_MAX = 2
    monkeypatch.setattr(embeddings, "SLICE", 2)
    file = indexed_handbook(client)
    real = embeddings.passages_embed
    raced: list[bool] = []

    def with_another_run_meanwhile(passages: Any) -> Any:
        if not raced:
            raced.append(True)
            assert file_embed(file_id=file.id) is True  # the other run, first
        return real(passages)

    monkeypatch.setattr(embeddings, "passages_embed", with_another_run_meanwhile)
    assert file_embed(file_id=file.id) is False
    positions, _ = vectors_unpack(*(bytes(v) for v in _stored(file)))
    assert len(positions) == len(set(positions)) == 2


def test_the_shortlist_by_codes_orders_as_the_stored_vectors_do():
    # Three files of many passages, more than the shortlist holds: the
    # nearest are those the stored (float16) vectors rank first, in their
    # order, whichever file holds them.
    rng = np.random.default_rng(5)
    limit = 20
    files = []
    for n, count in enumerate([700, 50, 1300]):
        vectors = rng.standard_normal((count, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        positions = rng.permutation(count * 2)[:count]
        files.append(((f"file_{n}", 0), FileVectors.of(*vectors_pack(positions, vectors))))
    assert sum(len(entry.positions) for _, entry in files) > SHORTLIST * limit
    for _ in range(10):
        question = rng.standard_normal(384).astype(np.float32)
        question /= np.linalg.norm(question)
        exact = sorted(
            (
                (-float(entry.stored[row].astype(np.float32) @ question), key[0], int(position))
                for key, entry in files
                for row, position in enumerate(entry.positions)
            )
        )
        expected = [(file_id, position) for _, file_id, position in exact[:limit]]
        assert _nearest(files, question, limit) == expected


def test_a_file_of_headings_alone_has_no_vectors_and_search_goes_on(client, bot):
    titles = FileFactory(bot=bot, key="titles.md")
    file_passages_set(
        file=titles,
        passages=[PassageData(content="Holidays", subtype=PassageSubtype.TITLE)],
    )
    file_embed(file_id=titles.id)
    assert len(vectors_unpack(*(bytes(v) for v in _stored(titles)))[0]) == 0
    indexed_handbook(client)
    [first, *_] = search(client, query="How much paid time off do staff receive?")
    assert "twenty-five vacation days" in first["content"]
    empty = FileVectors.of(*vectors_pack([], np.zeros((0, 384), dtype=np.float32)))
    assert _nearest([(("file_0", 0), empty)], np.ones(384, dtype=np.float32), 10) == []
