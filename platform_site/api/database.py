"""The database connection of a request that outlives its queries, and of
one a database restart broke."""

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


def database_broken_connection_dropped() -> bool:
    """After an OperationalError on this thread's connection: whether it was
    one the server had closed (a restart since it was last used: the pool
    hands out its idle connections unchecked), now given back, which the pool
    discards, and the pool's other idle connections checked. A query may then
    be tried once more, on a connection that works if the database does.

    False, and nothing done, when the thread got no connection at all (the
    database away, or the pool out of connections for DATABASE_POOL_TIMEOUT:
    trying again would only wait as long again), when the connection is not
    broken (the query itself failed), or inside a transaction (a test's),
    whose connection is not ours to close."""
    raw = connection.connection
    if connection.in_atomic_block or raw is None or not getattr(raw, "broken", False):
        return False
    connection.close()
    database_pool_check()
    logger.info("A database connection broken since it was last used was dropped")
    return True
