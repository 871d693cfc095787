"""Passages page 10,000 against page 1 (limit 200) with 2,000,000 passages.

    .venv/bin/python bench/passages_depth.py [--passages 2000000 --samples 200]

1. A fresh database bench_passages, migrated and seeded (token, bot, file).
2. The seeded file's passages replaced by --passages rows made server-side
   (INSERT ... SELECT generate_series): unique ids `psg_` + 26 characters,
   positions 0..N-1; then VACUUM ANALYZE and a CHECKPOINT.
3. The nextToken of page 10,000 minted in-process by the application's own
   code: files.selectors.passages.passages_list runs with its queryset narrowed to
   start at page 9,999, so platform_site.foundation.pagination signs the token of the
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
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine, report, servers  # noqa: E402
from harness.project import ROOT, Project, django_setup, project  # noqa: E402
from harness.report import verdict  # noqa: E402

LIMIT = 200
TARGET_RATIO = 1.2
CONTENT_SQL = (
    "'Section ' || g || ': a bot answers its users through conversations; every message "
    "a user sends becomes an event that is delivered to the bot''s webhook, signed, retried "
    "and recorded.'"
)


def fill_passages(proj: Project, file_id: str, count: int) -> float:
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


def table_facts(proj: Project) -> dict[str, str]:
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


def summary(
    label: str, page1: list[float], deep: list[float], deep_name: str
) -> tuple[float, float]:
    p = report.percentile
    m1, m2 = p(page1, 50), p(deep, 50)
    q1, q2 = p(page1, 90), p(deep, 90)
    print(
        f"  {label:28s} page 1: median {m1 * 1000:7.3f} ms, p90 {q1 * 1000:7.3f} ms | "
        f"{deep_name}: median {m2 * 1000:7.3f} ms, p90 {q2 * 1000:7.3f} ms | "
        f"ratio median {m2 / m1:5.3f}, p90 {q2 / q1:5.3f}"
    )
    return m2 / m1, q2 / q1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_db(parser, "bench_passages")
    cli.add_gunicorn(parser)
    parser.add_argument("--passages", type=int, default=2_000_000)
    parser.add_argument("--page", type=int, default=10_000, help="the deep page's number")
    parser.add_argument("--samples", type=int, default=200, help="timings of each page")
    args = parser.parse_args()
    if args.passages < args.page * LIMIT:
        parser.error(f"--passages must be at least {args.page * LIMIT}")
    args.deep_first = (args.page - 1) * LIMIT
    args.deep_last = args.page * LIMIT - 1
    return args


def fill(proj: Project, args: argparse.Namespace, failures: list[str]) -> None:
    """1. The seeded file's passages replaced by --passages rows."""
    file_id = proj.demo["fileId"]
    report.log(f"inserting {args.passages:,} passages for {file_id}")
    fill_seconds = fill_passages(proj, file_id, args.passages)
    facts = table_facts(proj)
    print(f"data: {args.passages:,} passages of file {file_id} made in {fill_seconds:.1f} s")
    for key, value in facts.items():
        print(f"  {key:16s} {value}")
    if facts["passages"] != str(args.passages) or facts["distinct ids"] != str(args.passages):
        failures.append("the passages were not all inserted with unique ids")


@dataclass
class Tokens:
    """2. The tokens of page 2 (real and minted) and of the deep page, and the
    SQL Django sends for page 1 and the deep page."""

    minted_page2: str
    deep: str
    sql_page1: str
    sql_deep: str


def mint_tokens(file: Any, args: argparse.Namespace) -> Tokens:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from files.selectors import passages as selectors
    from platform_site.foundation import pagination

    # passages_list looks paginate up in its own module: patched there.
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

    first = selectors.passages_list(file=file, page=pagination.PageRequest(size=LIMIT, token=None))
    minted_page2 = token_of_page_before(LIMIT)
    deep_token = token_of_page_before(args.deep_first)
    print(
        f"tokens: page 2 real {first.next_token!r}, minted {minted_page2!r}; "
        f"page {args.page:,}: {deep_token!r}"
    )
    queries = []
    for token in (None, deep_token):
        with CaptureQueriesContext(connection) as captured:
            selectors.passages_list(file=file, page=pagination.PageRequest(size=LIMIT, token=token))
        queries.append(captured.captured_queries[-1]["sql"])
    print(f"SQL page 1:      {queries[0][-140:]}")
    print(f"SQL page {args.page:,}: {queries[1][-140:]}")
    return Tokens(minted_page2, deep_token, queries[0], queries[1])


