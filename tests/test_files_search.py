"""GET /v1/files/search (searchFiles), /v1/files/tags (listFileTags) and
/v1/files/tags/{tag}/values (listFileTagValues), through the real URLconf,
on both databases."""

import json
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection

from files.models import File, Passage, PassageSubtype
from files.selectors import search_lexical
from files.selectors.search_bm25_postgresql import statistics
from files.services.files import file_delete
from tests.conftest import assert_error
from tests.factories import BotFactory, FileFactory, PassageFactory

pytestmark = pytest.mark.django_db

URL = "/v1/files/search"

# A handbook: headings, then paragraphs under them (positions 0..8).
HANDBOOK = [
    (PassageSubtype.TITLE, "Employee handbook"),
    (PassageSubtype.SUBTITLE, "Holidays"),
    (PassageSubtype.PARAGRAPH, "Every employee gets twenty-five vacation days a year."),
    (PassageSubtype.PARAGRAPH, "Unused vacation days carry over until March."),
    (PassageSubtype.SUBTITLE, "Expenses"),
    (PassageSubtype.PARAGRAPH, "Travel expenses are reimbursed within ten days of a claim."),
    (PassageSubtype.PARAGRAPH, "Receipts must be attached to every expense claim."),
    (PassageSubtype.TITLE, "Security"),
    (PassageSubtype.PARAGRAPH, "Laptops are encrypted and locked when unattended."),
]


def handbook(bot: Any, *, key: str = "handbook.md", tags: dict[str, str] | None = None) -> File:
    file = FileFactory(bot=bot, key=key, tags=tags or {})
    for position, (subtype, content) in enumerate(HANDBOOK):
        PassageFactory(file=file, position=position, subtype=subtype, content=content)
    return file


@pytest.fixture
def client(runtime_client: Any) -> Any:
    return runtime_client()


def search(client: Any, **params: Any) -> list[dict[str, Any]]:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"passages"}
    return body["passages"]


def test_the_passage_holding_the_answer_comes_first(client, bot):
    file = handbook(bot)
    FileFactory(bot=bot, key="other.txt")  # a file with no passages
    [first, *rest] = search(client, query="How many vacation days do I get?", contextDepth=0)
    assert first["content"] == HANDBOOK[2][1]
    assert first["meta"] == {"type": "chunk", "subtype": "paragraph", "position": 2}
    assert first["file"] == {
        "id": file.id,
        "key": "handbook.md",
        "contentType": "text/plain",
        "metadata": {},
        "tags": {},
        "createdAt": first["file"]["createdAt"],
        "updatedAt": first["file"]["updatedAt"],
    }
    assert set(first) == {"content", "score", "meta", "file"}
    assert first["score"] == 1.0
    assert all(0 < hit["score"] < first["score"] for hit in rest)
    assert [h["meta"]["position"] for h in rest][0] == 3  # "vacation days" again


def test_stemming_matches_other_forms_of_a_word(client, bot):
    handbook(bot)
    [first, *_] = search(client, query="reimbursing travelling", contextDepth=0)
    assert first["meta"]["position"] == 5


def test_context_depth_adds_the_neighbours_to_the_content(client, bot):
    handbook(bot)
    [first, *_] = search(client, query="receipts attached", contextDepth=1)
    assert first["content"] == "\n".join(c for _, c in HANDBOOK[5:8])
    [first, *_] = search(client, query="receipts attached", contextDepth=2)
    assert first["content"] == "\n".join(c for _, c in HANDBOOK[4:9])
    [first, *_] = search(client, query="receipts attached")  # default: 1
    assert first["content"] == "\n".join(c for _, c in HANDBOOK[5:8])
    [first, *_] = search(client, query="laptops encrypted", contextDepth=10)
    assert first["content"] == "\n".join(c for _, c in HANDBOOK)


def test_with_context_lists_the_passages_around_and_the_breadcrumb(client, bot):
    handbook(bot)
    passages = {p.position: p.id for p in Passage.objects.all()}
    [first, *_] = search(
        client, query="receipts attached", withContext="true", includeBreadcrumb="true"
    )
    assert first["content"] == "\n".join(
        ["Employee handbook > Expenses", *(c for _, c in HANDBOOK[5:8])]
    )
    assert first["context"] == [
        {"text": "Employee handbook > Expenses", "type": "breadcrumb"},
        {"text": HANDBOOK[5][1], "type": "preceding", "id": passages[5], "offset": -1},
        {"text": HANDBOOK[6][1], "type": "current", "id": passages[6], "offset": 0},
        {"text": HANDBOOK[7][1], "type": "subsequent", "id": passages[7], "offset": 1},
    ]
    [first, *_] = search(client, query="receipts attached", withContext="true", contextDepth=0)
    assert first["context"] == [
        {"text": HANDBOOK[6][1], "type": "current", "id": passages[6], "offset": 0}
    ]


