"""GET /v1/files/{id}/passages: lookup by id or key, shape, limits and keyset paging."""

import random
from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bots.models import Role
from files.models import Passage, PassageSubtype, PassageType
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    FileFactory,
    MembershipFactory,
    PassageFactory,
    WorkspaceFactory,
    token_for,
)

pytestmark = pytest.mark.django_db


def url(file_id_or_key: str) -> str:
    return f"/v1/files/{file_id_or_key}/passages"


def make_passages(file, positions):
    """Passages of `file` at `positions`, inserted in a shuffled order so that
    insertion (and id) order is not position order."""
    shuffled = list(positions)
    random.Random(7).shuffle(shuffled)
    return Passage.objects.bulk_create(
        [Passage(file=file, position=p, content=f"content at {p}") for p in shuffled]
    )


def get_page(client, file_ref, **params):
    response = client.get(url(file_ref), params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"passages", "meta"}
    return body


def walk(client, file_ref, **params):
    """Every page of the list: (ids in order, number of pages)."""
    seen, pages, token = [], 0, None
    while True:
        query = dict(params)
        if token is not None:
            query["nextToken"] = token
        body = get_page(client, file_ref, **query)
        pages += 1
        seen += [p["id"] for p in body["passages"]]
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {}
            return seen, pages
        assert isinstance(token, str) and token
        assert pages < 1000, "paging does not end"


@pytest.fixture
def file(bot):
    return FileFactory(bot=bot, key="guide.txt")


@pytest.fixture
def client(runtime_client):
    return runtime_client(Role.DEVELOPER)


# --- lookup ----------------------------------------------------------------


def test_by_file_id(client, file):
    make_passages(file, range(3))
    body = get_page(client, file.id)
    assert [p["content"] for p in body["passages"]] == [f"content at {i}" for i in range(3)]
    assert body["meta"] == {}


def test_by_plain_key(client, file):
    make_passages(file, range(3))
    body = get_page(client, "guide.txt")
    assert [p["meta"]["position"] for p in body["passages"]] == [0, 1, 2]


def test_by_key_with_slash_encoded(client, bot):
    nested = FileFactory(bot=bot, key="docs/manuals/guide.md")
    make_passages(nested, range(2))
    FileFactory(bot=bot, key="docs")  # a prefix of the key is another file
    body = get_page(client, quote("docs/manuals/guide.md", safe=""))
    assert [p["content"] for p in body["passages"]] == ["content at 0", "content at 1"]


def test_by_key_with_slash_unencoded(client, bot):
    nested = FileFactory(bot=bot, key="docs/guide.md")
    make_passages(nested, range(2))
    body = get_page(client, "docs/guide.md")
    assert len(body["passages"]) == 2


def test_by_id_and_by_key_give_the_same_list(client, file):
    make_passages(file, range(5))
    assert get_page(client, file.id) == get_page(client, file.key)


def test_file_without_passages_is_an_empty_list(client, file):
    assert get_page(client, file.id) == {"passages": [], "meta": {}}


def test_unknown_file_id(client, file):
    assert_error(client.get(url("file_01JCZZZZZZZZZZZZZZZZZZZZZZ")), 404, "ResourceNotFound")


def test_unknown_file_key(client, file):
    assert_error(client.get(url("no-such-key.txt")), 404, "ResourceNotFound")
    assert_error(client.get(url(quote("no/such/key", safe=""))), 404, "ResourceNotFound")


def test_file_of_another_bot_is_404(client, bot):
    other = FileFactory(bot=BotFactory(), key="guide.txt")
    make_passages(other, range(2))
    assert_error(client.get(url(other.id)), 404, "ResourceNotFound")
    # The key exists only in the other bot.
    assert_error(client.get(url("guide.txt")), 404, "ResourceNotFound")


def test_file_of_another_bot_is_404_for_a_member_of_both_workspaces(bot):
    other_bot = BotFactory(workspace=WorkspaceFactory())
    other_file = FileFactory(bot=other_bot, key="theirs.txt")
    make_passages(other_file, range(2))
    membership = MembershipFactory(workspace=bot.workspace, role=Role.OWNER)
    MembershipFactory(account=membership.account, workspace=other_bot.workspace, role=Role.OWNER)
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {token_for(membership.account)}", HTTP_X_BOT_ID=bot.id
    )
    assert_error(client.get(url(other_file.id)), 404, "ResourceNotFound")
    assert_error(client.get(url("theirs.txt")), 404, "ResourceNotFound")
    # The same account reaches the file through its own bot.
    client.credentials(
        HTTP_AUTHORIZATION=f"Bearer {token_for(membership.account)}", HTTP_X_BOT_ID=other_bot.id
    )
    assert len(get_page(client, other_file.id)["passages"]) == 2


def test_same_key_in_two_bots_reads_the_callers_file(client, bot, file):
    make_passages(file, range(2))
    theirs = FileFactory(bot=BotFactory(), key=file.key)
    Passage.objects.create(file=theirs, position=0, content="not mine")
    body = get_page(client, file.key)
    assert [p["content"] for p in body["passages"]] == ["content at 0", "content at 1"]


