"""Retention: finished events, and their delivery attempts, are deleted once
they are older than their workspace keeps them.

The database picks what has expired, a batch at a time, each batch in a short
transaction of its own: a large purge never holds one long transaction, and it
locks only the finished events it deletes, never waiting ones."""

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
    for expired in _expired_by_period(now):
        while True:
            count = _delete_batch(expired, size)
            if count:
                yield count
            if count < size:
                break


def events_expired_count(*, now: datetime | None = None) -> int:
    """How many events a purge at `now` would delete (fewer if other
    transactions hold some of them then)."""
    return sum(expired.count() for expired in _expired_by_period(now or timezone.now()))


def _expired_by_period(now: datetime) -> Iterator[QuerySet[Event]]:
    # One query per retention period in use (a handful), so each compares
    # updated_at with a constant: the planner then walks event_expiry_idx per
    # bot for just the expired rows, where a cutoff computed per row would
    # have it scan every event.
    for days in _retention_periods():
        bots = Bot.objects.alias(retention_days=_retention_days("workspace__")).filter(
            retention_days=days
        )
        yield Event.objects.filter(
            bot__in=bots,
            status__in=FINISHED_STATUSES,
            updated_at__lt=now - timedelta(days=days),
        )


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
