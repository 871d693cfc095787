from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS

from platform_site.secret_fields import (
    EncryptedCharField,
    UndecryptableSecret,
    stored_secrets_rotate,
)


class Command(BaseCommand):
    help = (
        "Re-encrypt every secret stored encrypted with the first key of"
        " SECRET_ENCRYPTION_KEYS; the other keys can then be dropped from it."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        total = 0
        for model in apps.get_models():
            for field in model._meta.local_concrete_fields:
                if not isinstance(field, EncryptedCharField):
                    continue
                label = f"{model._meta.label}.{field.name}"
                try:
                    rotated = stored_secrets_rotate(
                        model=model, field_name=field.name, using=DEFAULT_DB_ALIAS
                    )
                except UndecryptableSecret as exc:
                    # The batches before it are rotated: running again after
                    # fixing the setting finishes the work.
                    raise CommandError(f"{label}: {exc}") from None
                self.stdout.write(f"{label}: {rotated} rotated")
                total += rotated
        self.stdout.write(f"{total} secrets rotated in all")
