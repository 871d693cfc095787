"""A bot's logs: its webhook delivery attempts, newest first (the admin API's bot logs)."""

from datetime import datetime

from bots.models import Bot
from events.models import AttemptOutcome, DeliveryAttempt
from platform_site.foundation.pagination import Page, PageRequest, paginate

# A log line's level, by the outcome of the attempt it tells of.
LOG_LEVELS = {
    "info": AttemptOutcome.PROCESSED,
    "warn": AttemptOutcome.RETRY,
    "error": AttemptOutcome.FAILED,
}


def bot_logs_list(
    *,
    bot: Bot,
    page: PageRequest,
    time_start: datetime | None = None,
    time_end: datetime | None = None,
    level: str | None = None,
) -> Page[DeliveryAttempt]:
    """The attempts that started from `time_start` to `time_end` (both included)."""
    attempts = DeliveryAttempt.objects.filter(bot=bot)
    if time_start is not None:
        attempts = attempts.filter(started_at__gte=time_start)
    if time_end is not None:
        attempts = attempts.filter(started_at__lte=time_end)
    if level is not None:
        attempts = attempts.filter(outcome=LOG_LEVELS[level])
    bounds = [moment.isoformat() if moment else "" for moment in (time_start, time_end)]
    return paginate(
        attempts,
        # Two attempts may start in the same microsecond: the id breaks the tie.
        ordering=["-started_at", "-id"],
        list_name=f"logs:{bot.id}:{bounds}:{level}",
        request=page,
    )
