# A bot's signing secrets, encrypted at rest (platform_site/foundation/secret_fields.py).

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

import bots.models.bot
import platform_site.foundation.secret_fields
from platform_site.foundation.secret_fields import stored_secrets_decrypt, stored_secrets_encrypt

SECRETS = ("signing_secret", "previous_signing_secret")


def encrypt(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    bot = apps.get_model("bots", "Bot")
    for name in SECRETS:
        stored_secrets_encrypt(model=bot, field_name=name, using=schema_editor.connection.alias)


def decrypt(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    bot = apps.get_model("bots", "Bot")
    for name in SECRETS:
        stored_secrets_decrypt(model=bot, field_name=name, using=schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [
        ("bots", "0006_rate_limits_idempotency_keys"),
    ]

    operations = [
        # The column first becomes text, which a token needs; going back, it
        # is a varchar again once the values are plain.
        migrations.AlterField(
            model_name="bot",
            name="signing_secret",
            field=platform_site.foundation.secret_fields.EncryptedCharField(
                default=bots.models.bot.new_signing_secret, editable=False, max_length=100
            ),
        ),
        migrations.AlterField(
            model_name="bot",
            name="previous_signing_secret",
            field=platform_site.foundation.secret_fields.EncryptedCharField(
                blank=True, editable=False, max_length=100
            ),
        ),
        migrations.RunPython(encrypt, decrypt),
    ]
