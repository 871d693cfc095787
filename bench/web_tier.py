"""The web tier as users run it: create event and chat create-message through
each way of serving the API, against raw psycopg inserts of the same row, all
in one run on PostgreSQL + Redis.

    .venv/bin/python bench/web_tier.py [--servers serve,django-asgi,gunicorn] [--duration 10]

Servers (each on the same fresh database bench_web_tier, Redis database 14 as
broker and live-stream bus):
- serve: platform_site/Procfile's `web:` line, exactly as `make run` starts it
  (python -m platform_site.serve: uvicorn, one process per core with Redis,
  views on platform_site.server.wsgi_bridge's threads, access log on);
  `serve:WEB_THREADS=4+WEB_ACCESS_LOG=0` the same with those settings;
- django-asgi: uvicorn with the same processes and protocol, serving Django's
  own ASGI handler (what `make run` served before), no access log;
- gunicorn: platform_site.wsgi, 4 gthread workers x 1 thread, no access log
  (BENCHMARKS.md section 1's configuration).

For each: wrk warm-up, then create event (POST /v1/chat/events, --connections
keep-alive connections) and chat create-message (POST /chat/{id}/messages,
half as many connections, the sender rotated over --senders users), each
--duration seconds, with the server's CPU per request. For `serve`, the p99 of
create event at half its peak rate (open loop, from the scheduled send time).
Raw inserts (--connections connections, autocommit) run before and after the
servers; ratios are against their mean.

Reads too: GET /v1/chat/events/{id} and GET /v1/chat/events?pageSize=20
(`get`, `list`). With --before-tree (a checkout of an earlier commit, made
with `git worktree add`), `before` serves it as `make run` then did: one
uvicorn process, Django's ASGI handler.

Checks (exit 1 when one fails): every answer 201 (200 for reads), no socket
error; stored events and messages (each with exactly one message_created
event) match the 201 answers, plus at most one request in flight per
connection when wrk stops; reads store nothing. Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, load, machine, servers  # noqa: E402
from harness.project import ROOT, bus_project  # noqa: E402
from harness.report import indent, log, percentile  # noqa: E402

DB = "bench_web_tier"
QUIET_WAIT = 60.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", default="serve,django-asgi,gunicorn")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=10, help="seconds of each phase")
    parser.add_argument("--warmup", type=float, default=3, help="seconds, each request")
    parser.add_argument("--raw-duration", type=float, default=10)
    parser.add_argument("--latency-duration", type=float, default=10)
    parser.add_argument("--senders", type=int, default=64)
    parser.add_argument(
        "--before-tree",
        default="",
        help="a checkout of an earlier commit, served as `before` (uvicorn, one process, "
        "Django's ASGI handler: `make run` then), e.g. made by `git worktree add`",
    )
    return parser.parse_args()


@dataclass
class Bench(api.WrkRun):
    results: list[api.Measured] = field(default_factory=list)
    raws: list[float] = field(default_factory=list)
    half: load.OpenLoopResult | None = None
    half_rate: float = 0.0

    def raw(self) -> None:
        """Raw inserts: a 2 s warm-up, then --raw-duration seconds."""
        machine.wait_for_quiet(QUIET_WAIT)
        bot, conns = self.proj.demo["botId"], self.args.connections
        api.raw_inserts(self.proj, bot_id=bot, connections=conns, seconds=2)
        rows, wall = api.raw_inserts(
            self.proj, bot_id=bot, connections=conns, seconds=self.args.raw_duration
        )
        self.raws.append(rows / wall)
        log(f"raw inserts: {rows / wall:.0f} rows/s")

    def scripts(self, server: servers.WebServer) -> list[tuple[str, Path, str, int]]:
        """(request, wrk script, path, connections) of each request measured;
        the chat users are made through the first server."""
        demo, conns, tmp = self.proj.demo, self.args.connections, self.tmp
        messages = tmp / "messages.lua"
        if not messages.exists():
            rooms = api.make_rooms_sync(
                server.base_url, demo["webhookId"], rooms=self.args.senders, per_room=1
            )
            api.message_script(messages, rooms)
        get = load.get_script(tmp / "get.lua", headers=api.demo_auth(demo))
        event_id = self.proj.scalar("SELECT id FROM events_event ORDER BY id DESC LIMIT 1")
        return [
            ("event", api.event_script(tmp / "events.lua", demo), "/v1/chat/events", conns),
            ("message", messages, f"/chat/{demo['webhookId']}/messages", conns // 2),
            ("get", get, f"/v1/chat/events/{event_id}", conns),
            ("list", get, "/v1/chat/events?pageSize=20", conns),
        ]

    def server(self, name: str) -> None:
        """Every request through one way of serving the API."""
        args = self.args
        with servers.web_server(name, self.proj, before_tree=args.before_tree) as server:
            groups = {name: server.pids()}
            for request, script, path, n in self.scripts(server):
                self.request(name, groups, request, script, server.base_url + path, n)
            if name == "serve":  # the configuration as shipped
                self.half_peak(name, server)

    def request(
        self, name: str, groups: dict[str, list[int]], request: str, script: Path, url: str, n: int
    ) -> None:
        """A wrk warm-up, then --duration seconds over `n` connections, checked."""
        args = self.args
        load.run_wrk(self.wrk, url, script, connections=n, threads=1, seconds=args.warmup)

        def measured_run() -> dict[str, int]:
            log(f"{name}: {request}, wrk -c{n} {args.duration:g} s")
            return load.run_wrk(
                self.wrk, url, script, connections=n, threads=1, seconds=args.duration
            )

        run = load.counted(
            measured_run, count=lambda: api.stored(self.proj), groups=groups, quiet_wait=QUIET_WAIT
        )
        key = {"event": "events", "message": "messages"}.get(request)
        created = run.stored[key] if key else run.result["created"]
        measured = api.Measured(name, request, run.result, run.cpu, created)
        self.results.append(measured)
        api.check_measured(measured, n, run.before, run.after, self.failures)

    def half_peak(self, name: str, server: servers.WebServer) -> None:
        """Create event at half its peak rate, open loop."""
        peak = next(m.rate for m in self.results if m.server == name and m.request == "event")
        self.half_rate = peak / 2
        machine.wait_for_quiet(QUIET_WAIT)
        log(f"{name}: open loop at {self.half_rate:.0f} req/s, {self.args.latency_duration:g} s")
        demo = self.proj.demo
        request = api.http_request(
            port=server.port,
            token=demo["tokens"]["developer"],
            bot_id=demo["botId"],
            body=api.event_body(),
        )
        self.half = load.open_loop(
            "127.0.0.1",
            server.port,
            request,
            rate=self.half_rate,
            seconds=self.args.latency_duration,
            connections=self.args.connections,
        )
        if set(self.half.statuses) != {201}:
            self.failures.append(f"{name} open loop: statuses {dict(self.half.statuses)}")


def main() -> int:
    args = parse_args()
    wrk = load.start_wrk_bench(
        "== web tier: create event and chat create-message against raw inserts, same run"
    )
    with (
        bus_project(DB, queue="bench-chat") as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
    ):
        bench = Bench(args, proj, wrk, Path(tmp))
        bench.raw()
        for name in args.servers.split(","):
            bench.server(name)
        bench.raw()
        unmatched = api.stored(proj)["unmatched"]
        if unmatched:
            bench.failures.append(
                f"{unmatched} user messages without exactly one message_created event"
            )

    report(bench)
    for failure in bench.failures:
        print(f"FAILED: {failure}")
    return 1 if bench.failures else 0


def report(bench: Bench) -> None:
    results, raws, half, conns = bench.results, bench.raws, bench.half, bench.args.connections
    raw = sum(raws) / len(raws)
    print()
    print(
        f"raw psycopg INSERT ({conns} connections): "
        + ", ".join(f"{r:.0f}" for r in raws)
        + f" rows/s (mean {raw:.0f})"
    )
    for m in results:
        w = m.wrk
        print(
            f"{m.server:12s} {m.request:8s} {m.rate:7.0f} req/s  ÷ raw {m.rate / raw:6.3f}  "
            f"p50 {w['p50_us'] / 1000:6.2f} ms  p99 {w['p99_us'] / 1000:6.2f} ms  "
            f"server CPU {m.server_ms_per_request:5.2f} ms/request  answered 2xx {w['created']}, "
            f"stored or read {m.created}"
        )
        print(indent(m.cpu.report(m.server, w["requests"])))
    if half is not None:
        lat = sorted(half.latencies)
        print(
            f"serve, create event at half its peak ({bench.half_rate:.0f} req/s scheduled, open "
            f"loop, {conns} connections): sent {half.sent}, p50 "
            f"{percentile(lat, 50) * 1000:.2f} ms, p99 "
            f"{percentile(lat, 99) * 1000:.2f} ms, p99.9 "
            f"{percentile(lat, 99.9) * 1000:.2f} ms"
        )
    print()
    print("RESULT web_tier")
    for m in results:
        print(
            f"  {m.server:12s} {m.request:8s} ÷ raw insert {m.rate / raw:6.3f}  "
            f"({m.rate:.0f} req/s, {m.server_ms_per_request:.2f} ms server CPU per request)"
        )
    by = {(m.server, m.request): m for m in results}
    for server in {m.server for m in results}:
        if (server, "event") in by and ("django-asgi", "event") in by and server != "django-asgi":
            ratio = (
                by[("django-asgi", "event")].server_ms_per_request
                / by[(server, "event")].server_ms_per_request
            )
            print(f"  server CPU per create event, django-asgi ÷ {server}: {ratio:.2f}x")


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
