import json
from typing import Any

from files.models import File, FileStatus, Passage
from files.signed_urls import download_url, upload_url
from platform_site.api.fields import format_timestamp

_FAILED = (FileStatus.UPLOAD_FAILED, FileStatus.INDEXING_FAILED)


def file_json(file: File, *, with_upload_url: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": file.id,
        "botId": file.bot_id,
        "key": file.key,
        "size": file.size,
        "contentType": file.content_type,
        "tags": file.tags,
        "metadata": file.metadata,
        "accessPolicies": file.access_policies,
        "index": file.index,
        "status": file.status,
        "createdAt": format_timestamp(file.created_at),
        "updatedAt": format_timestamp(file.updated_at),
    }
    if file.status in _FAILED:
        body["failedStatusReason"] = file.failed_status_reason
    if file.expires_at is not None:
        body["expiresAt"] = format_timestamp(file.expires_at)
    if file.has_content:
        body["url"] = download_url(file)
    if with_upload_url:
        body["uploadUrl"] = upload_url(file)
    return body


def passage_json(passage: Passage) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "type": passage.type,
        "subtype": passage.subtype,
        "position": passage.position,
    }
    if passage.page_number is not None:
        meta["pageNumber"] = passage.page_number
    if passage.source_url:
        meta["sourceUrl"] = passage.source_url
    return {"id": passage.id, "content": passage.content, "meta": meta}


def passages_page_body(*, passages: str, next_token: str | None) -> bytes:
    """`{"passages": [...], "meta": {...}}` around the array the database
    encoded (files.selectors.passages.passages_page)."""
    meta = json.dumps({"nextToken": next_token} if next_token else {}, separators=(",", ":"))
    return f'{{"passages":{passages},"meta":{meta}}}'.encode()
