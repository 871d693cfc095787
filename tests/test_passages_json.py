"""The passages page as JSON written by the database (files.selectors.passages_sql),
held to the model instances through the presenter (files.presenters.passage_json),
value for value, on whichever database the suite runs (PostgreSQL or SQLite)."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core import signing

from bots.models import Role
from files.models import Passage, PassageSubtype, PassageType
from files.presenters import passage_json, passages_page_body
from files.selectors.files import file_get
from files.selectors.passages import passages_list, passages_page
from platform_site.foundation.domain_errors import DomainError, MalformedId, NotFound
from platform_site.foundation.ids import new_id
from platform_site.foundation.pagination import PageRequest
from tests.conftest import assert_error
from tests.factories import BotFactory, FileFactory, PassageFactory

pytestmark = pytest.mark.django_db

TRICKY = [
    "",
    " ",
    'a "quoted" word',
    "back\\slash, trailing \\",
    '\\"',
    "".join(chr(c) for c in range(1, 32)) + "\x7f",
    "tab\tnew\nline\rreturn\x0bvtab\x0cfeed\x08backspace\x1bescape",
    "caf\u00e9 \u00fc\u00df \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "beyond the BMP: \U0001f600 \U0001d11e \U00010348 \U0010ffff",
    "e\u0301 combining, \ufeff BOM, \ufffd replacement, \u2028 line \u2029 paragraph",
    "</script><script>alert(1)</script> & <b>",
    '{"looks": ["like", "json"]}',
    "[1, 2, 3]",
    "null",
    "true",
    "123",
    "-0.5e10",
    "\\u0041 is not an escape here",
    "\\\\n",
    "x" * 10_000,
    "\u00e9" * 5_000,
    "multi\n\nparagraph\n\n\n  indented\n",
]


def expected_page(file, *, size, token=None):
    page = passages_list(file=file, page=PageRequest(size=size, token=token))
    return [passage_json(p) for p in page.items], page.next_token


def database_page(file, *, size, token=None):
    page = passages_page(bot=file.bot, id_or_key=file.id, page=PageRequest(size=size, token=token))
    # strict: a control character left raw in a string is refused.
    return json.loads(page.passages, strict=True), page.next_token


@pytest.fixture
def file(bot):
    return FileFactory(bot=bot, key="tricky.txt")


@pytest.mark.parametrize("content", TRICKY)
def test_tricky_content_as_the_presenter_gives_it(file, content):
    PassageFactory(file=file, position=0, content=content)
    passages, token = database_page(file, size=20)
    assert (passages, token) == expected_page(file, size=20)
    assert passages[0]["content"] == content


def test_every_tricky_content_on_one_page(file):
    for position, content in enumerate(TRICKY):
        PassageFactory(file=file, position=position, content=content)
    passages, token = database_page(file, size=200)
    assert (passages, token) == expected_page(file, size=200)
    assert [p["content"] for p in passages] == TRICKY
    assert token is None


@pytest.mark.parametrize(
    ("page_number", "source_url"),
    [
        (None, ""),
        (0, ""),
        (1, ""),
        (2**31 - 1, ""),
        (None, "https://example.com/a.png"),
        (7, 'https://example.com/q?a="b"&c=\\d'),
        (7, "https://example.com/caf\u00e9/\U0001f600"),
    ],
)
def test_meta_fields_as_the_presenter_gives_them(file, page_number, source_url):
    PassageFactory(
        file=file,
        position=2**31 - 1,
        content="c",
        type=PassageType.CONSOLIDATED,
        subtype=PassageSubtype.BLOCKQUOTE,
        page_number=page_number,
        source_url=source_url,
    )
    passages, _ = database_page(file, size=1)
    assert passages == expected_page(file, size=1)[0]
    meta = passages[0]["meta"]
    assert ("pageNumber" in meta) == (page_number is not None)
    assert ("sourceUrl" in meta) == bool(source_url)
    assert meta["position"] == 2**31 - 1 and type(meta["position"]) is int


@pytest.mark.parametrize("passage_type", PassageType.values)
@pytest.mark.parametrize("subtype", PassageSubtype.values)
def test_types_and_subtypes(file, passage_type, subtype):
    PassageFactory(file=file, position=3, type=passage_type, subtype=subtype)
    assert database_page(file, size=5) == expected_page(file, size=5)


def test_empty_file(file):
    assert database_page(file, size=200) == ([], None)
    page = passages_page(bot=file.bot, id_or_key=file.key, page=PageRequest(size=200, token=None))
    assert page.passages == "[]"
    body = passages_page_body(passages=page.passages, next_token=page.next_token)
    assert json.loads(body) == {"passages": [], "meta": {}}


@pytest.mark.parametrize(("count", "size"), [(1, 1), (2, 1), (20, 20), (21, 20), (45, 7), (7, 200)])
def test_every_page_and_token_as_the_model_instances_give_them(file, count, size):
    for position in range(0, count * 3, 3):
        PassageFactory(file=file, position=position, content=f"passage \\ {position} \u00e9")
    token, pages = None, 0
    while True:
        passages, database_token = database_page(file, size=size, token=token)
        assert (passages, database_token) == expected_page(file, size=size, token=token)
        pages += 1
        if database_token is None:
            break
        assert len(passages) == size
        token = database_token
    assert pages == max(1, -(-count // size))


def test_the_last_page_exactly_full_has_no_token(file):
    for position in range(6):
        PassageFactory(file=file, position=position)
    first, token = database_page(file, size=3)
    second, last_token = database_page(file, size=3, token=token)
    assert [p["meta"]["position"] for p in first + second] == list(range(6))
    assert last_token is None


def test_a_token_of_the_model_instances_is_good_for_the_database_page(file):
    for position in range(10):
        PassageFactory(file=file, position=position)
    token = passages_list(file=file, page=PageRequest(size=4, token=None)).next_token
    passages, _ = database_page(file, size=4, token=token)
    assert [p["meta"]["position"] for p in passages] == [4, 5, 6, 7]


def test_only_this_files_passages(bot, file):
    PassageFactory(file=file, position=0, content="mine")
    other = FileFactory(bot=bot)
    PassageFactory(file=other, position=0, content="theirs")
    PassageFactory(file=other, position=1, content="theirs")
    assert [p["content"] for p in database_page(file, size=200)[0]] == ["mine"]


@pytest.mark.parametrize("next_token", [None, "abc:def", 'with "quotes" \\ and \u00e9'])
def test_body_around_the_array(next_token):
    passages = '[{"id":"psg_1","content":"\\"","meta":{"position":0}}]'
    body = json.loads(passages_page_body(passages=passages, next_token=next_token))
    meta = {"nextToken": next_token} if next_token else {}
    assert body == {"passages": json.loads(passages), "meta": meta}


# --- which file: the one file_get finds --------------------------------------


def found_by_page(bot, ref):
    """The content of the first passage of the file that passages_page reads
    for `ref`, or the error it raises."""
    try:
        page = passages_page(bot=bot, id_or_key=ref, page=PageRequest(size=1, token=None))
    except DomainError as error:
        return type(error), error.message
    return json.loads(page.passages)[0]["content"]


def found_by_file_get(bot, ref):
    try:
        file = file_get(bot=bot, id_or_key=ref)
    except DomainError as error:
        return type(error), error.message
    return file.passages.get().content


def test_the_file_is_the_one_file_get_finds(bot):
    def make(key, *, in_bot=bot, expires_at=None):
        file = FileFactory(bot=in_bot, key=key, expires_at=expires_at)
        PassageFactory(file=file, position=0, content=f"of {key}")
        return file

    plain = make("plain.txt")
    make("docs/nested/guide.md")
    # A key that spells another file's id: the id wins.
    spelled = make("spelled.txt")
    make(spelled.id)
    # A key shaped like an id that no file has.
    id_shaped_key = new_id("file")
    make(id_shaped_key)
    expired = make("expired.txt")
    type(expired).objects.filter(id=expired.id).update(
        expires_at=datetime.now(UTC) - timedelta(seconds=1)
    )
    make("later.txt", expires_at=datetime.now(UTC) + timedelta(days=1))
    theirs = make("theirs.txt", in_bot=BotFactory())
    refs = [
        plain.id,
        "plain.txt",
        "docs/nested/guide.md",
        "docs/nested",
        spelled.id,
        "spelled.txt",
        id_shaped_key,
        expired.id,
        "expired.txt",
        "later.txt",
        theirs.id,
        "theirs.txt",
        new_id("file"),
        "no-such-key",
        "PLAIN.TXT",
        "plain.txt ",
        "x" * 500,
        "x" * 501,
        "",
    ]
    answers = {ref: found_by_page(bot, ref) for ref in refs}
    assert answers == {ref: found_by_file_get(bot, ref) for ref in refs}
    assert answers[spelled.id] == "of spelled.txt"
    assert answers[id_shaped_key] == f"of {id_shaped_key}"
    assert answers["later.txt"] == "of later.txt"
    assert answers["expired.txt"][0] is NotFound
    assert answers["theirs.txt"][0] is NotFound
    assert answers[""][0] is MalformedId


# --- through the API ----------------------------------------------------------


@pytest.fixture
def client(runtime_client):
    return runtime_client(Role.DEVELOPER)


def test_the_response_is_the_presenters_page(client, file):
    for position, content in enumerate(TRICKY):
        PassageFactory(file=file, position=position, content=content, page_number=position or None)
    expected, next_token = expected_page(file, size=10)
    response = client.get(f"/v1/files/{file.id}/passages", {"limit": 10})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"passages": expected, "meta": {"nextToken": next_token}}
    token = response.json()["meta"]["nextToken"]
    response = client.get(f"/v1/files/{file.id}/passages", {"limit": 200, "nextToken": token})
    expected, _ = expected_page(file, size=200, token=token)
    assert response.json() == {"passages": expected, "meta": {}}


def test_a_token_of_replaced_passages_is_invalid_query(client, file):
    for position in range(5):
        PassageFactory(file=file, position=position)
    token = client.get(f"/v1/files/{file.id}/passages", {"limit": 2}).json()["meta"]["nextToken"]
    Passage.objects.filter(file=file).delete()
    file.passages_version += 1
    file.save(update_fields=["passages_version"])
    response = client.get(f"/v1/files/{file.id}/passages", {"nextToken": token})
    assert "replaced" in assert_error(response, 400, "InvalidQuery")["message"]


def test_a_bad_token_for_a_file_that_is_not_there_is_404(client, file):
    PassageFactory(file=file, position=0)
    response = client.get("/v1/files/no-such-file/passages", {"nextToken": "garbage"})
    assert_error(response, 404, "ResourceNotFound")
    response = client.get(f"/v1/files/{file.id}/passages", {"nextToken": "garbage"})
    assert_error(response, 400, "InvalidQuery")


def test_a_token_signed_for_another_position_is_invalid_query(client, file):
    """The statement runs with the position the token says before its
    signature is checked: a token whose position was swapped for another is
    refused all the same."""
    for position in range(10):
        PassageFactory(file=file, position=position)
    token = client.get(f"/v1/files/{file.id}/passages", {"limit": 2}).json()["meta"]["nextToken"]
    other = client.get(f"/v1/files/{file.id}/passages", {"limit": 5}).json()["meta"]["nextToken"]
    swapped = other.split(":")[0] + ":" + token.split(":")[1]
    response = client.get(f"/v1/files/{file.id}/passages", {"nextToken": swapped})
    assert_error(response, 400, "InvalidQuery")
    response = client.get(f"/v1/files/{file.id}/passages", {"nextToken": other})
    assert [p["meta"]["position"] for p in response.json()["passages"]][:1] == [5]


@pytest.mark.parametrize(
    "position",
    [[10**30], [2**31], [-5], ["5"], [True], [5.0], [None], [], [1, 2], {"p": 1}, "5", None],
)
def test_a_forged_token_of_any_position_is_invalid_query(client, file, position):
    """What a token says is read before its signature is checked: whatever
    it says, a token not signed for this list is a 400, never a 500."""
    PassageFactory(file=file, position=0)
    forged = signing.Signer(salt="another list").sign_object(position)
    response = client.get(f"/v1/files/{file.id}/passages", {"nextToken": forged})
    assert_error(response, 400, "InvalidQuery")
