"""On PostgreSQL a statement the service runs often is prepared on its
connection and planned once, generically (platform_site/settings.py): a
get by id of the partitioned events then reads one partition, pruned as it
runs, without every partition planned again on every request."""

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
def test_a_get_by_id_run_often_is_prepared_with_one_generic_plan() -> None:
    bot = BotFactory()
    events = EventFactory.create_batch(3, bot=bot)
    for _ in range(4):
        event_get(bot=bot, event_id=events[0].id)
    assert not [row for row in prepared("events_event") if '"id" = ' in row[1]]

    for event in events * 3:
        assert event_get(bot=bot, event_id=event.id) == event

    [(name, _, generic, custom)] = [
        row for row in prepared("events_event") if '"events_event"."id" = ' in row[1]
    ]
    assert custom == 0
    assert generic >= 1
    with connection.cursor() as cursor:
        # A utility statement takes no parameters: the values go in as literals.
        cursor.execute(
            sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE {}({}, {})").format(
                sql.Identifier(name), sql.Literal(events[1].id), sql.Literal(bot.pk)
            )
        )
        plan = "\n".join(row[0] for row in cursor)
    # Pruned as it ran: every partition but the one holding the id left out.
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


def test_preparation_turned_off_leaves_plans_to_postgresql() -> None:
    assert run_settings() == "5 -c plan_cache_mode=force_generic_plan"
    assert run_settings(DATABASE_PREPARE_THRESHOLD="") == "None None"
    assert run_settings(DATABASE_PLAN_CACHE_MODE="auto") == "5 -c plan_cache_mode=auto"
    assert (
        run_settings(DATABASE_URL="postgres://u@127.0.0.1:1/x?options=-c%20work_mem%3D8MB")
        == "5 -c work_mem=8MB -c plan_cache_mode=force_generic_plan"
    )
