"""When a failed delivery is tried again: exponential backoff with jitter,
honouring Retry-After, within a retry window that starts at the first attempt;
and when the engine tries again a call of its own that failed (its database,
its Redis)."""

import random
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from django.conf import settings

# A Retry-After beyond this many seconds is read as this many: a receiver
# cannot park an event for longer than the retry window with one header.
_RETRY_AFTER_CEILING = 365 * 24 * 3600


def retry_delay(attempt_number: int, *, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt `attempt_number` (1 for the first):
    base × 2^(n-1), capped, then "equal jitter" (half fixed, half random), so
    retries from many events that failed together spread out but never come
    sooner than half the nominal delay."""
    nominal = min(
        settings.EVENT_RETRY_MAX_DELAY_SECONDS,
        settings.EVENT_RETRY_BASE_SECONDS * 2 ** min(attempt_number - 1, 40),
    )
    return nominal / 2 + (rng or random).uniform(0, nominal / 2)


def parse_retry_after(value: str | None, *, now: datetime) -> float | None:
    """Seconds from `now` that a Retry-After header asks for (delay-seconds or
    an HTTP date), or None when it is absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(min(int(value), _RETRY_AFTER_CEILING))
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return min(max(0.0, (moment - now).total_seconds()), float(_RETRY_AFTER_CEILING))


def next_attempt_time(
    *,
    attempt_number: int,
    first_attempt_at: datetime,
    now: datetime,
    retry_after: float | None = None,
) -> datetime | None:
    """When to try again after failed attempt `attempt_number`, or None when
    the retry window is spent and the event has failed."""
    window = timedelta(seconds=settings.EVENT_RETRY_WINDOW_SECONDS)
    if now - first_attempt_at >= window:
        return None
    delay = retry_delay(attempt_number)
    if retry_after is not None:
        delay = max(delay, retry_after)
    # The last retry happens at the window's end at the latest, so a receiver
    # that is down for the whole window still gets one try after it.
    return min(now + timedelta(seconds=delay), first_attempt_at + window)


# Longest wait between two tries of a failing database or Redis call.
MAX_FAILURE_BACKOFF_SECONDS = 10.0


def failure_backoff(failures: int) -> float:
    """Seconds before trying again a call of the engine that failed
    `failures` times in a row: 0.5 s, doubling, at most
    MAX_FAILURE_BACKOFF_SECONDS."""
    return float(min(MAX_FAILURE_BACKOFF_SECONDS, 0.5 * 2 ** min(failures - 1, 10)))
