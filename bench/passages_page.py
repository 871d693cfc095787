"""A passages page of 200 of a file indexed from 50 MB of text: over HTTP and
in-process, against the time of its own SQL query alone, in the same run.

    .venv/bin/python bench/passages_page.py [--text-mb 50 --samples 300]

1. A fresh database bench_passages_page, migrated and seeded, a DATA_DIR of
   the run under /tmp. The 50 MB plain-text document of bench/indexing.py
   (same generator, same seed) is uploaded the real way and indexed with
   files.indexing.file_index in-process (about 70,000 passages); then VACUUM
   (ANALYZE) and a CHECKPOINT.
2. Every page is walked in-process with files.selectors.passages_page (the
   page as JSON the database encodes) and the real nextTokens (checked:
   positions 0..N-1 once each, ids distinct), and each page is compared with
   the same page read as model instances (passages_list) and presented by
   files.presenters.passage_json: equal values, equal nextTokens. The deep
   page is the last full page (--page to choose another).
3. The statements one request sends are captured from Django's connection
   (SQL with its parameters, as Django hands them to psycopg).
4. Timed, interleaved, --samples rounds (the order rotates each round), page 1
   and the deep page at each level:
   - HTTP: gunicorn (2 gthread workers x 2 threads), one keep-alive client;
   - in-process: the WSGI application called in this process (all of
     Django: middleware, authentication, view, response; no socket);
   - SQL: the page's own query alone (the one statement that finds the file
     and selects and encodes its page), the same text and parameters through
     psycopg, bound server-side and not prepared, as Django's connection
     does: the ratios' base;
   - SQL, all the request's statements in a row through psycopg (context);
   - SQL, the rows alone: the model-instance query of passages_list (201
     rows, not encoded), for reference: what the JSON encoding adds.
   Ratios: HTTP / SQL and in-process / SQL, at p50 and p90.
5. Where the in-process time goes: the steps of the view timed one by one
   (the statement that finds the file and encodes its page, the body's bytes;
   and, for comparison, the file lookup, model instances, presenter and DRF
   renderer that the view used before) and a cProfile of --profile-requests
   in-process requests.

Target (reported, never asserted): a page served in at most twice the time
of its own query. Exit status 1 only if a correctness check fails.
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
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import indexing  # noqa: E402
from passages_depth import Client  # noqa: E402

LIMIT = 200
TARGET = 2.0
SQL_BASE = "SQL: the page's own query"


def summary(label: str, values: list[float], base: list[float] | None = None) -> str:
    p = benchlib.percentile
    line = f"p50 {p(values, 50) * 1000:8.3f} ms  p90 {p(values, 90) * 1000:8.3f} ms"
    if base is not None:
        median = p(values, 50) / p(base, 50)
        line += f"  | / SQL: p50 {median:6.1f}x  p90 {p(values, 90) / p(base, 90):6.1f}x"
    return f"  {label:44s} {line}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-mb", type=float, default=50.0)
    parser.add_argument("--samples", type=int, default=300, help="rounds of timings")
    parser.add_argument("--page", type=int, default=0, help="deep page (default: last full)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile-requests", type=int, default=300)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--quiet-wait", type=float, default=300.0, help="seconds to wait for an idle machine"
    )
    parser.add_argument("--db", default="bench_passages_page")
    args = parser.parse_args()
    benchlib.exit_cleanly_on_sigterm()

    print(f"== passages page of {LIMIT}: HTTP and in-process against its own SQL query alone")
    benchlib.print_machine()
    failures: list[str] = []
    queue = indexing.run_queue()
    benchlib.log(f"generating {args.text_mb:g} MB of text")
    data = indexing.english_text(int(args.text_mb * indexing.MB))

    with benchlib.project(args.db) as proj:
        indexing.django_setup(proj)
        from django.core.wsgi import get_wsgi_application
        from django.db import connection
        from rest_framework.renderers import JSONRenderer

        from bots.models import Bot
        from files.indexing import IndexingOutcome, file_index
        from files.models import File
        from files.passage_json import EncodedJSONResponse
        from files.presenters import passage_json
        from files.selectors import file_get, passages_list, passages_page
        from platform_site.api.pagination import PageRequest

        try:
            # ---------------------------------------------- the file
            bot = Bot.objects.get(id=proj.demo["botId"])
            file = indexing.upload(
                bot=bot,
                key="bench/corpus.txt",
                data=data,
                content_type=indexing.TEXT_CONTENT_TYPE,
            )
            started = time.perf_counter()
            outcome = file_index(file_id=file.id, revision=file.revision)
            index_seconds = time.perf_counter() - started
            if outcome != IndexingOutcome.COMPLETED:
                raise RuntimeError(f"indexing failed: {outcome}")
            file = File.objects.get(id=file.id)
            with proj.connect(autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE) files_passage")
                conn.execute("CHECKPOINT")
                row = conn.execute(
                    "SELECT count(*), pg_size_pretty(pg_total_relation_size('files_passage'))"
                    " FROM files_passage WHERE file_id = %s",
                    (file.id,),
                ).fetchone()
            assert row is not None
            total = int(row[0])
            print(
                f"data: {len(data):,} bytes of text indexed in {index_seconds:.1f} s into"
                f" {total:,} passages of {file.id}; files_passage with indexes {row[1]}"
            )

            # ---------------------------------------------- walk every page
            tokens: list[str | None] = [None]
            seen_ids: set[str] = set()
            positions: list[int] = []
            differing: list[int] = []
            while True:
                request = PageRequest(size=LIMIT, token=tokens[-1])
                page = passages_page(bot=bot, id_or_key=file.id, page=request)
                passages = json.loads(page.passages)
                positions.extend(p["meta"]["position"] for p in passages)
                seen_ids.update(p["id"] for p in passages)
                reference = passages_list(file=file, page=request)
                if passages != [passage_json(p) for p in reference.items] or (
                    page.next_token != reference.next_token
                ):
                    differing.append(len(tokens))
                if page.next_token is None:
                    break
                tokens.append(page.next_token)
            pages = len(tokens)
            if positions != list(range(total)) or len(seen_ids) != total:
                failures.append(f"walking {pages} pages did not give positions 0..{total - 1}")
            if differing:
                failures.append(
                    f"{len(differing)} pages (first: {differing[0]}) differ from the model"
                    " instances' page through the presenter"
                )
            deep_number = args.page or (total // LIMIT if total % LIMIT else total // LIMIT - 1)
            deep_number = max(2, min(deep_number, pages))
            deep_token = tokens[deep_number - 1]
            print(
                f"pages: {pages} of {LIMIT}, walked with the real nextTokens; deep page:"
                f" {deep_number} (positions {(deep_number - 1) * LIMIT:,}..)"
            )

            # ---------------------------------------------- the statements
            app: Any = get_wsgi_application()
            auth = {
                "Authorization": f"Bearer {proj.demo['tokens']['developer']}",
                "x-bot-id": proj.demo["botId"],
            }
            route = f"/v1/files/{file.id}/passages"

            def query_of(token: str | None) -> str:
                query = f"limit={LIMIT}"
                if token is not None:
                    query += f"&nextToken={urllib.parse.quote(token, safe='')}"
                return query

            def wsgi(token: str | None) -> Callable[[], bytes]:
                query = query_of(token)

                def run() -> bytes:
                    status, body = benchlib.wsgi_call(app, "GET", route, query=query, headers=auth)
                    if status != 200:
                        raise RuntimeError(
                            f"in-process GET {route}?{query} -> {status}: {body[:200]!r}"
                        )
                    return body

                return run

            def statements_of(call: Callable[[], Any]) -> list[tuple[str, Any]]:
                captured: list[tuple[str, Any]] = []

                def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
                    captured.append((sql, params))
                    return execute(sql, params, many, context)

                with connection.execute_wrapper(capture):
                    call()
                return captured

            wsgi(None)()  # warm: the credential's last_used write is at most once a minute
            statements_1 = statements_of(wsgi(None))
            statements_deep = statements_of(wsgi(deep_token))
            passages_1 = [s for s in statements_1 if "files_passage" in s[0]]
            passages_deep = [s for s in statements_deep if "files_passage" in s[0]]
            if len(passages_1) != 1 or len(passages_deep) != 1:
                raise RuntimeError("could not find the one passages query of a request")
            # For reference: the query of the model instances (passages_list).
            rows_1 = statements_of(
                lambda: passages_list(file=file, page=PageRequest(size=LIMIT, token=None))
            )
            rows_deep = statements_of(
                lambda: passages_list(file=file, page=PageRequest(size=LIMIT, token=deep_token))
            )
            raw = connection.connection
            print(
                f"statements per request: {len(statements_1)} (page 1), {len(statements_deep)}"
                f" (deep page); Django's psycopg connection: cursor"
                f" {raw.cursor_factory.__name__ if raw else '?'},"
                f" prepare_threshold {raw.prepare_threshold if raw else '?'}"
            )
            for sql, params in statements_deep:
                flat = " ".join(sql.split())
                print(f"    {flat[:150]}{'...' if len(flat) > 150 else ''}")
                print(f"      params {params!r}"[:200])

            # ---------------------------------------------- correctness over WSGI
            body_1 = json.loads(wsgi(None)())
            body_deep = json.loads(wsgi(deep_token)())
            for body, token, label in ((body_1, None, "page 1"), (body_deep, deep_token, "deep")):
                reference = passages_list(file=file, page=PageRequest(size=LIMIT, token=token))
                expected = {
                    "passages": [passage_json(p) for p in reference.items],
                    "meta": reference.meta(),
                }
                if body != expected:
                    failures.append(f"the {label} response differs from the presenter's")
            first = (deep_number - 1) * LIMIT
            if [p["meta"]["position"] for p in body_1["passages"]] != list(range(LIMIT)):
                failures.append("page 1 is not positions 0..199")
            if [p["meta"]["position"] for p in body_deep["passages"]] != list(
                range(first, first + LIMIT)
            ):
                failures.append(f"page {deep_number} is not positions {first}..{first + LIMIT - 1}")
            size_1 = len(wsgi(None)())
            size_deep = len(wsgi(deep_token)())
            print(
                f"response bodies: page 1 {size_1:,} bytes, page {deep_number} {size_deep:,} bytes"
            )

            with (
                benchlib.gunicorn(proj, workers=args.workers, threads=args.threads) as server,
                proj.connect(autocommit=True, prepare_threshold=None) as sql_conn,
            ):
                for label, (sql, params) in (("page 1", passages_1[0]), ("deep", passages_deep[0])):
                    plan = sql_conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                    print(f"plan, {label}:")
                    for (line,) in plan.fetchall():
                        print(f"    {line}")

                client = Client(server.port, auth)

                def http(token: str | None) -> Callable[[], Any]:
                    target = f"{route}?{query_of(token)}"

                    def run() -> None:
                        status, body = client.get(target)
                        if status != 200:
                            raise RuntimeError(f"GET {target} -> {status}: {body[:200]!r}")

                    return run

                def sql_alone(statement: tuple[str, Any], rows: int) -> Callable[[], Any]:
                    sql, params = statement

                    def run() -> None:
                        if len(sql_conn.execute(sql, params).fetchall()) != rows:
                            raise RuntimeError(f"the passages query did not answer {rows} rows")

                    return run

                def sql_all(statements: list[tuple[str, Any]]) -> Callable[[], Any]:
                    def run() -> None:
                        for sql, params in statements:
                            cursor = sql_conn.execute(sql, params)
                            if cursor.description is not None:
                                cursor.fetchall()

                    return run

                levels: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
                    "HTTP (gunicorn, keep-alive)": (http(None), http(deep_token)),
                    "in-process WSGI (all of Django)": (wsgi(None), wsgi(deep_token)),
                    SQL_BASE: (
                        sql_alone(passages_1[0], 1),
                        sql_alone(passages_deep[0], 1),
                    ),
                    "SQL: all the request's statements": (
                        sql_all(statements_1),
                        sql_all(statements_deep),
                    ),
                    "SQL: rows alone, not encoded (ref.)": (
                        sql_alone(rows_1[-1], LIMIT + 1),
                        sql_alone(rows_deep[-1], LIMIT + 1),
                    ),
                }
                calls = [
                    (name, which, call)
                    for name, pair in levels.items()
                    for which, call in zip(("page 1", "deep"), pair, strict=True)
                ]
                times: dict[tuple[str, str], list[float]] = {(n, w): [] for n, w, _ in calls}
                for _ in range(20):
                    for _name, _which, call in calls:
                        call()
                benchlib.wait_for_quiet(max_wait=args.quiet_wait)
                benchlib.log(f"timing {args.samples} rounds of {len(calls)} calls")
                before = benchlib.cpu_snapshot({"gunicorn": server.pids()})
                for round_number in range(args.samples):
                    shift = round_number % len(calls)
                    for name, which, call in calls[shift:] + calls[:shift]:
                        started = time.perf_counter()
                        call()
                        times[(name, which)].append(time.perf_counter() - started)
                use = benchlib.cpu_use(before, benchlib.cpu_snapshot({"gunicorn": server.pids()}))
                client.conn.close()

            # ---------------------------------------------- where the time goes
            benchlib.log("in-process steps and cProfile")
            request = PageRequest(size=LIMIT, token=None)
            steps: dict[str, list[float]] = {
                name: []
                for name in (
                    "passages_page (one statement: file + page)",
                    "body bytes + EncodedJSONResponse",
                    "before: file_get (one query)",
                    "before: passages_list (201 model instances)",
                    "before: passage_json x 200 (presenter)",
                    "before: DRF JSONRenderer.render",
                )
            }
            renderer = JSONRenderer()
            for _ in range(args.samples):
                marks = [time.perf_counter()]
                encoded = passages_page(bot=bot, id_or_key=file.id, page=request)
                marks.append(time.perf_counter())
                EncodedJSONResponse(encoded.body())
                marks.append(time.perf_counter())
                found = file_get(bot=bot, id_or_key=file.id)
                marks.append(time.perf_counter())
                rows = passages_list(file=found, page=request)
                marks.append(time.perf_counter())
                body = {"passages": [passage_json(p) for p in rows.items], "meta": rows.meta()}
                marks.append(time.perf_counter())
                renderer.render(body)
                marks.append(time.perf_counter())
                for index, name in enumerate(steps):
                    steps[name].append(marks[index + 1] - marks[index])

            profiler = cProfile.Profile()
            call = wsgi(None)
            profiler.enable()
            for _ in range(args.profile_requests):
                call()
            profiler.disable()
        finally:
            connection.close()
            purged = indexing.drop_queue(queue)
            print(f"celery queue {queue}: {purged} enqueued indexing messages purged, deleted")

    # ---------------------------------------------- report
    print()
    print(use.report("the timed rounds", args.samples * len(calls), "call"))
    print()
    print(f"in-process steps of the view, page 1 ({args.samples} samples each):")
    for name, values in steps.items():
        print(summary(name, values))
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        # By cumulative time the first lines are the request's wrappers: show more.
        stats.strip_dirs().sort_stats(order).print_stats(
            args.top + (20 if order == "cumulative" else 0)
        )
        print(
            f"\n== cProfile (wall time), {args.profile_requests} in-process requests of page 1,"
            f" by {order}"
        )
        print(out.getvalue().split("\n", 4)[-1].rstrip())
    print()
    print(f"RESULT passages_page ({args.samples} samples each, interleaved; {total:,} passages)")
    verdicts: list[str] = []
    for which, label in (("page 1", "page 1"), ("deep", f"page {deep_number}")):
        base = times[(SQL_BASE, which)]
        print(f" {label}:")
        for name in levels:
            values = times[(name, which)]
            print(summary(name, values, None if name == SQL_BASE else base))
        for name in ("HTTP (gunicorn, keep-alive)", "in-process WSGI (all of Django)"):
            ratio = benchlib.percentile(times[(name, which)], 50) / benchlib.percentile(base, 50)
            verdict = "met" if ratio <= TARGET else "NOT met"
            verdicts.append(f"{label} {name.split(' ')[0]} {ratio:.2f}x {verdict}")
    print(f"  target page <= {TARGET:g}x its own query (p50): " + "; ".join(verdicts))
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(
        f"  correctness: {pages} pages walked, positions 0..{total - 1} once each, ids distinct;"
        f" page 1 and page {deep_number} hold their positions"
    )
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
