"""Downloads under ASGI: platform_site.asgi.application called in-process as
a server calls it. Django reads a synchronous file whole into memory before
sending a byte under ASGI; the download view hands it an asynchronous
iterator instead, and the file must be closed however the download ends.

The view runs in a thread of its own there, on its own database connection,
so these tests commit (transaction=True)."""

import asyncio
import hashlib
import io
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.core.files.storage import storages
from django.db import connection
from rest_framework.test import APIClient

from files import streaming, views
from files.models import File
from files.signed_urls import download_url
from files.storage import blob_save
from tests.factories import FileFactory
from tests.servers import READ_TIMEOUT, celery_queue, servers  # noqa: F401
from tests.test_asgi_limits import Exchange, peak_memory

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024


def path_of(url: str) -> str:
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def stored_file(data: bytes, *, key: str, content_type: str) -> File:
    file = FileFactory(key=key, size=len(data), content_type=content_type)
    file.storage_name = blob_save(bot_id=file.bot_id, file_id=file.id, content=io.BytesIO(data))
    file.save(update_fields=["storage_name"])
    return file


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch, file_storage: Path) -> list[Any]:
    """Every file the download view opens from the storage."""
    files: list[Any] = []
    storage = storages["files"]
    real_open = storage.open

    def spy_open(name: str, mode: str = "rb") -> Any:
        file = real_open(name, mode)
        files.append(file)
        return file

    monkeypatch.setattr(storage, "open", spy_open)
    return files


def download(url: str, opened: list[Any], *, hang_up_after: int | None = None) -> Exchange:
    """GET the URL through the ASGI application, then wait on the same event
    loop (a server's goes on) until every file it opened is closed."""
    done = Exchange("GET", path_of(url), {}, iter([b""]), hang_up_after)

    async def run() -> None:
        await done.run()
        for _ in range(200):
            if opened and all(file.closed for file in opened):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"files left open: {[f for f in opened if not f.closed]}")

    asyncio.run(run())
    return done


def test_a_download_comes_in_chunks_with_the_headers_it_has_under_wsgi(opened):
    data = bytes(range(256)) * (MB // 256) + b"tail"
    file = stored_file(data, key="docs/report.txt", content_type="text/plain")
    url = download_url(file)
    with warnings.catch_warnings():
        # Django warns when it reads a synchronous iterator whole.
        warnings.simplefilter("error")
        done = download(url, opened)
    answer = done.answer()
    assert answer.status_code == 200
    assert answer.content == data
    assert len(done.body) > 1

    under_wsgi = APIClient().get(path_of(url))
    assert not under_wsgi.is_async
    assert b"".join(under_wsgi.streaming_content) == data
    # The same headers, but for where the workspace stands after one more
    # request, and each request's own id.
    assert answer.headers.pop("ratelimit") != under_wsgi.headers.pop("RateLimit")
    assert answer.headers.pop("x-request-id") != under_wsgi.headers.pop("X-Request-Id")
    assert answer.headers == {name.lower(): value for name, value in under_wsgi.items()}
    assert answer.headers["content-length"] == str(len(data))
    assert answer.headers["content-type"] == "text/plain"
    assert answer.headers["content-disposition"] == 'inline; filename="report.txt"'
    assert answer.headers["content-security-policy"] == "sandbox"
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_an_attachment_keeps_its_disposition(opened):
    file = stored_file(b"<svg/>", key="pictures/logo.svg", content_type="image/svg+xml")
    answer = download(download_url(file), opened).answer()
    assert answer.content == b"<svg/>"
    assert answer.headers["content-disposition"] == 'attachment; filename="logo.svg"'
    assert answer.headers["content-type"] == "image/svg+xml"


def test_the_file_is_closed_when_the_client_hangs_up_mid_way(opened):
    data = b"x" * (8 * streaming.ASYNC_CHUNK_SIZE)
    file = stored_file(data, key="docs/big.txt", content_type="text/plain")
    done = download(download_url(file), opened, hang_up_after=1)
    assert not done.complete
    assert 0 < sum(len(part) for part in done.body) < len(data)


def test_the_database_connection_goes_back_before_the_content_streams(opened, monkeypatch):
    file = stored_file(b"hello", key="docs/hello.txt", content_type="text/plain")
    held: list[bool] = []

    async def chunks(content: IO[bytes]) -> AsyncIterator[bytes]:
        # Asked in the request's thread, where the view ran its lookups.
        held.append(await sync_to_async(lambda: connection.connection is not None)())
        async for chunk in streaming.content_chunks(content):
            yield chunk

    monkeypatch.setattr(views, "content_chunks", chunks)
    assert download(download_url(file), opened).answer().content == b"hello"
    assert held == [False]


@pytest.mark.integration
def test_a_big_download_from_uvicorn_streams_in_little_memory(servers):  # noqa: F811
    size = 200 * MB
    file = FileFactory(key="docs/huge.bin", size=size, content_type="application/zip")
    # Written in place (the server's storage is this folder), a megabyte at a time.
    file.storage_name = f"{file.bot_id}/{file.id}/content"
    blob = Path(storages["files"].path(file.storage_name))
    blob.parent.mkdir(parents=True)
    megabyte = bytes(range(256)) * (MB // 256)
    with blob.open("wb") as out:
        for _ in range(size // MB):
            out.write(megabyte)
    file.save(update_fields=["storage_name"])
    try:
        server = servers()
        before = peak_memory(server.process.pid)
        received = hashlib.sha256()
        url = f"{server.url}{path_of(download_url(file))}"
        with httpx.stream("GET", url, timeout=READ_TIMEOUT) as response:
            assert response.status_code == 200
            assert response.headers["content-length"] == str(size)
            assert response.headers["content-disposition"] == 'attachment; filename="huge.bin"'
            for part in response.iter_bytes():
                received.update(part)
        expected = hashlib.sha256()
        for _ in range(size // MB):
            expected.update(megabyte)
        assert received.hexdigest() == expected.hexdigest()
        grown = peak_memory(server.process.pid) - before
        # Buffered, the download would hold all 200 MB at once.
        assert grown < 50 * MB, f"the server's peak memory grew by {grown // MB} MB"
    finally:
        blob.unlink()
