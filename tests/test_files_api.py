"""The files API: PUT /v1/files (upsert), GET /v1/files (list), GET|PUT|DELETE
/v1/files/{id-or-key}, GET|PUT /v1/files/{id-or-key}/passages. The bytes
themselves (upload and download URLs) are in test_files_upload.py."""

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bots.models import Bot, Role
from files.models import File, FileStatus, Passage
from platform_site.foundation.ids import new_id
from tests.conftest import assert_error, runtime_api, upload
from tests.factories import (
    BotFactory,
    FileFactory,
    PassageFactory,
    WorkspaceFactory,
    member_token,
)

pytestmark = pytest.mark.django_db

URL = "/v1/files"
TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
BASE_KEYS = {
    "id",
    "botId",
    "key",
    "size",
    "contentType",
    "tags",
    "metadata",
    "accessPolicies",
    "index",
    "status",
    "createdAt",
    "updatedAt",
}
WRITERS = [Role.OWNER, Role.ADMINISTRATOR, Role.MANAGER, Role.DEVELOPER]
READERS = [*WRITERS, Role.VIEWER]
MISSING = object()


def file_url(id_or_key: str) -> str:
    return f"{URL}/{id_or_key}"


def passages_url(id_or_key: str) -> str:
    return f"{URL}/{id_or_key}/passages"