def test_a_breadcrumb_is_the_nearest_title_then_its_subtitle(client, bot):
    handbook(bot)
    [first, *_] = search(client, query="laptops", contextDepth=0, includeBreadcrumb="true")
    # Under "Security", a title after the "Expenses" subtitle: the subtitle ended there.
    assert first["content"] == "Security\n" + HANDBOOK[8][1]
    [first, *_] = search(
        client, query="vacation twenty-five", contextDepth=0, includeBreadcrumb="true"
    )
    assert first["content"] == "Employee handbook > Holidays\n" + HANDBOOK[2][1]


def test_consolidate_merges_a_files_matches_in_file_order_under_their_headings(client, bot):
    file = handbook(bot)
    other = FileFactory(bot=bot, key="notes.txt")
    # One of the words, where the handbook's best passages hold two.
    PassageFactory(file=other, position=0, content="Finance pays the claims.")
    hits = search(client, query="expense claim vacation", contextDepth=0, consolidate="true")
    assert [hit["file"]["id"] for hit in hits] == [file.id, other.id]
    assert hits[0]["meta"] == {"type": "consolidated"}
    assert hits[0]["content"] == "\n".join(
        [
            "Employee handbook",
            "Holidays",
            HANDBOOK[2][1],
            HANDBOOK[3][1],
            "Expenses",
            HANDBOOK[5][1],
            HANDBOOK[6][1],
        ]
    )
    assert hits[1]["content"] == "Finance pays the claims."
    assert hits[0]["score"] == 1.0 and hits[1]["score"] < 1.0
    # Breadcrumbs and context are not separate when consolidated.
    same = search(
        client,
        query="expense claim vacation",
        contextDepth=0,
        consolidate="true",
        withContext="true",
        includeBreadcrumb="true",
    )
    assert same == hits


def test_limit_bounds_the_answer(client, bot):
    handbook(bot)
    assert len(search(client, query="vacation expenses laptops days claim", limit=2)) == 2
    # Every body passage holds one of the words; no heading is ranked.
    assert len(search(client, query="vacation expenses laptops days claim")) == 5


def test_only_the_callers_bot_and_its_live_files(client, bot):
    handbook(BotFactory(workspace=bot.workspace))
    assert search(client, query="vacation") == []
    expired = handbook(bot, key="old.md")
    File.objects.filter(id=expired.id).update(expires_at="2000-01-01T00:00:00Z")
    assert search(client, query="vacation") == []


def test_a_deleted_file_leaves_search_at_once(client, bot, file_storage):
    file = handbook(bot)
    assert search(client, query="vacation")
    file_delete(file=file)
    assert search(client, query="vacation") == []


