"""On PostgreSQL, with DATABASE_PREPARE_THRESHOLD set, a statement the
service runs that often is prepared on its connection
(platform_site/settings.py): parsed once, and planned once where PostgreSQL
finds a generic plan as good as one made for the values. Off by default."""

import os
import subprocess
import sys
from typing import Any

import pytest
from django.db import connection

from tests.factories import BotFactory, EventFactory

on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite prepares through its own cache"
)


READS = """
from bots.models import Bot
from django.db import connection
from events.selectors.events import event_get
bot = Bot.objects.get(id={bot!r})
for _ in range({runs}):
    event_get(bot=bot, event_id={event!r})
with connection.cursor() as cursor:
    cursor.execute(
        "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%events_event%'"
    )
    print(cursor.fetchone()[0])
"""


def prepared_after(runs: int, bot: Any, event: Any, **env: str) -> int:
    """Statements reading events prepared on the connection of a process that
    read an event `runs` times, its settings from `env`."""
    database = connection.settings_dict
    url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            READS.format(bot=bot.id, event=event.id, runs=runs),
        ],
        env={**os.environ, "DATABASE_URL": url, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
@on_postgresql
def test_with_a_threshold_a_statement_run_that_often_is_prepared() -> None:
    bot = BotFactory()
    event = EventFactory(bot=bot)
    assert prepared_after(6, bot, event) == 0  # off by default
    assert prepared_after(5, bot, event, DATABASE_PREPARE_THRESHOLD="5") == 0
    assert prepared_after(6, bot, event, DATABASE_PREPARE_THRESHOLD="5") == 1


def run_settings(**env: str) -> str:
    """The database's OPTIONS as a process started with `env` reads them."""
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='platform_site.settings';"
        "from django.conf import settings; o = settings.DATABASES['default']['OPTIONS'];"
        "print(o.get('prepare_threshold'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DATABASE_URL": "postgres://u@127.0.0.1:1/x", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_preparation_is_a_setting_off_by_default() -> None:
    assert run_settings() == "None"
    assert run_settings(DATABASE_PREPARE_THRESHOLD="") == "None"
    assert run_settings(DATABASE_PREPARE_THRESHOLD="5") == "5"
