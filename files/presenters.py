import json
from typing import Any

from files.models import File, FileStatus, Passage, PassageType
from files.selectors.search import ContextPassage, Hit
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


def search_hit_json(hit: Hit) -> dict[str, Any]:
    """A passage of GET /v1/files/search: its content (with its context and
    breadcrumb, as asked), score, meta and file (a subset of the file's own
    fields); `context` only when asked for."""
    meta = passage_json(hit.passage)["meta"]
    if hit.consolidated:
        meta = {"type": PassageType.CONSOLIDATED}
    file = hit.file
    body: dict[str, Any] = {
        "content": hit.content,
        "score": hit.score,
        "meta": meta,
        "file": {
            "id": file.id,
            "key": file.key,
            "contentType": file.content_type,
            "metadata": file.metadata,
            "tags": file.tags,
            "createdAt": format_timestamp(file.created_at),
            "updatedAt": format_timestamp(file.updated_at),
        },
    }
    if hit.context:
        body["context"] = [_context_json(item) for item in hit.context]
    return body


def _context_json(item: ContextPassage) -> dict[str, Any]:
    body: dict[str, Any] = {"text": item.text, "type": item.type}
    if item.id is not None:
        body["id"] = item.id
    if item.offset is not None:
        body["offset"] = item.offset
    return body
