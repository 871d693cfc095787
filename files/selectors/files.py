"""Reads of files: by id or key, the bot's list, what re-indexing takes."""

from collections.abc import Mapping

from django.db.models import Q, QuerySet
from django.utils import timezone

from bots.models import Bot
from files.models import FILE_KEY_MAX_LENGTH, File, FileStatus
from platform_site.foundation.domain_errors import MalformedId, NotFound
from platform_site.foundation.ids import is_id
from platform_site.foundation.pagination import Page, PageRequest, paginate
from platform_site.foundation.tags import tagged


def files_live(files: QuerySet[File]) -> QuerySet[File]:
    # An expired file is gone for its readers even before housekeeping deletes it.
    return files.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def live_file_find(*, file_id: str) -> File | None:
    """The file of `file_id`, or None when it was deleted or has expired."""
    return files_live(File.objects.filter(id=file_id)).first()


def files_reindexable(*, bot: Bot) -> QuerySet[File]:
    """The files of `bot` that re-indexing all of them re-indexes, by id: those
    whose client asked for passages and whose content is there. The others
    have no content yet (upload_pending, upload_failed), or content their
    client keeps unindexed (upload_completed, passages set directly)."""
    indexed = [
        FileStatus.INDEXING_PENDING,
        FileStatus.INDEXING_COMPLETED,
        FileStatus.INDEXING_FAILED,
    ]
    return (
        files_live(File.objects.filter(bot=bot))
        .filter(index=True, status__in=indexed)
        .exclude(storage_name="")
        .order_by("id")
    )


def file_reference_check(id_or_key: str) -> None:
    """MalformedId when `id_or_key` can name no file, as an id or as a key."""
    if not id_or_key or len(id_or_key) > FILE_KEY_MAX_LENGTH:
        raise MalformedId(f"{id_or_key[:40]!r}… is neither a file id nor a file key")


def file_not_found(id_or_key: str) -> NotFound:
    return NotFound(f"File {id_or_key!r} not found")


def file_get(*, bot: Bot, id_or_key: str) -> File:
    """A file of `bot` by its id or its key (keys are unique per bot)."""
    file_reference_check(id_or_key)
    files = files_live(File.objects.filter(bot=bot))
    # An id wins over a key that happens to spell another file's id.
    found = files.filter(id=id_or_key).first() if is_id(id_or_key, "file") else None
    found = found or files.filter(key=id_or_key).first()
    if found is None:
        raise file_not_found(id_or_key)
    return found


def files_list(*, bot: Bot, page: PageRequest, tags: Mapping[str, str]) -> Page[File]:
    """The bot's files, newest first, with every tag of `tags`."""
    return paginate(
        tagged(files_live(File.objects.filter(bot=bot)), tags),
        ordering=["-id"],
        list_name=f"files:{bot.id}:tags={sorted(tags.items())}",
        request=page,
    )
