"""Where a create-event request spends its CPU: the WSGI application called
in-process (exactly what a gunicorn worker calls, minus the socket), on a fresh
PostgreSQL database bench_profile, timed plain and then under cProfile.

    .venv/bin/python bench/profile_create_event.py [--requests 2000] [--top 35]

Prints the time per request, the SQL statements one request sends, and the
functions that take the most time. A diagnostic aid, not a benchmark target.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from create_event import EVENT_PAYLOAD, EVENT_TYPE  # noqa: E402


def call(app: Any, body: bytes, headers: dict[str, str]) -> int:
    status, _ = benchlib.wsgi_call(app, "POST", "/v1/chat/events", body=body, headers=headers)
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument(
        "--timer",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: time on this process's CPU (what limits throughput); wall: with waits",
    )
    parser.add_argument("--db", default="bench_profile")
    args = parser.parse_args()
    benchlib.exit_cleanly_on_sigterm()

    with benchlib.project(args.db) as proj:
        os.environ.update(proj.env)
        import django
        from django.core.wsgi import get_wsgi_application
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        django.setup(set_prefix=False)
        app: Any = get_wsgi_application()
        body = json.dumps({"type": EVENT_TYPE, "payload": EVENT_PAYLOAD}).encode()
        headers = {
            "Authorization": f"Bearer {proj.demo['tokens']['developer']}",
            "x-bot-id": proj.demo["botId"],
        }
        for _ in range(200):
            assert call(app, body, headers) == 201

        with CaptureQueriesContext(connection) as queries:
            call(app, body, headers)
        print(f"SQL statements of one request ({len(queries.captured_queries)}):")
        for query in queries.captured_queries:
            print(f"  {query['time']}s  {query['sql'][:150]}")
        # The health check (CONN_HEALTH_CHECKS) runs on the raw psycopg
        # connection and so is not captured above: count it from the server.
        with proj.connect(autocommit=True) as admin:
            admin.execute("SELECT pg_stat_reset()")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
        benchlib.wait_for_quiet()
        before = time.process_time()
        started = time.perf_counter()
        for _ in range(args.requests):
            call(app, body, headers)
        wall = time.perf_counter() - started
        cpu = time.process_time() - before
        with proj.connect(autocommit=True) as admin:
            row = admin.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (args.db,)
            ).fetchone()
        print(
            f"\nplain: {wall / args.requests * 1000:.3f} ms wall, "
            f"{cpu / args.requests * 1000:.3f} ms CPU per request "
            f"(this process; PostgreSQL runs beside it) -> {args.requests / wall:.0f} req/s "
            f"on one thread; ~{(row[0] if row else 0) / args.requests:.1f} transactions "
            f"per request seen by PostgreSQL"
        )

        timer = time.process_time if args.timer == "cpu" else time.perf_counter
        profiler = cProfile.Profile(timer)
        profiler.enable()
        for _ in range(args.requests):
            call(app, body, headers)
        profiler.disable()
        connection.close()
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.strip_dirs().sort_stats(order).print_stats(args.top)
            print(f"\n== cProfile ({args.timer} time), {args.requests} requests, by {order}")
            print(out.getvalue().split("\n", 4)[-1])
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
