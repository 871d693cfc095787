"""event_rollups_update: the dashboard's per-minute rollups, recomputed from
the events and delivery attempts of the last few minutes."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Q
from django.db.models.functions import TruncMinute

from events.models import AttemptOutcome, DeliveryAttempt, Event
from events.rollups.lateness import LATENESS_BOUNDS, LATENESS_FIELDS
from events.rollups.models import (
    FAILURE_REASON_MAX_LENGTH,
    AnalyticsMinute,
    BotFailureMinute,
    EventMinute,
)
from platform_site.foundation.ids import id_floor

MINUTE = timedelta(minutes=1)
# Minutes before the latest rollup that each run recomputes, besides a
# lease: an event or an attempt is committed a little after the time it is
# counted at (an attempt at its start, recorded once its request ends, at
# the latest when its lease does), so a minute is not final when it ends.
RECOMPUTED_MARGIN = timedelta(minutes=2)


def recomputed_overlap() -> timedelta:
    return RECOMPUTED_MARGIN + timedelta(seconds=settings.EVENT_LEASE_SECONDS)


# An event's id is made a moment before its created_at is set: the id range
# read is this much wider than the minutes, and created_at decides.
_ID_SLACK = timedelta(minutes=1)
_FAILING = (AttemptOutcome.RETRY, AttemptOutcome.FAILED)
_REASONS_PER_QUERY = 1000
# A first run writes a day of minutes: in statements of this many rows.
_ROWS_PER_INSERT = 1000
# The minutes recomputed per transaction.
_CHUNK = timedelta(hours=1)


@dataclass(frozen=True)
class RollupRun:
    start: datetime
    end: datetime
    minutes: int
    bot_failure_minutes: int
    purged: int


def minute_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def event_rollups_update(*, now: datetime) -> RollupRun:
    """Recompute every minute from a little before the latest rollup to the
    current one (from DASHBOARD_ROLLUP_BACKFILL_HOURS back when there is
    none), and delete rollups (bots' analytics too) older than
    DASHBOARD_ROLLUP_KEEP_HOURS. Safe to run twice, or at once: a minute's
    rows are replaced by what it holds."""
    current = minute_floor(now)
    end = current + MINUTE
    start = current - timedelta(hours=settings.DASHBOARD_ROLLUP_BACKFILL_HOURS)
    latest = EventMinute.objects.aggregate(latest=Max("minute"))["latest"]
    if latest is not None:
        start = max(start, min(latest, current) - recomputed_overlap())
    written = failing = 0
    # A first run (or one after a long stop) recomputes a day: an hour at a
    # time, each in a transaction of its own, so that no transaction, query
    # or list of rows grows with the backlog (the first day's took 21.9 s in
    # one at 6M events), and a run cut short keeps what it finished.
    chunk_start = start
    while chunk_start < end:
        chunk_end = min(chunk_start + _CHUNK, end)
        minutes, failures = _rollups_replace(chunk_start, chunk_end)
        written += minutes
        failing += failures
        chunk_start = chunk_end
    expired = Q(minute__lt=now - timedelta(hours=settings.DASHBOARD_ROLLUP_KEEP_HOURS))
    with transaction.atomic():
        purged = EventMinute.objects.filter(expired).delete()[0]
        purged += BotFailureMinute.objects.filter(expired).delete()[0]
        # Bots' analytics are not recomputed (they are counted as they come),
        # only kept as long.
        purged += AnalyticsMinute.objects.filter(expired).delete()[0]
    return RollupRun(
        start=start,
        end=end,
        minutes=written,
        bot_failure_minutes=failing,
        purged=purged,
    )


def _rollups_replace(start: datetime, end: datetime) -> tuple[int, int]:
    """Recompute the minutes of [start, end) and replace their rows; how many
    event minutes and bot failure minutes were written."""
    minutes = _event_minutes(start, end)
    failures = _bot_failure_minutes(start, end)
    window = Q(minute__gte=start, minute__lt=end)
    with transaction.atomic():
        # A minute that held rows and now holds none (its events purged)
        # loses them. Should two runs overlap, each deletes what it sees, and
        # an insert that meets the other's row updates it (both computed alike).
        EventMinute.objects.filter(window).delete()
        BotFailureMinute.objects.filter(window).delete()
        EventMinute.objects.bulk_create(
            minutes,
            update_conflicts=True,
            unique_fields=["workspace", "minute"],
            update_fields=["created", "delivered", "failed", *LATENESS_FIELDS],
            batch_size=_ROWS_PER_INSERT,
        )
        BotFailureMinute.objects.bulk_create(
            failures,
            update_conflicts=True,
            unique_fields=["bot", "minute"],
            update_fields=["workspace", "failed", "last_failure_reason", "last_failure_at"],
            batch_size=_ROWS_PER_INSERT,
        )
    return len(minutes), len(failures)


def _event_minutes(start: datetime, end: datetime) -> list[EventMinute]:
    rows: dict[tuple[datetime, str], EventMinute] = {}

    def row(minute: datetime, workspace_id: str) -> EventMinute:
        key = (minute, workspace_id)
        if key not in rows:
            rows[key] = EventMinute(minute=minute, workspace_id=workspace_id)
        return rows[key]

    created = (
        # Over the primary key's index: ids are ULIDs, in creation order.
        Event.objects.filter(
            id__gte=id_floor("evt", start - _ID_SLACK),
            id__lt=id_floor("evt", end + _ID_SLACK),
            created_at__gte=start,
            created_at__lt=end,
        )
        .annotate(minute=TruncMinute("created_at", tzinfo=UTC))
        .values("minute", workspace=F("bot__workspace_id"))
        .annotate(count=Count("pk"))
        .order_by()
    )
    for counted in created:
        row(counted["minute"], counted["workspace"]).created = counted["count"]

    first = Q(number=1)
    # Cumulative: attempts no later than each bound; the buckets are the steps.
    no_later = {
        f"within_{index}": Count("pk", filter=first & Q(lateness__lte=timedelta(seconds=bound)))
        for index, bound in enumerate(LATENESS_BOUNDS)
    }
    attempts = (
        DeliveryAttempt.objects.filter(started_at__gte=start, started_at__lt=end)
        .alias(
            lateness=ExpressionWrapper(
                F("started_at") - F("event__due_at"), output_field=DurationField()
            )
        )
        .annotate(minute=TruncMinute("started_at", tzinfo=UTC))
        .values("minute", workspace=F("bot__workspace_id"))
        .annotate(
            delivered=Count("pk", filter=Q(outcome=AttemptOutcome.PROCESSED)),
            failed=Count("pk", filter=Q(outcome__in=_FAILING)),
            first=Count("pk", filter=first),
            **no_later,
        )
        .order_by()
    )
    for counted in attempts:
        minute = row(counted["minute"], counted["workspace"])
        minute.delivered = counted["delivered"]
        minute.failed = counted["failed"]
        previous = 0
        steps = [counted[f"within_{index}"] for index in range(len(LATENESS_BOUNDS))]
        for field, reached in zip(LATENESS_FIELDS, [*steps, counted["first"]], strict=True):
            setattr(minute, field, reached - previous)
            previous = reached
    return list(rows.values())


def _bot_failure_minutes(start: datetime, end: datetime) -> list[BotFailureMinute]:
    failing = (
        DeliveryAttempt.objects.filter(
            started_at__gte=start, started_at__lt=end, outcome__in=_FAILING
        )
        .annotate(minute=TruncMinute("started_at", tzinfo=UTC))
        .values("minute", "bot_id", workspace=F("bot__workspace_id"))
        # The last recorded failure: ids grow as attempts are recorded.
        .annotate(failed=Count("pk"), last_id=Max("pk"))
        .order_by()
    )
    groups = list(failing)
    last = _attempts_by_id(group["last_id"] for group in groups)
    return [
        BotFailureMinute(
            minute=group["minute"],
            bot_id=group["bot_id"],
            workspace_id=group["workspace"],
            failed=group["failed"],
            last_failure_reason=attempt_failure_reason(last[group["last_id"]]),
            last_failure_at=last[group["last_id"]]["started_at"],
        )
        for group in groups
    ]


def _attempts_by_id(ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for chunk in _chunks(list(ids), _REASONS_PER_QUERY):
        rows = DeliveryAttempt.objects.filter(pk__in=chunk).values(
            "pk", "started_at", "status_code", "error", "response_excerpt"
        )
        found.update((row["pk"], dict(row)) for row in rows)
    return found


def _chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for offset in range(0, len(items), size):
        yield items[offset : offset + size]


def attempt_failure_reason(attempt: dict[str, Any]) -> str:
    """A failed attempt in a line: what went wrong, or what the webhook answered."""
    if attempt["error"]:
        reason = attempt["error"]
    elif attempt["status_code"] is not None:
        excerpt = " ".join(attempt["response_excerpt"].split())
        reason = f"HTTP {attempt['status_code']}" + (f": {excerpt}" if excerpt else "")
    else:
        reason = "failed"
    if len(reason) > FAILURE_REASON_MAX_LENGTH:
        reason = reason[: FAILURE_REASON_MAX_LENGTH - 1] + "…"
    return str(reason)
