"""Retention: finished events, and their delivery attempts, are deleted once
they are older than their workspace keeps them.

On PostgreSQL, where events live in partitions of EVENT_PARTITION_DAYS
(events/services/partitions.py), a partition goes whole, by DETACH and DROP,
once every event in it is past the longest retention in use: at most a
partition's span after an event expired, in a catalog change rather than a
row-by-row DELETE (0.36 s and 0.81 MB of WAL a million events, against 712 s
and 7.3 GB: BENCHMARKS.md §21). Rows go one by one only where a partition
cannot: those of workspaces that keep events for less than the longest
retention in use, and the expired rows of a partition that still holds an
event waiting or finished since.

One by one, the database picks what has expired, a batch at a time, each
batch in a short transaction of its own: a large purge never holds one long
transaction, and it locks only the finished events it deletes, never
waiting ones."""

from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from bots.models import Bot, Workspace
from bots.models.workspace_settings import EVENT_RETENTION_DAYS_DEFAULT
from events.models import FINISHED_STATUSES, DeliveryAttempt, Event
from events.services.partitions import (
    event_partitions_drop_expired,
    events_partitioned,
    one_by_one_below,
)


def events_purge_expired(*, now: datetime | None = None) -> int:
    """Delete processed, failed, ignored and canceled events last changed
    longer ago than their workspace's retention (30 days for a workspace
    without settings), with their attempts; answers how many events."""
    return sum(events_purge_expired_batches(now=now))


def events_purge_expired_batches(*, now: datetime | None = None) -> Iterator[int]:
    """events_purge_expired a batch at a time, for a caller that reports
    progress: yields how many events each batch deleted, once its
    transaction has committed."""
    now = now or timezone.now()
    size = settings.EVENT_RETENTION_BATCH
    partitioned = events_partitioned()
    periods = _retention_periods()
    if partitioned:
        longest = max(periods, default=EVENT_RETENTION_DAYS_DEFAULT)
        for dropped in event_partitions_drop_expired(cutoff=now - timedelta(days=longest)):
            if dropped.events:
                yield dropped.events
    for expired in _expired_by_period(now, periods, partitioned=partitioned):
        while True:
            count = _delete_batch(expired, size)
            if count:
                yield count
            if count < size:
                break


def events_expired_count(*, now: datetime | None = None) -> int:
    """How many events a purge at `now` would delete (fewer if other
    transactions hold some of them then)."""
    expired_sets = _expired_by_period(
        now or timezone.now(), _retention_periods(), partitioned=events_partitioned()
    )
    return sum(expired.count() for expired in expired_sets)


def _expired_by_period(
    now: datetime, periods: list[int], *, partitioned: bool
) -> Iterator[QuerySet[Event]]:
    # One query per retention period in use (a handful), so each compares
    # updated_at with a constant: the planner then walks event_expiry_idx per
    # bot for just the expired rows, where a cutoff computed per row would
    # have it scan every event.
    longest = max(periods, default=None)
    for days in periods:
        bots = Bot.objects.alias(retention_days=_retention_days("workspace__")).filter(
            retention_days=days
        )
        cutoff = now - timedelta(days=days)
        expired = Event.objects.filter(
            bot__in=bots, status__in=FINISHED_STATUSES, updated_at__lt=cutoff
        )
        if partitioned and days == longest:
            # The longest retention's rows go with their partition, but for
            # those a partition drop passed over.
            expired = expired.filter(id__lt=one_by_one_below(cutoff))
        yield expired


def _retention_days(workspace_path: str = "") -> Coalesce:
    # An expression rather than a filter across the relation, so the join to
    # the settings stays outer: a workspace without them keeps the default.
    return Coalesce(
        F(f"{workspace_path}settings__event_retention_days"), Value(EVENT_RETENTION_DAYS_DEFAULT)
    )


def _retention_periods() -> list[int]:
    return list(
        Workspace.objects.annotate(retention_days=_retention_days())
        .order_by()
        .values_list("retention_days", flat=True)
        .distinct()
    )


@transaction.atomic
def _delete_batch(expired: QuerySet[Event], size: int) -> int:
    # Rows another transaction holds are left for the next run: the purge
    # never waits on the engine.
    ids = list(
        expired.select_for_update(skip_locked=True, of=("self",)).values_list("id", flat=True)[
            :size
        ]
    )
    if ids:
        # Two statements. Django's collector would read the events back and
        # delete them 100 at a time: three quarters of the purge's time.
        DeliveryAttempt.objects.filter(
            event_id__in=ids
        ).delete()  # one DELETE: nothing hangs on attempts
        _delete_events(ids)
    return len(ids)


def _delete_events(ids: list[str]) -> None:
    """Delete these events, whose attempts are gone. Other rows that name an
    event do not exist (attempts are its only dependents)."""
    table = connection.ops.quote_name(Event._meta.db_table)
    placeholders = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id IN ({placeholders})", ids)
