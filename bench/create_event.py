"""Create event through the full HTTP stack against the raw insert rate.

    .venv/bin/python bench/create_event.py [--workers 4 --threads 1 --connections 16 ...]

1. A fresh database bench_events, migrated and seeded (developer token, bot).
2. gunicorn (platform_site.wsgi, gthread workers: keep-alive) on a free loopback
   port, each worker capped at twice its fair share of the client connections
   (--worker-connections): with gunicorn's default cap (1000) one worker can
   take all of them and, held to one core by the GIL, halve the peak.
3. Warm-up, then peak throughput of POST /v1/chat/events with wrk (Lua script:
   body and headers; keep-alive; N connections) for --duration seconds.
4. Latency at a fixed rate: an open-loop asyncio client that sends on a
   schedule over N keep-alive connections and measures each request from its
   *scheduled* send time (no coordinated omission); first at a low rate
   (--low-rate, 5 s: the cost of one request without queueing), then at half
   the peak rate.
5. The raw rate of inserting the same row (same columns and values as the
   service writes) with psycopg, N connections, autocommit, one INSERT per
   transaction, for --raw-duration seconds.
6. Events stored against 201 answers, then the ratio HTTP / raw.

Target (reported, never asserted): HTTP rate >= 35% of the raw rate, and p99
under 15 ms at half the peak rate. Exit status 1 only if a correctness check
fails (stored events do not match 201 answers, or requests failed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, cli, load, machine, servers  # noqa: E402
from harness.machine import Phase, measure  # noqa: E402
from harness.project import ROOT, Project, project  # noqa: E402
from harness.report import background_warning, log, percentile, verdict  # noqa: E402

TARGET_RATIO = 0.35
TARGET_P99_MS = 15.0
LOW_SECONDS = 5  # the low-load latency phase


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_gunicorn(parser, workers=4, threads=1, help=True)
    parser.add_argument("--connections", type=int, default=16, help="HTTP and raw connections")
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=5, help="seconds")
    parser.add_argument("--duration", type=float, default=15, help="peak phase, seconds")
    parser.add_argument("--latency-duration", type=float, default=15, help="seconds")
    parser.add_argument("--raw-duration", type=float, default=10, help="seconds")
    parser.add_argument(
        "--low-rate", type=float, default=20, help="req/s of the low-load latency phase (5 s)"
    )
    parser.add_argument(
        "--worker-connections",
        type=int,
        default=0,
        help="gunicorn's cap of connections per worker; 0 (default): twice connections / "
        "workers, which keeps one worker from taking most keep-alive connections; 1000 is "
        "gunicorn's own default (and the Procfile's)",
    )
    parser.add_argument(
        "--worker-class",
        choices=["gthread", "sync"],
        default="gthread",
        help="gthread keeps connections alive; sync closes each after one response",
    )
    cli.add_db(parser, "bench_events")
    args = parser.parse_args()
    args.worker_connections = args.worker_connections or servers.spread_connections(
        args.connections, args.workers
    )
    return args


@dataclass
class Http:
    """The HTTP phases: wrk's warm-up and peak, open-loop latency at a low
    rate and at half the peak, and the connections each worker held."""

    warm: Phase[dict[str, int]]
    peak: Phase[dict[str, int]]
    low: Phase[load.OpenLoopResult]
    half: Phase[load.OpenLoopResult]
    half_rate: float
    spread: dict[str, list[int]]

    @property
    def peak_rps(self) -> float:
        return load.wrk_rate(self.peak.result)


def http_phases(
    args: argparse.Namespace, proj: Project, server: servers.GunicornServer, script: Path, wrk: str
) -> Http:
    conns = args.connections
    token, bot_id = proj.demo["tokens"]["developer"], proj.demo["botId"]
    url = f"{server.base_url}/v1/chat/events"

    def count() -> int:
        return api.count_events(proj)

    groups = {"gunicorn": server.pids()}
    spread: dict[str, list[int]] = {}

    def record_spread(label: str) -> Callable[[], None]:
        def record() -> None:
            spread[label] = server.connections_by_worker()

        return record

    def closed_loop(seconds: float) -> Callable[[], dict[str, int]]:
        return lambda: load.run_wrk(
            wrk,
            url,
            script,
            connections=conns,
            threads=args.wrk_threads,
            seconds=seconds,
            midway=record_spread("peak"),
        )

    request = api.http_request(port=server.port, token=token, bot_id=bot_id, body=api.event_body())

    def open_loop(rate: float, seconds: float, label: str) -> Callable[[], load.OpenLoopResult]:
        return lambda: load.open_loop(
            "127.0.0.1",
            server.port,
            request,
            rate=rate,
            seconds=seconds,
            connections=conns,
            connected=record_spread(label),
        )

    log(f"warm-up: wrk {args.warmup:.0f} s")
    warm = measure("warm-up", closed_loop(args.warmup), count=count, attempts=1, settle=1)
    log(f"peak: wrk {args.duration:.0f} s")
    peak = measure("peak", closed_loop(args.duration), count=count, groups=groups, settle=1)
    log(f"latency at low load: open loop, {args.low_rate:.0f} req/s, {LOW_SECONDS} s")
    low = measure(
        "low-load latency",
        open_loop(args.low_rate, LOW_SECONDS, "low load"),
        count=count,
        groups=groups,
    )
    rate = load.wrk_rate(peak.result) / 2
    log(f"latency: open loop, {rate:.0f} req/s, {args.latency_duration:.0f} s")
    half = measure(
        "half-peak latency",
        open_loop(rate, args.latency_duration, "half-peak"),
        count=count,
        groups=groups,
    )
    return Http(warm, peak, low, half, rate, spread)


@dataclass
class Raw:
    warm: Phase[tuple[int, float]]
    run: Phase[tuple[int, float]]

    @property
    def rows(self) -> int:
        return self.run.result[0]

    @property
    def rate(self) -> float:
        rows, wall = self.run.result
        return rows / wall


def raw_phases(args: argparse.Namespace, proj: Project) -> Raw:
    """The raw insert rate, after a 2 s warm-up."""
    conns, bot_id = args.connections, proj.demo["botId"]
    log(f"raw inserts: {conns} connections, {args.raw_duration:.0f} s")

    def inserts(seconds: float) -> Callable[[], tuple[int, float]]:
        return lambda: api.raw_inserts(proj, bot_id=bot_id, connections=conns, seconds=seconds)

    def count() -> int:
        return api.count_events(proj)

    warm = measure("raw warm-up", inserts(2), count=count, attempts=1)
    return Raw(warm, measure("raw inserts", inserts(args.raw_duration), count=count))


def print_http(args: argparse.Namespace, http: Http) -> None:
    conns = args.connections
    w, pk, peak, half = http.warm.result, http.peak.result, http.peak, http.half
    latency, lat = half.result, half.result.latencies
    print()
    print(f"warm-up (wrk {args.warmup:.0f} s): {w['requests']} requests, {w['created']} x 201")
    print(
        f"peak (wrk -t{args.wrk_threads} -c{conns}, {pk['duration_us'] / 1e6:.1f} s, "
        f"attempt {peak.attempts}): {pk['requests']} requests = {http.peak_rps:.0f} req/s, "
        f"{pk['created']} x 201, {pk['other']} other, socket errors connect/read/write/timeout "
        f"{pk['err_connect']}/{pk['err_read']}/{pk['err_write']}/{pk['err_timeout']}"
    )
    print(f"  closed-loop latency at peak (wrk, {conns} connections): {load.wrk_latency(pk)}")
    print(peak.cpu.report("the peak phase", pk["requests"]))
    print(
        "client connections held by each gunicorn worker: "
        + "; ".join(f"{label} {counts}" for label, counts in http.spread.items())
    )
    print(
        f"half-peak latency (open loop, {http.half_rate:.0f} req/s scheduled, {conns} "
        f"connections, attempt {half.attempts}): sent {latency.sent} in {latency.wall:.1f} s = "
        f"{latency.sent / latency.wall:.0f} req/s, statuses {dict(latency.statuses)}, "
        f"reconnects {latency.reconnects}"
    )
    print(
        f"  from the scheduled send: p50 {ms(percentile(lat, 50))}, "
        f"p90 {ms(percentile(lat, 90))}, p99 {ms(percentile(lat, 99))}, "
        f"p99.9 {ms(percentile(lat, 99.9))}, max {ms(max(lat))}"
    )
    print(
        f"  service time (from the actual send): "
        f"p50 {ms(percentile(latency.service, 50))}, "
        f"p99 {ms(percentile(latency.service, 99))}"
    )
    print(half.cpu.report("the half-peak phase", latency.sent))
    quiet = http.low.result
    print(
        f"low-load latency (open loop, {args.low_rate:.0f} req/s, {LOW_SECONDS} s): "
        f"p50 {ms(percentile(quiet.latencies, 50))}, "
        f"p90 {ms(percentile(quiet.latencies, 90))}, "
        f"p99 {ms(percentile(quiet.latencies, 99))}, statuses {dict(quiet.statuses)}; "
        f"{http.low.cpu.per_request_ms('gunicorn', quiet.sent):.2f} ms "
        f"gunicorn CPU per request"
    )


def print_raw(args: argparse.Namespace, raw: Raw) -> None:
    rows, wall = raw.run.result
    print(
        f"raw inserts (psycopg, {args.connections} connections, autocommit, one INSERT per "
        f"transaction, attempt {raw.run.attempts}): {rows} rows in {wall:.1f} s = "
        f"{raw.rate:.0f} rows/s"
    )
    print(raw.run.cpu.report("the raw phase", rows, unit="row"))


def check_stored(
    args: argparse.Namespace, http: Http, raw: Raw, stored_start: int, stored_end: int
) -> list[str]:
    """The events stored in each phase against the 201 answers, printed and checked."""
    conns, pk, w = args.connections, http.peak.result, http.warm.result
    quiet, half = http.low.result, http.half.result
    ok = half.statuses.get(201, 0)
    in_flight = http.peak.stored - pk["created"]
    print("events stored against 201 answers:")
    print(f"  before the load: {stored_start}")
    print(f"  warm-up: stored {http.warm.stored}, 201s {w['created']}")
    print(
        f"  peak: stored {http.peak.stored}, 201s {pk['created']} (difference {in_flight}: "
        f"requests in flight when wrk stopped, at most {conns})"
    )
    print(f"  low load: stored {http.low.stored}, 201s {quiet.statuses.get(201, 0)}")
    print(f"  half-peak: stored {http.half.stored}, 201s {ok}")
    print(f"  raw: stored {raw.run.stored}, inserted {raw.rows} (+{raw.warm.result[0]} warm-up)")
    print(f"  events in the table at the end: {stored_end}")
    failures = []
    if load.wrk_failed(pk, ("err_connect", "err_read", "err_timeout")):
        failures.append("peak phase had non-201 answers or socket errors")
    if not 0 <= in_flight <= conns:
        failures.append(f"peak: {http.peak.stored} stored but {pk['created']} answered 201")
    if http.low.stored != quiet.statuses.get(201, 0) or quiet.statuses.get(201, 0) != quiet.sent:
        failures.append(f"low load: {http.low.stored} stored, {dict(quiet.statuses)} answered")
    if http.half.stored != ok:
        failures.append(f"half-peak: {http.half.stored} stored but {ok} answered 201")
    if ok != half.sent:
        failures.append(f"half-peak: {half.sent - ok} of {half.sent} requests not 201")
    if raw.run.stored != raw.rows:
        failures.append("raw: rows stored differ from rows inserted")
    return failures


def print_result(http: Http, raw: Raw, stored_http: int) -> None:
    lat = http.half.result.latencies
    p50, p99 = percentile(lat, 50) * 1000, percentile(lat, 99) * 1000
    ratio = http.peak_rps / raw.rate
    created = http.peak.result["created"] + http.half.result.statuses.get(201, 0)
    print()
    print("RESULT create_event")
    print(f"  HTTP create event      {http.peak_rps:10.0f} req/s")
    print(f"  raw psycopg INSERT     {raw.rate:10.0f} rows/s")
    print(
        f"  ratio HTTP / raw       {ratio:10.1%}    target >= {TARGET_RATIO:.0%}: "
        f"{'met' if ratio >= TARGET_RATIO else 'MISSED'}"
    )
    print(f"  p50 at half peak       {p50:10.2f} ms  ({http.half_rate:.0f} req/s)")
    print(
        f"  p99 at half peak       {p99:10.2f} ms  target < {TARGET_P99_MS:.0f} ms: "
        f"{'met' if p99 < TARGET_P99_MS else 'MISSED'}"
    )
    print(
        f"  events stored by HTTP  {stored_http:10d}    (all phases and attempts; "
        f"peak + half-peak: {http.peak.stored + http.half.stored} stored, {created} answered 201)"
    )
    background_warning(
        [
            f"{name} {phase.cpu.other:.2f}"
            for name, phase in (("peak", http.peak), ("half-peak", http.half), ("raw", raw.run))
            if phase.cpu.other > machine.BACKGROUND_LIMIT
        ]
    )


def main() -> int:
    args = parse_args()
    wrk = load.start_wrk_bench("== create event: full HTTP stack against raw psycopg inserts")
    body = api.event_body()
    with project(args.db) as proj, tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        script = api.event_script(Path(tmp) / "create_event.lua", proj.demo)
        stored_start = api.count_events(proj)
        with servers.gunicorn(
            proj,
            workers=args.workers,
            threads=args.threads,
            worker_connections=args.worker_connections,
            worker_class=args.worker_class,
        ) as server:
            print(
                f"server: gunicorn {args.worker_class}, {server.workers} workers x "
                f"{server.threads} threads, "
                f"worker_connections {args.worker_connections}, no access log; "
                f"clients: {args.connections} keep-alive connections"
            )
            print(f"request: POST /v1/chat/events, body {len(body)} bytes: {body}")
            http = http_phases(args, proj, server, script, wrk)
        stored_http = api.count_events(proj)
        raw = raw_phases(args, proj)
        stored_end = api.count_events(proj)

    print_http(args, http)
    print_raw(args, raw)
    failures = check_stored(args, http, raw, stored_start, stored_end)
    print_result(http, raw, stored_http - stored_start)
    return verdict(
        failures,
        "  correctness: stored events match 201 answers (peak: plus requests in flight at stop)",
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
