"""When a failed delivery is tried again: the backoff delay, Retry-After and the
retry window. Pure functions; no database."""

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from events.engine.backoff import next_attempt_time, parse_retry_after, retry_delay

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
YEAR = 365 * 24 * 3600.0


@pytest.fixture(autouse=True)
def retry_settings(settings):
    settings.EVENT_RETRY_BASE_SECONDS = 5.0
    settings.EVENT_RETRY_MAX_DELAY_SECONDS = 7200.0
    settings.EVENT_RETRY_WINDOW_SECONDS = 24 * 3600.0


class FixedRandom(random.Random):
    """A random source whose uniform() always answers one end of the range."""

    def __init__(self, end: str) -> None:
        super().__init__()
        self.end = end

    def uniform(self, a: float, b: float) -> float:
        return a if self.end == "low" else b


# --- retry_delay -----------------------------------------------------------------------


def nominal(attempt: int) -> float:
    return min(7200.0, 5.0 * 2 ** (attempt - 1))


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 8, 10, 11, 12, 20])
def test_retry_delay_is_between_half_and_the_full_nominal_delay(attempt):
    rng = random.Random(attempt)
    for _ in range(200):
        delay = retry_delay(attempt, rng=rng)
        assert nominal(attempt) / 2 <= delay <= nominal(attempt)


def test_retry_delay_doubles_from_the_base():
    assert retry_delay(1, rng=FixedRandom("high")) == 5.0
    assert retry_delay(2, rng=FixedRandom("high")) == 10.0
    assert retry_delay(3, rng=FixedRandom("high")) == 20.0
    assert retry_delay(1, rng=FixedRandom("low")) == 2.5
    assert retry_delay(4, rng=FixedRandom("low")) == 20.0


@pytest.mark.parametrize("attempt", [12, 13, 40, 41, 1000, 10**9])
def test_retry_delay_is_capped(attempt):
    assert retry_delay(attempt, rng=FixedRandom("high")) == 7200.0
    assert retry_delay(attempt, rng=FixedRandom("low")) == 3600.0
    assert 3600.0 <= retry_delay(attempt) <= 7200.0


def test_retry_delay_follows_the_settings(settings):
    settings.EVENT_RETRY_BASE_SECONDS = 1.0
    settings.EVENT_RETRY_MAX_DELAY_SECONDS = 3.0
    assert retry_delay(1, rng=FixedRandom("high")) == 1.0
    assert retry_delay(2, rng=FixedRandom("high")) == 2.0
    assert retry_delay(3, rng=FixedRandom("high")) == 3.0
    assert retry_delay(30, rng=FixedRandom("low")) == 1.5


def test_retry_delays_of_events_that_failed_together_spread_out():
    delays = {retry_delay(5) for _ in range(50)}
    assert len(delays) > 40


# --- parse_retry_after -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("120", 120.0), ("0", 0.0), (" 30 ", 30.0), ("007", 7.0), ("86400", 86400.0)],
)
def test_retry_after_in_seconds(value, seconds):
    assert parse_retry_after(value, now=NOW) == seconds


def test_retry_after_as_an_http_date_is_seconds_from_now():
    later = NOW + timedelta(seconds=90)
    assert parse_retry_after(format_datetime(later, usegmt=True), now=NOW) == 90.0
    assert parse_retry_after("Sun, 22 Nov 2026 10:05:00 GMT", now=NOW) == 300.0


def test_retry_after_as_a_date_in_the_past_is_zero():
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=NOW) == 0.0


@pytest.mark.parametrize(
    "value",
    [None, "", "   ", "soon", "-5", "1.5", "12abc", "1e3", "١٢٠", "Mon, 99 Foo 2026", "GMT"],
)
def test_unreadable_retry_after_is_none(value):
    assert parse_retry_after(value, now=NOW) is None


@pytest.mark.parametrize("value", ["9" * 30, str(10**12), "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_huge_retry_after_is_capped_at_a_year(value):
    assert parse_retry_after(value, now=NOW) == YEAR


# --- next_attempt_time -----------------------------------------------------------------


def test_next_attempt_is_after_the_backoff_delay():
    moment = next_attempt_time(attempt_number=1, first_attempt_at=NOW, now=NOW)
    assert moment is not None
    assert NOW + timedelta(seconds=2.5) <= moment <= NOW + timedelta(seconds=5)


def test_no_next_attempt_once_the_window_is_spent():
    window = timedelta(hours=24)
    assert next_attempt_time(attempt_number=9, first_attempt_at=NOW - window, now=NOW) is None
    assert (
        next_attempt_time(
            attempt_number=9, first_attempt_at=NOW - window - timedelta(hours=1), now=NOW
        )
        is None
    )
    assert (
        next_attempt_time(attempt_number=1, first_attempt_at=NOW - window, now=NOW, retry_after=1.0)
        is None
    )


def test_no_next_attempt_with_an_empty_window(settings):
    settings.EVENT_RETRY_WINDOW_SECONDS = 0
    assert next_attempt_time(attempt_number=1, first_attempt_at=NOW, now=NOW) is None


@pytest.mark.parametrize("attempt", [1, 5, 20])
def test_next_attempt_is_never_past_the_window_end(attempt):
    first = NOW - timedelta(hours=24) + timedelta(seconds=3)
    end = first + timedelta(hours=24)
    for retry_after in (None, 60.0, YEAR):
        moment = next_attempt_time(
            attempt_number=attempt, first_attempt_at=first, now=NOW, retry_after=retry_after
        )
        assert moment is not None
        assert NOW < moment <= end


def test_the_last_retry_is_at_the_window_end_when_the_backoff_reaches_past_it():
    first = NOW - timedelta(hours=23, minutes=59)
    moment = next_attempt_time(attempt_number=20, first_attempt_at=first, now=NOW)
    assert moment == first + timedelta(hours=24)


def test_retry_after_wins_when_longer_than_the_backoff():
    moment = next_attempt_time(attempt_number=1, first_attempt_at=NOW, now=NOW, retry_after=120.0)
    assert moment == NOW + timedelta(seconds=120)


def test_backoff_wins_when_longer_than_retry_after():
    # attempt 10: nominal 2560 s, so at least 1280 s
    moment = next_attempt_time(attempt_number=10, first_attempt_at=NOW, now=NOW, retry_after=1.0)
    assert moment is not None
    assert NOW + timedelta(seconds=1280) <= moment <= NOW + timedelta(seconds=2560)


def test_retry_after_of_zero_keeps_the_backoff():
    moment = next_attempt_time(attempt_number=1, first_attempt_at=NOW, now=NOW, retry_after=0.0)
    assert moment is not None
    assert moment >= NOW + timedelta(seconds=2.5)
