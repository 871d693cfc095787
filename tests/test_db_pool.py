"""PostgreSQL connections come from a pool per process. Under ASGI, Django runs
each request in a thread of its own: persistent connections (CONN_MAX_AGE)
were left open with their dead threads, one per request until the garbage
collector came by; the pool takes each back when its request ends."""

from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from bots.models import Bot, Role
from tests.factories import member_token
from tests.servers import READ_TIMEOUT, celery_queue, servers  # noqa: F401

pytestmark = pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="the pool is PostgreSQL's (psycopg); SQLite connects as before",
)


def test_connections_come_from_a_pool_sized_by_the_settings():
    assert connection.settings_dict["CONN_MAX_AGE"] == 0
    pool = connection.pool
    assert pool is not None
    options = settings.DATABASES["default"]["OPTIONS"]["pool"]
    assert (pool.min_size, pool.max_size) == (options["min_size"], options["max_size"])
    assert settings.DATABASES["default"]["OPTIONS"]["server_side_binding"] is True


def server_connections() -> int:
    """Connections to the test database other than this test's own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        count: int = cursor.fetchone()[0]
        return count


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_uvicorn_reuses_a_few_connections_for_many_requests(servers: Any, bot: Bot):  # noqa: F811
    # Other tests' connections may still sit in this process's pool.
    before = server_connections()
    server = servers()
    headers = {
        "authorization": f"Bearer {member_token(bot.workspace, Role.DEVELOPER)}",
        "x-bot-id": bot.id,
    }
    with httpx.Client(base_url=server.url, headers=headers, timeout=READ_TIMEOUT) as client:
        for _ in range(100):
            assert client.get("/v1/files").status_code == 200
    # Persistent connections left one per request open until the garbage
    # collector came by. A request's connection goes back to the pool just
    # after its answer, so the next request may take another.
    assert server_connections() - before <= 3