def test_replaced_passages_are_searched_as_they_are_now(client, bot):
    file = handbook(bot)
    response = client.put(
        f"/v1/files/{file.id}/passages",
        {"passages": [{"content": "Parking is free for bicycles."}]},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert search(client, query="vacation") == []
    [hit] = search(client, query="bicycle parking")
    assert hit["content"] == "Parking is free for bicycles."
    Passage.objects.filter(file=file).update(content="Ferries leave hourly.")
    [hit] = search(client, query="ferry")
    assert hit["content"] == "Ferries leave hourly."
    assert search(client, query="bicycle") == []


def test_a_query_of_no_word_or_of_search_syntax_is_no_error(client, bot):
    handbook(bot)
    assert search(client, query="?!") == []
    assert search(client, query='"unbalanced -x: NEAR (') == []


def test_a_question_of_more_words_than_are_ranked_keeps_those_that_find(client, bot):
    # Past the words a question contributes (64), its stop words go first:
    # a question of every stop word, then "unattended" (last of them in
    # alphabetical order as in the question's), finds the laptops.
    handbook(bot)
    stop_words = sorted(search_lexical.STOP_WORDS)
    assert len(stop_words) > search_lexical.QUERY_TERMS_MAX
    with connection.cursor() as cursor:  # the statistics a bot's passages get in time
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE files_passage")
    statistics.forget()
    [first, *_] = search(client, query=" ".join(stop_words) + " unattended", contextDepth=0)
    assert first["content"] == HANDBOOK[8][1]


@pytest.mark.parametrize(
    "tags, found",
    [
        ({"team": "hr"}, ["hr.md"]),
        ({"team": ["hr", "it"]}, ["hr.md", "it.md"]),
        ({"team": {"not": "hr"}}, ["it.md", "untagged.md"]),
        ({"team": {"not": ["hr", "it"]}}, ["untagged.md"]),
        ({"team": "hr", "lang": "en"}, ["hr.md"]),
        ({"team": "hr", "lang": "fr"}, []),
    ],
)
def test_tags_as_json(client, bot, tags, found):
    handbook(bot, key="hr.md", tags={"team": "hr", "lang": "en"})
    handbook(bot, key="it.md", tags={"team": "it"})
    handbook(bot, key="untagged.md")
    hits = search(client, query="laptops", tags=json.dumps(tags), contextDepth=0)
    assert sorted(hit["file"]["key"] for hit in hits) == found


def test_tags_as_the_official_client_sends_them(client, bot):
    handbook(bot, key="hr.md", tags={"team": "hr"})
    handbook(bot, key="it.md", tags={"team": "it"})
    handbook(bot, key="ops.md", tags={"team": "ops"})

    def keys(query: str) -> list[str]:
        response = client.get(f"{URL}?query=laptops&contextDepth=0&{query}")
        assert response.status_code == 200, response.content
        return sorted(hit["file"]["key"] for hit in response.json()["passages"])

    assert keys("tags.team=hr") == ["hr.md"]
    assert keys("tags.team=hr&tags.team=it") == ["hr.md", "it.md"]
    assert keys("tags.team.not=hr") == ["it.md", "ops.md"]
    assert keys("tags.team.not=hr&tags.team.not=ops") == ["it.md"]
    assert keys("tags%5Bteam%5D%5B0%5D=hr&tags%5Bteam%5D%5B1%5D=ops") == ["hr.md", "ops.md"]
    assert keys("tags%5Bteam%5D%5Bnot%5D=hr") == ["it.md", "ops.md"]


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 10_000}, "query"),
        ({"query": "q", "contextDepth": "11"}, "contextDepth"),
        ({"query": "q", "contextDepth": "-1"}, "contextDepth"),
        ({"query": "q", "contextDepth": "two"}, "contextDepth"),
        ({"query": "q", "limit": "0"}, "limit"),
        ({"query": "q", "limit": "201"}, "limit"),
        ({"query": "q", "consolidate": "yes"}, "consolidate"),
        ({"query": "q", "withContext": "1"}, "withContext"),
        ({"query": "q", "tags": "{not json"}, "tags"),
        ({"query": "q", "tags": "[]"}, "tags"),
        ({"query": "q", "tags": '{"a": 1}'}, "tags"),
        ({"query": "q", "tags": '{"a": []}'}, "tags"),
        ({"query": "q", "tags": '{"a": {"is": "b"}}'}, "tags"),
        ({"query": "q", "tags": json.dumps({f"k{n}": "v" for n in range(60)})}, "tags"),
    ],
)
def test_bad_input_is_400_in_the_one_error_body(client, bot, params, message):
    handbook(bot)
    body = assert_error(client.get(URL, params), 400, "InvalidQuery")
    assert message in body["message"]


def test_a_billing_member_may_not_search(runtime_client, bot):
    assert_error(runtime_client("billing").get(URL, {"query": "q"}), 403, "Forbidden")


def test_without_a_token_it_is_401(api_client):
    assert_error(api_client.get(URL, {"query": "q"}), 401, "Unauthorized")


# --- tags ----------------------------------------------------------------------------


def test_tags_and_their_values_are_listed_in_order_and_paged(client, bot):
    FileFactory(bot=bot, tags={"team": "hr", "lang": "en"})
    FileFactory(bot=bot, tags={"team": "it", "region": "eu"})
    FileFactory(bot=bot, tags={"team": "hr", "a/b c": "x y"})
    FileFactory(bot=BotFactory(workspace=bot.workspace), tags={"secret": "s"})
    expired = FileFactory(bot=bot, tags={"gone": "g"})
    File.objects.filter(id=expired.id).update(expires_at="2000-01-01T00:00:00Z")

    response = client.get("/v1/files/tags")
    assert response.json() == {"tags": ["a/b c", "lang", "region", "team"], "meta": {}}
    first = client.get("/v1/files/tags", {"pageSize": 3}).json()
    assert first["tags"] == ["a/b c", "lang", "region"]
    rest = client.get("/v1/files/tags", {"pageSize": 3, "nextToken": first["meta"]["nextToken"]})
    assert rest.json() == {"tags": ["team"], "meta": {}}

    values = client.get("/v1/files/tags/team/values").json()
    assert values == {"values": ["hr", "it"], "meta": {}}
    encoded = client.get(f"/v1/files/tags/{quote('a/b c', safe='')}/values").json()
    assert encoded == {"values": ["x y"], "meta": {}}
    assert client.get("/v1/files/tags/nothing/values").json() == {"values": [], "meta": {}}
    page = client.get("/v1/files/tags/team/values", {"pageSize": 1}).json()
    assert page["values"] == ["hr"]
    # A token of one list is no position in another.
    assert_error(
        client.get("/v1/files/tags", {"nextToken": page["meta"]["nextToken"]}),
        400,
        "InvalidQuery",
    )
    assert_error(client.get("/v1/files/tags", {"nextToken": "forged"}), 400, "InvalidQuery")
    assert_error(client.get("/v1/files/tags", {"pageSize": "0"}), 400, "InvalidQuery")