Times = tuple[list[float], list[float]]


def time_sql(proj: Project, tokens: Tokens, args: argparse.Namespace, failures: list[str]) -> Times:
    """The exact SQL text through psycopg, with the plans."""
    machine.wait_for_quiet()
    with proj.connect(autocommit=True) as conn:
        for label, text in (("page 1", tokens.sql_page1), (f"page {args.page:,}", tokens.sql_deep)):
            plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + text).fetchall()
            print(f"plan, {label}:")
            for (line,) in plan:
                print(f"    {line}")

        def run_sql(text: str) -> Callable[[], Any]:
            return lambda: conn.execute(text).fetchall()

        times = load.warm_interleaved(
            args.samples, run_sql(tokens.sql_page1), run_sql(tokens.sql_deep)
        )
        # paginate reads one row past the page to know whether a next one
        # exists: LIMIT + 1 rows, or LIMIT on the last page.
        deep_rows = conn.execute(tokens.sql_deep).fetchall()
        expected = LIMIT + 1 if args.deep_last < args.passages - 1 else LIMIT
        if len(deep_rows) != expected:
            failures.append(
                f"SQL of page {args.page} returned {len(deep_rows)} rows, not {expected}"
            )
    return times


def time_in_process(file: Any, tokens: Tokens, args: argparse.Namespace) -> Times:
    """passages_list + presenter + json.dumps, in this process."""
    from files.presenters import passage_json
    from files.selectors import passages as selectors
    from platform_site.foundation import pagination

    def in_process(token: str | None) -> Callable[[], Any]:
        def run() -> bytes:
            page = selectors.passages_list(
                file=file, page=pagination.PageRequest(size=LIMIT, token=token)
            )
            body = {"passages": [passage_json(p) for p in page.items], "meta": page.meta()}
            return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

        return run

    return load.warm_interleaved(args.samples, in_process(None), in_process(tokens.deep))


def path_of(file_id: str, token: str | None) -> str:
    """The passages route with the page's token."""
    base = f"/v1/files/{file_id}/passages?limit={LIMIT}"
    if token is None:
        return base
    return f"{base}&nextToken={urllib.parse.quote(token, safe='')}"


def time_wsgi(proj: Project, tokens: Tokens, args: argparse.Namespace) -> Times:
    """The WSGI application called in this process."""
    from django.core.wsgi import get_wsgi_application

    app = get_wsgi_application()
    auth = api.demo_auth(proj.demo)
    first, deep = (
        load.wsgi_getter(app, path_of(proj.demo["fileId"], token), auth)
        for token in (None, tokens.deep)
    )
    return load.warm_interleaved(args.samples, first, deep)


