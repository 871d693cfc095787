from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from bots.models import Bot
from files.models import FILE_KEY_MAX_LENGTH, File, Passage, PassageSubtype, PassageType
from platform_site.api.errors import InvalidIdentifier, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate


def file_get(*, bot: Bot, id_or_key: str) -> File:
    """A file of `bot` by its id or its key (keys are unique per bot)."""
    if not id_or_key or len(id_or_key) > FILE_KEY_MAX_LENGTH:
        raise InvalidIdentifier(f"{id_or_key[:40]!r}… is neither a file id nor a file key")
    files = File.objects.filter(bot=bot)
    # An id wins over a key that happens to spell another file's id.
    found = files.filter(id=id_or_key).first() if is_id(id_or_key, "file") else None
    found = found or files.filter(key=id_or_key).first()
    if found is None:
        raise ResourceNotFound(f"File {id_or_key!r} not found")
    return found


def passages_list(*, file: File, page: PageRequest) -> Page[Passage]:
    return paginate(
        Passage.objects.filter(file=file),
        ordering=["position"],
        list_name=f"passages:{file.id}",
        request=page,
    )


@dataclass(frozen=True)
class PassageData:
    content: str
    subtype: str = PassageSubtype.PARAGRAPH
    type: str = PassageType.CHUNK
    page_number: int | None = None
    source_url: str = ""


@transaction.atomic
def passages_replace(*, file: File, passages: Sequence[PassageData]) -> int:
    """Replace every passage of `file` in one transaction: a reader sees the
    old set or the new one, never a mix."""
    Passage.objects.filter(file=file).delete()
    Passage.objects.bulk_create(
        (
            Passage(
                file=file,
                position=position,
                content=data.content,
                type=data.type,
                subtype=data.subtype,
                page_number=data.page_number,
                source_url=data.source_url,
            )
            for position, data in enumerate(passages)
        ),
        batch_size=1000,
    )
    return len(passages)
