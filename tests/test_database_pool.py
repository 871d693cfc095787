"""Pooled connections a database restart broke. After a database error, a
process's idle pooled connections are checked at once
(platform_site.api.database.database_pool_check): they go together, rather
than each failing a request or a readiness probe later. And /readyz answers
for the database, not for the one connection it gets: the first probe after
the database is back answers ready, however many broken connections the
pool holds. PostgreSQL's pool only; the server really closes the
connections (pg_terminate_backend), nothing is mocked."""

import logging

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError, connection

from platform_site.api.database import database_broken_connection_dropped, database_pool_check
from tests.worker import worker_database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
        reason="psycopg's pool is PostgreSQL's",
    ),
]


def end_other_backends() -> int:
    """What a restart does to the pool's connections: the server ends every
    other backend of this database. How many it ended."""
    with psycopg.connect(worker_database_url(), autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchone()
    assert ended is not None
    return int(ended[0])


def idle_in_pool(count: int) -> None:
    """`count` connections open and idle in the pool, as after a busy spell."""
    connection.close()
    pool = connection.pool
    held = [pool.getconn() for _ in range(count)]
    for conn in held:
        pool.putconn(conn)
    assert pool.get_stats()["pool_available"] >= count


def test_connections_a_restart_broke_go_at_once_after_a_database_error(api_client):
    assert api_client.get("/readyz").status_code == 200
    connection.close()  # back to the pool, idle
    pool = connection.pool
    before = pool.get_stats().get("connections_lost", 0)
    assert end_other_backends() >= 1

    database_pool_check()

    assert pool.get_stats().get("connections_lost", 0) > before
    # The next request gets a good connection: ready at once.
    assert api_client.get("/readyz").status_code == 200


def test_readyz_answers_ready_at_once_when_the_pool_holds_only_broken_connections(
    api_client, caplog
):
    idle_in_pool(3)
    pool = connection.pool
    lost = pool.get_stats().get("connections_lost", 0)
    assert end_other_backends() >= 3

    with caplog.at_level(logging.INFO):
        response = api_client.get("/readyz")

    # The first probe: the database is up, so ready, whatever its first
    # connection was.
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ready", "database": "ok", "broker": "ok"}
    # The broken ones went together (the one the probe got, then the
    # others when the pool checked them), and nothing was logged as a
    # failure: no trace, no error, no 503's line.
    assert pool.get_stats().get("connections_lost", 0) >= lost + 2
    assert [r for r in caplog.records if r.exc_info] == []
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r for r in caplog.records if r.name == "platform_site.errors"] == []
    [dropped] = [r for r in caplog.records if r.name == "platform_site.database"]
    assert dropped.levelname == "INFO"
    # And the probes after it.
    assert [api_client.get("/readyz").status_code for _ in range(3)] == [200, 200, 200]


def test_a_query_that_failed_on_a_working_connection_is_not_tried_again():
    connection.close()
    with pytest.raises(OperationalError), connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 1")
        cursor.execute("SELECT pg_sleep(1)")  # canceled: an OperationalError
    raw = connection.connection

    assert database_broken_connection_dropped() is False

    # Kept: the connection works, it was the query that failed.
    assert connection.connection is raw
    with connection.cursor() as cursor:
        cursor.execute("RESET statement_timeout")
        cursor.execute("SELECT 1")
    connection.close()


def test_without_a_connection_nothing_is_tried_again():
    # What a pool that timed out leaves: no connection (trying again would
    # wait as long again while the database is away).
    connection.close()
    assert connection.connection is None

    assert database_broken_connection_dropped() is False
