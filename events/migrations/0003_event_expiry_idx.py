from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("events", "0002_delivery"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                condition=models.Q(("status__in", ["processed", "failed", "ignored", "canceled"])),
                fields=["bot", "updated_at"],
                name="event_expiry_idx",
            ),
        ),
    ]
