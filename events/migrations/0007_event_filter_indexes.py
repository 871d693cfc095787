from django.db import migrations, models

from platform_site.foundation.sql.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    # Built concurrently: an events table in production takes writes all the
    # while (about 1.7x the time of a plain build, which would hold them).
    atomic = False

    dependencies = [
        ("events", "0006_analytics_minute"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(fields=["bot", "type", "id"], name="event_by_type_idx"),
        ),
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(fields=["bot", "status", "id"], name="event_by_status_idx"),
        ),
    ]
