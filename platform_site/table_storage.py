"""Per-table storage parameters set by migrations (autovacuum's, on
PostgreSQL; SQLite has none)."""

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def storage_set(table: str, parameters: dict[str, int | float]) -> migrations.RunPython:
    """`ALTER TABLE … SET (…)` on PostgreSQL, `RESET` when reversed."""

    def forwards(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        values = ", ".join(f"{name} = {value}" for name, value in parameters.items())
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} SET ({values})")

    def backwards(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        names = ", ".join(parameters)
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} RESET ({names})")

    return migrations.RunPython(forwards, backwards, elidable=False)
