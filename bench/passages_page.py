"""A passages page of 200 of a file indexed from 50 MB of text: over HTTP and
in-process, against the time of its own SQL query alone, in the same run.

    .venv/bin/python bench/passages_page.py [--text-mb 50 --samples 300]

1. A fresh database bench_passages_page, migrated and seeded, a DATA_DIR of
   the run under /tmp. The 50 MB plain-text document of bench/indexing.py
   (same generator, same seed) is uploaded the real way and indexed with
   files.services.file_index.file_index in-process (about 70,000 passages); then VACUUM
   (ANALYZE) and a CHECKPOINT.
2. Every page is walked in-process with files.selectors.passages.passages_page (the
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
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine, report, servers  # noqa: E402
from harness.documents import (  # noqa: E402
    MB,
    TEXT_CONTENT_TYPE,
    drop_queue,
    english_text,
    indexing_queue,
    passages_vacuum,
    upload,
)
from harness.project import ROOT, Project, django_setup, project  # noqa: E402
from harness.report import verdict  # noqa: E402

LIMIT = 200
TARGET = 2.0
SQL_BASE = "SQL: the page's own query"
HTTP = "HTTP (gunicorn, keep-alive)"
WSGI = "in-process WSGI (all of Django)"
WHICH = ("page 1", "deep")
Statement = load.Statement


def summary(label: str, values: list[float], base: list[float] | None = None) -> str:
    p = report.percentile
    line = f"p50 {p(values, 50) * 1000:8.3f} ms  p90 {p(values, 90) * 1000:8.3f} ms"
    if base is not None:
        median = p(values, 50) / p(base, 50)
        line += f"  | / SQL: p50 {median:6.1f}x  p90 {p(values, 90) / p(base, 90):6.1f}x"
    return f"  {label:44s} {line}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-mb", type=float, default=50.0)
    parser.add_argument("--samples", type=int, default=300, help="rounds of timings")
    parser.add_argument("--page", type=int, default=0, help="deep page (default: last full)")
    cli.add_gunicorn(parser)
    parser.add_argument("--profile-requests", type=int, default=300)
    parser.add_argument("--top", type=int, default=25)
    cli.add_quiet_wait(parser)
    cli.add_db(parser, "bench_passages_page")
    return parser.parse_args()


def query_of(token: str | None) -> str:
    query = f"limit={LIMIT}"
    if token is not None:
        query += f"&nextToken={urllib.parse.quote(token, safe='')}"
    return query


@dataclass
class Bench:
    """The indexed file, its pages' tokens, and the request through Django."""

    args: argparse.Namespace
    proj: Project
    bot: Any
    file: Any = None
    total: int = 0
    pages: int = 0
    deep_number: int = 0
    deep_token: str | None = None
    app: Any = None
    failures: list[str] = field(default_factory=list)

    @property
    def route(self) -> str:
        return f"/v1/files/{self.file.id}/passages"

    def target(self, token: str | None) -> str:
        return f"{self.route}?{query_of(token)}"

    def tokens(self) -> tuple[str | None, str | None]:
        return None, self.deep_token

    def wsgi(self, token: str | None) -> Callable[[], bytes]:
        return load.wsgi_getter(self.app, self.target(token), api.demo_auth(self.proj.demo))

    def index(self, data: bytes) -> None:
        """The text indexed in-process, then VACUUM (ANALYZE)."""
        from files.models import File
        from files.services.file_index import IndexingOutcome, file_index

        file = upload(
            bot=self.bot, key="bench/corpus.txt", data=data, content_type=TEXT_CONTENT_TYPE
        )
        started = time.perf_counter()
        outcome = file_index(file_id=file.id, revision=file.revision)
        index_seconds = time.perf_counter() - started
        if outcome != IndexingOutcome.COMPLETED:
            raise RuntimeError(f"indexing failed: {outcome}")
        self.file = File.objects.get(id=file.id)
        passages_vacuum(self.proj, analyze=True)
        with self.proj.connect(autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*), pg_size_pretty(pg_total_relation_size('files_passage'))"
                " FROM files_passage WHERE file_id = %s",
                (file.id,),
            ).fetchone()
        assert row is not None
        self.total = int(row[0])
        print(
            f"data: {len(data):,} bytes of text indexed in {index_seconds:.1f} s into"
            f" {self.total:,} passages of {file.id}; files_passage with indexes {row[1]}"
        )

    def walk(self) -> None:
        """Every page with the real nextTokens, each against the ORM path's."""
        from files.presenters import passage_json
        from files.selectors.passages import passages_list, passages_page
        from platform_site.foundation.pagination import PageRequest

        tokens: list[str | None] = [None]
        seen_ids: set[str] = set()
        positions: list[int] = []
        differing: list[int] = []
        while True:
            request = PageRequest(size=LIMIT, token=tokens[-1])
            page = passages_page(bot=self.bot, id_or_key=self.file.id, page=request)
            passages = json.loads(page.passages)
            positions.extend(p["meta"]["position"] for p in passages)
            seen_ids.update(p["id"] for p in passages)
            reference = passages_list(file=self.file, page=request)
            if passages != [passage_json(p) for p in reference.items] or (
                page.next_token != reference.next_token
            ):
                differing.append(len(tokens))
            if page.next_token is None:
                break
            tokens.append(page.next_token)
        total, self.pages = self.total, len(tokens)
        if positions != list(range(total)) or len(seen_ids) != total:
            self.failures.append(
                f"walking {self.pages} pages did not give positions 0..{total - 1}"
            )
        if differing:
            self.failures.append(
                f"{len(differing)} pages (first: {differing[0]}) differ from the model"
                " instances' page through the presenter"
            )
        deep = self.args.page or (total // LIMIT if total % LIMIT else total // LIMIT - 1)
        self.deep_number = max(2, min(deep, self.pages))
        self.deep_token = tokens[self.deep_number - 1]
        print(
            f"pages: {self.pages} of {LIMIT}, walked with the real nextTokens; deep page:"
            f" {self.deep_number} (positions {(self.deep_number - 1) * LIMIT:,}..)"
        )

    def check_wsgi(self) -> None:
        """Page 1 and the deep page through WSGI against the presenter's."""
        from files.presenters import passage_json
        from files.selectors.passages import passages_list
        from platform_site.foundation.pagination import PageRequest

        bodies = [json.loads(self.wsgi(token)()) for token in self.tokens()]
        for body, token, label in zip(bodies, self.tokens(), WHICH, strict=True):
            reference = passages_list(file=self.file, page=PageRequest(size=LIMIT, token=token))
            expected = {
                "passages": [passage_json(p) for p in reference.items],
                "meta": reference.meta(),
            }
            if body != expected:
                self.failures.append(f"the {label} response differs from the presenter's")
        first = (self.deep_number - 1) * LIMIT
        if [p["meta"]["position"] for p in bodies[0]["passages"]] != list(range(LIMIT)):
            self.failures.append("page 1 is not positions 0..199")
        if [p["meta"]["position"] for p in bodies[1]["passages"]] != list(
            range(first, first + LIMIT)
        ):
            self.failures.append(
                f"page {self.deep_number} is not positions {first}..{first + LIMIT - 1}"
            )
        size_1, size_deep = (len(self.wsgi(token)()) for token in self.tokens())
        print(
            f"response bodies: page 1 {size_1:,} bytes, page {self.deep_number} {size_deep:,} bytes"
        )


@dataclass
class Statements:
    """What page 1 and the deep page send to PostgreSQL: every statement of a
    request, the page's own one, and the ORM path's rows query (reference)."""

    request: tuple[list[Statement], list[Statement]]
    page: tuple[Statement, Statement]
    rows: tuple[Statement, Statement]


def capture_statements(bench: Bench) -> Statements:
    from django.db import connection

    from files.selectors.passages import passages_list
    from platform_site.foundation.pagination import PageRequest

    bench.wsgi(None)()  # warm: the credential's last_used write is at most once a minute
    request = tuple(load.django_statements(bench.wsgi(token)) for token in bench.tokens())
    own = [[s for s in statements if "files_passage" in s[0]] for statements in request]
    if any(len(found) != 1 for found in own):
        raise RuntimeError("could not find the one passages query of a request")

    # For reference: the query of the model instances (passages_list).
    def rows_of(token: str | None) -> Statement:
        page = PageRequest(size=LIMIT, token=token)
        return load.django_statements(lambda: passages_list(file=bench.file, page=page))[-1]

    rows = [rows_of(token) for token in bench.tokens()]
    raw = connection.connection
    print(
        f"statements per request: {len(request[0])} (page 1), {len(request[1])}"
        f" (deep page); Django's psycopg connection: cursor"
        f" {raw.cursor_factory.__name__ if raw else '?'},"
        f" prepare_threshold {raw.prepare_threshold if raw else '?'}"
    )
    for sql, params in request[1]:
        flat = " ".join(sql.split())
        print(f"    {flat[:150]}{'...' if len(flat) > 150 else ''}")
        print(f"      params {params!r}"[:200])
    return Statements((request[0], request[1]), (own[0][0], own[1][0]), (rows[0], rows[1]))


Levels = dict[str, tuple[Callable[[], Any], Callable[[], Any]]]
Times = dict[tuple[str, str], list[float]]


def timed_rounds(
    levels: Levels, samples: int, quiet_wait: float, pids: list[int]
) -> tuple[Times, machine.CpuUse]:
    """Every level's two calls, in rotated rounds, with the server's CPU."""
    calls = {
        (name, which): call
        for name, pair in levels.items()
        for which, call in zip(WHICH, pair, strict=True)
    }
    return load.timed_rounds(calls, samples, quiet_wait=quiet_wait, groups={"gunicorn": pids})


def time_levels(bench: Bench, statements: Statements) -> tuple[Levels, Times, machine.CpuUse]:
    """The plans, then every level timed: HTTP, WSGI, the page's statement,
    all the request's statements, the rows alone."""
    args, proj = bench.args, bench.proj
    with (
        servers.gunicorn(proj, workers=args.workers, threads=args.threads) as server,
        proj.connect(autocommit=True, prepare_threshold=None) as sql_conn,
    ):
        for label, (sql, params) in zip(WHICH, statements.page, strict=True):
            plan = sql_conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            print(f"plan, {label}:")
            for (line,) in plan.fetchall():
                print(f"    {line}")
        client = load.KeepAliveClient(server.port, api.demo_auth(proj.demo))
        tokens = bench.tokens()
        levels: Levels = {
            HTTP: (
                load.http_getter(client, bench.target(tokens[0])),
                load.http_getter(client, bench.target(tokens[1])),
            ),
            WSGI: (bench.wsgi(tokens[0]), bench.wsgi(tokens[1])),
            SQL_BASE: (
                load.sql_call(sql_conn, statements.page[0], 1),
                load.sql_call(sql_conn, statements.page[1], 1),
            ),
            "SQL: all the request's statements": (
                load.sql_calls(sql_conn, statements.request[0]),
                load.sql_calls(sql_conn, statements.request[1]),
            ),
            "SQL: rows alone, not encoded (ref.)": (
                load.sql_call(sql_conn, statements.rows[0], LIMIT + 1),
                load.sql_call(sql_conn, statements.rows[1], LIMIT + 1),
            ),
        }
        times, use = timed_rounds(levels, args.samples, args.quiet_wait, server.pids())
        client.conn.close()
    return levels, times, use


STEPS = (
    "passages_page (one statement: file + page)",
    "body bytes + EncodedJSONResponse",
    "before: file_get (one query)",
    "before: passages_list (201 model instances)",
    "before: passage_json x 200 (presenter)",
    "before: DRF JSONRenderer.render",
)


def view_steps(bench: Bench) -> dict[str, list[float]]:
    """The view's steps (and the design's before), page 1, timed one by one."""
    from rest_framework.renderers import JSONRenderer

    from files.presenters import passage_json, passages_page_body
    from files.selectors.files import file_get
    from files.selectors.passages import passages_list, passages_page
    from files.views import EncodedJSONResponse
    from platform_site.foundation.pagination import PageRequest

    report.log("in-process steps and cProfile")
    request = PageRequest(size=LIMIT, token=None)
    steps: dict[str, list[float]] = {name: [] for name in STEPS}
    renderer = JSONRenderer()
    for _ in range(bench.args.samples):
        marks = [time.perf_counter()]
        encoded = passages_page(bot=bench.bot, id_or_key=bench.file.id, page=request)
        marks.append(time.perf_counter())
        EncodedJSONResponse(
            passages_page_body(passages=encoded.passages, next_token=encoded.next_token)
        )
        marks.append(time.perf_counter())
        found = file_get(bot=bench.bot, id_or_key=bench.file.id)
        marks.append(time.perf_counter())
        rows = passages_list(file=found, page=request)
        marks.append(time.perf_counter())
        body = {"passages": [passage_json(p) for p in rows.items], "meta": rows.meta()}
        marks.append(time.perf_counter())
        renderer.render(body)
        marks.append(time.perf_counter())
        for index, name in enumerate(steps):
            steps[name].append(marks[index + 1] - marks[index])
    return steps


def print_profile(profiler: cProfile.Profile, args: argparse.Namespace) -> None:
    for order in ("cumulative", "tottime"):
        # By cumulative time the first lines are the request's wrappers: show more.
        top = args.top + (20 if order == "cumulative" else 0)
        print(
            f"\n== cProfile (wall time), {args.profile_requests} in-process requests of page 1,"
            f" by {order}"
        )
        print(report.profile_text(profiler, order, top).rstrip())


def print_result(bench: Bench, levels: Levels, times: Times) -> None:
    args = bench.args
    print()
    print(
        f"RESULT passages_page ({args.samples} samples each, interleaved; {bench.total:,} passages)"
    )
    verdicts: list[str] = []
    for which, label in zip(WHICH, ("page 1", f"page {bench.deep_number}"), strict=True):
        base = times[(SQL_BASE, which)]
        print(f" {label}:")
        for name in levels:
            values = times[(name, which)]
            print(summary(name, values, None if name == SQL_BASE else base))
        for name in (HTTP, WSGI):
            ratio = report.percentile(times[(name, which)], 50) / report.percentile(base, 50)
            met = "met" if ratio <= TARGET else "NOT met"
            verdicts.append(f"{label} {name.split(' ')[0]} {ratio:.2f}x {met}")
    print(f"  target page <= {TARGET:g}x its own query (p50): " + "; ".join(verdicts))


def main() -> int:
    args = parse_args()
    machine.start(
        f"== passages page of {LIMIT}: HTTP and in-process against its own SQL query alone"
    )
    queue = indexing_queue()
    report.log(f"generating {args.text_mb:g} MB of text")
    data = english_text(int(args.text_mb * MB))
    with project(args.db) as proj:
        django_setup(proj)
        from django.core.wsgi import get_wsgi_application
        from django.db import connection

        from bots.models import Bot

        try:
            bench = Bench(args, proj, Bot.objects.get(id=proj.demo["botId"]))
            bench.index(data)
            bench.walk()
            bench.app = get_wsgi_application()
            statements = capture_statements(bench)
            bench.check_wsgi()
            levels, times, use = time_levels(bench, statements)
            steps = view_steps(bench)
            profiler = report.profiled(bench.wsgi(None), args.profile_requests)
        finally:
            connection.close()
            purged = drop_queue(queue)
            print(f"celery queue {queue}: {purged} enqueued indexing messages purged, deleted")

    print()
    print(use.report("the timed rounds", args.samples * 2 * len(levels), "call"))
    print()
    print(f"in-process steps of the view, page 1 ({args.samples} samples each):")
    for name, values in steps.items():
        print(summary(name, values))
    print_profile(profiler, args)
    print_result(bench, levels, times)
    return verdict(
        bench.failures,
        f"  correctness: {bench.pages} pages walked, positions 0..{bench.total - 1} once each, "
        f"ids distinct; page 1 and page {bench.deep_number} hold their positions",
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
