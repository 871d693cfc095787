"""The tags a bot's files carry (listFileTags) and the values one tag takes
(listFileTagValues): keyset pages over the distinct strings, in order."""

from django.core import signing
from django.db import connection
from django.utils import timezone

from bots.models import Bot
from platform_site.foundation.domain_errors import InvalidFilter
from platform_site.foundation.pagination import Page, PageRequest, keyset_signer

# `j` is each (key, value) of a live file's tags; {column} is the one listed.
_DISTINCT = """
SELECT DISTINCT j.{column}
FROM files_file AS f, {each}(f.tags) AS j
WHERE f.bot_id = %s AND (f.expires_at IS NULL OR f.expires_at > %s)
    AND j.{column} > %s {condition}
ORDER BY j.{column}
LIMIT %s
"""


def _page(
    *, column: str, condition: str, params: list[str], list_name: str, page: PageRequest, bot: Bot
) -> Page[str]:
    signer = keyset_signer(list_name, [column])
    after: object = ""
    if page.token:
        try:
            after = signer.unsign_object(page.token)
        except signing.BadSignature:
            after = None
    if not isinstance(after, str):
        raise InvalidFilter("nextToken is invalid or belongs to another list")
    each = "jsonb_each_text" if connection.vendor == "postgresql" else "json_each"
    sql = _DISTINCT.format(column=column, each=each, condition=condition)
    with connection.cursor() as cursor:
        cursor.execute(sql, [bot.id, timezone.now(), after, *params, page.size + 1])
        found = [row[0] for row in cursor.fetchall()]
    if len(found) <= page.size:
        return Page(items=found, next_token=None)
    found = found[: page.size]
    return Page(items=found, next_token=signer.sign_object(found[-1]))


def file_tags_page(*, bot: Bot, page: PageRequest) -> Page[str]:
    """A page of the tag keys of the bot's live files."""
    return _page(
        column="key", condition="", params=[], list_name=f"file-tags:{bot.id}", page=page, bot=bot
    )


def file_tag_values_page(*, bot: Bot, tag: str, page: PageRequest) -> Page[str]:
    """A page of the values tag `tag` takes on the bot's live files."""
    # SQLite's json_each answers a nested value too; tags hold strings only.
    text = "" if connection.vendor == "postgresql" else "AND j.type = 'text'"
    return _page(
        column="value",
        condition=f"AND j.key = %s {text}",
        params=[tag],
        list_name=f"file-tag-values:{bot.id}:{tag}",
        page=page,
        bot=bot,
    )