def check_http(
    client: load.KeepAliveClient, file_id: str, tokens: Tokens, args: argparse.Namespace
) -> list[str]:
    """Page 1, page 2 through both tokens and the deep page, over HTTP."""
    failures = []
    p1 = client.page(path_of(file_id, None))
    positions = [p["meta"]["position"] for p in p1["passages"]]
    if positions != list(range(LIMIT)) or "nextToken" not in p1["meta"]:
        failures.append("page 1 is not positions 0..199 with a nextToken")
    p2_real = client.page(path_of(file_id, p1["meta"]["nextToken"]))
    p2_minted = client.page(path_of(file_id, tokens.minted_page2))
    if [p["id"] for p in p2_real["passages"]] != [p["id"] for p in p2_minted["passages"]]:
        failures.append("page 2 through the minted token differs from the real one")
    if [p["meta"]["position"] for p in p2_real["passages"]] != list(range(LIMIT, 2 * LIMIT)):
        failures.append("page 2 is not positions 200..399")
    deep = client.page(path_of(file_id, tokens.deep))
    deep_positions = [p["meta"]["position"] for p in deep["passages"]]
    deep_ids = [p["id"] for p in deep["passages"]]
    expect_next = args.deep_last < args.passages - 1
    print(
        f"page {args.page:,}: {len(deep_positions)} passages, positions "
        f"{deep_positions[0]:,}..{deep_positions[-1]:,}, "
        f"nextToken {'present' if 'nextToken' in deep['meta'] else 'absent'}, "
        f"{len(set(deep_ids))} distinct ids"
    )
    if deep_positions != list(range(args.deep_first, args.deep_last + 1)):
        failures.append(f"page {args.page} is not positions {args.deep_first}..{args.deep_last}")
    if ("nextToken" in deep["meta"]) != expect_next:
        failures.append(f"page {args.page}: nextToken presence is wrong")
    if len(set(deep_ids)) != LIMIT:
        failures.append(f"page {args.page}: ids are not distinct")
    return failures


def time_http(
    proj: Project, tokens: Tokens, args: argparse.Namespace, failures: list[str]
) -> Times:
    """gunicorn, one keep-alive client: the checks, then the timings."""
    file_id = proj.demo["fileId"]
    with servers.gunicorn(proj, workers=args.workers, threads=args.threads) as server:
        client = load.KeepAliveClient(server.port, api.demo_auth(proj.demo))
        failures += check_http(client, file_id, tokens, args)
        size1 = len(client.get(path_of(file_id, None))[1])
        size2 = len(client.get(path_of(file_id, tokens.deep))[1])
        print(f"response bodies: page 1 {size1:,} bytes, page {args.page:,} {size2:,} bytes")
        first, deep = (
            load.http_getter(client, path_of(file_id, token)) for token in (None, tokens.deep)
        )
        machine.wait_for_quiet()
        load.interleaved(20, first, deep)
        report.log(f"timing {args.samples} requests of each page")
        times = load.interleaved(args.samples, first, deep)
        client.conn.close()
    return times


def print_result(args: argparse.Namespace, levels: dict[str, Times]) -> None:
    print()
    deep_name = f"page {args.page:,}"
    print(f"RESULT passages_depth ({args.samples} samples each, interleaved)")
    ratios = [summary(label, *times, deep_name) for label, times in levels.items()]
    http_ratio, http_p90_ratio = ratios[0]
    print(
        f"  page {args.page:,} / page 1 over HTTP: {http_ratio:.3f}x median, "
        f"{http_p90_ratio:.3f}x p90; target <= {TARGET_RATIO}x: "
        f"{'met' if max(http_ratio, http_p90_ratio) <= TARGET_RATIO else 'MISSED'}"
    )


def main() -> int:
    args = parse_args()
    machine.start(f"== passages: page {args.page:,} against page 1, limit {LIMIT}")
    failures: list[str] = []
    with project(args.db) as proj:
        fill(proj, args, failures)
        django_setup(proj)
        from django.db import connection

        from files.models import File

        file = File.objects.get(id=proj.demo["fileId"])
        tokens = mint_tokens(file, args)
        sql_times = time_sql(proj, tokens, args, failures)
        orm_times = time_in_process(file, tokens, args)
        wsgi_times = time_wsgi(proj, tokens, args)
        connection.close()
        http_times = time_http(proj, tokens, args, failures)

    print_result(
        args,
        {
            "HTTP (gunicorn, keep-alive)": http_times,
            "in-process WSGI (Django)": wsgi_times,
            "in-process ORM+JSON only": orm_times,
            "SQL alone (psycopg)": sql_times,
        },
    )
    return verdict(
        failures,
        f"  correctness: page {args.page:,} is positions {args.deep_first:,}.."
        f"{args.deep_last:,}, {'with' if args.deep_last < args.passages - 1 else 'without'} "
        "nextToken; minted token agrees with the real one",
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
