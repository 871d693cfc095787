"""On PostgreSQL a statement the service runs often is prepared on its
connection (platform_site/settings.py): parsed once, and planned once where
PostgreSQL finds a generic plan as good as one made for the values."""

import os
import subprocess
import sys

import pytest
from django.db import connection
from psycopg import sql

from events.selectors.events import event_get
from tests.factories import BotFactory, EventFactory

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite prepares through its own cache"
)


def prepared(table: str) -> list[tuple[str, str, int, int]]:
    """(name, statement, generic plans, custom plans) of this connection's
    prepared statements reading `table`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            [f'%FROM "{table}"%'],
        )
        return [(name, sql, int(generic), int(custom)) for name, sql, generic, custom in cursor]


@pytest.mark.django_db
@on_postgresql
def test_a_get_by_id_run_often_is_prepared_on_its_connection() -> None:
    bot = BotFactory()
    events = EventFactory.create_batch(3, bot=bot)
    for _ in range(4):
        event_get(bot=bot, event_id=events[0].id)
    assert not [row for row in prepared("events_event") if '"events_event"."id" = ' in row[1]]

    for event in events * 3:
        assert event_get(bot=bot, event_id=event.id) == event

    [(_, _, generic, custom)] = [
        row for row in prepared("events_event") if '"events_event"."id" = ' in row[1]
    ]
    # Run 5 times unprepared, prepared on the sixth; each run since was
    # planned by PostgreSQL's own choice between a plan for its values and
    # the generic one.
    assert generic + custom == 4 + len(events) * 3 - 5


@pytest.mark.django_db
@on_postgresql
def test_a_forced_generic_plan_reads_one_partition_pruned_as_it_runs() -> None:
    bot = BotFactory()
    events = EventFactory.create_batch(2, bot=bot)
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            for _ in range(7):
                event_get(bot=bot, event_id=events[0].id)
            [(name, _, generic, custom)] = [
                row for row in prepared("events_event") if '"events_event"."id" = ' in row[1]
            ]
            assert (generic, custom) == (2, 0)
            # A utility statement takes no parameters: the values go in as literals.
            cursor.execute(
                sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE {}({}, {})").format(
                    sql.Identifier(name), sql.Literal(events[1].id), sql.Literal(bot.pk)
                )
            )
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET plan_cache_mode")
    # Every partition but the one holding the id left out as it ran.
    assert "Subplans Removed" in plan
    assert plan.count("Index Scan") == 1


def run_settings(**env: str) -> str:
    """The database's OPTIONS as a process started with `env` reads them."""
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='platform_site.settings';"
        "from django.conf import settings; o = settings.DATABASES['default']['OPTIONS'];"
        "print(o.get('prepare_threshold'), o.get('options'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DATABASE_URL": "postgres://u@127.0.0.1:1/x", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_preparation_and_the_plan_cache_mode_are_settings() -> None:
    assert run_settings() == "5 None"
    assert run_settings(DATABASE_PREPARE_THRESHOLD="") == "None None"
    assert (
        run_settings(DATABASE_PLAN_CACHE_MODE="force_custom_plan")
        == "5 -c plan_cache_mode=force_custom_plan"
    )
    assert run_settings(DATABASE_PREPARE_THRESHOLD="", DATABASE_PLAN_CACHE_MODE="x") == "None None"
    assert (
        run_settings(
            DATABASE_URL="postgres://u@127.0.0.1:1/x?options=-c%20work_mem%3D8MB",
            DATABASE_PLAN_CACHE_MODE="auto",
        )
        == "5 -c work_mem=8MB -c plan_cache_mode=auto"
    )
