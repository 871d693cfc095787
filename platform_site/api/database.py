"""The database connection of a request that outlives its queries."""

from django.db import connection


def database_release() -> None:
    """Give this thread's database connection back (to the pool, or closed)
    now rather than when the response ends: a download may stream for
    minutes and a live stream for hours after their lookups, and holding the
    connection meanwhile would starve the pool. Inside a transaction (a
    test's) it is not ours to close."""
    if not connection.in_atomic_block:
        connection.close()
