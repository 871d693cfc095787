"""An upload is checked from its headers before its body is read, through the
ASGI application as a server runs it (files/upload_admission.py): a size or
type other than the file announced fails the upload at once, with nothing
read; one that agrees goes on to the view."""

from typing import Any

import pytest

from files.models import File, FileStatus
from files.services.files import file_upsert
from files.signed_urls import upload_url
from tests import test_chat_live as live
from tests.conftest import assert_error
from tests.test_chat_live import Exchange

pytestmark = pytest.mark.django_db(transaction=True)

server = live.server


def upload_path(file: File) -> str:
    return "/" + upload_url(file).split("://", 1)[1].split("/", 1)[1]


def put(server: Any, path: str, *, length: int, content_type: str) -> Exchange:
    headers = {"content-length": str(length), "content-type": content_type}
    return Exchange(server, path, method="PUT", headers=headers)


def test_an_upload_announcing_another_size_fails_before_its_body_is_read(server, bot):
    file = file_upsert(bot=bot, key="notes.txt", size=5)
    exchange = put(server, upload_path(file), length=1_000_000_000, content_type="text/plain")
    body = assert_error(exchange.answer(), 400, "InvalidPayload")
    assert "1000000000 bytes but the file announced 5" in body["message"]
    file.refresh_from_db()
    assert file.status == FileStatus.UPLOAD_FAILED
    # The application never asked for the body: the only receive was the
    # empty one Exchange hands out first, which the refusal answered itself.


def test_an_upload_of_a_replaced_url_is_403_before_its_body_is_read(server, bot):
    file = file_upsert(bot=bot, key="notes.txt", size=5)
    stale_path = upload_path(file)
    file_upsert(bot=bot, key="notes.txt", size=5)  # a new upload URL
    stale = put(server, stale_path, length=5, content_type="text/plain")
    assert_error(stale.answer(), 403, "Forbidden")
