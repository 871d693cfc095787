"""A file's bytes: PUT to its signed uploadUrl, GET from its signed `url`.
Both URLs are their own credential, so these requests carry no Authorization."""

import io
import time
from pathlib import Path
from typing import Any

import pytest
from celery import current_app
from django.core import signing
from rest_framework.test import APIClient

from bots.models import Role
from files.models import File, FileStatus, Passage
from files.signed_urls import (
    _DOWNLOAD_SALT,
    _PUBLIC_SALT,
    _TIMESTAMPED_PUBLIC_SALT,
    _UPLOAD_SALT,
)
from files.tasks import index_file
from tests.conftest import assert_error
from tests.factories import BotFactory, member_token

pytestmark = pytest.mark.django_db

FILES = "/v1/files"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
HOUR = 3600


class AgedSigner(signing.TimestampSigner):
    """Signs as if `age` seconds ago: a URL handed out that long before it is used."""

    def __init__(self, *, age: int, salt: str) -> None:
        super().__init__(salt=salt)
        self.age = age

    def timestamp(self) -> str:
        return signing.b62_encode(int(time.time()) - self.age)


def path_of(url: str) -> str:
    """The path of an absolute URL the API handed out, for the test client."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def token_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


def with_token(url: str, token: str) -> str:
    return f"{url.rsplit('/', 1)[0]}/{token}"


def aged(url: str, *, salt: str, age: int) -> str:
    """The same URL, granting the same thing, but signed `age` seconds ago."""
    value = signing.loads(token_of(url), salt=salt)
    return with_token(url, AgedSigner(age=age, salt=salt).sign_object(value))


def put_bytes(url: str, data: bytes, content_type: str, **extra: Any) -> Any:
    """PUT to an upload URL as a client would: no credentials unless given in `extra`."""
    return APIClient().generic("PUT", path_of(url), data, content_type=content_type, **extra)


def fetch(url: str) -> Any:
    return APIClient().get(path_of(url))


def content_of(response: Any) -> bytes:
    assert response.status_code == 200, response.content
    # Consuming the stream closes the response, as a WSGI server would.
    return b"".join(response.streaming_content)


def stored_blobs(folder: Path) -> dict[str, bytes]:
    """Every file under the storage folder, by its path inside it."""
    if not folder.exists():
        return {}
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }


def flip(text: str, index: int) -> str:
    chars = list(text)
    chars[index] = "A" if chars[index] != "A" else "B"
    return "".join(chars)


@pytest.fixture
def client(runtime_client: Any) -> APIClient:
    client: APIClient = runtime_client(Role.DEVELOPER)
    return client


def create(client: APIClient, **body: Any) -> dict[str, Any]:
    response = client.put(FILES, body, format="json")
    assert response.status_code == 200, response.content
    file: dict[str, Any] = response.json()["file"]
    return file


def read(client: APIClient, file_id: str) -> dict[str, Any]:
    response = client.get(f"{FILES}/{file_id}")
    assert response.status_code == 200, response.content
    file: dict[str, Any] = response.json()["file"]
    return file


def uploaded(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"file"}
    file: dict[str, Any] = body["file"]
    assert "uploadUrl" not in file
    return file


# --- happy paths ----------------------------------------------------------------------


def test_upload_without_index_completes_and_downloads_the_same_bytes(
    client, bot, file_storage, django_capture_on_commit_callbacks
):
    data = "Grüße, le monde ✓\n".encode()
    created = create(client, key="docs/notes.txt", size=len(data))
    with django_capture_on_commit_callbacks() as callbacks:
        file = uploaded(put_bytes(created["uploadUrl"], data, "text/plain"))
    assert callbacks == []  # nothing to index, nothing to delete
    assert file["id"] == created["id"]
    assert file["status"] == "upload_completed"
    assert "failedStatusReason" not in file
    assert file["url"].startswith("http")

    assert list(stored_blobs(file_storage).values()) == [data]
    row = File.objects.get(id=created["id"])
    assert row.storage_name
    assert row.indexing_due_at is None
    assert read(client, created["id"])["status"] == "upload_completed"

    response = fetch(file["url"])
    assert content_of(response) == data
    assert response["Content-Type"] == "text/plain"
    assert 'filename="notes.txt"' in response["Content-Disposition"]


def test_download_of_a_pdf_has_its_content_type(client, file_storage):
    created = create(client, key="report.pdf", size=len(PDF))
    file = uploaded(put_bytes(created["uploadUrl"], PDF, "application/pdf"))
    response = fetch(file["url"])
    assert content_of(response) == PDF
    assert response["Content-Type"] == "application/pdf"


def test_upload_with_index_waits_for_indexing_and_enqueues_it_on_commit(
    client, file_storage, django_capture_on_commit_callbacks, monkeypatch
):
    data = b"# Title\n\nSome text to index.\n"
    created = create(client, key="guide.md", size=len(data), index=True)
    with django_capture_on_commit_callbacks() as callbacks:
        file = uploaded(put_bytes(created["uploadUrl"], data, "text/markdown"))
    assert file["status"] == "indexing_pending"
    assert "url" in file
    row = File.objects.get(id=created["id"])
    assert row.status == FileStatus.INDEXING_PENDING
    assert row.indexing_due_at is not None
    assert len(callbacks) == 1
    sent: list[tuple[str, tuple[object, ...]]] = []
    monkeypatch.setattr(current_app, "send_task", lambda name, args, **_: sent.append((name, args)))
    callbacks[0]()
    assert sent == [(index_file.name, (row.id, row.revision))]
    assert read(client, row.id)["status"] == "indexing_pending"
    assert list(stored_blobs(file_storage).values()) == [data]


def test_empty_file_completes(client, file_storage):
    created = create(client, key="empty.txt", size=0)
    file = uploaded(put_bytes(created["uploadUrl"], b"", "text/plain"))
    assert file["status"] == "upload_completed"
    assert content_of(fetch(file["url"])) == b""


def test_upload_over_the_json_body_limit_is_taken(client, file_storage, settings):
    data = b"x" * (settings.RUNTIME_BODY_LIMIT + 10)
    created = create(client, key="big.txt", size=len(data))
    file = uploaded(put_bytes(created["uploadUrl"], data, "text/plain"))
    assert file["status"] == "upload_completed"
    assert content_of(fetch(file["url"])) == data


@pytest.mark.parametrize(
    "sent", ["text/plain", "text/plain; charset=utf-8", "TEXT/PLAIN", "text/plain;charset=UTF-8"]
)
def test_content_type_with_parameters_or_other_case_is_the_same_type(client, file_storage, sent):
    created = create(client, key="a.txt", size=3)
    assert uploaded(put_bytes(created["uploadUrl"], b"abc", sent))["status"] == "upload_completed"


def test_upload_answer_is_the_file_as_read(client, file_storage):
    created = create(client, key="a.txt", size=3, tags={"t": "1"})
    file = uploaded(put_bytes(created["uploadUrl"], b"abc", "text/plain"))
    again = read(client, created["id"])
    assert {k: v for k, v in file.items() if k != "url"} == {
        k: v for k, v in again.items() if k != "url"
    }


def test_upload_without_index_drops_passages_set_before(client, file_storage):
    created = create(client, key="a.txt", size=3)
    response = client.put(
        f"{FILES}/{created['id']}/passages", {"passages": [{"content": "hand"}]}, format="json"
    )
    assert response.status_code == 200
    file = uploaded(put_bytes(created["uploadUrl"], b"abc", "text/plain"))
    assert file["status"] == "upload_completed"
    assert not Passage.objects.filter(file_id=created["id"]).exists()


# --- what the bytes must match --------------------------------------------------------


@pytest.mark.parametrize("sent", [b"x" * 8, b"x" * 12], ids=["smaller", "larger"])
def test_size_mismatch_fails_the_upload_and_the_url_can_be_used_again(client, file_storage, sent):
    created = create(client, key="ten.txt", size=10)
    error = assert_error(put_bytes(created["uploadUrl"], sent, "text/plain"), 400, "InvalidPayload")
    assert str(len(sent)) in error["message"]
    assert "10" in error["message"]

    failed = read(client, created["id"])
    assert failed["status"] == "upload_failed"
    assert str(len(sent)) in failed["failedStatusReason"]
    assert "10" in failed["failedStatusReason"]
    assert "url" not in failed
    assert stored_blobs(file_storage) == {}

    file = uploaded(put_bytes(created["uploadUrl"], b"0123456789", "text/plain"))
    assert file["status"] == "upload_completed"
    assert "failedStatusReason" not in file
    assert content_of(fetch(file["url"])) == b"0123456789"


def test_body_shorter_than_its_content_length_fails_the_upload(client, file_storage):
    created = create(client, key="ten.txt", size=10)
    # A client that announces 10 bytes and sends 4 (a connection cut short):
    # the stream ends early, as a server's does when the client goes away.
    response = put_bytes(
        created["uploadUrl"],
        b"abcd",
        "text/plain",
        CONTENT_LENGTH="10",
        **{"wsgi.input": io.BytesIO(b"abcd")},
    )
    error = assert_error(response, 400, "InvalidPayload")
    assert "4" in error["message"] and "10" in error["message"]
    assert read(client, created["id"])["status"] == "upload_failed"
    assert stored_blobs(file_storage) == {}


def test_content_type_mismatch_fails_the_upload(client, file_storage):
    created = create(client, key="notes.txt", size=3)
    error = assert_error(
        put_bytes(created["uploadUrl"], b"abc", "application/json"), 400, "InvalidPayload"
    )
    assert "application/json" in error["message"]
    assert "text/plain" in error["message"]
    failed = read(client, created["id"])
    assert failed["status"] == "upload_failed"
    assert "application/json" in failed["failedStatusReason"]
    assert stored_blobs(file_storage) == {}


def test_missing_content_type_fails_the_upload(client, file_storage):
    created = create(client, key="notes.txt", size=3)
    error = assert_error(put_bytes(created["uploadUrl"], b"abc", ""), 400, "InvalidPayload")
    assert "Content-Type" in error["message"]
    assert "text/plain" in error["message"]
    failed = read(client, created["id"])
    assert failed["status"] == "upload_failed"
    assert "missing" in failed["failedStatusReason"]


def test_pdf_announced_but_not_a_pdf_fails_the_upload(client, file_storage):
    data = b"just some text, no PDF header"
    created = create(client, key="report.pdf", size=len(data))
    error = assert_error(
        put_bytes(created["uploadUrl"], data, "application/pdf"), 400, "InvalidPayload"
    )
    assert "PDF" in error["message"]
    failed = read(client, created["id"])
    assert failed["status"] == "upload_failed"
    assert "PDF" in failed["failedStatusReason"]
    assert stored_blobs(file_storage) == {}


def test_text_announced_but_the_bytes_are_a_png_fails_the_upload(client, file_storage):
    created = create(client, key="notes.txt", size=len(PNG))
    error = assert_error(put_bytes(created["uploadUrl"], PNG, "text/plain"), 400, "InvalidPayload")
    assert "image/png" in error["message"]
    failed = read(client, created["id"])
    assert failed["status"] == "upload_failed"
    assert "image/png" in failed["failedStatusReason"]
    assert stored_blobs(file_storage) == {}


def test_png_announced_as_png_is_taken(client, file_storage):
    created = create(client, key="pixel.png", size=len(PNG))
    assert created["contentType"] == "image/png"
    file = uploaded(put_bytes(created["uploadUrl"], PNG, "image/png"))
    assert content_of(fetch(file["url"])) == PNG


def test_failed_upload_after_a_good_one_drops_the_old_content(
    client, file_storage, django_capture_on_commit_callbacks
):
    created = create(client, key="notes.txt", size=3)
    good = uploaded(put_bytes(created["uploadUrl"], b"abc", "text/plain"))
    with django_capture_on_commit_callbacks(execute=True):
        response = put_bytes(created["uploadUrl"], b"abc", "text/html")
    assert_error(response, 400, "InvalidPayload")
    failed = read(client, created["id"])
    assert failed["status"] == "upload_failed"
    assert "url" not in failed
    assert_error(fetch(good["url"]), 404, "ResourceNotFound")
    assert stored_blobs(file_storage) == {}


# --- the upload URL as a credential ---------------------------------------------------


@pytest.fixture
def pending(client: APIClient, file_storage: Path) -> dict[str, Any]:
    return create(client, key="secret.txt", size=5)


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda t: flip(t, -5), id="signature-char"),
        pytest.param(lambda t: flip(t, 2), id="payload-char"),
        pytest.param(lambda t: t[:-4], id="truncated"),
        pytest.param(lambda t: t.rsplit(":", 1)[0], id="signature-removed"),
        pytest.param(lambda t: t + "A", id="extended"),
        pytest.param(lambda t: "garbage", id="garbage"),
        pytest.param(lambda t: "a:b:c", id="garbage-with-colons"),
    ],
)
def test_tampered_upload_url_is_403(client, pending, file_storage, tamper):
    token = token_of(pending["uploadUrl"])
    tampered = tamper(token)
    assert tampered != token
    response = put_bytes(with_token(pending["uploadUrl"], tampered), b"hello", "text/plain")
    assert_error(response, 403, "Forbidden")
    assert read(client, pending["id"])["status"] == "upload_pending"
    assert stored_blobs(file_storage) == {}


def test_download_url_is_not_an_upload_url(client, pending, file_storage):
    uploaded(put_bytes(pending["uploadUrl"], b"hello", "text/plain"))
    download_token = token_of(read(client, pending["id"])["url"])
    response = put_bytes(with_token(pending["uploadUrl"], download_token), b"HELLO", "text/plain")
    assert_error(response, 403, "Forbidden")


def test_expired_upload_url_is_403(client, pending):
    old = aged(pending["uploadUrl"], salt=_UPLOAD_SALT, age=2 * HOUR)
    error = assert_error(put_bytes(old, b"hello", "text/plain"), 403, "Forbidden")
    assert "expired" in error["message"]
    assert read(client, pending["id"])["status"] == "upload_pending"


def test_upload_url_lifetime_is_the_setting(client, pending, settings):
    ten_seconds_old = aged(pending["uploadUrl"], salt=_UPLOAD_SALT, age=10)
    settings.FILE_UPLOAD_URL_TTL = 5
    error = assert_error(put_bytes(ten_seconds_old, b"hello", "text/plain"), 403, "Forbidden")
    assert "expired" in error["message"]
    settings.FILE_UPLOAD_URL_TTL = HOUR
    assert uploaded(put_bytes(ten_seconds_old, b"hello", "text/plain"))["status"] == (
        "upload_completed"
    )


def test_upload_url_of_before_an_upsert_is_403(client, pending):
    again = create(client, key="secret.txt", size=5)
    error = assert_error(put_bytes(pending["uploadUrl"], b"hello", "text/plain"), 403, "Forbidden")
    assert "upserted" in error["message"]
    assert read(client, pending["id"])["status"] == "upload_pending"
    assert uploaded(put_bytes(again["uploadUrl"], b"hello", "text/plain"))["id"] == pending["id"]


def test_upload_after_the_file_was_deleted_is_404(client, pending):
    assert client.delete(f"{FILES}/{pending['id']}").status_code == 200
    response = put_bytes(pending["uploadUrl"], b"hello", "text/plain")
    assert_error(response, 404, "ResourceNotFound")
    assert not File.objects.filter(id=pending["id"]).exists()


def test_upload_to_an_expired_file_is_404(client, pending):
    File.objects.filter(id=pending["id"]).update(expires_at="2000-01-01T00:00:00Z")
    assert_error(put_bytes(pending["uploadUrl"], b"hello", "text/plain"), 404, "ResourceNotFound")


def test_upload_is_judged_by_the_url_only(client, bot, pending):
    other = BotFactory()
    foreign = {
        "HTTP_AUTHORIZATION": f"Bearer {member_token(other.workspace, Role.OWNER)}",
        "HTTP_X_BOT_ID": other.id,
    }
    owner = {
        "HTTP_AUTHORIZATION": f"Bearer {member_token(bot.workspace, Role.OWNER)}",
        "HTTP_X_BOT_ID": bot.id,
    }
    tampered = with_token(pending["uploadUrl"], flip(token_of(pending["uploadUrl"]), -3))
    # The bot's own owner cannot make a bad URL good...
    assert_error(put_bytes(tampered, b"hello", "text/plain", **owner), 403, "Forbidden")
    # ...and credentials of another bot, or garbage ones, do not spoil a good URL.
    bogus = {"HTTP_AUTHORIZATION": "Bearer bp_pat_nonsense"}
    file = uploaded(put_bytes(pending["uploadUrl"], b"hello", "text/plain", **bogus))
    assert file["botId"] == bot.id
    file = uploaded(put_bytes(pending["uploadUrl"], b"HELLO", "text/plain", **foreign))
    assert file["botId"] == bot.id
    assert content_of(fetch(file["url"])) == b"HELLO"


# --- limits of the request itself -----------------------------------------------------


def test_body_over_the_maximum_is_413_before_it_is_read(client, settings, file_storage):
    created = create(client, key="big.txt", size=100)
    settings.FILE_UPLOAD_MAX_SIZE = 50
    response = put_bytes(created["uploadUrl"], b"x" * 100, "text/plain")
    assert_error(response, 413, "PayloadTooLarge")
    # The announced length alone decides: reading past the 1 byte sent would raise here.
    response = put_bytes(created["uploadUrl"], b"x", "text/plain", CONTENT_LENGTH=str(10**9))
    assert_error(response, 413, "PayloadTooLarge")
    # The view never ran: the file did not even fail.
    assert read(client, created["id"])["status"] == "upload_pending"
    assert stored_blobs(file_storage) == {}


def test_chunked_body_is_411(client, pending, file_storage):
    response = put_bytes(
        pending["uploadUrl"], b"hello", "text/plain", HTTP_TRANSFER_ENCODING="chunked"
    )
    error = assert_error(response, 411, "InvalidPayload")
    assert "Content-Length" in error["message"]
    assert read(client, pending["id"])["status"] == "upload_pending"
    assert stored_blobs(file_storage) == {}


@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
def test_upload_route_refuses_other_methods(pending, method):
    response = getattr(APIClient(), method)(path_of(pending["uploadUrl"]))
    assert_error(response, 405, "MethodNotFound")


# --- re-upload and the download URL ---------------------------------------------------


def test_re_upload_replaces_the_content(client, file_storage, django_capture_on_commit_callbacks):
    created = create(client, key="v.txt", size=8)
    first = uploaded(put_bytes(created["uploadUrl"], b"version1", "text/plain"))
    (first_blob,) = stored_blobs(file_storage)

    with django_capture_on_commit_callbacks(execute=True):
        second = uploaded(put_bytes(created["uploadUrl"], b"version2", "text/plain"))

    assert second["status"] == "upload_completed"
    assert second["url"] != first["url"]
    assert content_of(fetch(second["url"])) == b"version2"
    assert content_of(fetch(read(client, created["id"])["url"])) == b"version2"
    # The old bytes are deleted once the new ones are the file's.
    blobs = stored_blobs(file_storage)
    assert list(blobs.values()) == [b"version2"]
    assert first_blob not in blobs
    # A URL of the old content does not serve the new one.
    error = assert_error(fetch(first["url"]), 404, "ResourceNotFound")
    assert "changed" in error["message"]


def test_download_after_the_file_was_deleted_is_404(client, file_storage):
    created = create(client, key="gone.txt", size=4)
    file = uploaded(put_bytes(created["uploadUrl"], b"gone", "text/plain"))
    client.delete(f"{FILES}/{created['id']}")
    assert_error(fetch(file["url"]), 404, "ResourceNotFound")


def test_download_after_an_upsert_is_404(client, file_storage):
    created = create(client, key="redo.txt", size=4)
    file = uploaded(put_bytes(created["uploadUrl"], b"redo", "text/plain"))
    create(client, key="redo.txt", size=4)
    assert_error(fetch(file["url"]), 404, "ResourceNotFound")


def test_public_url_survives_a_re_upload_and_ends_with_the_policy(client, file_storage):
    created = create(client, key="public.txt", size=2, accessPolicies=["public_content"])
    first = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    public_url = first["url"]
    assert content_of(fetch(public_url)) == b"v1"

    second = uploaded(put_bytes(created["uploadUrl"], b"v2", "text/plain"))
    assert second["url"] == public_url
    assert read(client, created["id"])["url"] == public_url
    assert content_of(fetch(public_url)) == b"v2"

    response = client.put(f"{FILES}/{created['id']}", {"accessPolicies": []}, format="json")
    assert response.status_code == 200
    assert_error(fetch(public_url), 403, "Forbidden")
    private_url = read(client, created["id"])["url"]
    assert private_url != public_url
    assert content_of(fetch(private_url)) == b"v2"


def test_public_url_does_not_expire(client, file_storage):
    created = create(client, key="public.txt", size=2, accessPolicies=["public_content"])
    file = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    # It carries no timestamp at all, so it is the same URL whenever it is made.
    assert signing.Signer(salt=_PUBLIC_SALT).unsign_object(token_of(file["url"])) == file["id"]
    # Public URLs made by earlier versions were timestamped: they still work.
    old = with_token(
        file["url"],
        AgedSigner(age=90 * 24 * HOUR, salt=_TIMESTAMPED_PUBLIC_SALT).sign_object(file["id"]),
    )
    assert content_of(fetch(old)) == b"v1"


def test_private_download_url_expires(client, file_storage):
    created = create(client, key="private.txt", size=2)
    file = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    old = aged(file["url"], salt=_DOWNLOAD_SALT, age=2 * HOUR)
    error = assert_error(fetch(old), 403, "Forbidden")
    assert "expired" in error["message"]


def test_download_url_lifetime_is_the_setting(client, file_storage, settings):
    created = create(client, key="private.txt", size=2)
    file = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    ten_seconds_old = aged(file["url"], salt=_DOWNLOAD_SALT, age=10)
    assert content_of(fetch(ten_seconds_old)) == b"v1"
    settings.FILE_DOWNLOAD_URL_TTL = 5
    error = assert_error(fetch(ten_seconds_old), 403, "Forbidden")
    assert "expired" in error["message"]


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda t: flip(t, -5), id="signature-char"),
        pytest.param(lambda t: flip(t, 2), id="payload-char"),
        pytest.param(lambda t: t[:-4], id="truncated"),
        pytest.param(lambda t: "garbage", id="garbage"),
    ],
)
@pytest.mark.parametrize("public", [False, True], ids=["private", "public"])
def test_tampered_download_url_is_403(client, file_storage, tamper, public):
    created = create(
        client, key="t.txt", size=2, accessPolicies=["public_content"] if public else []
    )
    file = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    tampered = tamper(token_of(file["url"]))
    assert tampered != token_of(file["url"])
    assert_error(fetch(with_token(file["url"], tampered)), 403, "Forbidden")


def test_upload_url_is_not_a_download_url(client, file_storage):
    created = create(client, key="t.txt", size=2)
    file = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    assert_error(fetch(with_token(file["url"], token_of(created["uploadUrl"]))), 403, "Forbidden")


@pytest.mark.parametrize("method", ["put", "post", "patch", "delete"])
def test_download_route_refuses_other_methods(client, file_storage, method):
    created = create(client, key="t.txt", size=2)
    file = uploaded(put_bytes(created["uploadUrl"], b"v1", "text/plain"))
    response = getattr(APIClient(), method)(path_of(file["url"]))
    assert_error(response, 405, "MethodNotFound")
    assert content_of(fetch(file["url"])) == b"v1"


@pytest.mark.parametrize(
    ("key", "data"),
    [
        pytest.param("page.html", b"<html><script>fetch('/admin/')</script></html>", id="html"),
        pytest.param(
            "logo.svg",
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>',
            id="svg",
        ),
    ],
)
def test_downloaded_active_content_cannot_run_in_the_api_origin(client, file_storage, key, data):
    """The download route shares its origin with the Django admin, whose
    session cookie a page served from here could use: bytes a bot uploaded
    must come as an attachment or in a sandbox, never as a live page."""
    created = create(client, key=key, size=len(data), accessPolicies=["public_content"])
    file = uploaded(put_bytes(created["uploadUrl"], data, created["contentType"]))
    response = fetch(file["url"])
    assert content_of(response) == data
    assert response["X-Content-Type-Options"] == "nosniff"
    disposition = response.get("Content-Disposition", "")
    policy = response.get("Content-Security-Policy", "")
    assert disposition.startswith("attachment") or "sandbox" in policy, (
        disposition,
        policy,
    )
