"""analytics_track: what a bot counts with the runtime API's trackAnalytics,
added to its minute's row (AnalyticsMinute) by one upsert."""

from datetime import datetime
from functools import cache

from django.db import connection
from django.utils import timezone

from bots.models import Bot
from events.rollups.models import AnalyticsMinute
from events.services.rollups import minute_floor

_COLUMNS = ("bot_id", "workspace_id", "name", "minute", "count")


@cache
def _add_sql() -> str:
    quote = connection.ops.quote_name
    table = quote(AnalyticsMinute._meta.db_table)
    columns = ", ".join(quote(name) for name in _COLUMNS)
    count = quote("count")
    # One statement, the same on PostgreSQL and SQLite (3.24 and later): calls
    # at once each add their count, none is lost, and no call fails on the
    # row another one made first.
    return (
        f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(_COLUMNS))})"
        f" ON CONFLICT (bot_id, name, minute)"
        f" DO UPDATE SET {count} = {table}.{count} + excluded.{count}"
    )


def analytics_track(*, bot: Bot, name: str, count: int, now: datetime | None = None) -> None:
    """Add `count` to what the bot counted under `name` in the current minute."""
    minute = minute_floor(now or timezone.now())
    field = AnalyticsMinute._meta.get_field("minute")
    stored_minute = field.get_db_prep_save(minute, connection)
    with connection.cursor() as cursor:
        cursor.execute(_add_sql(), [bot.id, bot.workspace_id, name, stored_minute, count])
