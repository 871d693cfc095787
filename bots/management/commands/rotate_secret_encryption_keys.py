from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, models

from platform_site.foundation.progress import command_progress
from platform_site.foundation.secret_fields import (
    EncryptedCharField,
    UndecryptableSecret,
    stored_secrets_count,
    stored_secrets_rotate_batches,
)


class Command(BaseCommand):
    help = (
        "Re-encrypt every secret stored encrypted with the first key of"
        " SECRET_ENCRYPTION_KEYS; the other keys can then be dropped from it."
        " On a terminal, a bar on stderr counts the rows of each field."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        verbosity: int = options["verbosity"]
        total = 0
        for model in apps.get_models():
            for field in model._meta.local_concrete_fields:
                if isinstance(field, EncryptedCharField):
                    total += self.rotate(model, field.name, verbosity=verbosity)
        if verbosity > 0:
            self.stdout.write(f"{total} secrets rotated in all")

    def rotate(self, model: type[models.Model], field_name: str, *, verbosity: int) -> int:
        label = f"{model._meta.label}.{field_name}"
        column: dict[str, Any] = {
            "model": model,
            "field_name": field_name,
            "using": DEFAULT_DB_ALIAS,
        }
        rotated = 0
        with command_progress(
            stream=self.stderr,
            verbosity=verbosity,
            desc=label,
            unit="row",
            total=stored_secrets_count(**column),
        ) as progress:
            try:
                for read, rewritten in stored_secrets_rotate_batches(**column):
                    rotated += rewritten
                    progress.update(read)
            except UndecryptableSecret as exc:
                # The batches before it are rotated: running again after
                # fixing the setting finishes the work.
                raise CommandError(f"{label}: {exc}") from None
        if verbosity > 0:
            self.stdout.write(f"{label}: {rotated} rotated")
        return rotated