def upsert(client: APIClient, **body: Any) -> dict[str, Any]:
    response = client.put(URL, body, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert set(answer) == {"file"}
    file: dict[str, Any] = answer["file"]
    return file


def get_file(client: APIClient, id_or_key: str) -> dict[str, Any]:
    response = client.get(file_url(id_or_key))
    assert response.status_code == 200, response.content
    answer = response.json()
    assert set(answer) == {"file"}
    file: dict[str, Any] = answer["file"]
    return file


def update(client: APIClient, id_or_key: str, **body: Any) -> dict[str, Any]:
    response = client.put(file_url(id_or_key), body, format="json")
    assert response.status_code == 200, response.content
    file: dict[str, Any] = response.json()["file"]
    return file


def listing(client: APIClient, **query: Any) -> dict[str, Any]:
    response = client.get(URL, query)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    assert set(body) == {"files", "meta"}
    return body


def listed_ids(client: APIClient, **query: Any) -> list[str]:
    return [f["id"] for f in listing(client, **query)["files"]]


def walk(client: APIClient, **query: Any) -> list[list[str]]:
    """Every page of the file list, following nextToken to the end."""
    pages: list[list[str]] = []
    token = None
    for _ in range(100):
        body = listing(client, **query, **({"nextToken": token} if token else {}))
        pages.append([f["id"] for f in body["files"]])
        token = body["meta"].get("nextToken")
        if token is None:
            assert body["meta"] == {}
            return pages
        assert isinstance(token, str) and token
    raise AssertionError("the list never ended")


def set_passages(client: APIClient, id_or_key: str, passages: list[Any]) -> dict[str, Any]:
    response = client.put(passages_url(id_or_key), {"passages": passages}, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert set(answer) == {"file"}
    file: dict[str, Any] = answer["file"]
    return file


def get_passages(client: APIClient, id_or_key: str, **query: Any) -> dict[str, Any]:
    response = client.get(passages_url(id_or_key), query)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def stored_blobs(folder: Path) -> dict[str, bytes]:
    """Every file under the storage folder, by its path inside it."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }


def names_field(message: str, field: str) -> bool:
    """The error message starts by naming `field` (or a part of it: `tags.a`, `passages[0]`)."""
    return re.match(rf"{re.escape(field)}[:.\[]", message) is not None


def future(days: int = 30) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).isoformat()


@pytest.fixture
def client(runtime_client: Any) -> APIClient:
    client: APIClient = runtime_client(Role.DEVELOPER)
    return client


# --- upsert -------------------------------------------------------------------------


def test_upsert_creates_the_file(client, bot):
    body = upsert(
        client,
        key="docs/guide.txt",
        size=12,
        tags={"lang": "en"},
        metadata={"source": {"kind": "crawl", "depth": 2}},
        accessPolicies=["integrations"],
        index=True,
    )
    assert set(body) == BASE_KEYS | {"uploadUrl"}
    assert body["id"].startswith("file_") and len(body["id"]) == 31
    assert body["botId"] == bot.id
    assert body["key"] == "docs/guide.txt"
    assert body["size"] == 12
    assert body["contentType"] == "text/plain"
    assert body["tags"] == {"lang": "en"}
    assert body["metadata"] == {"source": {"kind": "crawl", "depth": 2}}
    assert body["accessPolicies"] == ["integrations"]
    assert body["index"] is True
    assert body["status"] == "upload_pending"
    assert TIMESTAMP_RE.fullmatch(body["createdAt"])
    assert TIMESTAMP_RE.fullmatch(body["updatedAt"])
    assert body["uploadUrl"].startswith("http")
    assert "/v1/uploads/" in body["uploadUrl"]
    row = File.objects.get(id=body["id"])
    assert (row.bot_id, row.key, row.size, row.status) == (
        bot.id,
        "docs/guide.txt",
        12,
        FileStatus.UPLOAD_PENDING,
    )


def test_upsert_defaults(client):
    body = upsert(client, key="plain.txt", size=0)
    assert body["tags"] == {}
    assert body["metadata"] == {}
    assert body["accessPolicies"] == []
    assert body["index"] is False
    row = File.objects.get(id=body["id"])
    assert row.max_chunk_length is None
    assert row.public_content_immediately_accessible is False


def test_upsert_answers_200_not_201(client):
    response = client.put(URL, {"key": "a.txt", "size": 1}, format="json")
    assert response.status_code == 200
    response = client.put(URL, {"key": "a.txt", "size": 1}, format="json")
    assert response.status_code == 200


def test_upsert_again_starts_the_file_over(
    client, bot, file_storage, django_capture_on_commit_callbacks
):
    first = upsert(
        client, key="guide.txt", size=5, tags={"old": "yes"}, metadata={"v": 1}, index=False
    )
    assert upload(client, first["uploadUrl"], b"hello", "text/plain").status_code == 200
    set_passages(client, first["id"], [{"content": "one"}, {"content": "two"}])
    assert get_file(client, first["id"])["status"] == "indexing_completed"
    assert len(stored_blobs(file_storage)) == 1

    with django_capture_on_commit_callbacks(execute=True):
        second = upsert(client, key="guide.txt", size=7, tags={"new": "yes"}, index=True)

    assert second["id"] == first["id"]
    assert second["createdAt"] == first["createdAt"]
    assert second["status"] == "upload_pending"
    assert second["size"] == 7
    assert second["index"] is True
    # An upsert replaces the file's description: nothing of the old one is kept.
    assert second["tags"] == {"new": "yes"}
    assert second["metadata"] == {}
    assert "url" not in second
    assert second["uploadUrl"] != first["uploadUrl"]
    assert File.objects.filter(bot=bot, key="guide.txt").count() == 1
    assert not Passage.objects.filter(file_id=first["id"]).exists()
    assert get_passages(client, first["id"]) == {"passages": [], "meta": {}}
    # The old content is gone from the storage once the upsert committed.
    assert stored_blobs(file_storage) == {}

    old = upload(client, first["uploadUrl"], b"hello", "text/plain")
    assert_error(old, 403, "Forbidden")
    assert get_file(client, first["id"])["status"] == "upload_pending"
    assert upload(client, second["uploadUrl"], b"goodbye", "text/plain").status_code == 200


def test_upsert_of_a_key_of_another_bot_creates_a_file_of_its_own(client, bot):
    theirs = FileFactory(bot=BotFactory(workspace=bot.workspace), key="shared.txt")
    ours = upsert(client, key="shared.txt", size=3)
    assert ours["id"] != theirs.id
    theirs.refresh_from_db()
    assert theirs.status == FileStatus.INDEXING_COMPLETED
    assert theirs.size == 100


@pytest.mark.parametrize(
    ("key", "content_type"),
    [
        ("report.pdf", "application/pdf"),
        ("REPORT.PDF", "application/pdf"),
        ("docs/readme.md", "text/markdown"),
        ("notes.txt", "text/plain"),
        ("archive", "application/octet-stream"),
        ("notes.d/README", "application/octet-stream"),
        ("weird.unknownext", "application/octet-stream"),
    ],
)
def test_content_type_is_inferred_from_the_key(client, key, content_type):
    body = upsert(client, key=key, size=1)
    assert body["contentType"] == content_type
    assert File.objects.get(id=body["id"]).content_type == content_type


def test_content_type_given_wins_over_the_key(client):
    body = upsert(client, key="notes.txt", size=1, contentType="text/csv; charset=utf-8")
    assert body["contentType"] == "text/csv; charset=utf-8"


@pytest.mark.parametrize("length", [100, 5000])
def test_chunk_length_bounds_are_accepted(client, length):
    body = upsert(
        client,
        key="a.txt",
        size=1,
        indexing={"configuration": {"chunking": {"maximumChunkLength": length}}},
    )
    assert File.objects.get(id=body["id"]).max_chunk_length == length


@pytest.mark.parametrize(
    "indexing", [{}, {"configuration": {}}, {"configuration": {"chunking": {}}}]
)
def test_empty_indexing_settings_mean_the_default_chunk_length(client, indexing):
    body = upsert(client, key="a.txt", size=1, indexing=indexing)
    assert File.objects.get(id=body["id"]).max_chunk_length is None


def test_expires_at_is_answered_in_utc_with_milliseconds(client):
    body = upsert(client, key="a.txt", size=1, expiresAt="2099-01-02T03:04:05.678+02:00")
    assert body["expiresAt"] == "2099-01-02T01:04:05.678Z"
    assert get_file(client, body["id"])["expiresAt"] == "2099-01-02T01:04:05.678Z"


def test_access_policies_are_deduplicated(client):
    body = upsert(
        client,
        key="a.txt",
        size=1,
        accessPolicies=["public_content", "integrations", "integrations"],
    )
    assert body["accessPolicies"] == ["integrations", "public_content"]


def test_size_up_to_the_maximum_is_accepted(client, settings):
    settings.FILE_UPLOAD_MAX_SIZE = 1000
    assert upsert(client, key="a.txt", size=1000)["size"] == 1000


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"key": MISSING}, "key", id="key-missing"),
        pytest.param({"size": MISSING}, "size", id="size-missing"),
        pytest.param({"key": 12}, "key", id="key-number"),
        pytest.param({"key": ""}, "key", id="key-empty"),
        pytest.param({"key": "k" * 501}, "key", id="key-too-long"),
        pytest.param({"key": None}, "key", id="key-null"),
        pytest.param({"size": "10"}, "size", id="size-string"),
        pytest.param({"size": 1.5}, "size", id="size-fraction"),
        pytest.param({"size": True}, "size", id="size-boolean"),
        pytest.param({"size": -1}, "size", id="size-negative"),
        pytest.param({"size": 1001}, "size", id="size-over-maximum"),
        pytest.param({"index": "true"}, "index", id="index-string"),
        pytest.param({"index": 1}, "index", id="index-number"),
        pytest.param({"contentType": "pdf"}, "contentType", id="content-type-no-slash"),
        pytest.param({"contentType": "text/plain garbage"}, "contentType", id="content-type-bad"),
        pytest.param({"contentType": 5}, "contentType", id="content-type-number"),
        pytest.param({"colour": "red"}, "colour", id="unknown-field"),
        pytest.param({"tags": "lang=en"}, "tags", id="tags-string"),
        pytest.param({"tags": {"lang": 1}}, "tags", id="tags-number-value"),
        pytest.param({"tags": {"lang": None}}, "tags", id="tags-null-value"),
        pytest.param({"tags": {"lang": ["en"]}}, "tags", id="tags-list-value"),
        pytest.param({"accessPolicies": ["everyone"]}, "accessPolicies", id="policy-unknown"),
        pytest.param({"accessPolicies": "public_content"}, "accessPolicies", id="policy-string"),
        pytest.param({"metadata": ["a"]}, "metadata", id="metadata-list"),
        pytest.param({"expiresAt": "2000-01-01T00:00:00Z"}, "expiresAt", id="expires-past"),
        pytest.param({"expiresAt": "2099-01-01T00:00:00"}, "expiresAt", id="expires-naive"),
        pytest.param({"expiresAt": "next tuesday"}, "expiresAt", id="expires-malformed"),
        pytest.param({"expiresAt": "2099-13-01T00:00:00Z"}, "expiresAt", id="expires-month-13"),
        pytest.param({"expiresAt": 4102444800}, "expiresAt", id="expires-number"),
        pytest.param(
            {"publicContentImmediatelyAccessible": "yes"},
            "publicContentImmediatelyAccessible",
            id="public-immediately-string",
        ),
        pytest.param(
            {"indexing": {"configuration": {"chunking": {"maximumChunkLength": 99}}}},
            "indexing.configuration.chunking.maximumChunkLength",
            id="chunk-99",
        ),
        pytest.param(
            {"indexing": {"configuration": {"chunking": {"maximumChunkLength": 5001}}}},
            "indexing.configuration.chunking.maximumChunkLength",
            id="chunk-5001",
        ),
        pytest.param(
            {"indexing": {"configuration": {"chunking": {"maximumChunkLength": "500"}}}},
            "indexing.configuration.chunking.maximumChunkLength",
            id="chunk-string",
        ),
        pytest.param(
            {
                "indexing": {
                    "configuration": {
                        "chunking": {"maximumChunkLength": 500},
                        "summary": {"enabled": True},
                    }
                }
            },
            "indexing.configuration.summary",
            id="indexing-unknown-key",
        ),
        pytest.param({"indexing": "yes"}, "indexing", id="indexing-string"),
    ],
)
def test_invalid_upsert_body_is_invalid_payload(client, bot, settings, changes, field):
    settings.FILE_UPLOAD_MAX_SIZE = 1000
    body: dict[str, Any] = {"key": "a.txt", "size": 10}
    for name, value in changes.items():
        if value is MISSING:
            del body[name]
        else:
            body[name] = value
    error = assert_error(client.put(URL, body, format="json"), 400, "InvalidPayload")
    assert names_field(error["message"], field), error["message"]
    assert not File.objects.filter(bot=bot).exists()


@pytest.mark.parametrize("payload", ["[]", '"a.txt"', "null", "{", ""])
def test_upsert_body_that_is_not_an_object_is_invalid_payload(client, bot, payload):
    response = client.put(URL, payload, content_type="application/json")
    assert_error(response, 400, "InvalidPayload")
    assert not File.objects.filter(bot=bot).exists()


def test_upsert_body_that_is_not_json_is_unsupported_media_type(client, bot):
    response = client.put(URL, "key=a.txt&size=1", content_type="application/x-www-form-urlencoded")
    assert_error(response, 415, "UnsupportedMediaType")


def test_invalid_upsert_leaves_the_existing_file_alone(client, file_storage):
    first = upsert(client, key="a.txt", size=3, tags={"keep": "me"})
    assert_error(
        client.put(URL, {"key": "a.txt", "size": -3}, format="json"), 400, "InvalidPayload"
    )
    again = get_file(client, first["id"])
    assert (again["size"], again["tags"]) == (3, {"keep": "me"})
    # The upload URL of the first answer still works: nothing was upserted.
    assert upload(client, first["uploadUrl"], b"abc", "text/plain").status_code == 200


# --- answer shape ---------------------------------------------------------------------


def test_read_answer_has_no_upload_url(client):
    created = upsert(client, key="a.txt", size=1)
    body = get_file(client, created["id"])
    assert set(body) == BASE_KEYS
    assert {k: v for k, v in created.items() if k != "uploadUrl"} == body


@pytest.mark.parametrize("status", [FileStatus.UPLOAD_FAILED, FileStatus.INDEXING_FAILED])
def test_failed_status_reason_only_when_failed(client, bot, status):
    failed = FileFactory(bot=bot, status=status, failed_status_reason="the parser choked")
    body = get_file(client, failed.id)
    assert body["status"] == status
    assert body["failedStatusReason"] == "the parser choked"
    assert set(body) == BASE_KEYS | {"failedStatusReason"}


@pytest.mark.parametrize(
    "status",
    [
        FileStatus.UPLOAD_PENDING,
        FileStatus.UPLOAD_COMPLETED,
        FileStatus.INDEXING_COMPLETED,
    ],
)
def test_no_failed_status_reason_otherwise(client, bot, status):
    file = FileFactory(bot=bot, status=status)
    body = get_file(client, file.id)
    assert body["status"] == status
    assert set(body) == BASE_KEYS


def test_url_only_once_content_exists(client, file_storage):
    created = upsert(client, key="a.txt", size=3)
    assert "url" not in created
    assert "url" not in get_file(client, created["id"])
    uploaded = upload(client, created["uploadUrl"], b"abc", "text/plain").json()["file"]
    assert uploaded["url"].startswith("http")
    assert "/v1/downloads/" in uploaded["url"]
    body = get_file(client, created["id"])
    assert set(body) == BASE_KEYS | {"url"}
    assert body["status"] == "upload_completed"


def test_list_items_are_the_files_as_read_one_by_one(client, bot, file_storage):
    created = upsert(client, key="a.txt", size=3, expiresAt=future())
    upload(client, created["uploadUrl"], b"abc", "text/plain")
    FileFactory(bot=bot, status=FileStatus.UPLOAD_FAILED, failed_status_reason="why")
    files = listing(client)["files"]
    assert len(files) == 2
    for item in files:
        single = get_file(client, item["id"])
        # A private url is signed on each read; the rest is the same.
        assert {k: v for k, v in item.items() if k != "url"} == {
            k: v for k, v in single.items() if k != "url"
        }
        assert ("url" in item) == ("url" in single)


# --- one file -------------------------------------------------------------------------


def test_get_by_id_and_by_key(client, bot):
    file = FileFactory(bot=bot, key="guide.txt")
    assert get_file(client, file.id)["id"] == file.id
    assert get_file(client, "guide.txt")["id"] == file.id


@pytest.mark.parametrize("key", ["docs/manuals/guide.md", "a/b/c/d.txt", "docs/"])
def test_get_by_key_with_slashes(client, bot, key):
    file = FileFactory(bot=bot, key=key)
    FileFactory(bot=bot, key="docs")  # a prefix of the key is another file
    assert get_file(client, key)["id"] == file.id
    assert get_file(client, quote(key, safe=""))["id"] == file.id


def test_get_by_key_that_looks_like_an_id_of_no_file(client, bot):
    lookalike = new_id("file")
    file = FileFactory(bot=bot, key=lookalike)
    assert get_file(client, lookalike)["id"] == file.id


@pytest.mark.parametrize(
    "ref", ["file_01J0000000000000000000000A", "no-such-key.txt", "no/such/key.txt"]
)
def test_unknown_file_is_404(client, bot, ref):
    FileFactory(bot=bot)
    error = assert_error(client.get(file_url(ref)), 404, "ResourceNotFound")
    assert ref in error["message"]


def test_key_longer_than_any_key_is_invalid_identifier(client):
    assert_error(client.get(file_url("k" * 501)), 400, "InvalidIdentifier")


@pytest.mark.parametrize("same_workspace", [True, False], ids=["same-workspace", "other"])
def test_file_of_another_bot_is_404(client, bot, same_workspace):
    workspace = bot.workspace if same_workspace else WorkspaceFactory()
    theirs = FileFactory(bot=BotFactory(workspace=workspace), key="theirs.txt")
    PassageFactory(file=theirs, content="theirs")
    for ref in (theirs.id, "theirs.txt"):
        assert_error(client.get(file_url(ref)), 404, "ResourceNotFound")
        assert_error(client.get(passages_url(ref)), 404, "ResourceNotFound")
        assert_error(
            client.put(file_url(ref), {"tags": {"x": "y"}}, format="json"),
            404,
            "ResourceNotFound",
        )
        assert_error(
            client.put(passages_url(ref), {"passages": [{"content": "x"}]}, format="json"),
            404,
            "ResourceNotFound",
        )
        assert_error(client.delete(file_url(ref)), 404, "ResourceNotFound")
    assert listed_ids(client) == []
    theirs.refresh_from_db()
    assert theirs.tags == {}
    assert list(theirs.passages.values_list("content", flat=True)) == ["theirs"]


def test_expired_file_is_gone_for_readers(client, bot):
    live = FileFactory(bot=bot, key="live.txt", expires_at=datetime.now(UTC) + timedelta(days=1))
    expired = FileFactory(bot=bot, key="old.txt")
    File.objects.filter(id=expired.id).update(expires_at=datetime.now(UTC) - timedelta(seconds=1))
    for ref in (expired.id, "old.txt"):
        assert_error(client.get(file_url(ref)), 404, "ResourceNotFound")
        assert_error(client.get(passages_url(ref)), 404, "ResourceNotFound")
        assert_error(
            client.put(file_url(ref), {"expiresAt": None}, format="json"), 404, "ResourceNotFound"
        )
    assert listed_ids(client) == [live.id]
    assert get_file(client, "live.txt")["id"] == live.id


def test_upsert_of_an_expired_key_revives_the_file(client, bot):
    expired = FileFactory(bot=bot, key="old.txt")
    File.objects.filter(id=expired.id).update(expires_at=datetime.now(UTC) - timedelta(seconds=1))
    body = upsert(client, key="old.txt", size=2)
    assert "expiresAt" not in body
    assert get_file(client, "old.txt")["id"] == body["id"]


# --- the list -------------------------------------------------------------------------


def test_list_is_newest_first_and_only_the_bots_own(client, bot):
    ours = []
    for index in range(4):
        ours.append(upsert(client, key=f"f{index}.txt", size=1)["id"])
        time.sleep(0.002)  # ULIDs order by millisecond: keep creation order total
    FileFactory(bot=BotFactory(workspace=bot.workspace))
    FileFactory(bot=BotFactory())
    body = listing(client)
    assert [f["id"] for f in body["files"]] == list(reversed(ours))
    assert body["meta"] == {}


def test_re_upserting_keeps_a_files_place_in_the_list(client):
    first = upsert(client, key="first.txt", size=1)["id"]
    time.sleep(0.002)
    second = upsert(client, key="second.txt", size=1)["id"]
    upsert(client, key="first.txt", size=2)
    assert listed_ids(client) == [second, first]


def test_empty_list(client):
    assert listing(client) == {"files": [], "meta": {}}


def test_tag_filters(client, bot):
    en_faq = FileFactory(bot=bot, tags={"lang": "en", "kind": "faq"})
    en_doc = FileFactory(bot=bot, tags={"lang": "en", "kind": "doc"})
    fr_faq = FileFactory(bot=bot, tags={"lang": "fr", "kind": "faq"})
    FileFactory(bot=bot)
    FileFactory(bot=BotFactory(workspace=bot.workspace), tags={"lang": "en", "kind": "faq"})

    assert set(listed_ids(client, **{"tags[lang]": "en"})) == {en_faq.id, en_doc.id}
    assert set(listed_ids(client, **{"tags[kind]": "faq"})) == {en_faq.id, fr_faq.id}
    assert listed_ids(client, **{"tags[lang]": "en", "tags[kind]": "faq"}) == [en_faq.id]
    assert listed_ids(client, **{"tags[lang]": "fr", "tags[kind]": "doc"}) == []
    assert listed_ids(client, **{"tags[lang]": "EN"}) == []
    assert listed_ids(client, **{"tags[missing]": "en"}) == []


def test_tag_filter_on_a_key_made_of_digits(client, bot):
    tagged = FileFactory(bot=bot, tags={"2024": "yes", "0": "zero"})
    FileFactory(bot=bot, tags={"2024": "no"})
    FileFactory(bot=bot, tags={"year": "2024"})
    assert listed_ids(client, **{"tags[2024]": "yes"}) == [tagged.id]
    assert listed_ids(client, **{"tags[0]": "zero"}) == [tagged.id]


def test_tag_filter_given_twice_is_invalid_query(client, bot):
    FileFactory(bot=bot, tags={"lang": "en"})
    response = client.get(f"{URL}?tags[lang]=en&tags[lang]=fr")
    error = assert_error(response, 400, "InvalidQuery")
    assert "tags[lang]" in error["message"]


def test_paging_walk_with_page_size_2(client, bot):
    for index in range(7):
        FileFactory(bot=bot, key=f"f{index}.txt")
    FileFactory(bot=BotFactory(workspace=bot.workspace))
    pages = walk(client, pageSize=2)
    assert [len(page) for page in pages] == [2, 2, 2, 1]
    seen = [file_id for page in pages for file_id in page]
    assert len(seen) == len(set(seen)) == 7
    expected = list(File.objects.filter(bot=bot).order_by("-id").values_list("id", flat=True))
    assert seen == expected


def test_paging_walk_with_a_tag_filter(client, bot):
    tagged = [FileFactory(bot=bot, tags={"team": "a"}).id for _ in range(5)]
    for _ in range(4):
        FileFactory(bot=bot, tags={"team": "b"})
    pages = walk(client, pageSize=2, **{"tags[team]": "a"})
    seen = [file_id for page in pages for file_id in page]
    assert len(pages) == 3
    assert sorted(seen) == sorted(tagged)
    assert seen == sorted(seen, reverse=True)


def test_paging_while_files_are_added_shows_none_twice(client, bot):
    at_start = [FileFactory(bot=bot).id for _ in range(6)]
    body = listing(client, pageSize=2)
    seen = [f["id"] for f in body["files"]]
    token = body["meta"]["nextToken"]
    FileFactory.create_batch(3, bot=bot)  # newer files land before the first page
    while token:
        body = listing(client, pageSize=2, nextToken=token)
        seen += [f["id"] for f in body["files"]]
        token = body["meta"].get("nextToken")
    assert sorted(seen) == sorted(at_start)


@pytest.fixture
def list_token(client: APIClient, bot: Bot) -> str:
    for _ in range(5):
        FileFactory(bot=bot, tags={"team": "a"})
    token: str = listing(client, pageSize=2)["meta"]["nextToken"]
    return token


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"), id="last-char"),
        pytest.param(lambda t: ("A" if t[0] != "A" else "B") + t[1:], id="first-char"),
        pytest.param(lambda t: t[:-3], id="truncated"),
        pytest.param(lambda t: t + "x", id="extended"),
        pytest.param(lambda t: "garbage", id="garbage"),
        pytest.param(lambda t: "W10:abc", id="garbage-with-colon"),
    ],
)
def test_tampered_next_token_is_invalid_query(client, list_token, tamper):
    tampered = tamper(list_token)
    assert tampered != list_token
    response = client.get(URL, {"pageSize": 2, "nextToken": tampered})
    error = assert_error(response, 400, "InvalidQuery")
    assert "nextToken" in error["message"]


def test_next_token_of_one_tag_filter_is_refused_with_another(client, bot, list_token):
    filtered = listing(client, pageSize=2, **{"tags[team]": "a"})["meta"]["nextToken"]
    # Unfiltered token with a filter, filtered token without one, and with another value.
    assert_error(
        client.get(URL, {"pageSize": 2, "nextToken": list_token, "tags[team]": "a"}),
        400,
        "InvalidQuery",
    )
    assert_error(client.get(URL, {"pageSize": 2, "nextToken": filtered}), 400, "InvalidQuery")
    assert_error(
        client.get(URL, {"pageSize": 2, "nextToken": filtered, "tags[team]": "b"}),
        400,
        "InvalidQuery",
    )
    # The same filter takes it.
    assert listing(client, pageSize=2, nextToken=filtered, **{"tags[team]": "a"})["files"]


def test_next_token_of_another_bot_is_invalid_query(client, bot, runtime_client, list_token):
    other = BotFactory(workspace=bot.workspace)
    FileFactory.create_batch(3, bot=other)
    other_client = runtime_client(Role.DEVELOPER, for_bot=other)
    assert_error(other_client.get(URL, {"nextToken": list_token}), 400, "InvalidQuery")


def test_next_token_of_a_passages_list_is_invalid_query(client, bot, list_token):
    file = FileFactory(bot=bot)
    PassageFactory.create_batch(3, file=file)
    passages_token = get_passages(client, file.id, limit=1)["meta"]["nextToken"]
    assert_error(client.get(URL, {"nextToken": passages_token}), 400, "InvalidQuery")
    assert_error(client.get(passages_url(file.id), {"nextToken": list_token}), 400, "InvalidQuery")


@pytest.mark.parametrize("size", ["0", "201", "-1", "two", "1.5"])
def test_page_size_out_of_range_is_invalid_query(client, size):
    error = assert_error(client.get(URL, {"pageSize": size}), 400, "InvalidQuery")
    assert "pageSize" in error["message"]


def test_page_size_default_is_20(client, bot):
    FileFactory.create_batch(21, bot=bot)
    body = listing(client)
    assert len(body["files"]) == 20
    assert "nextToken" in body["meta"]


# --- metadata update ------------------------------------------------------------------


@pytest.fixture
def described(bot: Bot) -> File:
    file = FileFactory(
        bot=bot,
        key="docs/desc.txt",
        tags={"a": "1", "b": "2"},
        metadata={"x": 1, "y": {"z": 2}},
        access_policies=["integrations"],
        status=FileStatus.INDEXING_COMPLETED,
    )
    PassageFactory(file=file, position=0, content="kept")
    return file


def test_tags_are_merged_and_null_removes_one(client, described):
    body = update(client, described.id, tags={"b": None, "c": "3", "a": "one"})
    assert body["tags"] == {"a": "one", "c": "3"}
    described.refresh_from_db()
    assert described.tags == {"a": "one", "c": "3"}


def test_removing_a_tag_that_is_not_there_is_fine(client, described):
    assert update(client, described.id, tags={"nope": None})["tags"] == {"a": "1", "b": "2"}


def test_metadata_is_replaced(client, described):
    body = update(client, described.id, metadata={"w": [1, 2]})
    assert body["metadata"] == {"w": [1, 2]}
    assert update(client, described.id, metadata={})["metadata"] == {}


def test_access_policies_are_replaced(client, described):
    body = update(client, described.id, accessPolicies=["public_content"])
    assert body["accessPolicies"] == ["public_content"]
    assert update(client, described.id, accessPolicies=[])["accessPolicies"] == []


def test_expires_at_is_set_and_null_clears_it(client, described):
    body = update(client, described.id, expiresAt="2099-05-06T07:08:09.010Z")
    assert body["expiresAt"] == "2099-05-06T07:08:09.010Z"
    body = update(client, described.id, expiresAt=None)
    assert "expiresAt" not in body
    described.refresh_from_db()
    assert described.expires_at is None


def test_update_by_key_with_slashes(client, described):
    assert update(client, "docs/desc.txt", tags={"d": "4"})["id"] == described.id


def test_update_leaves_content_status_and_passages_alone(client, described):
    before = get_file(client, described.id)
    body = update(client, described.id, tags={"c": "3"})
    for field in ("id", "key", "size", "contentType", "status", "index", "createdAt"):
        assert body[field] == before[field]
    assert body["metadata"] == before["metadata"]
    assert body["accessPolicies"] == before["accessPolicies"]
    assert set(body) == BASE_KEYS
    assert [p["content"] for p in get_passages(client, described.id)["passages"]] == ["kept"]


def test_empty_update_changes_nothing(client, described):
    before = get_file(client, described.id)
    body = update(client, described.id)
    assert {k: v for k, v in body.items() if k != "updatedAt"} == {
        k: v for k, v in before.items() if k != "updatedAt"
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"tags": "a=1"}, "tags", id="tags-string"),
        pytest.param({"tags": {"a": 1}}, "tags", id="tag-number"),
        pytest.param({"tags": {"a": True}}, "tags", id="tag-boolean"),
        pytest.param({"tags": {"k" * 101: "v"}}, "tags", id="tag-name-too-long"),
        pytest.param({"tags": {"a": "v" * 501}}, "tags", id="tag-value-too-long"),
        pytest.param({"metadata": "x"}, "metadata", id="metadata-string"),
        pytest.param({"metadata": None}, "metadata", id="metadata-null"),
        pytest.param({"accessPolicies": ["all"]}, "accessPolicies", id="policy-unknown"),
        pytest.param({"expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt", id="expires-past"),
        pytest.param({"expiresAt": "2099-01-01T00:00:00"}, "expiresAt", id="expires-naive"),
        pytest.param({"expiresAt": "soon"}, "expiresAt", id="expires-malformed"),
        pytest.param({"key": "renamed.txt"}, "key", id="key-cannot-change"),
        pytest.param({"size": 3}, "size", id="size-cannot-change"),
        pytest.param({"index": True}, "index", id="index-not-here"),
    ],
)
def test_invalid_update_is_invalid_payload(client, described, body, field):
    error = assert_error(
        client.put(file_url(described.id), body, format="json"), 400, "InvalidPayload"
    )
    assert names_field(error["message"], field), error["message"]
    described.refresh_from_db()
    assert described.tags == {"a": "1", "b": "2"}
    assert described.metadata == {"x": 1, "y": {"z": 2}}
    assert described.access_policies == ["integrations"]
    assert described.expires_at is None
    assert described.key == "docs/desc.txt"


def test_update_past_the_tag_limit_is_refused_and_changes_nothing(client, bot):
    file = FileFactory(bot=bot, tags={f"t{i}": "v" for i in range(45)})
    error = assert_error(
        client.put(
            file_url(file.id),
            {"tags": {f"n{i}": "v" for i in range(6)}, "metadata": {"m": 1}},
            format="json",
        ),
        400,
        "InvalidPayload",
    )
    assert "tags" in error["message"]
    file.refresh_from_db()
    assert len(file.tags) == 45
    assert file.metadata == {}
    # Removing while adding keeps it within the limit.
    body = update(client, file.id, tags={**{f"t{i}": None for i in range(6)}, "n": "v"})
    assert len(body["tags"]) == 40


# --- delete ---------------------------------------------------------------------------


def test_delete_removes_the_file_its_passages_and_its_bytes(
    client, bot, file_storage, django_capture_on_commit_callbacks
):
    created = upsert(client, key="docs/bye.txt", size=3)
    assert upload(client, created["uploadUrl"], b"bye", "text/plain").status_code == 200
    set_passages(client, created["id"], [{"content": "p1"}, {"content": "p2"}])
    kept = upsert(client, key="kept.txt", size=4)
    upload(client, kept["uploadUrl"], b"keep", "text/plain")
    assert sorted(stored_blobs(file_storage).values()) == [b"bye", b"keep"]

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(file_url(created["id"]))
    assert response.status_code == 200, response.content
    assert response.json() == {}

    assert not File.objects.filter(id=created["id"]).exists()
    assert not Passage.objects.filter(file_id=created["id"]).exists()
    assert list(stored_blobs(file_storage).values()) == [b"keep"]
    assert_error(client.get(file_url(created["id"])), 404, "ResourceNotFound")
    assert_error(client.get(passages_url(created["id"])), 404, "ResourceNotFound")
    assert listed_ids(client) == [kept["id"]]


def test_delete_by_key_with_slashes(client, bot):
    file = FileFactory(bot=bot, key="a/b/c.txt")
    response = client.delete(file_url("a/b/c.txt"))
    assert response.status_code == 200
    assert response.json() == {}
    assert not File.objects.filter(id=file.id).exists()


def test_delete_twice_is_404(client, bot):
    file = FileFactory(bot=bot)
    assert client.delete(file_url(file.id)).status_code == 200
    assert_error(client.delete(file_url(file.id)), 404, "ResourceNotFound")


def test_deleted_key_can_be_upserted_again_as_a_new_file(client, bot):
    first = upsert(client, key="again.txt", size=1)
    client.delete(file_url("again.txt"))
    second = upsert(client, key="again.txt", size=1)
    assert second["id"] != first["id"]


# --- passages -------------------------------------------------------------------------


@pytest.fixture
def file(bot: Bot) -> File:
    return FileFactory(bot=bot, key="guide.txt", status=FileStatus.UPLOAD_PENDING)


def test_passages_positions_default_to_their_order(client, file):
    body = set_passages(
        client, file.id, [{"content": "first"}, {"content": "second"}, {"content": "third"}]
    )
    assert body["id"] == file.id
    assert body["status"] == "indexing_completed"
    assert "failedStatusReason" not in body
    passages = get_passages(client, file.id)["passages"]
    assert [(p["content"], p["meta"]) for p in passages] == [
        ("first", {"type": "chunk", "subtype": "paragraph", "position": 0}),
        ("second", {"type": "chunk", "subtype": "paragraph", "position": 1}),
        ("third", {"type": "chunk", "subtype": "paragraph", "position": 2}),
    ]
    assert all(p["id"].startswith("psg_") for p in passages)


def test_passages_explicit_positions_are_honoured(client, file):
    set_passages(
        client,
        file.id,
        [
            {"content": "ten", "meta": {"position": 10}},
            {"content": "five", "meta": {"position": 5}},
            {"content": "seven", "meta": {"position": 7}},
        ],
    )
    passages = get_passages(client, "guide.txt")["passages"]
    assert [(p["content"], p["meta"]["position"]) for p in passages] == [
        ("five", 5),
        ("seven", 7),
        ("ten", 10),
    ]


def test_passages_meta_is_kept(client, file):
    set_passages(
        client,
        file.id,
        [
            {
                "content": "A table",
                "meta": {
                    "type": "summary",
                    "subtype": "table",
                    "pageNumber": 3,
                    "sourceUrl": "https://example.com/doc#p3",
                },
            },
            {"content": "An image", "meta": {"type": "image", "subtype": "image"}},
            {"content": "Plain"},
        ],
    )
    passages = get_passages(client, file.id)["passages"]
    assert [p["meta"] for p in passages] == [
        {
            "type": "summary",
            "subtype": "table",
            "position": 0,
            "pageNumber": 3,
            "sourceUrl": "https://example.com/doc#p3",
        },
        {"type": "image", "subtype": "image", "position": 1},
        {"type": "chunk", "subtype": "paragraph", "position": 2},
    ]


def test_passages_replace_the_previous_set(client, file):
    set_passages(client, file.id, [{"content": f"old {i}"} for i in range(5)])
    set_passages(client, file.id, [{"content": "new"}])
    passages = get_passages(client, file.id)["passages"]
    assert [p["content"] for p in passages] == ["new"]
    assert Passage.objects.filter(file=file).count() == 1


def test_passages_by_key_with_slashes(client, bot):
    nested = FileFactory(bot=bot, key="docs/a/b.md")
    set_passages(client, "docs/a/b.md", [{"content": "x"}])
    assert [p.content for p in nested.passages.all()] == ["x"]


def test_passage_content_of_5000_characters_is_accepted(client, file):
    set_passages(client, file.id, [{"content": "x" * 5000}])
    assert get_passages(client, file.id)["passages"][0]["content"] == "x" * 5000


def test_passages_clear_a_failed_status(client, bot):
    failed = FileFactory(bot=bot, status=FileStatus.INDEXING_FAILED, failed_status_reason="bad")
    body = set_passages(client, failed.id, [{"content": "fixed by hand"}])
    assert body["status"] == "indexing_completed"
    assert "failedStatusReason" not in body
    failed.refresh_from_db()
    assert failed.failed_status_reason == ""
    assert failed.indexing_due_at is None


@pytest.mark.parametrize(
    ("passages", "field"),
    [
        pytest.param(
            [{"content": "a", "meta": {"position": 0}}, {"content": "b"}],
            "passages",
            id="partial-positions",
        ),
        pytest.param(
            [{"content": "a", "meta": {"position": 3}}, {"content": "b", "meta": {"position": 3}}],
            "passages",
            id="duplicate-positions",
        ),
        pytest.param([{"content": "x" * 5001}], "passages[0].content", id="content-too-long"),
        pytest.param([{"content": ""}], "passages[0].content", id="content-empty"),
        pytest.param([{"content": 5}], "passages[0].content", id="content-number"),
        pytest.param([{}], "passages[0].content", id="content-missing"),
        pytest.param(
            [{"content": "a"}, {"content": "b", "meta": {"subtype": "poem"}}],
            "passages[1].meta.subtype",
            id="unknown-subtype",
        ),
        pytest.param(
            [{"content": "a", "meta": {"type": "essay"}}],
            "passages[0].meta.type",
            id="unknown-type",
        ),
        pytest.param(
            [{"content": "a", "meta": {"sourceUrl": "ftp://example.com/a"}}],
            "passages[0].meta.sourceUrl",
            id="ftp-source-url",
        ),
        pytest.param(
            [{"content": "a", "meta": {"sourceUrl": "javascript:alert(1)"}}],
            "passages[0].meta.sourceUrl",
            id="javascript-source-url",
        ),
        pytest.param(
            [{"content": "a", "meta": {"sourceUrl": "not a url"}}],
            "passages[0].meta.sourceUrl",
            id="not-a-url",
        ),
        pytest.param(
            [{"content": "a", "meta": {"position": -1}}],
            "passages[0].meta.position",
            id="negative-position",
        ),
        pytest.param(
            [{"content": "a", "meta": {"position": "1"}}],
            "passages[0].meta.position",
            id="string-position",
        ),
        pytest.param(
            [{"content": "a", "meta": {"pageNumber": 0}}],
            "passages[0].meta.pageNumber",
            id="page-zero",
        ),
        pytest.param(
            [{"content": "a", "meta": {"colour": "red"}}],
            "passages[0].meta.colour",
            id="unknown-meta-field",
        ),
        pytest.param([{"content": "a", "id": "psg_x"}], "passages[0].id", id="unknown-field"),
        pytest.param("a passage", "passages", id="not-a-list"),
    ],
)
def test_invalid_passages_are_invalid_payload(client, file, passages, field):
    PassageFactory(file=file, position=0, content="before")
    response = client.put(passages_url(file.id), {"passages": passages}, format="json")
    error = assert_error(response, 400, "InvalidPayload")
    assert names_field(error["message"], field), error["message"]
    assert [p.content for p in file.passages.all()] == ["before"]
    file.refresh_from_db()
    assert file.status == FileStatus.UPLOAD_PENDING


def test_passages_body_without_passages_is_invalid_payload(client, file):
    error = assert_error(
        client.put(passages_url(file.id), {}, format="json"), 400, "InvalidPayload"
    )
    assert "passages" in error["message"]


def test_replacing_passages_invalidates_an_old_next_token(client, file):
    set_passages(client, file.id, [{"content": f"p{i}"} for i in range(5)])
    token = get_passages(client, file.id, limit=2)["meta"]["nextToken"]
    assert [
        p["content"] for p in get_passages(client, file.id, limit=2, nextToken=token)["passages"]
    ] == ["p2", "p3"]
    set_passages(client, file.id, [{"content": f"q{i}"} for i in range(5)])
    error = assert_error(
        client.get(passages_url(file.id), {"limit": 2, "nextToken": token}), 400, "InvalidQuery"
    )
    assert "nextToken" in error["message"]


# --- roles and credentials ------------------------------------------------------------


@pytest.mark.parametrize("role", READERS)
def test_readers_may_read(runtime_client, bot, role):
    file = FileFactory(bot=bot, key="r.txt")
    PassageFactory(file=file)
    reader = runtime_client(role)
    assert listed_ids(reader) == [file.id]
    assert get_file(reader, file.id)["id"] == file.id
    assert len(get_passages(reader, "r.txt")["passages"]) == 1


@pytest.mark.parametrize("role", WRITERS)
def test_writers_may_write(runtime_client, bot, role):
    writer = runtime_client(role)
    created = upsert(writer, key="w.txt", size=1)
    assert update(writer, created["id"], tags={"a": "b"})["tags"] == {"a": "b"}
    set_passages(writer, created["id"], [{"content": "x"}])
    assert writer.delete(file_url(created["id"])).status_code == 200


@pytest.mark.parametrize("role", [Role.VIEWER, Role.BILLING])
def test_viewer_and_billing_may_not_write(runtime_client, bot, role):
    file = FileFactory(bot=bot, key="w.txt", tags={"a": "b"})
    PassageFactory(file=file, content="kept")
    caller = runtime_client(role)
    assert_error(caller.put(URL, {"key": "new.txt", "size": 1}, format="json"), 403, "Forbidden")
    assert_error(caller.put(URL, {"key": "w.txt", "size": 1}, format="json"), 403, "Forbidden")
    assert_error(
        caller.put(file_url(file.id), {"tags": {"a": None}}, format="json"), 403, "Forbidden"
    )
    assert_error(
        caller.put(passages_url(file.id), {"passages": [{"content": "x"}]}, format="json"),
        403,
        "Forbidden",
    )
    assert_error(caller.delete(file_url(file.id)), 403, "Forbidden")
    file.refresh_from_db()
    assert file.tags == {"a": "b"}
    assert file.size == 100
    assert [p.content for p in file.passages.all()] == ["kept"]
    assert list(File.objects.filter(bot=bot).values_list("key", flat=True)) == ["w.txt"]


def test_billing_may_not_read(runtime_client, bot):
    file = FileFactory(bot=bot)
    billing = runtime_client(Role.BILLING)
    assert_error(billing.get(URL), 403, "Forbidden")
    assert_error(billing.get(file_url(file.id)), 403, "Forbidden")
    assert_error(billing.get(passages_url(file.id)), 403, "Forbidden")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", URL, None),
        ("put", URL, {"key": "a.txt", "size": 1}),
        ("get", "/v1/files/{id}", None),
        ("put", "/v1/files/{id}", {"tags": {}}),
        ("delete", "/v1/files/{id}", None),
        ("get", "/v1/files/{id}/passages", None),
        ("put", "/v1/files/{id}/passages", {"passages": []}),
    ],
)
def test_without_credentials_is_401(api_client, bot, method, path, body):
    file = FileFactory(bot=bot)
    call = getattr(api_client, method)
    args = {"data": body, "format": "json"} if body is not None else {}
    response = call(path.format(id=file.id), **args)
    assert_error(response, 401, "Unauthorized")
    assert response.headers["WWW-Authenticate"]
    assert File.objects.filter(id=file.id).exists()


def test_token_of_another_workspace_is_401(bot):
    outsider = BotFactory()
    client = runtime_api(member_token(outsider.workspace, Role.OWNER), bot.id)
    response = client.get(URL)
    assert_error(response, 401, "Unauthorized")


@pytest.mark.parametrize("method", ["post", "patch"])
def test_other_methods_are_405(client, bot, method):
    file = FileFactory(bot=bot)
    assert_error(getattr(client, method)(URL, {}, format="json"), 405, "MethodNotFound")
    assert_error(
        getattr(client, method)(file_url(file.id), {}, format="json"), 405, "MethodNotFound"
    )
    assert_error(
        getattr(client, method)(passages_url(file.id), {}, format="json"), 405, "MethodNotFound"
    )


# --- cost -----------------------------------------------------------------------------


def test_query_count_of_a_page_of_files(client, bot, file_storage, django_assert_num_queries):
    for index in range(19):
        FileFactory(bot=bot, tags={"n": str(index)})
    created = upsert(client, key="with-content.txt", size=3)
    upload(client, created["uploadUrl"], b"abc", "text/plain")
    FileFactory.create_batch(5, bot=bot)
    listing(client)  # the token's last use is recorded on first use; its credentials kept
    # files
    with django_assert_num_queries(1):
        response = client.get(URL, {"pageSize": 20})
    assert response.status_code == 200
    assert len(response.json()["files"]) == 20


def test_query_count_of_a_filtered_page_of_files(client, bot, django_assert_num_queries):
    for _ in range(25):
        FileFactory(bot=bot, tags={"team": "a", "lang": "en"})
    listing(client)
    with django_assert_num_queries(1):  # files (the credentials were kept)
        response = client.get(URL, {"tags[team]": "a", "tags[lang]": "en"})
    assert len(response.json()["files"]) == 20


def test_query_count_of_passages(client, file):
    set_passages(client, file.id, [{"content": f"p{i}"} for i in range(30)])
    token = get_passages(client, file.id, limit=5)["meta"]["nextToken"]
    with CaptureQueriesContext(connection) as queries:
        response = client.get(passages_url("guide.txt"), {"limit": 20, "nextToken": token})
    assert len(response.json()["passages"]) == 20
    # The file and its page in one statement (the credentials' aside).
    assert len([q for q in queries.captured_queries if "files_" in q["sql"]]) == 1
