import django.db.models.deletion
from django.db import migrations, models

from platform_site.foundation.sql.migration_ops import indexes_dropped


class Migration(migrations.Migration):
    # DROP INDEX CONCURRENTLY: no lock that would queue the table's writes
    # behind a long transaction. Not in a transaction, as PostgreSQL asks.
    atomic = False

    dependencies = [
        ("bots", "0011_chat_user_creation_limits"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="bot",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="bots.bot",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="bots.conversation",
                    ),
                ),
            ],
            # Every message write paid for 9 secondary indexes. Gone: the
            # foreign-key indexes of bot and conversation (message_list_idx
            # and message_by_conversation_idx lead with them), and the
            # varchar_pattern_ops twins of every varchar key (no LIKE on
            # ids). Kept: user_id's (a user's delete cascades by it).
            database_operations=[
                indexes_dropped(
                    "bots_message",
                    [
                        ("bot_id", ""),
                        ("bot_id", "_like"),
                        ("conversation_id", ""),
                        ("conversation_id", "_like"),
                        ("user_id", "_like"),
                        ("id", "_like"),
                    ],
                )
            ],
        ),
    ]
