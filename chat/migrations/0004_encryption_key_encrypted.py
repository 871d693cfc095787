# Chat connections' encryption keys, encrypted at rest (platform_site/foundation/secret_fields.py).

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

import chat.models
import platform_site.foundation.secret_fields
from platform_site.foundation.secret_fields import stored_secrets_decrypt, stored_secrets_encrypt


def encrypt(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = apps.get_model("chat", "ChatConnection")
    stored_secrets_encrypt(
        model=connection, field_name="encryption_key", using=schema_editor.connection.alias
    )


def decrypt(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = apps.get_model("chat", "ChatConnection")
    stored_secrets_decrypt(
        model=connection, field_name="encryption_key", using=schema_editor.connection.alias
    )


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0003_scheduled_message"),
    ]

    operations = [
        # The column first becomes text, which a token needs; going back, it
        # is a varchar again once the values are plain.
        migrations.AlterField(
            model_name="chatconnection",
            name="encryption_key",
            field=platform_site.foundation.secret_fields.EncryptedCharField(
                default=chat.models.new_encryption_key, max_length=200
            ),
        ),
        migrations.RunPython(encrypt, decrypt),
    ]
