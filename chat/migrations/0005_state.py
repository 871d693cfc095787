# States of a bot's conversations, users, workflows and of itself (runtime States API).

import django.db.models.deletion
from django.db import migrations, models

import platform_site.foundation.ids


class Migration(migrations.Migration):
    dependencies = [
        ("bots", "0008_bot_delivery_format"),
        ("chat", "0004_encryption_key_encrypted"),
    ]

    operations = [
        migrations.CreateModel(
            name="State",
            fields=[
                (
                    "id",
                    platform_site.foundation.ids.PrefixedIdField(
                        editable=False,
                        max_length=36,
                        prefix="state",
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "type",
                    models.CharField(
                        choices=[
                            ("conversation", "Conversation"),
                            ("user", "User"),
                            ("bot", "Bot"),
                            ("workflow", "Workflow"),
                        ],
                        max_length=20,
                    ),
                ),
                ("target_id", models.CharField(max_length=36)),
                ("name", models.CharField(max_length=200)),
                ("payload", models.JSONField()),
                (
                    "expiry",
                    models.BigIntegerField(
                        blank=True,
                        help_text="Milliseconds of idleness after which it expires.",
                        null=True,
                    ),
                ),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                (
                    "bot",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bots.bot",
                    ),
                ),
                (
                    "conversation",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bots.conversation",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bots.user",
                    ),
                ),
                (
                    "workflow",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="bots.workflow",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("expires_at__isnull", False)),
                        fields=["expires_at"],
                        name="state_expires_idx",
                    ),
                    models.Index(
                        condition=models.Q(("conversation__isnull", False)),
                        fields=["conversation"],
                        name="state_conversation_idx",
                    ),
                    models.Index(
                        condition=models.Q(("user__isnull", False)),
                        fields=["user"],
                        name="state_user_idx",
                    ),
                    models.Index(
                        condition=models.Q(("workflow__isnull", False)),
                        fields=["workflow"],
                        name="state_workflow_idx",
                    ),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("bot", "type", "target_id", "name"), name="state_key_unique"
                    )
                ],
            },
        ),
    ]
