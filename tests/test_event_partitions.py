"""Events and delivery attempts in partitions by time on PostgreSQL
(events/services/partitions.py, platform_site/foundation/sql/partitioning.py): made ahead by
beat, read by id from one partition, dropped whole by retention, and a table
of any size converted without its rows moving."""

import importlib
import itertools
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg
import pytest
from django.db import IntegrityError, connection, models, transaction
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone
from ulid import ULID

from bots.models import WorkspaceSettings
from events.models import DeliveryAttempt, Event, EventStatus
from events.services.partitions import ATTEMPTS, EVENTS, day_floor
from events.services.retention import events_purge_expired
from events.tasks import make_event_partitions
from platform_site.foundation.sql import partitioning
from platform_site.foundation.sql.migration_ops import AddIndexConcurrently
from platform_site.foundation.sql.partitioning import (
    LockUnavailable,
    partition_add,
    partition_drop,
    partitions,
    table_partitioned,
    table_unpartitioned,
)
from tests.factories import BotFactory, WorkspaceFactory, event_attempted_at
from tests.test_migrations_nonblocking import blocking_build

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="SQLite keeps plain tables (one machine)"
    ),
]

URL = "/v1/chat/events"


def today() -> date:
    return timezone.now().astimezone(UTC).date()


def at(day: date, hour: int = 12) -> datetime:
    return datetime.combine(day, time(hour), tzinfo=UTC)


def names(table: str) -> list[str]:
    return [p.name for p in partitions(connection, table)]