def test_viewer_may_read_and_billing_may_not(runtime_client, file):
    make_passages(file, range(1))
    assert runtime_client(Role.VIEWER).get(url(file.id)).status_code == 200
    assert_error(runtime_client(Role.BILLING).get(url(file.id)), 403, "Forbidden")


def test_without_credentials_is_401(api_client, file):
    response = api_client.get(url(file.id))
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"]


# --- shape and order --------------------------------------------------------


def test_passage_shape(client, file):
    plain = PassageFactory(
        file=file,
        position=0,
        content="Plain",
        type=PassageType.CHUNK,
        subtype=PassageSubtype.PARAGRAPH,
    )
    paged = PassageFactory(
        file=file,
        position=1,
        content="On page 3",
        type=PassageType.SUMMARY,
        subtype=PassageSubtype.TABLE,
        page_number=3,
    )
    sourced = PassageFactory(
        file=file,
        position=2,
        content="From the web",
        type=PassageType.IMAGE,
        subtype=PassageSubtype.IMAGE,
        page_number=12,
        source_url="https://example.com/a.png",
    )
    body = get_page(client, file.id)
    assert body["passages"] == [
        {
            "id": plain.id,
            "content": "Plain",
            "meta": {"type": "chunk", "subtype": "paragraph", "position": 0},
        },
        {
            "id": paged.id,
            "content": "On page 3",
            "meta": {"type": "summary", "subtype": "table", "position": 1, "pageNumber": 3},
        },
        {
            "id": sourced.id,
            "content": "From the web",
            "meta": {
                "type": "image",
                "subtype": "image",
                "position": 2,
                "pageNumber": 12,
                "sourceUrl": "https://example.com/a.png",
            },
        },
    ]
    assert plain.id.startswith("psg_") and len(plain.id) == 30


def test_passages_come_in_position_order(client, file):
    positions = [40, 3, 17, 0, 99, 5, 8]
    make_passages(file, positions)
    body = get_page(client, file.id)
    assert [p["meta"]["position"] for p in body["passages"]] == sorted(positions)
    assert [p["content"] for p in body["passages"]] == [
        f"content at {p}" for p in sorted(positions)
    ]


def test_only_the_files_own_passages(client, bot, file):
    make_passages(file, range(3))
    make_passages(FileFactory(bot=bot), range(5))
    assert len(get_page(client, file.id)["passages"]) == 3


# --- limit ------------------------------------------------------------------


def test_limit_defaults_to_20(client, file):
    make_passages(file, range(25))
    body = get_page(client, file.id)
    assert [p["meta"]["position"] for p in body["passages"]] == list(range(20))
    assert set(body["meta"]) == {"nextToken"}


def test_exactly_a_full_page_has_no_next_token(client, file):
    make_passages(file, range(20))
    body = get_page(client, file.id)
    assert len(body["passages"]) == 20
    assert body["meta"] == {}


@pytest.mark.parametrize("limit", [1, 7, 200])
def test_limit_accepted(client, file, limit):
    make_passages(file, range(205))
    body = get_page(client, file.id, limit=limit)
    assert [p["meta"]["position"] for p in body["passages"]] == list(range(limit))
    assert "nextToken" in body["meta"]


@pytest.mark.parametrize("param", ["limit", "pageSize"])
@pytest.mark.parametrize(
    "value",
    [
        "0",
        "201",
        "-1",
        "abc",
        "1.5",
        "1e2",
        "9" * 30,
        # Python's int() reads these as 10 and 5; no client sends them as integers.
        "1_0",
        "\u0665",
        "\uff15",
    ],
)
def test_limit_out_of_range_is_invalid_query(client, file, param, value):
    make_passages(file, range(3))
    body = assert_error(client.get(url(file.id), {param: value}), 400, "InvalidQuery")
    assert param in body["message"]


def test_page_size_accepted(client, file):
    make_passages(file, range(10))
    body = get_page(client, file.id, pageSize=4)
    assert [p["meta"]["position"] for p in body["passages"]] == [0, 1, 2, 3]


def test_limit_wins_over_page_size(client, file):
    make_passages(file, range(10))
    body = get_page(client, file.id, limit=3, pageSize=6)
    assert len(body["passages"]) == 3
    body = get_page(client, file.id, limit=6, pageSize=3)
    assert len(body["passages"]) == 6


def test_unknown_query_parameters_are_ignored(client, file):
    make_passages(file, range(3))
    body = get_page(client, file.id, integrationNames="x", foo="bar", limit=2)
    assert len(body["passages"]) == 2


# --- paging -----------------------------------------------------------------


@pytest.mark.parametrize(("limit", "pages"), [(200, 3), (7, 65)])
def test_walk_every_page(client, file, limit, pages):
    positions = [i * 3 for i in range(450)]
    make_passages(file, positions)
    expected = list(
        Passage.objects.filter(file=file).order_by("position").values_list("id", flat=True)
    )
    seen, page_count = walk(client, file.id, limit=limit)
    assert len(seen) == len(set(seen)) == 450
    assert seen == expected
    assert page_count == pages


