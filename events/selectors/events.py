"""Reading a bot's events."""

from collections.abc import Mapping
from typing import Any

from bots.models import Bot
from events.filters import EventFilter
from events.models import Event
from platform_site.foundation.filtering import filter_query
from platform_site.foundation.lookups import object_get
from platform_site.foundation.pagination import Page, PageRequest, paginate


def event_get(*, bot: Bot, event_id: str) -> Event:
    return object_get(Event.objects, object_id=event_id, prefix="evt", noun="event", bot=bot)


def events_list(*, bot: Bot, query: Mapping[str, Any], page: PageRequest) -> Page[Event]:
    """The bot's events, newest first, narrowed by the filters in `query`."""
    events, filters = filter_query(EventFilter, query, Event.objects.filter(bot=bot))
    return paginate(
        events,
        ordering=["-id"],
        # The filters name the list: a token of one filtered list is no position in another.
        list_name=f"events:{bot.id}:{sorted(filters.items())}",
        request=page,
    )
