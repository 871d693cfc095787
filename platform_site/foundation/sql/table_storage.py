"""Per-table storage parameters set by migrations (autovacuum's, on
PostgreSQL; SQLite has none). A partitioned table carries none itself: they
are set on each partition, and a new partition takes the newest one's
(platform_site/foundation/sql/partitioning.py)."""

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from platform_site.foundation.sql.partitioning import is_partitioned, partitions


def storage_set(table: str, parameters: dict[str, int | float]) -> migrations.RunPython:
    """`ALTER TABLE … SET (…)` on PostgreSQL, `RESET` when reversed."""

    def forwards(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        values = ", ".join(f"{name} = {value}" for name, value in parameters.items())
        for target in _storing(schema_editor, table):
            schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(target)} SET ({values})")

    def backwards(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        names = ", ".join(parameters)
        for target in _storing(schema_editor, table):
            schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(target)} RESET ({names})")

    return migrations.RunPython(forwards, backwards, elidable=False)


def _storing(schema_editor: BaseDatabaseSchemaEditor, table: str) -> list[str]:
    """The tables that hold `table`'s rows: its partitions, or itself."""
    if is_partitioned(schema_editor.connection, table):
        return [p.name for p in partitions(schema_editor.connection, table)]
    return [table]