def home(table: str, column: str, value: str) -> str:
    """The partition holding the row of `table` whose `column` is `value`."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE {column} = %s", [value])
        (found,) = cursor.fetchone()
    return str(found)


def event_on(day: date, bot: Any, *, status: str = EventStatus.PROCESSED, **fields: Any) -> Event:
    """An event made on `day`, last changed then, with one attempt."""
    event = event_attempted_at(bot, at(day), status=status, **fields)
    # As if committed: a partition cannot be dropped while its rows' deferred
    # foreign-key checks are pending, which only happens inside a test's transaction.
    connection.check_constraints()
    return event


def partition_of(table: str, day: date) -> str:
    """The partition of `table` whose range holds what is made on `day`."""
    key = day_floor(day)
    for partition in partitions(connection, table):
        if not partition.is_default and (partition.lower or "") <= key < (partition.upper or "~"):
            return partition.name
    return f"{table}_pdefault"


def ranged_days(settings: Any, count: int) -> list[date]:
    """The first day of each of `count` partitions after the converted one
    (made ahead as far as needed)."""
    settings.EVENT_PARTITIONS_AHEAD_DAYS += count * settings.EVENT_PARTITION_DAYS
    make_event_partitions.apply()
    firsts = [
        ULID.from_str(p.lower[4:]).datetime.date()
        for p in partitions(connection, EVENTS)
        if p.lower and not p.is_default
    ]
    return firsts[:count]


def test_both_tables_are_partitioned_without_gap_from_the_conversion_to_the_days_ahead(settings):
    last = today() + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS)
    for table in (EVENTS, ATTEMPTS):
        found = partitions(connection, table)
        assert found[0].name == f"{table}_p0" and found[0].lower is None
        # Two days ahead of the migration's day (yesterday's, should the
        # suite have crossed midnight since).
        assert found[0].upper in {day_floor(today() + timedelta(days=n)) for n in (1, 2)}
        assert found[-1].name == f"{table}_pdefault" and found[-1].is_default
        ranged = found[:-1]
        assert all(a.upper == b.lower for a, b in itertools.pairwise(ranged))
        assert ranged[-1].upper and ranged[-1].upper >= day_floor(last + timedelta(days=1))
        assert (
            len(ranged)
            <= 2 + settings.EVENT_PARTITIONS_AHEAD_DAYS // settings.EVENT_PARTITION_DAYS + 1
        )
    # The attempts' key holds the partition key, after the id: an attempt is
    # still found by its id alone through it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass AND contype = 'p'",
            [ATTEMPTS],
        )
        assert cursor.fetchone() == ("PRIMARY KEY (id, event_id)",)
    assert [p.name.removeprefix(EVENTS) for p in partitions(connection, EVENTS)] == [
        p.name.removeprefix(ATTEMPTS) for p in partitions(connection, ATTEMPTS)
    ]


def test_a_get_by_id_reads_the_one_partition_that_holds_it(runtime_client, bot):
    day = today() + timedelta(days=3)
    event = event_on(day, bot)
    plan = Event.objects.filter(id=event.id).explain()
    assert len(re.findall(r" on events_event_p", plan)) == 1, plan
    assert partition_of(EVENTS, day) in plan

    assert runtime_client().get(f"{URL}/{event.id}").json()["event"]["id"] == event.id


def test_a_list_runs_across_partitions_newest_first(settings, runtime_client, bot):
    made = [event_on(day, bot) for day in [today(), *ranged_days(settings, 3)]]
    assert len({home(EVENTS, "id", event.id) for event in made}) == 4
    listed = runtime_client().get(URL).json()["events"]
    assert [e["id"] for e in listed] == [e.id for e in reversed(made)]


@pytest.mark.parametrize("span", [1, 7])
def test_beat_makes_the_partitions_ahead_once(settings, span):
    [entry] = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == make_event_partitions.name
    ]
    assert entry["schedule"] == settings.EVENT_PARTITIONS_INTERVAL

    settings.EVENT_PARTITION_DAYS = span
    settings.EVENT_PARTITIONS_AHEAD_DAYS += 21
    last = today() + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS)
    assert partition_of(EVENTS, last) == f"{EVENTS}_pdefault"
    assert make_event_partitions.apply().get() >= 2  # both tables
    assert make_event_partitions.apply().get() == 0
    for table in (EVENTS, ATTEMPTS):
        assert partition_of(table, last) != f"{table}_pdefault"
        ranged = [p for p in partitions(connection, table) if not p.is_default]
        assert all(a.upper == b.lower for a, b in itertools.pairwise(ranged))
    # The last ones span `span` days, from a Monday when they are weeks.
    newest = ranged[-1]
    assert newest.lower and newest.upper
    first_day = ULID.from_str(newest.lower[4:]).datetime.date()
    assert day_floor(first_day + timedelta(days=span)) == newest.upper
    assert span == 1 or first_day.weekday() == 0


def test_a_new_partition_keeps_the_tables_autovacuum_settings(settings):
    [day] = ranged_days(settings, 1)
    settings.EVENT_PARTITIONS_AHEAD_DAYS += 14
    make_event_partitions.apply()
    last = today() + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS)
    for table, setting in (
        (EVENTS, "autovacuum_vacuum_scale_factor=0.01"),
        (ATTEMPTS, "autovacuum_vacuum_insert_scale_factor=0.02"),
    ):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reloptions FROM pg_class WHERE relname = %s", [partition_of(table, last)]
            )
            (options,) = cursor.fetchone()
        assert setting in options


def test_an_event_of_a_day_without_a_partition_waits_in_the_default_and_moves_when_it_is_made(
    settings, runtime_client, bot
):
    far = today() + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS + 20)
    event = event_on(far, bot)
    assert home(EVENTS, "id", event.id) == f"{EVENTS}_pdefault"
    assert home(ATTEMPTS, "event_id", event.id) == f"{ATTEMPTS}_pdefault"

    settings.EVENT_PARTITIONS_AHEAD_DAYS += 20
    make_event_partitions.apply()

    assert home(EVENTS, "id", event.id) == partition_of(EVENTS, far) != f"{EVENTS}_pdefault"
    assert home(ATTEMPTS, "event_id", event.id) == partition_of(ATTEMPTS, far)
    body = runtime_client().get(f"{URL}/{event.id}").json()
    assert body["event"]["status"] == "processed"


def test_retention_drops_a_partition_whole_once_every_event_in_it_expired(
    settings, runtime_client, bot
):
    gone_day, busy_day = ranged_days(settings, 2)
    gone = [event_on(gone_day, bot) for _ in range(3)]
    expired_on_busy_day = event_on(busy_day, bot, status=EventStatus.FAILED)
    waiting = event_on(
        busy_day,
        bot,
        status=EventStatus.SCHEDULED,
        due_at=at(busy_day + timedelta(days=60)),
    )
    gone_partitions = {table: partition_of(table, gone_day) for table in (EVENTS, ATTEMPTS)}
    busy_partitions = {table: partition_of(table, busy_day) for table in (EVENTS, ATTEMPTS)}

    # Thirty days (no settings) after the busy partition's end.
    end = busy_day + timedelta(days=settings.EVENT_PARTITION_DAYS)
    purged = events_purge_expired(now=at(end + timedelta(days=31)))

    assert purged == len(gone) + 1
    for table in (EVENTS, ATTEMPTS):
        assert gone_partitions[table] not in names(table)
        # The waiting event keeps its partition; its expired one went one by one.
        assert busy_partitions[table] in names(table)
    assert set(Event.objects.values_list("id", flat=True)) == {waiting.id}
    assert set(DeliveryAttempt.objects.values_list("event_id", flat=True)) == {waiting.id}
    assert runtime_client().get(f"{URL}/{gone[0].id}").status_code == 404
    assert runtime_client().get(f"{URL}/{expired_on_busy_day.id}").status_code == 404


def test_a_workspace_keeping_events_less_long_loses_them_one_by_one_before_the_partition_goes(
    settings,
):
    short = WorkspaceFactory()
    WorkspaceSettings.objects.create(workspace=short, event_retention_days=5)
    [day] = ranged_days(settings, 1)
    brief = event_on(day, BotFactory(workspace=short))
    kept = event_on(day, BotFactory())

    assert events_purge_expired(now=at(day + timedelta(days=6))) == 1

    assert set(Event.objects.values_list("id", flat=True)) == {kept.id}
    assert brief.id not in set(DeliveryAttempt.objects.values_list("event_id", flat=True))
    assert partition_of(EVENTS, day) != f"{EVENTS}_pdefault"


def test_a_partition_still_within_retention_stays(settings):
    [day] = ranged_days(settings, 1)
    kept = event_on(day, BotFactory())
    partition = partition_of(EVENTS, day)
    assert events_purge_expired(now=at(day + timedelta(days=30))) == 0
    assert Event.objects.filter(id=kept.id).exists()
    assert partition in names(EVENTS)


# --- The partitioning itself, on a table of the test's own -----------------

SCRATCH = "partitioning_scratch"


@pytest.fixture
def scratch(transactional_db: Any) -> Iterator[str]:
    """A plain table with what the events tables have: an identity column, a
    text key, indexes (one partial), a check and a foreign key; 1,000 rows."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {SCRATCH} (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
            " key varchar(36) NOT NULL, size integer NOT NULL CHECK (size >= 0),"
            " bot_id varchar(36) REFERENCES bots_bot (id) DEFERRABLE INITIALLY DEFERRED)"
        )
        cursor.execute(f"CREATE INDEX scratch_key_idx ON {SCRATCH} (key, size)")
        cursor.execute(f"CREATE INDEX scratch_big_idx ON {SCRATCH} (size) WHERE size > 500")
        cursor.execute(
            f"INSERT INTO {SCRATCH} (key, size) SELECT 'k' || lpad(n::text, 4, '0'), n"
            " FROM generate_series(1, 1000) AS n"
        )
    try:
        yield SCRATCH
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {SCRATCH} CASCADE")


