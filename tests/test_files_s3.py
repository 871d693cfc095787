"""Files kept in an S3-compatible bucket (settings.STORAGES["files"] with
django-storages), the bucket played by moto: upload, indexing, download and
deletion go through the same code as with the local folder."""

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from moto import mock_aws

from files.models import File
from files.services.file_index import IndexingOutcome, file_index
from tests.conftest import upload

pytestmark = pytest.mark.django_db

BUCKET = "bot-platform-files"


@pytest.fixture
def bucket(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        settings.STORAGES = {
            **settings.STORAGES,
            "files": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {
                    "bucket_name": BUCKET,
                    "location": "tenant-files",
                    "file_overwrite": False,
                    "default_acl": None,
                },
            },
        }
        yield s3


def stored_keys(s3: Any) -> list[str]:
    listing = s3.list_objects_v2(Bucket=BUCKET)
    return [item["Key"] for item in listing.get("Contents", [])]


def test_upload_index_download_and_delete_in_a_bucket(
    runtime_client, bucket, django_capture_on_commit_callbacks
):
    client = runtime_client()
    data = b"# Stored in S3\n\nThe bytes live in a bucket.\n"
    announced = client.put(
        "/v1/files",
        {"key": "kb/s3.md", "size": len(data), "index": True},
        format="json",
    ).json()["file"]
    assert announced["contentType"] == "text/markdown"
    with django_capture_on_commit_callbacks(execute=False):
        sent = upload(client, announced["uploadUrl"], data, "text/markdown")
    assert sent.status_code == 200, sent.content
    [key] = stored_keys(bucket)
    assert key.startswith(f"tenant-files/{announced['botId']}/{announced['id']}/")

    file = File.objects.get(id=announced["id"])
    assert file_index(file_id=file.id, revision=file.revision) == IndexingOutcome.COMPLETED
    found = client.get(f"/v1/files/{file.id}/passages").json()["passages"]
    assert [(p["meta"]["subtype"], p["content"]) for p in found] == [
        ("title", "Stored in S3"),
        ("paragraph", "The bytes live in a bucket."),
    ]

    url = client.get(f"/v1/files/{file.id}").json()["file"]["url"]
    download = client.get(urlsplit(url).path)
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == data
    assert download["Content-Type"] == "text/markdown"

    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(f"/v1/files/{file.id}").status_code == 200
    assert stored_keys(bucket) == []
