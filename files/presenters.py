from typing import Any

from files.models import Passage


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