def test_walk_by_key_with_slash(client, bot):
    nested = FileFactory(bot=bot, key="a/b/c.txt")
    make_passages(nested, range(30))
    seen, pages = walk(client, quote("a/b/c.txt", safe=""), limit=7)
    assert len(set(seen)) == 30
    assert pages == 5


def test_next_token_from_the_key_list_works_with_the_id_list(client, file):
    make_passages(file, range(10))
    token = get_page(client, file.key, limit=4)["meta"]["nextToken"]
    body = get_page(client, file.id, limit=4, nextToken=token)
    assert [p["meta"]["position"] for p in body["passages"]] == [4, 5, 6, 7]


def test_paging_is_stable_while_rows_are_added(client, file):
    make_passages(file, range(0, 100, 2))  # 50 rows: 0, 2, ..., 98
    at_start = set(Passage.objects.filter(file=file).values_list("id", flat=True))
    seen, token, pages = [], None, 0
    while True:
        params = {"limit": 7}
        if token:
            params["nextToken"] = token
        body = get_page(client, file.id, **params)
        seen += [p["id"] for p in body["passages"]]
        pages += 1
        if pages == 3:
            # Rows with higher positions arrive in the middle of the walk.
            Passage.objects.bulk_create(
                [Passage(file=file, position=p, content="late") for p in range(1000, 1010)]
            )
        token = body["meta"].get("nextToken")
        if not token:
            break
    assert len(seen) == len(set(seen))
    assert at_start <= set(seen)
    assert all(seen.count(i) == 1 for i in at_start)
    assert len(seen) == 60


@pytest.fixture
def token(client, file):
    make_passages(file, range(10))
    return get_page(client, file.id, limit=3)["meta"]["nextToken"]


def test_next_token_gives_the_next_page(client, file, token):
    body = get_page(client, file.id, limit=3, nextToken=token)
    assert [p["meta"]["position"] for p in body["passages"]] == [3, 4, 5]


@pytest.mark.parametrize("index", [0, 5, -10, -1])
def test_next_token_with_one_char_changed_is_invalid_query(client, file, token, index):
    chars = list(token)
    chars[index] = "A" if chars[index] != "A" else "B"
    tampered = "".join(chars)
    assert tampered != token
    assert_error(client.get(url(file.id), {"nextToken": tampered}), 400, "InvalidQuery")


@pytest.mark.parametrize(
    "garbage",
    [
        "garbage",
        " ",
        ":",
        "::",
        "a:b",
        "W10:abc",
        "eyJhIjoxfQ:1tFz:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "%%%",
        "x" * 5000,
        "\u00e9\u00e9",
    ],
)
def test_garbage_next_token_is_invalid_query(client, file, token, garbage):
    assert_error(client.get(url(file.id), {"nextToken": garbage}), 400, "InvalidQuery")


def test_truncated_or_extended_next_token_is_invalid_query(client, file, token):
    assert_error(client.get(url(file.id), {"nextToken": token[:-1]}), 400, "InvalidQuery")
    assert_error(client.get(url(file.id), {"nextToken": token + "A"}), 400, "InvalidQuery")


def test_next_token_of_another_file_is_invalid_query(client, bot, file, token):
    other = FileFactory(bot=bot)
    make_passages(other, range(10))
    other_token = get_page(client, other.id, limit=3)["meta"]["nextToken"]
    assert_error(client.get(url(file.id), {"nextToken": other_token}), 400, "InvalidQuery")
    assert_error(client.get(url(other.id), {"nextToken": token}), 400, "InvalidQuery")


def test_next_token_of_another_list_is_invalid_query(admin_client, client, file, bot):
    admin = admin_client(Role.DEVELOPER, for_workspace=bot.workspace)
    BotFactory.create_batch(3, workspace=bot.workspace)
    bots_token = admin.get("/v1/admin/bots", {"pageSize": 1}).json()["meta"]["nextToken"]
    make_passages(file, range(5))
    assert_error(client.get(url(file.id), {"nextToken": bots_token}), 400, "InvalidQuery")


# --- cost -------------------------------------------------------------------


def files_statements(queries):
    """The statements that read files or passages (the credentials' are not counted)."""
    return [q["sql"] for q in queries.captured_queries if "files_" in q["sql"]]


@pytest.mark.parametrize("limit", [1, 20, 200])
def test_query_count_of_a_page_does_not_grow_with_limit(client, file, token, limit):
    make_passages(file, range(100, 400))
    client.get(url(file.id))  # the token's last use is recorded on first use
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url(file.id), {"limit": limit, "nextToken": token})
    assert response.status_code == 200
    assert len(response.json()["passages"]) == limit
    # The file and its page in one statement.
    assert len(files_statements(queries)) == 1


def test_query_count_by_key(client, bot):
    nested = FileFactory(bot=bot, key="x/y.txt")
    make_passages(nested, range(50))
    client.get(url(nested.id))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url(quote("x/y.txt", safe="")), {"limit": 50})
    assert len(response.json()["passages"]) == 50
    assert len(files_statements(queries)) == 1
