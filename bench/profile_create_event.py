"""Where a create-event request spends its CPU: the WSGI application called
in-process (exactly what a gunicorn worker calls, minus the socket), on a fresh
PostgreSQL database bench_profile, timed plain and then under cProfile.

    .venv/bin/python bench/profile_create_event.py [--requests 2000] [--top 35]

Prints the time per request, the SQL statements one request sends, and the
functions that take the most time. A diagnostic aid, not a benchmark target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine  # noqa: E402
from harness.api import EVENT_PAYLOAD, EVENT_TYPE  # noqa: E402
from harness.project import ROOT, Project, django_setup, project  # noqa: E402
from harness.report import profile_text, profiled  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--top", type=int, default=35)
    cli.add_db(parser, "bench_profile")
    parser.add_argument(
        "--timer",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: time on this process's CPU (what limits throughput); wall: with waits",
    )
    return parser.parse_args()


def requests_of(proj: Project) -> Callable[[int], None]:
    """`n` create events through the WSGI application in this process, after
    200 that warm it up (each must answer 201)."""
    from django.core.wsgi import get_wsgi_application

    app: Any = get_wsgi_application()
    body = json.dumps({"type": EVENT_TYPE, "payload": EVENT_PAYLOAD}).encode()
    headers = api.demo_auth(proj.demo)

    def run(n: int) -> None:
        for _ in range(n):
            load.wsgi_call(app, "POST", "/v1/chat/events", body=body, headers=headers)

    for _ in range(200):
        status, _ = load.wsgi_call(app, "POST", "/v1/chat/events", body=body, headers=headers)
        assert status == 201
    return run


def print_statements(run: Callable[[int], None]) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        run(1)
    print(f"SQL statements of one request ({len(queries.captured_queries)}):")
    for query in queries.captured_queries:
        print(f"  {query['time']}s  {query['sql'][:150]}")


def print_plain(proj: Project, run: Callable[[int], None], requests: int) -> None:
    """Wall and CPU time per request, and the transactions PostgreSQL saw."""
    from django.db import connection

    # The health check (CONN_HEALTH_CHECKS) runs on the raw psycopg
    # connection and so is not captured above: count it from the server.
    with proj.connect(autocommit=True) as admin:
        admin.execute("SELECT pg_stat_reset()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
    machine.wait_for_quiet()
    before = time.process_time()
    started = time.perf_counter()
    run(requests)
    wall = time.perf_counter() - started
    cpu = time.process_time() - before
    commits = proj.scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (proj.dbname,)
    )
    print(
        f"\nplain: {wall / requests * 1000:.3f} ms wall, "
        f"{cpu / requests * 1000:.3f} ms CPU per request "
        f"(this process; PostgreSQL runs beside it) -> {requests / wall:.0f} req/s "
        f"on one thread; ~{(commits or 0) / requests:.1f} transactions "
        f"per request seen by PostgreSQL"
    )


def main() -> int:
    args = parse_args()
    machine.exit_cleanly_on_sigterm()
    with project(args.db) as proj:
        django_setup(proj)
        from django.db import connection

        run = requests_of(proj)
        print_statements(run)
        print_plain(proj, run, args.requests)
        timer = time.process_time if args.timer == "cpu" else time.perf_counter
        profiler = profiled(lambda: run(args.requests), 1, timer)
        connection.close()
        for order in ("tottime", "cumulative"):
            print(f"\n== cProfile ({args.timer} time), {args.requests} requests, by {order}")
            print(profile_text(profiler, order, args.top))
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