def index_oids(table: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexrelid::regclass::text, indexrelid::int FROM pg_index"
            " WHERE indrelid = %s::regclass",
            [table],
        )
        return dict(cursor.fetchall())


def scalar(sql: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def test_a_converted_table_keeps_its_rows_indexes_and_sequence_where_they_were(scratch):
    before = index_oids(scratch)

    table_partitioned(connection, scratch, "key", "k2000", primary_key=("key", "id"))

    assert scalar(f"SELECT relkind FROM pg_class WHERE relname = '{scratch}'") == "p"
    assert names(scratch) == [f"{scratch}_p0", f"{scratch}_pdefault"]
    # The old rows did not move and no index was built again: the old
    # table's indexes (the primary key aside, replaced to hold the key)
    # serve as the partition's.
    after = index_oids(f"{scratch}_p0")
    assert before["scratch_key_idx"] == after["scratch_key_idx_p0"]
    assert before["scratch_big_idx"] == after["scratch_big_idx_p0"]
    assert set(index_oids(scratch)) == {
        f"{scratch}_pkey",
        "scratch_key_idx",
        "scratch_big_idx",
    }
    assert scalar(f"SELECT count(*) FROM {scratch}") == 1000

    partition_add(connection, scratch, f"{scratch}_p1", "k2000", "k3000")
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {scratch} (key, size) VALUES ('k2500', 7) RETURNING id")
        (new_id,) = cursor.fetchone()
    assert new_id == 1001  # the sequence went on from where the old table's stood
    assert scalar(f"SELECT tableoid::regclass::text FROM {scratch} WHERE id = 1001") == (
        f"{scratch}_p1"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {scratch} (key, size) VALUES ('k2600', -1)")

    table_unpartitioned(connection, scratch, primary_key=("id",))
    assert scalar(f"SELECT relkind FROM pg_class WHERE relname = '{scratch}'") == "r"
    assert scalar(f"SELECT count(*) FROM {scratch}") == 1001
    assert set(index_oids(scratch)) == {f"{scratch}_pkey", "scratch_key_idx", "scratch_big_idx"}


def test_a_conversion_refuses_a_table_foreign_keys_name(scratch):
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {scratch}_child (id bigint REFERENCES {scratch} (id))")
    with pytest.raises(ValueError, match="foreign keys name it"):
        table_partitioned(connection, scratch, "key", "k2000", primary_key=("key", "id"))
    assert scalar(f"SELECT relkind FROM pg_class WHERE relname = '{scratch}'") == "r"


def test_a_drop_behind_a_long_transaction_gives_up_and_the_next_run_drops(scratch, monkeypatch):
    table_partitioned(connection, scratch, "key", "k2000", primary_key=("key", "id"))
    partition_add(connection, scratch, f"{scratch}_p1", "k2000", "k3000")
    monkeypatch.setattr(partitioning, "LOCK_TIMEOUT", "200ms")
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        dbname=settings["NAME"],
    ) as reader:
        reader.execute(f"SELECT count(*) FROM {scratch}")  # holds its lock until it ends
        with pytest.raises(LockUnavailable):
            partition_drop(connection, scratch, f"{scratch}_p1")
        assert f"{scratch}_p1" in names(scratch)
        reader.rollback()
    partition_drop(connection, scratch, f"{scratch}_p1")
    assert names(scratch) == [f"{scratch}_p0", f"{scratch}_pdefault"]


def test_an_index_added_to_a_partitioned_table_is_built_partition_by_partition(transactional_db):
    """A future migration's AddIndexConcurrently on events: PostgreSQL builds
    no partitioned index concurrently, so each partition's is."""
    state = MigrationLoader(connection).project_state()
    added = AddIndexConcurrently(
        model_name="event", index=models.Index(fields=["bot", "created_at"], name="probe_idx")
    )
    after = state.clone()
    added.state_forwards("events", after)
    statements: list[str] = []

    def recorded(execute: Any, sql: str, *args: Any) -> Any:
        statements.append(sql)
        return execute(sql, *args)

    try:
        with connection.execute_wrapper(recorded), connection.schema_editor(atomic=False) as editor:
            added.database_forwards("events", editor, state, after)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), bool_and(x.indisvalid) FROM pg_index AS x"
                " JOIN pg_inherits AS i ON i.inhrelid = x.indexrelid"
                " WHERE i.inhparent = 'probe_idx'::regclass"
            )
            attached, valid = cursor.fetchone()
        assert attached == len(names(EVENTS)) and valid
        builds = [sql for sql in statements if sql.startswith("CREATE INDEX")]
        assert builds[0].startswith('CREATE INDEX "probe_idx" ON ONLY "events_event"')
        assert all("CONCURRENTLY" in sql for sql in builds[1:])
        assert not any(blocking_build(sql) for sql in statements)
    finally:
        with connection.schema_editor(atomic=False) as editor:
            added.database_backwards("events", editor, after, state)
    assert "probe_idx" not in index_oids(EVENTS)


