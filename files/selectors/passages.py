"""Reads of a file's passages: the API's page, encoded by the database, and
the same page as model instances that tests and benchmarks hold it to."""

import json
from dataclasses import dataclass

from django.core import signing
from django.utils import timezone

from bots.models import Bot
from files.models import File, Passage
from files.selectors.files import file_not_found, file_reference_check
from files.selectors.passages_sql import file_passages_json_select
from platform_site.foundation.domain_errors import InvalidFilter
from platform_site.foundation.ids import is_id
from platform_site.foundation.pagination import Page, PageRequest, keyset_signer, paginate


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
    except InvalidFilter:
        # The pagination of every list refuses a bad token with its own
        # words; these say why a token of this list goes stale.
        raise InvalidFilter(_STALE_TOKEN) from None


@dataclass(frozen=True)
class PassagesPage:
    passages: str
    """A JSON array of the page's passages, as the database encoded them."""
    next_token: str | None


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
    file_reference_check(id_or_key)
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
        raise file_not_found(id_or_key)
    signer = _position_signer(selected.file_id, selected.passages_version)
    if page.token:
        try:
            signed = signer.unsign_object(page.token)
        except signing.BadSignature:
            raise InvalidFilter(_STALE_TOKEN) from None
        if claimed is None or signed != [claimed]:
            raise InvalidFilter(_STALE_TOKEN)
    next_token = None
    if selected.next_after is not None:
        next_token = signer.sign_object([selected.next_after])
    return PassagesPage(passages=selected.passages, next_token=next_token)
