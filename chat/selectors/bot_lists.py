"""How the runtime API's lists of a bot's messages, conversations and users
are ordered and named."""

from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from bots.models import Bot
from platform_site.foundation.pagination import Page, PageRequest, paginate
from platform_site.foundation.tags import tagged

ModelT = TypeVar("ModelT", bound=Model)

# Newest first: ids are ULIDs, which sort by creation time, and are unique.
NEWEST_FIRST = ["-id"]


def bot_list_page(
    queryset: QuerySet[ModelT],
    *,
    bot: Bot,
    noun: str,
    tags: dict[str, str],
    filters: dict[str, Any],
    page: PageRequest,
) -> Page[ModelT]:
    """A page of the bot's `queryset` with these tags, newest first."""
    named_by = {**filters, "tags": sorted(tags.items())}
    return paginate(
        tagged(queryset, tags),
        ordering=NEWEST_FIRST,
        # The filters name the list: a token of one filtered list is no position in another.
        list_name=f"{noun}:{bot.id}:{sorted((k, str(v)) for k, v in named_by.items())}",
        request=page,
    )
