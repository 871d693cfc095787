"""Events and their delivery attempts partitioned on PostgreSQL
(platform_site/foundation/sql/partitioning.py) by when an event was made, EVENT_PARTITION_DAYS
(UTC) days a partition: its id is a ULID, so the id says when, a get by id
reads one partition, and an event's attempts (partitioned by their event's
id) share its partition.

A week by default, not a day: a query that no id narrows (a bot's list, the
claim of what is due) is planned once per partition, about 0.08 ms each with
the events' indexes, so the count of partitions is kept to some ten (30 days
of retention, a week ahead, the converted and the default ones) at the cost
of retention's grain: a week goes once its newest event has expired.

Beat makes the partitions EVENT_PARTITIONS_AHEAD_DAYS ahead
(`event_partitions_make`); retention (events/services/retention.py) drops a
partition pair whole once every event in it has expired. Until a partition
is made, its rows wait in the default partition and move when it is."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from events.models import DeliveryAttempt, Event
from platform_site.foundation.ids import id_floor
from platform_site.foundation.sql.partitioning import (
    CONVERTED_SUFFIX,
    LockUnavailable,
    Partition,
    is_partitioned,
    partition_drop,
    partitions,
    partitions_make,
)

EVENTS = Event._meta.db_table
ATTEMPTS = DeliveryAttempt._meta.db_table
# Each table and the column it is partitioned by: both an event's id.
PARTITION_KEYS = {EVENTS: "id", ATTEMPTS: "event_id"}


def events_partitioned() -> bool:
    return is_partitioned(connection, EVENTS)


def day_floor(day: date) -> str:
    """The lowest id of an event made on `day` (UTC)."""
    return id_floor("evt", datetime.combine(day, time.min, tzinfo=UTC))


def event_partitions_make(*, now: datetime | None = None) -> int:
    """Make the partitions of both tables, EVENT_PARTITION_DAYS days each,
    from today's to EVENT_PARTITIONS_AHEAD_DAYS ahead, that are missing; how
    many were made."""
    if not events_partitioned():
        return 0
    today = (now or timezone.now()).astimezone(UTC).date()
    return sum(
        partitions_make(
            connection,
            table,
            first=today,
            last=today + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS),
            span_days=settings.EVENT_PARTITION_DAYS,
            key_at=day_floor,
        )
        for table in PARTITION_KEYS
    )


@dataclass(frozen=True)
class DroppedPartition:
    partition: str
    events: int


def event_partitions_drop_expired(*, cutoff: datetime) -> Iterator[DroppedPartition]:
    """Drop each partition of events (with its attempts' partition) whose
    events were all made before `cutoff`'s day and all finished before
    `cutoff`: the retention of every workspace holding events there has
    passed. A partition with an event still waiting, or one finished since,
    stays (retention deletes its expired rows one by one); one whose lock
    cannot be had now is left for the next run."""
    below = expired_below(cutoff)
    attempts = {p.name for p in partitions(connection, ATTEMPTS)}
    for partition in partitions(connection, EVENTS):
        if partition.is_default or partition.upper is None or partition.upper > below:
            continue
        if _holds_unexpired(partition, cutoff):
            continue
        events = _count(partition.name)
        twin = ATTEMPTS + partition.name.removeprefix(EVENTS)
        try:
            if twin in attempts:
                partition_drop(connection, ATTEMPTS, twin)
            partition_drop(connection, EVENTS, partition.name)
        except LockUnavailable:
            continue
        yield DroppedPartition(partition.name, events)


def expired_below(cutoff: datetime) -> str:
    """The ids below which a partition holds only events made before
    `cutoff`'s day: those retention may drop by partition."""
    return day_floor(cutoff.astimezone(UTC).date())


def one_by_one_below(cutoff: datetime) -> str:
    """The ids below which expired events are deleted one by one at the
    longest retention: those of the partitions before `cutoff`'s day that a
    drop had to pass over, and those of the converted partition, which goes
    whole only once its newest event has expired. Above, in the partition
    that holds `cutoff`'s day and after, events wait for their partition to go."""
    below = expired_below(cutoff)
    bound = ""
    for partition in partitions(connection, EVENTS):
        if partition.is_default or not partition.upper:
            continue
        if partition.upper <= below or partition.name == EVENTS + CONVERTED_SUFFIX:
            bound = max(bound, partition.upper)
    return bound


def _holds_unexpired(partition: Partition, cutoff: datetime) -> bool:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        # Two probes: the first reads the (small) index of waiting events.
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {q(partition.name)} WHERE next_attempt_at IS NOT NULL)"
            f" OR EXISTS (SELECT 1 FROM {q(partition.name)} WHERE updated_at >= %s)",
            [cutoff],
        )
        (unexpired,) = cursor.fetchone()
    return bool(unexpired)


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
        (count,) = cursor.fetchone()
    return int(count)
