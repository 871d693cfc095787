"""Migrations never hold the big tables' writes while an index builds
(platform_site/foundation/sql/migration_ops.py): every migration newer than those named
below is run, on PostgreSQL, against a database of its own, and each
statement it sends is read. A plain CREATE INDEX (or a unique constraint,
which builds one) on a big table fails the test; CONCURRENTLY passes."""

import os
import re
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="index builds lock on PostgreSQL"
)

# Tables that grow with traffic: a blocking build there stops the service.
BIG_TABLES = {
    "events_event",
    "events_deliveryattempt",
    "bots_message",
    "bots_idempotencykey",
    "bots_conversation",
    "bots_user",
    "files_passage",
}

# The last migration of each app written before the rule: these built their
# indexes the plain way when the tables were young (docs/upgrading.md).
CHECKED_AFTER = {
    "bots": "0011_chat_user_creation_limits",
    "events": "0006_analytics_minute",
    "chat": "0006_message_feedback",
    "files": "0002_upload_and_indexing",
}

_BLOCKING = re.compile(
    # ON ONLY makes a partitioned table's index alone: it builds nothing.
    r"""CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+(?!ONLY\s)"""
    r""""?(?:public\.)?"?(\w+)"?"""
    r"""|ALTER\s+TABLE\s+"?(\w+)"?\s+ADD\s+CONSTRAINT\s+\S+\s+(?:UNIQUE|PRIMARY\s+KEY)(?!\s+USING\s+INDEX)""",
    re.IGNORECASE,
)


SCRATCH = "migrations_scratch"


def blocking_build(sql: str) -> str | None:
    """The big table `sql` builds an index on while holding its writes, if any."""
    for match in _BLOCKING.finditer(sql):
        table = match.group(1) or match.group(2)
        if table in BIG_TABLES:
            return table
    return None


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ('CREATE INDEX "x" ON "events_event" ("bot_id", "type")', "events_event"),
        ('CREATE UNIQUE INDEX IF NOT EXISTS "x" ON "bots_message" ("id")', "bots_message"),
        ('ALTER TABLE "bots_user" ADD CONSTRAINT "u" UNIQUE ("bot_id", "name")', "bots_user"),
        ('CREATE INDEX CONCURRENTLY "x" ON "events_event" ("bot_id")', None),
        ('CREATE INDEX CONCURRENTLY IF NOT EXISTS "x" ON "bots_message" ("id")', None),
        ('ALTER TABLE "bots_user" ADD CONSTRAINT "u" UNIQUE USING INDEX "x"', None),
        ('CREATE INDEX "x" ON "bots_bot" ("name")', None),
        ("CREATE INDEX x ON public.events_event USING btree (bot_id)", "events_event"),
        ("CREATE INDEX x ON ONLY public.events_event USING btree (bot_id)", None),
        ('DROP INDEX CONCURRENTLY IF EXISTS "x"', None),
    ],
)
def test_what_counts_as_a_blocking_build(sql, table):
    assert blocking_build(sql) == table


@pytest.fixture
def scratch() -> Iterator[BaseDatabaseWrapper]:
    """A connection to an empty database of its own, dropped afterwards."""
    settings = connection.settings_dict
    name = f"test_migrations_scratch_{os.getpid()}"
    admin_info = dict(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    with psycopg.connect(**admin_info) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    # Known to Django by an alias of its own: migrations look connections up by alias.
    connections.settings[SCRATCH] = {**settings, "NAME": name}
    try:
        yield connections[SCRATCH]
    finally:
        connections[SCRATCH].close()
        del connections[SCRATCH]
        del connections.settings[SCRATCH]
        with psycopg.connect(**admin_info) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@on_postgresql
def test_no_new_migration_builds_an_index_that_holds_a_big_tables_writes(
    scratch, django_db_blocker
):
    with django_db_blocker.unblock():
        _checked(scratch)


def _checked(scratch: BaseDatabaseWrapper) -> None:
    executor = MigrationExecutor(scratch)
    executor.migrate([(app, name) for app, name in CHECKED_AFTER.items()])

    running: list[str] = []
    found: list[str] = []

    def progress(action: str, migration: object = None, fake: bool = False) -> None:
        if action == "apply_start":
            running.append(str(migration))

    def read(execute, sql, params, many, context):
        table = blocking_build(sql)
        if table is not None:
            found.append(f"{running[-1]}: {sql}")
        return execute(sql, params, many, context)

    executor = MigrationExecutor(scratch, progress_callback=progress)
    with scratch.execute_wrapper(read):
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert running, "no migration was checked"
    assert not found, (
        "builds that hold writes (use platform_site.foundation.sql.migration_ops):\n"
        + "\n".join(found)
    )


def test_messages_keep_only_the_indexes_their_queries_use(db):
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "bots_message")
    indexes = {
        name: tuple(info["columns"])
        for name, info in constraints.items()
        if info["index"] and not info["primary_key"]
    }
    assert sorted(indexes.values()) == [
        ("bot_id", "id"),
        ("conversation_id", "id"),
        ("user_id",),
    ], indexes
