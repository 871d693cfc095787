"""Indexing end to end: files announced and uploaded through the API, indexed
by a real Celery worker, read back as passages. A document that cannot be
indexed fails with its reason and the worker goes on with the next one.

Waits poll the database; nothing here asserts on speed."""

from typing import Any

import pytest

from files.models import File, FileEmbeddings, FileStatus
from files.services.embeddings import files_mark_embeddings_due
from tests.conftest import upload
from tests.documents import make_pdf, truncated_pdf
from tests.factories import FileFactory, PassageFactory
from tests.worker import Workers, celery_queue, drop_queue, wait_until, workers

__all__ = ["celery_queue", "workers"]  # fixtures, used by name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MARKDOWN = b"# Handbook\n\nFirst paragraph of the handbook.\n\n## Setup\n\n- one\n- two\n"


def announce_and_upload(client: Any, key: str, data: bytes, content_type: str) -> str:
    response = client.put(
        "/v1/files",
        {"key": key, "size": len(data), "contentType": content_type, "index": True},
        format="json",
    )
    assert response.status_code == 200, response.content
    file = response.json()["file"]
    sent = upload(client, file["uploadUrl"], data, content_type)
    assert sent.status_code == 200, sent.content
    assert sent.json()["file"]["status"] == FileStatus.INDEXING_PENDING
    return str(file["id"])


def wait_indexed(file_id: str, workers: Workers) -> File:
    def done() -> File | None:
        file = File.objects.get(id=file_id)
        return file if file.status != FileStatus.INDEXING_PENDING else None

    file: File = wait_until(
        done, timeout=60, message=f"{file_id} still indexing_pending", workers=workers
    )
    return file


def test_uploaded_documents_are_indexed_by_a_worker(runtime_client, workers):
    workers.start(beat=False)
    client = runtime_client()
    markdown_id = announce_and_upload(client, "docs/handbook.md", MARKDOWN, "text/markdown")
    pdf = make_pdf(
        [
            [("title", "Guide"), ("paragraph", "The first page says hello.")],
            [("subtitle", "Second"), ("paragraph", "The second page says goodbye.")],
        ]
    )
    pdf_id = announce_and_upload(client, "docs/guide.pdf", pdf, "application/pdf")

    assert wait_indexed(markdown_id, workers).status == FileStatus.INDEXING_COMPLETED
    # Embedded in the same pass: there when the file is indexing_completed.
    assert FileEmbeddings.objects.filter(file_id=markdown_id).exists()
    passages = client.get(f"/v1/files/{markdown_id}/passages").json()["passages"]
    assert [(p["content"], p["meta"]["subtype"]) for p in passages] == [
        ("Handbook", "title"),
        ("First paragraph of the handbook.", "paragraph"),
        ("Setup", "subtitle"),
        ("- one\n- two", "list"),
    ]
    assert wait_indexed(pdf_id, workers).status == FileStatus.INDEXING_COMPLETED
    passages = client.get(f"/v1/files/{pdf_id}/passages").json()["passages"]
    assert [(p["content"], p["meta"]["pageNumber"]) for p in passages] == [
        ("Guide", 1),
        ("The first page says hello.", 1),
        ("Second", 2),
        ("The second page says goodbye.", 2),
    ]


def test_a_corrupt_document_fails_and_the_worker_goes_on(runtime_client, workers):
    workers.start(beat=False)
    client = runtime_client()
    broken_id = announce_and_upload(client, "broken.pdf", truncated_pdf(), "application/pdf")
    good_id = announce_and_upload(client, "good.txt", b"Plain words.", "text/plain")

    broken = wait_indexed(broken_id, workers)
    assert broken.status == FileStatus.INDEXING_FAILED
    assert "PDF" in broken.failed_status_reason
    answer = client.get(f"/v1/files/{broken_id}").json()["file"]
    assert answer["failedStatusReason"] == broken.failed_status_reason
    assert wait_indexed(good_id, workers).status == FileStatus.INDEXING_COMPLETED
    passages = client.get(f"/v1/files/{good_id}/passages").json()["passages"]
    assert [p["content"] for p in passages] == ["Plain words."]


def test_a_lost_indexing_run_is_queued_again_by_housekeeping(runtime_client, workers, settings):
    """The message of an upload is lost (no worker was running, the queue was
    dropped); beat's housekeeping finds the file past its due time and
    queues it again."""
    client = runtime_client()
    file_id = announce_and_upload(client, "late.txt", b"Found again.", "text/plain")

    drop_queue(workers.queue)
    File.objects.filter(id=file_id).update(indexing_due_at="2000-01-01T00:00:00Z")
    workers.configure(FILE_HOUSEKEEPING_INTERVAL=0.5)
    workers.start(beat=True)
    assert wait_indexed(file_id, workers).status == FileStatus.INDEXING_COMPLETED


def test_passages_set_through_the_api_are_embedded_by_a_worker(runtime_client, workers):
    workers.start(beat=False)
    client = runtime_client()
    created = client.put(
        "/v1/files", {"key": "faq.txt", "size": 10, "contentType": "text/plain"}, format="json"
    )
    file_id = created.json()["file"]["id"]
    response = client.put(
        f"/v1/files/{file_id}/passages",
        {
            "passages": [
                {"content": "Parking is free for visitors."},
                {"content": "We ship worldwide."},
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content

    def embedded() -> File | None:
        file = File.objects.get(id=file_id)
        return file if file.embeddings_due_at is None else None

    wait_until(embedded, timeout=60, message=f"{file_id} not embedded", workers=workers)
    [first, *_] = client.get(
        "/v1/files/search", {"query": "international delivery", "contextDepth": 0}
    ).json()["passages"]
    assert first["content"] == "We ship worldwide."


def test_beat_queues_the_files_marked_due_and_a_worker_embeds_them(runtime_client, workers, bot):
    """What `embed_files --queue` leaves to the workers (files indexed
    before semantic search)."""
    workers.configure(FILE_HOUSEKEEPING_INTERVAL=1.0)
    file = FileFactory(bot=bot)
    PassageFactory(file=file, position=0, content="The cafeteria opens at noon.")
    assert files_mark_embeddings_due(bot=bot) == 1
    workers.start(beat=True)

    def embedded() -> FileEmbeddings | None:
        return FileEmbeddings.objects.filter(file=file).first()

    wait_until(embedded, timeout=60, message=f"{file.id} not embedded", workers=workers)
    assert File.objects.get(id=file.id).embeddings_due_at is None
