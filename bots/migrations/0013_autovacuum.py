from django.db import migrations

from platform_site.foundation.sql.table_storage import storage_set


class Migration(migrations.Migration):
    dependencies = [
        ("bots", "0012_message_lean_indexes"),
    ]

    operations = [
        # Messages are inserted, rarely changed: a vacuum sets the visibility
        # map (index-only scans) and freezes in small steps rather than in
        # one anti-wraparound pass over a table of hundreds of millions.
        storage_set(
            "bots_message",
            {
                "autovacuum_vacuum_insert_scale_factor": 0.02,
                "autovacuum_vacuum_scale_factor": 0.02,
                "autovacuum_analyze_scale_factor": 0.02,
            },
        ),
        # Every kept answer is inserted and, a day later, deleted by the
        # purge: a table that turns over whole. Vacuumed after 5 % (or 1,000
        # rows) is dead, so its size stays that of a day's keys.
        storage_set(
            "bots_idempotencykey",
            {
                "autovacuum_vacuum_scale_factor": 0.05,
                "autovacuum_vacuum_threshold": 1000,
                "autovacuum_analyze_scale_factor": 0.05,
            },
        ),
    ]
