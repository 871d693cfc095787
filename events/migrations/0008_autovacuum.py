from django.db import migrations

from platform_site.foundation.sql.table_storage import storage_set


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0007_event_filter_indexes"),
    ]

    operations = [
        # Each event is written three times (created, claimed, finished) and
        # no update is HOT: two dead row versions per event. At the default
        # scale factor (20 %) a table of 100M events waits for ~20M dead
        # rows before a vacuum, and its indexes bloat meanwhile; at 1 % it is
        # vacuumed every ~1M, and the cost limit lets that vacuum keep up
        # with 1,000 events/s. Analysed as often, so that the due-event and
        # list plans see today's table.
        storage_set(
            "events_event",
            {
                "autovacuum_vacuum_scale_factor": 0.01,
                "autovacuum_vacuum_threshold": 10_000,
                "autovacuum_analyze_scale_factor": 0.01,
                "autovacuum_vacuum_cost_limit": 1000,
            },
        ),
        # Attempts are only inserted (and deleted by retention): a vacuum
        # there sets the visibility map (index-only scans of the dashboard's
        # and the attempt list's indexes) and freezes rows in small steps,
        # not in one anti-wraparound pass over the whole table.
        storage_set(
            "events_deliveryattempt",
            {
                "autovacuum_vacuum_insert_scale_factor": 0.02,
                "autovacuum_vacuum_scale_factor": 0.02,
                "autovacuum_analyze_scale_factor": 0.02,
            },
        ),
    ]
