from collections.abc import Mapping

from django.db.models import Q, QuerySet
from django.utils import timezone

from bots.models import Bot
from files.models import FILE_KEY_MAX_LENGTH, File, Passage
from platform_site.api.errors import InvalidIdentifier, InvalidQuery, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate
from platform_site.api.tags import tagged


def _live_files(bot: Bot) -> QuerySet[File]:
    # An expired file is gone for its readers even before housekeeping deletes it.
    return File.objects.filter(bot=bot).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )


def file_get(*, bot: Bot, id_or_key: str) -> File:
    """A file of `bot` by its id or its key (keys are unique per bot)."""
    if not id_or_key or len(id_or_key) > FILE_KEY_MAX_LENGTH:
        raise InvalidIdentifier(f"{id_or_key[:40]!r}… is neither a file id nor a file key")
    files = _live_files(bot)
    # An id wins over a key that happens to spell another file's id.
    found = files.filter(id=id_or_key).first() if is_id(id_or_key, "file") else None
    found = found or files.filter(key=id_or_key).first()
    if found is None:
        raise ResourceNotFound(f"File {id_or_key!r} not found")
    return found


def files_list(*, bot: Bot, page: PageRequest, tags: Mapping[str, str]) -> Page[File]:
    """The bot's files, newest first, with every tag of `tags`."""
    return paginate(
        tagged(_live_files(bot), tags),
        ordering=["-id"],
        list_name=f"files:{bot.id}:tags={sorted(tags.items())}",
        request=page,
    )


def passages_list(*, file: File, page: PageRequest) -> Page[Passage]:
    try:
        return paginate(
            Passage.objects.filter(file=file),
            ordering=["position"],
            # The set's version names the list: once the passages are replaced,
            # a token of the old set is refused instead of going on in the new one.
            list_name=f"passages:{file.id}:{file.passages_version}",
            request=page,
        )
    except InvalidQuery:
        raise InvalidQuery(
            "nextToken is invalid, belongs to another list, or the file's passages were"
            " replaced since paging began: start again without it"
        ) from None