def test_expired_events_of_a_partition_that_holds_the_cutoff_wait_for_it_to_go(settings):
    """Rows go with their partition, not one by one as the cutoff moves
    through it: its expired ones wait until the whole partition has."""
    [first, after] = ranged_days(settings, 2)
    last = after - timedelta(days=1)  # the same partition's last day
    early, late = event_on(first, BotFactory()), event_on(last, BotFactory())
    partition = partition_of(EVENTS, first)
    assert partition_of(EVENTS, last) == partition

    between = at(last + timedelta(days=30), hour=0)  # early has expired, late not yet
    assert events_purge_expired(now=between) == 0
    assert set(Event.objects.values_list("id", flat=True)) == {early.id, late.id}

    assert events_purge_expired(now=at(after + timedelta(days=31))) == 2
    assert partition not in names(EVENTS)


def test_a_partition_another_process_made_or_dropped_first_is_no_error(scratch, monkeypatch):
    """Two beats at once: the second to make (or drop) a partition finds it
    done, and goes on."""
    table_partitioned(connection, scratch, "key", "k2000", primary_key=("key", "id"))
    assert partition_add(connection, scratch, f"{scratch}_p1", "k2000", "k3000")
    with monkeypatch.context() as stale:
        # As the second saw the table: before the first made the partition.
        stale.setattr(partitioning, "partitions", lambda connection, table: [])
        assert partition_add(connection, scratch, f"{scratch}_p1", "k2000", "k3000") is False
        assert partition_add(connection, scratch, f"{scratch}_p2", "k2500", "k3500") is False
    partition_drop(connection, scratch, f"{scratch}_p1")
    partition_drop(connection, scratch, f"{scratch}_p1")
    assert names(scratch) == [f"{scratch}_p0", f"{scratch}_pdefault"]


def test_the_migration_run_again_another_day_keeps_both_tables_on_one_bound(monkeypatch):
    """Should events.0009 fail between its tables and be run again later,
    the events keep the attempts' bound: an event's attempts stay beside it."""
    migration = importlib.import_module("events.migrations.0009_partitioned")
    table_unpartitioned(connection, EVENTS)  # as if the run had failed after the attempts
    bound = day_floor(today() + timedelta(days=2))  # the first run's
    later = timezone.now() + timedelta(days=3)
    monkeypatch.setattr(migration.timezone, "now", lambda: later)
    with connection.schema_editor() as editor:
        migration.partition(None, editor)

    [events_bound] = [p.upper for p in partitions(connection, EVENTS) if p.name.endswith("_p0")]
    [attempts_bound] = [p.upper for p in partitions(connection, ATTEMPTS) if p.name.endswith("_p0")]
    assert events_bound == attempts_bound == bound
