"""After a database error, a process's idle pooled connections are checked at
once (platform_site.api.database.database_pool_check): those a database
restart broke are discarded together, rather than each failing a request or
a readiness probe later. PostgreSQL's pool only; the server really closes
them (pg_terminate_backend), nothing is mocked."""

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from platform_site.api.database import database_pool_check
from tests.worker import worker_database_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
        reason="psycopg's pool is PostgreSQL's",
    ),
]


def test_connections_a_restart_broke_go_at_once_after_a_database_error(api_client):
    assert api_client.get("/readyz").status_code == 200
    connection.close()  # back to the pool, idle
    pool = connection.pool
    before = pool.get_stats().get("connections_lost", 0)
    # What a restart does to them: the server ends every other backend.
    with psycopg.connect(worker_database_url(), autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchone()
    assert ended and ended[0] >= 1

    database_pool_check()

    assert pool.get_stats().get("connections_lost", 0) > before
    # The next request gets a good connection: ready at once.
    assert api_client.get("/readyz").status_code == 200
