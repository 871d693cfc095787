"""The lexical ranking on PostgreSQL: bm25 with each word's rarity from the
column's statistics, candidates drawn by the rare words, the common ones
drawing when the rare find too little, lexemes quoted whatever they hold."""

from typing import Any

import pytest
from django.db import connection

from files.models import File
from files.passage_data import PassageData
from files.selectors import search_bm25_postgresql, search_lexical
from files.selectors.search_bm25_postgresql import statistics
from files.selectors.search_lexical import passages_ranked_lexically
from files.selectors.searched_files import SearchedFiles
from files.services.files import file_passages_set
from tests.factories import FileFactory, PassageFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's ranking"),
]


@pytest.fixture(autouse=True)
def statistics_forgotten() -> Any:
    """Statistics read here are rolled back with the test: no later test
    may see them."""
    yield
    statistics.forget()


def analysed() -> None:
    """What autovacuum does after writes: the statistics, read afresh."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE files_passage")
    statistics.forget()


@pytest.fixture
def harbour(bot: Any) -> File:
    """200 passages about the harbour, one of them about a lighthouse."""
    file = FileFactory(bot=bot)
    for n in range(200):
        PassageFactory(file=file, position=n, content=f"The harbour ferry number {n} is on time.")
    PassageFactory(
        file=file, position=200, content="The harbour lighthouse is white. The harbour is calm."
    )
    return file


def ranked(file: File, query: str, limit: int = 5) -> list[str]:
    files = SearchedFiles(File.objects.filter(id=file.id))
    return passages_ranked_lexically(files=files, query=query, limit=limit)


def test_a_rare_word_outweighs_a_common_one_said_twice(harbour):
    analysed()
    lighthouse = harbour.passages.get(position=200).id
    assert ranked(harbour, "harbour lighthouse")[0] == lighthouse
    shares = statistics.shares(["harbour", "lighthouse"])
    assert shares is not None and shares[0] > 0.9 > shares[1]


def words_drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The match each ranking drew its candidates by first, and among how
    many passages."""
    drawn: list[tuple[str, int]] = []
    real = search_bm25_postgresql._candidates

    def spy(words: Any, shares: Any, passages: int, bound: int, drawable: Any) -> str:
        match = real(words, shares, passages, bound, drawable)
        if bound == search_bm25_postgresql.CANDIDATE_PASSAGES:
            drawn.append((match, passages))
        return match

    monkeypatch.setattr(search_bm25_postgresql, "_candidates", spy)
    return drawn


def test_only_the_rare_words_draw_candidates_when_they_find_enough(harbour, monkeypatch):
    analysed()
    # A bot of more passages than the bound: the harbour's 201 would pass it.
    monkeypatch.setattr(search_bm25_postgresql, "CANDIDATE_PASSAGES", 100)
    drawn = words_drawn(monkeypatch)
    assert len(ranked(harbour, "harbour lighthouse", limit=1)) == 1
    assert drawn == [("'lighthous'", 201)]


def test_every_word_draws_among_fewer_passages_than_the_bound(harbour, monkeypatch):
    analysed()
    drawn = words_drawn(monkeypatch)
    assert len(ranked(harbour, "harbour lighthouse", limit=1)) == 1
    assert drawn == [("'lighthous' | 'harbour'", 201)]


def test_the_passages_counted_are_the_files_current_ones(harbour, monkeypatch):
    analysed()
    drawn = words_drawn(monkeypatch)
    other = FileFactory(bot=harbour.bot)
    PassageFactory(file=other, position=0, content="A ferry timetable.")
    files = File.objects.filter(bot=harbour.bot)
    passages_ranked_lexically(files=SearchedFiles(files), query="ferry", limit=1)
    # New passages come with a new passages_version: counted again.
    file_passages_set(
        file=File.objects.get(id=other.id),
        passages=[PassageData(content=f"Ferry {n}.") for n in range(3)],
    )
    passages_ranked_lexically(files=SearchedFiles(files), query="ferry", limit=1)
    assert [passages for _, passages in drawn] == [202, 204]


def test_the_common_words_draw_when_the_rare_ones_find_too_little(harbour):
    analysed()
    # "zeppelin" is in no passage: the harbour's passages still answer.
    found = ranked(harbour, "harbour zeppelin", limit=10)
    assert len(found) == 10


def test_the_most_common_words_never_draw_on_a_big_bot(harbour, monkeypatch):
    analysed()
    # As if the harbour's 201 passages were a big bot's: "harbour", in all
    # of them, is past even the wider bound, and "zeppelin" finds nothing.
    monkeypatch.setattr(search_bm25_postgresql, "CANDIDATE_PASSAGES", 20)
    assert ranked(harbour, "harbour zeppelin", limit=10) == []
    monkeypatch.setattr(search_bm25_postgresql, "CANDIDATE_PASSAGES", 50)
    assert len(ranked(harbour, "harbour zeppelin", limit=10)) == 10


def test_a_question_of_more_words_than_are_ranked_keeps_those_that_draw(harbour):
    # Its lexemes come in alphabetical order; past QUERY_TERMS_MAX the stop
    # words go first, so "white" still draws (and ranks) among statistics.
    analysed()
    stop_words = sorted(search_lexical.STOP_WORDS)
    lighthouse = harbour.passages.get(position=200).id
    assert ranked(harbour, " ".join(stop_words) + " white", limit=1) == [lighthouse]


def test_when_even_the_rarest_word_is_common_the_passages_hold_the_rarest_together(
    bot, monkeypatch
):
    file = FileFactory(bot=bot)
    for n in range(40):
        extra = " The tide is high." if n % 4 == 0 else ""
        PassageFactory(file=file, position=n, content=f"The harbour ferry {n}.{extra}")
    analysed()
    # Every word here is in at least a quarter of the passages: each would
    # bring more than 5, "tide" and "harbour" together 10 × 1.0 at most.
    monkeypatch.setattr(search_bm25_postgresql, "CANDIDATE_PASSAGES", 5)
    drawn = words_drawn(monkeypatch)
    found = ranked(file, "harbour tide", limit=3)
    assert drawn == [("'tide' & 'harbour'", 40)]
    assert {p.position % 4 for p in file.passages.filter(id__in=found)} == {0}


def test_without_statistics_every_word_weighs_the_same(bot):
    file = FileFactory(bot=bot)
    PassageFactory(file=file, position=0, content="Ferries leave hourly from the pier.")
    statistics.forget()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename = 'files_passage'"
            " AND attname = 'search_vector' AND most_common_elems IS NOT NULL"
        )
        (analysed_before,) = cursor.fetchone()
    if analysed_before:
        pytest.skip("the test database's passages were analysed by an earlier test")
    assert statistics.shares(["ferri"]) is None
    assert ranked(file, "ferries") == [file.passages.get().id]


@pytest.mark.parametrize(
    "query", ["it's o'clock", r"back\slash \\ twice", "'quoted' | & ! <-> :*", "a:b c-d"]
)
def test_words_of_any_characters_are_quoted(bot, query):
    file = FileFactory(bot=bot)
    passage = PassageFactory(file=file, position=0, content=query)
    analysed()
    assert ranked(file, query) == [passage.id]
