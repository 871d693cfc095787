"""Database connections of Celery's worker processes."""

from typing import Any

from django.conf import settings
from django.db import connections


def persistent_connections(**kwargs: Any) -> None:
    """In a worker process, one persistent connection instead of the pool
    the web processes use. Celery's Django fixup closes connections around
    every task: with a pool that reopens it each time (about 5 ms a task),
    while a persistent connection is kept until CONN_MAX_AGE passes. A worker
    process runs one task at a time, and its delivery engine's database
    thread one query at a time: two connections, each the thread's own."""
    for alias in connections:
        settings_dict = connections[alias].settings_dict
        if settings_dict.get("OPTIONS", {}).pop("pool", None) is not None:
            settings_dict["CONN_MAX_AGE"] = settings.DATABASE_WORKER_CONN_MAX_AGE
