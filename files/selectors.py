import json
from collections.abc import Mapping
from dataclasses import dataclass

from django.core import signing
from django.db.models import Q, QuerySet
from django.utils import timezone

from bots.models import Bot
from files.models import FILE_KEY_MAX_LENGTH, File, FileStatus, Passage
from files.passage_json import file_passages_json_select, passages_page_body
from platform_site.api.errors import InvalidIdentifier, InvalidQuery, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, keyset_signer, paginate
from platform_site.api.tags import tagged


def _live_files(bot: Bot) -> QuerySet[File]:
    # An expired file is gone for its readers even before housekeeping deletes it.
    return File.objects.filter(bot=bot).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )


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
        _live_files(bot)
        .filter(index=True, status__in=indexed)
        .exclude(storage_name="")
        .order_by("id")
    )


def _check_file_reference(id_or_key: str) -> None:
    if not id_or_key or len(id_or_key) > FILE_KEY_MAX_LENGTH:
        raise InvalidIdentifier(f"{id_or_key[:40]!r}… is neither a file id nor a file key")


def _file_not_found(id_or_key: str) -> ResourceNotFound:
    return ResourceNotFound(f"File {id_or_key!r} not found")


def file_get(*, bot: Bot, id_or_key: str) -> File:
    """A file of `bot` by its id or its key (keys are unique per bot)."""
    _check_file_reference(id_or_key)
    files = _live_files(bot)
    # An id wins over a key that happens to spell another file's id.
    found = files.filter(id=id_or_key).first() if is_id(id_or_key, "file") else None
    found = found or files.filter(key=id_or_key).first()
    if found is None:
        raise _file_not_found(id_or_key)
    return found


def files_list(*, bot: Bot, page: PageRequest, tags: Mapping[str, str]) -> Page[File]:
    """The bot's files, newest first, with every tag of `tags`."""
    return paginate(
        tagged(_live_files(bot), tags),
        ordering=["-id"],
        list_name=f"files:{bot.id}:tags={sorted(tags.items())}",
        request=page,
    )


def _passages_list_name(file_id: str, passages_version: int) -> str:
    # The set's version names the list: once the passages are replaced, a
    # token of the old set is refused instead of going on in the new one.
    return f"passages:{file_id}:{passages_version}"


_POSITION_MAX = 2**31 - 1  # Passage.position is a PositiveIntegerField

_STALE_TOKEN = (
    "nextToken is invalid, belongs to another list, or the file's passages were"
    " replaced since paging began: start again without it"
)


def passages_list(*, file: File, page: PageRequest) -> Page[Passage]:
    """A page of the file's passages as model instances. The API answers
    passages_page (the same page, encoded by the database); this is the
    reference that tests and benchmarks hold it to."""
    try:
        return paginate(
            Passage.objects.filter(file=file),
            ordering=["position"],
            list_name=_passages_list_name(file.id, file.passages_version),
            request=page,
        )
    except InvalidQuery:
        raise InvalidQuery(_STALE_TOKEN) from None


@dataclass(frozen=True)
class PassagesPage:
    passages: str
    """A JSON array of the page's passages, as the database encoded them."""
    next_token: str | None

    def body(self) -> bytes:
        return passages_page_body(passages=self.passages, next_token=self.next_token)


def _position_signer(file_id: str, passages_version: int) -> signing.Signer:
    # passages_list's signer: a token of either is good for the other
    # (tests/test_passages_json.py checks it).
    return keyset_signer(_passages_list_name(file_id, passages_version), ["position"])


def _claimed_position(token: str) -> int | None:
    """The position a nextToken says, its signature not checked (None if it
    says none). Signer.sign_object gives base64 of JSON, ':', the signature."""
    try:
        position = json.loads(signing.b64_decode(token.rpartition(":")[0].encode()))
    except ValueError:
        return None
    if not (isinstance(position, list) and len(position) == 1 and type(position[0]) is int):
        return None
    # Within the column's range, as every signed position is: a forged one
    # out of it must not make the statement fail before the signature does.
    return position[0] if 0 <= position[0] <= _POSITION_MAX else None


def passages_page(*, bot: Bot, id_or_key: str, page: PageRequest) -> PassagesPage:
    """A keyset page of the passages of the bot's file `id_or_key` (the file
    file_get finds), in position order, as JSON: one statement."""
    _check_file_reference(id_or_key)
    # A token is signed for the file's passages version, which the statement
    # reads along with the page: it runs with the position the token says, and
    # the page is answered only if the signature then holds.
    claimed = _claimed_position(page.token) if page.token else None
    selected = file_passages_json_select(
        bot_id=bot.id,
        file_id=id_or_key if is_id(id_or_key, "file") else None,
        key=id_or_key,
        now=timezone.now(),
        after=claimed,
        size=page.size,
    )
    if selected.file_id is None:
        raise _file_not_found(id_or_key)
    signer = _position_signer(selected.file_id, selected.passages_version)
    if page.token:
        try:
            signed = signer.unsign_object(page.token)
        except signing.BadSignature:
            raise InvalidQuery(_STALE_TOKEN) from None
        if claimed is None or signed != [claimed]:
            raise InvalidQuery(_STALE_TOKEN)
    next_token = None
    if selected.next_after is not None:
        next_token = signer.sign_object([selected.next_after])
    return PassagesPage(passages=selected.passages, next_token=next_token)
