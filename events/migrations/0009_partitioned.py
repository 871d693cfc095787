"""Events and delivery attempts become partitioned tables on PostgreSQL
(events/services/partitions.py), without holding their writes longer than a
catalog change: the existing rows stay where they are, as partition `_p0`
of every id below the start of the day after tomorrow (UTC), read once to
prove it under a lock that lets writes through (docs/upgrading.md gives
the time per million rows);
partitions of EVENT_PARTITION_DAYS begin there. SQLite keeps its tables.
Reversed, every row is copied back into plain tables, their writes held
meanwhile."""

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.utils import timezone

from platform_site.foundation.ids import id_floor
from platform_site.foundation.sql.partitioning import (
    CONVERTED_SUFFIX,
    is_partitioned,
    partitions,
    partitions_make,
    table_partitioned,
    table_unpartitioned,
)

# Each table, the column it is partitioned by, and the primary key that holds
# it: the attempts' id first, so that the key still finds an attempt by its
# id alone (the Django admin's page, the dashboard's last failures).
TABLES = (
    ("events_deliveryattempt", "event_id", ("id", "event_id")),
    ("events_event", "id", None),
)


def _day_floor(day: date) -> str:
    return id_floor("evt", datetime.combine(day, time.min, tzinfo=UTC))


def partition(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    today = timezone.now().astimezone(UTC).date()
    # Both tables share the bound (an event's attempts beside it), should a
    # run that failed after the first be run again another day.
    converted = [
        p.upper
        for table, _, _ in TABLES
        if is_partitioned(connection, table)
        for p in partitions(connection, table)
        if p.name == table + CONVERTED_SUFFIX and p.upper
    ]
    boundary = converted[0] if converted else _day_floor(today + timedelta(days=2))
    for table, key, primary_key in TABLES:
        if not is_partitioned(connection, table):  # done already by a run that failed later
            table_partitioned(connection, table, key, boundary, primary_key=primary_key)
        partitions_make(
            connection,
            table,
            first=today,
            last=today + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS),
            span_days=settings.EVENT_PARTITION_DAYS,
            key_at=_day_floor,
        )


def unpartition(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    for table, _, primary_key in TABLES:
        if is_partitioned(connection, table):
            table_unpartitioned(connection, table, primary_key=("id",) if primary_key else None)


class Migration(migrations.Migration):
    # Each step commits on its own: the rows are read under a lock that lets
    # writes through, and only the switch takes one that does not.
    atomic = False

    dependencies = [
        ("events", "0008_autovacuum"),
    ]

    operations = [
        migrations.AlterField(
            model_name="deliveryattempt",
            name="event",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="attempts",
                to="events.event",
            ),
        ),
        migrations.RunPython(partition, unpartition, elidable=False),
    ]
