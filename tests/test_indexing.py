"""Indexing in-process: documents uploaded the real way, indexed by the
service the Celery task calls, read back through the API passage by passage;
failures with their reasons; fencing by lease and revision; housekeeping of
lost runs and expired files; re-indexing while a reader pages."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import files.services.file_index as indexing
from files.models import File, FileStatus, Passage
from files.passage_data import PassageData
from files.services.file_index import IndexingOutcome, file_index, files_requeue_stalled
from files.services.files import (
    file_passages_set,
    file_reindex,
    file_upsert,
    files_delete_expired,
)
from platform_site.foundation.domain_errors import InvalidValue
from tests.conftest import assert_error, upload
from tests.documents import encrypted_pdf, garbage_pdf, make_html, make_pdf, truncated_pdf
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(runtime_client: Any, file_storage: Any) -> Any:
    return runtime_client()


def uploaded(client: Any, key: str, data: bytes, content_type: str, **fields: Any) -> File:
    """A file announced with index: true and its bytes uploaded: indexing_pending."""
    body = {"key": key, "size": len(data), "contentType": content_type, "index": True, **fields}
    response = client.put("/v1/files", body, format="json")
    assert response.status_code == 200, response.content
    sent = upload(client, response.json()["file"]["uploadUrl"], data, content_type)
    assert sent.status_code == 200, sent.content
    file = File.objects.get(id=response.json()["file"]["id"])
    assert file.status == FileStatus.INDEXING_PENDING
    return file


def index(file: File) -> IndexingOutcome:
    return file_index(file_id=file.id, revision=file.revision)


def passages(client: Any, file: File) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    token = None
    while True:
        query: dict[str, Any] = {"limit": 200}
        if token:
            query["nextToken"] = token
        response = client.get(f"/v1/files/{file.id}/passages", query)
        assert response.status_code == 200, response.content
        found += response.json()["passages"]
        token = response.json()["meta"].get("nextToken")
        if token is None:
            return found


def summary(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (p["meta"]["position"], p["meta"]["subtype"], p["meta"].get("pageNumber"), p["content"])
        for p in items
    ]


def file_answer(client: Any, file: File) -> dict[str, Any]:
    response = client.get(f"/v1/files/{file.id}")
    assert response.status_code == 200, response.content
    answer: dict[str, Any] = response.json()["file"]
    return answer


def test_markdown_becomes_passages_in_document_order(client):
    document = (
        b"# Guide\n\nWelcome to the guide.\n\n## Install\n\n1. Download\n2. Run\n\n"
        b"```\npip install thing\n```\n\n> Quoted wisdom.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    file = uploaded(client, "guide.md", document, "text/markdown")
    assert index(file) == IndexingOutcome.COMPLETED
    assert summary(passages(client, file)) == [
        (0, "title", None, "Guide"),
        (1, "paragraph", None, "Welcome to the guide."),
        (2, "subtitle", None, "Install"),
        (3, "list", None, "1. Download\n2. Run"),
        (4, "code", None, "pip install thing"),
        (5, "blockquote", None, "Quoted wisdom."),
        (6, "table", None, "a | b\n1 | 2"),
    ]
    answer = file_answer(client, file)
    assert answer["status"] == "indexing_completed"
    assert "failedStatusReason" not in answer


def test_html_with_a_canonical_url(client):
    document = make_html(
        "<h1>Title</h1><p>First <b>bold</b> words.</p><ul><li>x</li><li>y</li></ul>"
        "<script>ignored()</script>",
        head='<link rel="canonical" href="https://example.com/page">',
    )
    file = uploaded(client, "page.html", document, "text/html")
    assert index(file) == IndexingOutcome.COMPLETED
    found = passages(client, file)
    assert summary(found) == [
        (0, "title", None, "Title"),
        (1, "paragraph", None, "First bold words."),
        (2, "list", None, "- x\n- y"),
    ]
    assert {p["meta"]["sourceUrl"] for p in found} == {"https://example.com/page"}


def test_multi_page_pdf_with_headings(client):
    document = make_pdf(
        [
            [("title", "Annual Report"), ("paragraph", "The year went well for the team.")],
            [("subtitle", "Finances"), ("paragraph", "Revenue grew by a tenth.")],
            [("subtitle", "Outlook"), ("paragraph", "Next year looks bright.")],
        ]
    )
    file = uploaded(client, "report.pdf", document, "application/pdf")
    assert index(file) == IndexingOutcome.COMPLETED
    assert summary(passages(client, file)) == [
        (0, "title", 1, "Annual Report"),
        (1, "paragraph", 1, "The year went well for the team."),
        (2, "subtitle", 2, "Finances"),
        (3, "paragraph", 2, "Revenue grew by a tenth."),
        (4, "subtitle", 3, "Outlook"),
        (5, "paragraph", 3, "Next year looks bright."),
    ]


def test_plain_text_with_the_file_s_chunk_length_and_source_url(client):
    words = [f"word{n}" for n in range(400)]
    document = " ".join(words).encode()
    file = uploaded(
        client,
        "notes.txt",
        document,
        "text/plain",
        metadata={"sourceUrl": "https://example.com/notes"},
        indexing={"configuration": {"chunking": {"maximumChunkLength": 100}}},
    )
    assert index(file) == IndexingOutcome.COMPLETED
    found = passages(client, file)
    assert len(found) > 1
    assert all(len(p["content"]) <= 100 for p in found)
    assert " ".join(p["content"] for p in found).split() == words
    assert {p["meta"]["sourceUrl"] for p in found} == {"https://example.com/notes"}


@pytest.mark.parametrize(
    ("data", "content_type", "reason"),
    [
        (truncated_pdf(), "application/pdf", "PDF"),
        (garbage_pdf(), "application/pdf", "PDF"),
        (encrypted_pdf(), "application/pdf", "encrypted"),
        (b"", "text/plain", "empty"),
        (b"\xff\xfe\xfa not utf-8", "text/plain", "UTF-8"),
        (b"a,b\n1,2\n", "text/csv", "text/csv"),
    ],
    ids=["truncated-pdf", "garbage-pdf", "encrypted-pdf", "empty", "bad-utf8", "unsupported"],
)
def test_documents_that_cannot_be_indexed_fail_with_a_reason(client, data, content_type, reason):
    file = uploaded(client, f"doc-{content_type.replace('/', '-')}", data, content_type)
    assert index(file) == IndexingOutcome.FAILED
    answer = file_answer(client, file)
    assert answer["status"] == "indexing_failed"
    assert reason.lower() in answer["failedStatusReason"].lower()
    assert "Traceback" not in answer["failedStatusReason"]
    assert passages(client, file) == []


def test_oversize_files_are_not_read(client, settings):
    settings.FILE_INDEXING_MAX_SIZE = 10
    file = uploaded(client, "big.txt", b"more than ten bytes", "text/plain")
    assert index(file) == IndexingOutcome.FAILED
    assert "indexing reads files up to" in file_answer(client, file)["failedStatusReason"]


def test_missing_bytes_fail_the_file(client, file_storage):
    file = uploaded(client, "gone.txt", b"soon gone", "text/plain")
    (file_storage / file.storage_name).unlink()
    assert index(file) == IndexingOutcome.FAILED
    assert "missing from storage" in file_answer(client, file)["failedStatusReason"]


def test_a_run_of_an_older_revision_is_skipped(client):
    file = uploaded(client, "a.txt", b"first words", "text/plain")
    old_revision = file.revision
    file_upsert(bot=file.bot, key="a.txt", size=3, index=True)
    assert file_index(file_id=file.id, revision=old_revision) == IndexingOutcome.SKIPPED
    assert File.objects.get(id=file.id).status == FileStatus.UPLOAD_PENDING


def test_a_file_held_by_another_run_is_skipped_until_its_lease_ends(client):
    file = uploaded(client, "b.txt", b"some words", "text/plain")
    File.objects.filter(id=file.id).update(
        indexing_lease=123, indexing_due_at=timezone.now() + timedelta(minutes=5)
    )
    assert index(file) == IndexingOutcome.SKIPPED
    File.objects.filter(id=file.id).update(indexing_due_at=timezone.now() - timedelta(seconds=1))
    assert index(file) == IndexingOutcome.COMPLETED


def test_a_result_is_dropped_when_passages_were_set_meanwhile(client, monkeypatch):
    """The run parses while the bot sets passages directly: the run must not
    overwrite them (its file's revision changed)."""
    file = uploaded(client, "c.txt", b"parsed words", "text/plain")
    real = indexing.extract_passages

    def parse_then_race(*args: Any, **kwargs: Any) -> Any:
        file_passages_set(file=file, passages=[PassageData(content="set by the bot")])
        return real(*args, **kwargs)

    monkeypatch.setattr(indexing, "extract_passages", parse_then_race)
    assert index(file) == IndexingOutcome.SKIPPED
    assert [p["content"] for p in passages(client, file)] == ["set by the bot"]
    assert File.objects.get(id=file.id).status == FileStatus.INDEXING_COMPLETED


def test_housekeeping_requeues_lost_runs_then_gives_up(client, settings):
    settings.FILE_INDEXING_MAX_ATTEMPTS = 2
    file = uploaded(client, "lost.txt", b"words", "text/plain")
    assert files_requeue_stalled() == []  # not due yet
    past = timezone.now() - timedelta(seconds=1)
    File.objects.filter(id=file.id).update(indexing_due_at=past, indexing_attempts=1)
    assert files_requeue_stalled() == [(file.id, file.revision)]
    requeued = File.objects.get(id=file.id)
    assert requeued.status == FileStatus.INDEXING_PENDING
    assert requeued.indexing_due_at is not None
    assert requeued.indexing_due_at > timezone.now()

    File.objects.filter(id=file.id).update(indexing_due_at=past, indexing_attempts=2)
    assert files_requeue_stalled() == []
    failed = File.objects.get(id=file.id)
    assert failed.status == FileStatus.INDEXING_FAILED
    assert "interrupted 2 times" in failed.failed_status_reason
    assert failed.indexing_due_at is None


def test_expired_files_are_deleted_with_their_passages(client):
    file = uploaded(client, "short-lived.txt", b"brief", "text/plain")
    index(file)
    keeper = uploaded(client, "keeper.txt", b"stays", "text/plain")
    File.objects.filter(id=file.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert files_delete_expired() == 1
    assert not File.objects.filter(id=file.id).exists()
    assert not Passage.objects.filter(file_id=file.id).exists()
    assert File.objects.filter(id=keeper.id).exists()


def test_reindex_replaces_the_set_and_a_reader_never_mixes_them(client):
    """A reader pages through the passages while the file is re-indexed with
    another chunk length: every page comes from one set, and the reader's
    next token of the old set is refused (400) rather than continued in the
    new one, so it starts again and reads the new set whole."""
    paragraphs = [f"Paragraph {n} " + "filler words here " * 20 for n in range(60)]
    document = "\n\n".join(paragraphs).encode()
    file = uploaded(client, "long.txt", document, "text/plain")
    assert index(file) == IndexingOutcome.COMPLETED
    old_ids = {p["id"] for p in passages(client, file)}

    first = client.get(f"/v1/files/{file.id}/passages", {"limit": 5}).json()
    assert {p["id"] for p in first["passages"]} <= old_ids
    file.max_chunk_length = 100
    file.save(update_fields=["max_chunk_length"])
    reindexed = file_reindex(file=file)
    # Until the new set is written, readers go on with the old one.
    assert {p["id"] for p in passages(client, file)} == old_ids
    assert index(reindexed) == IndexingOutcome.COMPLETED

    stale = client.get(
        f"/v1/files/{file.id}/passages", {"limit": 5, "nextToken": first["meta"]["nextToken"]}
    )
    assert "replaced" in assert_error(stale, 400, "InvalidQuery")["message"]
    new = passages(client, file)
    assert not {p["id"] for p in new} & old_ids
    assert [p["meta"]["position"] for p in new] == list(range(len(new)))
    assert all(len(p["content"]) <= 100 for p in new)


def test_reindex_needs_content(client, bot):
    file = file_upsert(bot=bot, key="empty.txt", size=5)
    with pytest.raises(InvalidValue, match="no content"):
        file_reindex(file=file)


@pytest.fixture
def staff_browser(db: Any) -> Any:
    from django.test import Client

    browser = Client()
    browser.force_login(AccountFactory(is_staff=True, is_superuser=True))
    return browser


def test_admin_reindex_action(client, staff_browser):
    file = uploaded(client, "admin.txt", b"admin words", "text/plain")
    index(file)
    response = staff_browser.post(
        "/admin/files/file/", {"action": "reindex", "_selected_action": [file.id]}, follow=True
    )
    assert response.status_code == 200
    assert b"1 file(s) queued for indexing" in response.content
    reindexed = File.objects.get(id=file.id)
    assert reindexed.status == FileStatus.INDEXING_PENDING
    assert reindexed.revision == file.revision + 1
