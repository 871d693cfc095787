"""The database connection of a request that outlives its queries."""

import logging

from django.db import connection

logger = logging.getLogger("platform_site.database")


def database_release() -> None:
    """Give this thread's database connection back (to the pool, or closed)
    now rather than when the response ends: a download may stream for
    minutes and a live stream for hours after their lookups, and holding the
    connection meanwhile would starve the pool. Inside a transaction (a
    test's) it is not ours to close."""
    if not connection.in_atomic_block:
        connection.close()


def database_pool_check() -> None:
    """After a database error: check this process's idle pooled connections
    now (psycopg's pool discards the broken ones), so that those a database
    restart broke go at once, rather than each failing a request (or a
    readiness probe) later. No pool (SQLite), nothing to do."""
    pool = getattr(connection, "pool", None)
    if pool is None:
        return
    try:
        pool.check()
    except Exception:  # the database still away: the next request tries again
        logger.debug("checking the pool's connections failed", exc_info=True)
