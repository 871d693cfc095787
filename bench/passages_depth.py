"""Passages page 10,000 against page 1 (limit 200) with 2,000,000 passages.

    .venv/bin/python bench/passages_depth.py [--passages 2000000 --samples 200]

1. A fresh database bench_passages, migrated and seeded (token, bot, file).
2. The seeded file's passages replaced by --passages rows made server-side
   (INSERT ... SELECT generate_series): unique ids `psg_` + 26 characters,
   positions 0..N-1; then VACUUM ANALYZE and a CHECKPOINT.
3. The nextToken of page 10,000 minted in-process by the application's own
   code: files.selectors.passages_list runs with its queryset narrowed to
   start at page 9,999, so platform_site.api.pagination signs the token of the
   page after it (whatever signer and salt it uses). Checked: page 2 through a
   token minted so equals page 2 through the real token of page 1.
4. Timed, interleaved, --samples times each: page 1 and page 10,000
   - through the full HTTP stack (gunicorn, one keep-alive client),
   - the WSGI application called in-process (all of Django: middleware,
     authentication, view, rendering; no socket, no gunicorn),
   - in-process, the page alone (passages_list, presenter, json.dumps),
   - the SQL statement alone (the exact text Django sends, through psycopg).
5. Page 10,000 verified: positions 1,999,800..1,999,999, no nextToken.

Target (reported, never asserted): page 10,000 takes at most 1.2x page 1.
Exit status 1 only if a correctness check fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

LIMIT = 200
TARGET_RATIO = 1.2
CONTENT_SQL = (
    "'Section ' || g || ': a bot answers its users through conversations; every message "
    "a user sends becomes an event that is delivered to the bot''s webhook, signed, retried "
    "and recorded.'"
)


def fill_passages(proj: benchlib.Project, file_id: str, count: int) -> float:
    started = time.perf_counter()
    with proj.connect(autocommit=True) as conn:
        with conn.transaction():
            conn.execute("DELETE FROM files_passage WHERE file_id = %s", (file_id,))
            # 'psg_' + '01JZ' + 22 hex digits: 26 characters of the ULID alphabet, unique.
            conn.execute(
                "INSERT INTO files_passage"
                " (id, file_id, position, content, type, subtype, page_number, source_url)"
                " SELECT 'psg_01JZ' || lpad(upper(to_hex(g)), 22, '0'), %s, g, "
                + CONTENT_SQL
                + ", 'chunk', 'paragraph', NULL, ''"
                " FROM generate_series(0, %s) AS g",
                (file_id, count - 1),
            )
        conn.execute("VACUUM (ANALYZE) files_passage")
        conn.execute("CHECKPOINT")
    return time.perf_counter() - started


def table_facts(proj: benchlib.Project) -> dict[str, str]:
    with proj.connect(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT id), min(position), max(position),"
            " pg_size_pretty(pg_total_relation_size('files_passage')) FROM files_passage"
        ).fetchone()
        assert row is not None
        return {
            "passages": str(row[0]),
            "distinct ids": str(row[1]),
            "positions": f"{row[2]}..{row[3]}",
            "table + indexes": str(row[4]),
        }


def timed(
    samples: int, first: Callable[[], Any], second: Callable[[], Any]
) -> tuple[list[float], list[float]]:
    """`samples` timings of each, interleaved, alternating which one goes first."""
    a: list[float] = []
    b: list[float] = []
    for i in range(samples):
        order = [(first, a), (second, b)] if i % 2 == 0 else [(second, b), (first, a)]
        for call, out in order:
            started = time.perf_counter()
            call()
            out.append(time.perf_counter() - started)
    return a, b


def summary(
    label: str, page1: list[float], deep: list[float], deep_name: str
) -> tuple[float, float]:
    p = benchlib.percentile
    m1, m2 = p(page1, 50), p(deep, 50)
    q1, q2 = p(page1, 90), p(deep, 90)
    print(
        f"  {label:28s} page 1: median {m1 * 1000:7.3f} ms, p90 {q1 * 1000:7.3f} ms | "
        f"{deep_name}: median {m2 * 1000:7.3f} ms, p90 {q2 * 1000:7.3f} ms | "
        f"ratio median {m2 / m1:5.3f}, p90 {q2 / q1:5.3f}"
    )
    return m2 / m1, q2 / q1


class Client:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, port: int, headers: dict[str, str]):
        self.port = port
        self.headers = headers
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path: str) -> tuple[int, bytes]:
        for attempt in (1, 2):
            try:
                self.conn.request("GET", path, headers=self.headers)
                answer = self.conn.getresponse()
                return answer.status, answer.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def page(self, path: str) -> dict[str, Any]:
        status, body = self.get(path)
        if status != 200:
            raise RuntimeError(f"GET {path} -> {status}: {body[:300]!r}")
        result: dict[str, Any] = json.loads(body)
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=2_000_000)
    parser.add_argument("--page", type=int, default=10_000, help="the deep page's number")
    parser.add_argument("--samples", type=int, default=200, help="timings of each page")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--db", default="bench_passages")
    args = parser.parse_args()
    if args.passages < args.page * LIMIT:
        parser.error(f"--passages must be at least {args.page * LIMIT}")
    benchlib.exit_cleanly_on_sigterm()

    print(f"== passages: page {args.page:,} against page 1, limit {LIMIT}")
    benchlib.print_machine()
    failures: list[str] = []
    deep_first = (args.page - 1) * LIMIT
    deep_last = args.page * LIMIT - 1
    last_position = args.passages - 1

    with benchlib.project(args.db) as proj:
        file_id = proj.demo["fileId"]
        benchlib.log(f"inserting {args.passages:,} passages for {file_id}")
        fill_seconds = fill_passages(proj, file_id, args.passages)
        facts = table_facts(proj)
        print(f"data: {args.passages:,} passages of file {file_id} made in {fill_seconds:.1f} s")
        for key, value in facts.items():
            print(f"  {key:16s} {value}")
        if facts["passages"] != str(args.passages) or facts["distinct ids"] != str(args.passages):
            failures.append("the passages were not all inserted with unique ids")

        # ---------------------------------------------- in-process: token, SQL
        os.environ.update(proj.env)
        import django

        django.setup(set_prefix=False)
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from files import selectors
        from files.models import File
        from files.presenters import passage_json
        from platform_site.api import pagination

        file = File.objects.get(id=file_id)
        real_paginate = selectors.paginate

        def token_of_page_before(first_position: int) -> str:
            """The nextToken that the application itself signs at the end of the
            page ending just before `first_position`: passages_list runs as is,
            with its queryset narrowed to start one page earlier (a walk that
            skips the pages in between)."""
            start = first_position - LIMIT

            def narrowed(queryset: Any, **kwargs: Any) -> Any:
                return real_paginate(queryset.filter(position__gte=start), **kwargs)

            selectors.paginate = narrowed
            try:
                page = selectors.passages_list(
                    file=file, page=pagination.PageRequest(size=LIMIT, token=None)
                )
            finally:
                selectors.paginate = real_paginate
            if page.items[-1].position != first_position - 1 or page.next_token is None:
                raise RuntimeError(f"could not mint the token of position {first_position}")
            return page.next_token

        first = selectors.passages_list(
            file=file, page=pagination.PageRequest(size=LIMIT, token=None)
        )
        real_page2_token = first.next_token
        minted_page2 = token_of_page_before(LIMIT)
        deep_token = token_of_page_before(deep_first)
        print(
            f"tokens: page 2 real {real_page2_token!r}, minted {minted_page2!r}; "
            f"page {args.page:,}: {deep_token!r}"
        )

        def page_request(token: str | None) -> pagination.PageRequest:
            return pagination.PageRequest(size=LIMIT, token=token)

        with CaptureQueriesContext(connection) as q1:
            selectors.passages_list(file=file, page=page_request(None))
        with CaptureQueriesContext(connection) as q2:
            selectors.passages_list(file=file, page=page_request(deep_token))
        sql_page1 = q1.captured_queries[-1]["sql"]
        sql_deep = q2.captured_queries[-1]["sql"]
        print(f"SQL page 1:      {sql_page1[-140:]}")
        print(f"SQL page {args.page:,}: {sql_deep[-140:]}")

        def in_process(token: str | None) -> Callable[[], Any]:
            def run() -> bytes:
                page = selectors.passages_list(file=file, page=page_request(token))
                body = {"passages": [passage_json(p) for p in page.items], "meta": page.meta()}
                return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

            return run

        # ---------------------------------------------- SQL alone
        benchlib.wait_for_quiet()
        with proj.connect(autocommit=True) as conn:
            for label, text in (("page 1", sql_page1), (f"page {args.page:,}", sql_deep)):
                plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + text).fetchall()
                print(f"plan, {label}:")
                for (line,) in plan:
                    print(f"    {line}")

            def run_sql(text: str) -> Callable[[], Any]:
                return lambda: conn.execute(text).fetchall()

            timed(20, run_sql(sql_page1), run_sql(sql_deep))
            sql_times = timed(args.samples, run_sql(sql_page1), run_sql(sql_deep))
            deep_rows = conn.execute(sql_deep).fetchall()
            if len(deep_rows) != LIMIT:
                failures.append(f"SQL of page {args.page} returned {len(deep_rows)} rows")

        timed(20, in_process(None), in_process(deep_token))
        orm_times = timed(args.samples, in_process(None), in_process(deep_token))

        from django.core.wsgi import get_wsgi_application

        app = get_wsgi_application()
        auth = {
            "Authorization": f"Bearer {proj.demo['tokens']['developer']}",
            "x-bot-id": proj.demo["botId"],
        }

        def wsgi(token: str | None) -> Callable[[], Any]:
            query = f"limit={LIMIT}"
            if token is not None:
                query += f"&nextToken={urllib.parse.quote(token, safe='')}"
            target = f"/v1/files/{file_id}/passages"

            def run() -> None:
                status, _ = benchlib.wsgi_call(app, "GET", target, query=query, headers=auth)
                if status != 200:
                    raise RuntimeError(f"in-process GET {target}?{query} -> {status}")

            return run

        timed(20, wsgi(None), wsgi(deep_token))
        wsgi_times = timed(args.samples, wsgi(None), wsgi(deep_token))
        connection.close()

        # ---------------------------------------------- full HTTP stack
        with benchlib.gunicorn(proj, workers=args.workers, threads=args.threads) as server:
            client = Client(server.port, auth)
            base = f"/v1/files/{file_id}/passages?limit={LIMIT}"

            def path(token: str | None) -> str:
                if token is None:
                    return base
                return f"{base}&nextToken={urllib.parse.quote(token, safe='')}"

            # Correctness over HTTP.
            p1 = client.page(path(None))
            positions = [p["meta"]["position"] for p in p1["passages"]]
            if positions != list(range(LIMIT)) or "nextToken" not in p1["meta"]:
                failures.append("page 1 is not positions 0..199 with a nextToken")
            p2_real = client.page(path(p1["meta"]["nextToken"]))
            p2_minted = client.page(path(minted_page2))
            if [p["id"] for p in p2_real["passages"]] != [p["id"] for p in p2_minted["passages"]]:
                failures.append("page 2 through the minted token differs from the real one")
            if [p["meta"]["position"] for p in p2_real["passages"]] != list(
                range(LIMIT, 2 * LIMIT)
            ):
                failures.append("page 2 is not positions 200..399")
            deep = client.page(path(deep_token))
            deep_positions = [p["meta"]["position"] for p in deep["passages"]]
            deep_ids = [p["id"] for p in deep["passages"]]
            expect_next = deep_last < last_position
            print(
                f"page {args.page:,}: {len(deep_positions)} passages, positions "
                f"{deep_positions[0]:,}..{deep_positions[-1]:,}, "
                f"nextToken {'present' if 'nextToken' in deep['meta'] else 'absent'}, "
                f"{len(set(deep_ids))} distinct ids"
            )
            if deep_positions != list(range(deep_first, deep_last + 1)):
                failures.append(f"page {args.page} is not positions {deep_first}..{deep_last}")
            if ("nextToken" in deep["meta"]) != expect_next:
                failures.append(f"page {args.page}: nextToken presence is wrong")
            if len(set(deep_ids)) != LIMIT:
                failures.append(f"page {args.page}: ids are not distinct")
            size1 = len(client.get(path(None))[1])
            size2 = len(client.get(path(deep_token))[1])
            print(f"response bodies: page 1 {size1:,} bytes, page {args.page:,} {size2:,} bytes")

            def http_get(token: str | None) -> Callable[[], Any]:
                target = path(token)

                def run() -> None:
                    status, _ = client.get(target)
                    if status != 200:
                        raise RuntimeError(f"GET {target} -> {status}")

                return run

            benchlib.wait_for_quiet()
            timed(20, http_get(None), http_get(deep_token))
            benchlib.log(f"timing {args.samples} requests of each page")
            http_times = timed(args.samples, http_get(None), http_get(deep_token))
            client.conn.close()

    # ---------------------------------------------- report
    print()
    deep_name = f"page {args.page:,}"
    print(f"RESULT passages_depth ({args.samples} samples each, interleaved)")
    http_ratio, http_p90_ratio = summary("HTTP (gunicorn, keep-alive)", *http_times, deep_name)
    summary("in-process WSGI (Django)", *wsgi_times, deep_name)
    summary("in-process ORM+JSON only", *orm_times, deep_name)
    summary("SQL alone (psycopg)", *sql_times, deep_name)
    print(
        f"  page {args.page:,} / page 1 over HTTP: {http_ratio:.3f}x median, "
        f"{http_p90_ratio:.3f}x p90; target <= {TARGET_RATIO}x: "
        f"{'met' if max(http_ratio, http_p90_ratio) <= TARGET_RATIO else 'MISSED'}"
    )
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(
        f"  correctness: page {args.page:,} is positions {deep_first:,}..{deep_last:,}, "
        f"{'with' if deep_last < last_position else 'without'} nextToken; minted token "
        "agrees with the real one"
    )
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
