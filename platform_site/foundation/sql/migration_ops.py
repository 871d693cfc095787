"""Migration operations for the big tables (events, delivery attempts,
messages, idempotency keys) that never hold their writes while an index
builds: a plain CREATE INDEX locks out writes for the whole build (11 s at
6M events, minutes at 100M), CREATE INDEX CONCURRENTLY blocks nothing and
takes about 1.7x longer. PostgreSQL refuses it inside a transaction, so a
migration using these sets `atomic = False`. On SQLite (one machine, the
embedded default) they build and drop the plain way.

tests/test_migrations_nonblocking.py fails on a migration, newer than the
ones it names, that builds an index on a big table any other way."""

from collections.abc import Sequence
from typing import Any

from django.contrib.postgres.operations import (
    AddIndexConcurrently as PostgresAddIndexConcurrently,
)
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState

from platform_site.foundation.sql.partitioning import is_partitioned, partitions


class AddIndexConcurrently(PostgresAddIndexConcurrently):
    """AddIndex built CONCURRENTLY on PostgreSQL, plainly elsewhere."""

    def _build(self, schema_editor: BaseDatabaseSchemaEditor) -> Any:
        # PostgreSQL's concurrent operation, or, past it in the method
        # resolution order, AddIndex's plain one.
        if schema_editor.connection.vendor == "postgresql":
            return super()
        return super(PostgresAddIndexConcurrently, self)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        if is_partitioned(schema_editor.connection, model._meta.db_table):
            _partitioned_index_add(schema_editor, model, self.index)
            return
        self._build(schema_editor).database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if is_partitioned(schema_editor.connection, model._meta.db_table):
            # No concurrent drop of a partitioned index: a catalog change.
            schema_editor.execute(self.index.remove_sql(model, schema_editor))
            return
        self._build(schema_editor).database_backwards(
            app_label, schema_editor, from_state, to_state
        )


def _partitioned_index_add(
    schema_editor: BaseDatabaseSchemaEditor, model: Any, index: models.Index
) -> None:
    """PostgreSQL builds no index on a partitioned table concurrently: the
    parent's is made alone (ON ONLY, invalid until every partition has
    one), each partition's built concurrently and attached to it."""
    q = schema_editor.quote_name
    table = model._meta.db_table
    statement = str(index.create_sql(model, schema_editor))
    parent = statement.replace(f" ON {q(table)} ", f" ON ONLY {q(table)} ", 1)
    schema_editor.execute(parent)
    for partition in partitions(schema_editor.connection, table):
        child = f"{partition.name}_{index.name}"[:63]
        schema_editor.execute(
            statement.replace("CREATE INDEX ", "CREATE INDEX CONCURRENTLY ", 1).replace(
                f"{q(index.name)} ON {q(table)} ", f"{q(child)} ON {q(partition.name)} ", 1
            )
        )
        schema_editor.execute(f"ALTER INDEX {q(index.name)} ATTACH PARTITION {q(child)}")


def _concurrently(schema_editor: BaseDatabaseSchemaEditor, table: str = "") -> str:
    """CONCURRENTLY where PostgreSQL has it: not for a partitioned table's
    index, which it neither builds nor drops concurrently (its drop is a
    catalog change on every partition at once)."""
    if schema_editor.connection.vendor != "postgresql":
        return ""
    return "" if table and is_partitioned(schema_editor.connection, table) else "CONCURRENTLY "


def indexes_dropped(table: str, indexes: Sequence[tuple[str, str]]) -> migrations.RunPython:
    """Drop indexes Django made by itself (a foreign key's, the
    `varchar_pattern_ops` twins PostgreSQL gets), each named by the column
    and suffix Django named it by: (column, "") or (column, "_like"). Concurrently on
    PostgreSQL; made again (concurrently) when the migration is reversed.
    `_like` twins exist on PostgreSQL only."""

    def names(schema_editor: BaseDatabaseSchemaEditor) -> list[tuple[str, str, str]]:
        found = []
        for column, suffix in indexes:
            if suffix == "_like" and schema_editor.connection.vendor != "postgresql":
                continue
            # Django's own naming (private, missing from the stubs), so the
            # names are those it gave.
            name = schema_editor._create_index_name(table, [column], suffix=suffix)  # type: ignore[attr-defined]
            found.append((name, column, suffix))
        return found

    def drop(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        concurrently = _concurrently(schema_editor, table)
        for name, _, _ in names(schema_editor):
            schema_editor.execute(
                f"DROP INDEX {concurrently}IF EXISTS {schema_editor.quote_name(name)}"
            )

    def create(apps: Any, schema_editor: BaseDatabaseSchemaEditor) -> None:
        concurrently = _concurrently(schema_editor, table)
        quoted_table = schema_editor.quote_name(table)
        for name, column, suffix in names(schema_editor):
            opclass = " varchar_pattern_ops" if suffix == "_like" else ""
            schema_editor.execute(
                f"CREATE INDEX {concurrently}IF NOT EXISTS {schema_editor.quote_name(name)}"
                f" ON {quoted_table} ({schema_editor.quote_name(column)}{opclass})"
            )

    return migrations.RunPython(drop, create, elidable=False)
