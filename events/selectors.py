"""Reading a bot's events."""

from collections.abc import Mapping
from typing import Any

from bots.models import Bot
from events.filters import EventFilter
from events.models import Event
from platform_site.api.errors import InvalidIdentifier, ResourceNotFound
from platform_site.api.ids import is_id
from platform_site.api.pagination import Page, PageRequest, paginate
from platform_site.api.query import filter_query


def event_get(*, bot: Bot, event_id: str) -> Event:
    if not is_id(event_id, "evt"):
        raise InvalidIdentifier(f"{event_id[:40]!r} is not an event id")
    event = Event.objects.filter(bot=bot, id=event_id).first()
    if event is None:
        raise ResourceNotFound(f"Event {event_id!r} not found")
    return event


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
