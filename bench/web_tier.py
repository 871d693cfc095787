"""The web tier as users run it: create event and chat create-message through
each way of serving the API, against raw psycopg inserts of the same row, all
in one run on PostgreSQL + Redis.

    .venv/bin/python bench/web_tier.py [--servers serve,django-asgi,gunicorn] [--duration 10]

Servers (each on the same fresh database bench_web_tier, Redis database 14 as
broker and live-stream bus):
- serve: platform_site/Procfile's `web:` line, exactly as `make run` starts it
  (python -m platform_site.serve: uvicorn, one process per core with Redis,
  views on platform_site.wsgi_bridge's threads, access log on);
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
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import chat_messages  # noqa: E402
import chat_stream  # noqa: E402
import create_event  # noqa: E402
from benchlib import log  # noqa: E402

DB = "bench_web_tier"
BEFORE_TREE = ""  # --before-tree
REDIS_URL = chat_stream.REDIS_URL
TARGETS = {"serve": 0.25, "production": 0.35, "message": 0.25, "p99_ms": 15.0}


@dataclass
class Measured:
    server: str
    request: str  # "event" or "message"
    wrk: dict[str, int]
    cpu: benchlib.CpuUse
    created: int  # rows stored during the phase

    @property
    def rate(self) -> float:
        return self.wrk["requests"] / (self.wrk["duration_us"] / 1e6)

    @property
    def server_ms_per_request(self) -> float:
        cores = self.cpu.cores.get(self.server, 0.0)
        return cores * self.cpu.wall / max(1, self.wrk["requests"]) * 1000


def cores() -> int:
    return len(os.sched_getaffinity(0))


@contextlib.contextmanager
def start(name: str, proj: benchlib.Project) -> Iterator[benchlib.AsgiServer | benchlib.Server]:
    if name == "serve" or name.startswith("serve:"):
        # serve:NAME=VALUE+...: the same with settings of its own (WEB_THREADS=4).
        env = dict(item.split("=", 1) for item in name[6:].split("+") if item)
        with benchlib.procfile_web(proj, workers=cores(), env=env) as served:
            yield served
    elif name == "django-asgi":
        with benchlib.uvicorn(
            proj,
            workers=cores(),
            app=(
                "--factory",
                "django.core.asgi:get_asgi_application",
                "--http",
                "platform_site.http_protocol:HttpToolsProtocol",
            ),
        ) as asgi:
            yield asgi
    elif name == "before":
        # `make run`'s web as it was before this design: uvicorn, one process,
        # Django's ASGI handler, from a checkout of that commit.
        if not BEFORE_TREE:
            raise SystemExit("--before-tree is needed for the `before` server")
        with benchlib.uvicorn(
            proj,
            app=(
                "platform_site.asgi:application",
                "--app-dir",
                BEFORE_TREE,
                "--http",
                "platform_site.http_protocol:HttpToolsProtocol",
            ),
            env={"PYTHONPATH": BEFORE_TREE},
            cwd=BEFORE_TREE,
        ) as before:
            yield before
    elif name == "gunicorn":
        with benchlib.gunicorn(proj, workers=4, threads=1, worker_connections=8) as wsgi:
            yield wsgi
    else:
        raise SystemExit(f"unknown server {name!r}")


def get_script(path: Path, demo: dict[str, Any]) -> None:
    """GET requests with the developer token; 200 counts as success."""
    lines = [
        'wrk.method = "GET"',
        f'wrk.headers["Authorization"] = {json.dumps("Bearer " + demo["tokens"]["developer"])}',
        f'wrk.headers["x-bot-id"] = {json.dumps(demo["botId"])}',
    ]
    path.write_text("\n".join(lines) + "\n" + create_event.WRK_LUA.replace("== 201", "== 200"))


def any_event(proj: benchlib.Project) -> str:
    with proj.connect(autocommit=True) as conn:
        row = conn.execute("SELECT id FROM events_event ORDER BY id DESC LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


def stored(proj: benchlib.Project) -> dict[str, int]:
    counts = chat_messages.stored(proj)
    return counts


def main() -> int:
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
    args = parser.parse_args()
    global BEFORE_TREE
    BEFORE_TREE = args.before_tree
    conns = args.connections
    benchlib.exit_cleanly_on_sigterm()
    wrk = benchlib.ensure_wrk()
    print("== web tier: create event and chat create-message against raw inserts, same run")
    benchlib.print_machine()
    failures: list[str] = []
    results: list[Measured] = []
    raws: list[float] = []
    half: create_event.OpenLoopResult | None = None
    half_rate = 0.0

    with (
        chat_stream.run_queue(),
        benchlib.project(DB, redis_url=REDIS_URL) as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
    ):
        proj.env["LIVE_STREAM_REDIS_URL"] = REDIS_URL
        demo = proj.demo
        events_lua, messages_lua = Path(tmp) / "events.lua", Path(tmp) / "messages.lua"
        get_lua = Path(tmp) / "get.lua"
        chat_messages.event_script(events_lua, demo)
        get_script(get_lua, demo)

        def raw() -> None:
            benchlib.wait_for_quiet(60)
            create_event.raw_inserts(proj, bot_id=demo["botId"], connections=conns, seconds=2)
            rows, wall = create_event.raw_inserts(
                proj, bot_id=demo["botId"], connections=conns, seconds=args.raw_duration
            )
            raws.append(rows / wall)
            log(f"raw inserts: {rows / wall:.0f} rows/s")

        raw()
        rooms: list[chat_stream.Room] = []
        for name in args.servers.split(","):
            with start(name, proj) as server:
                if not rooms:
                    log(f"making {args.senders} chat users, one conversation each")
                    rooms = asyncio.run(
                        chat_stream.make_rooms(
                            server.base_url, demo["webhookId"], rooms=args.senders, per_room=1
                        )
                    )
                    chat_messages.message_script(messages_lua, rooms)
                groups = {name: server.pids()}
                event_id = any_event(proj)
                for request, script, path, n in (
                    ("event", events_lua, "/v1/chat/events", conns),
                    ("message", messages_lua, f"/chat/{demo['webhookId']}/messages", conns // 2),
                    ("get", get_lua, f"/v1/chat/events/{event_id}", conns),
                    ("list", get_lua, "/v1/chat/events?pageSize=20", conns),
                ):
                    url = server.base_url + path
                    create_event.run_wrk(
                        wrk, url, script, connections=n, threads=1, seconds=args.warmup
                    )
                    benchlib.wait_for_quiet(60)
                    time.sleep(1)
                    before, cpu_before = stored(proj), benchlib.cpu_snapshot(groups)
                    log(f"{name}: {request}, wrk -c{n} {args.duration:g} s")
                    result = create_event.run_wrk(
                        wrk, url, script, connections=n, threads=1, seconds=args.duration
                    )
                    cpu = benchlib.cpu_use(cpu_before, benchlib.cpu_snapshot(groups))
                    time.sleep(1)
                    after = stored(proj)
                    key = {"event": "events", "message": "messages"}.get(request)
                    created = after[key] - before[key] if key else result["created"]
                    measured = Measured(name, request, result, cpu, created)
                    results.append(measured)
                    check(measured, n, before, after, failures)
                if name == "serve":  # the configuration as shipped
                    half_rate = (
                        next(m.rate for m in results if m.server == name and m.request == "event")
                        / 2
                    )
                    benchlib.wait_for_quiet(60)
                    log(f"{name}: open loop at {half_rate:.0f} req/s, {args.latency_duration:g} s")
                    port = int(server.base_url.rsplit(":", 1)[1])
                    half = create_event.open_loop(
                        "127.0.0.1",
                        port,
                        create_event.http_request(
                            port=port,
                            token=demo["tokens"]["developer"],
                            bot_id=demo["botId"],
                            body=json.dumps(
                                {
                                    "type": create_event.EVENT_TYPE,
                                    "payload": create_event.EVENT_PAYLOAD,
                                },
                                separators=(",", ":"),
                            ),
                        ),
                        rate=half_rate,
                        seconds=args.latency_duration,
                        connections=conns,
                    )
                    if set(half.statuses) != {201}:
                        failures.append(f"{name} open loop: statuses {dict(half.statuses)}")
        raw()
        unmatched = stored(proj)["unmatched"]
        if unmatched:
            failures.append(f"{unmatched} user messages without exactly one message_created event")

    report(results, raws, half, half_rate, conns)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


def check(
    measured: Measured,
    connections: int,
    before: dict[str, int],
    after: dict[str, int],
    failures: list[str],
) -> None:
    w = measured.wrk
    name = f"{measured.server} {measured.request}"
    if w["other"] or w["err_connect"] or w["err_read"] or w["err_write"] or w["err_timeout"]:
        failures.append(f"{name}: non-201 answers or socket errors: {w}")
    if measured.request in ("get", "list"):
        if after["events"] != before["events"] or after["messages"] != before["messages"]:
            failures.append(f"{name}: a read stored something: {before} -> {after}")
    elif not 0 <= measured.created - w["created"] <= connections:
        failures.append(f"{name}: {measured.created} stored but {w['created']} answered 201")
    messages = after["messages"] - before["messages"]
    if after["message_events"] - before["message_events"] != messages:
        failures.append(f"{name}: messages {messages} without one message_created event each")


def report(
    results: list[Measured],
    raws: list[float],
    half: create_event.OpenLoopResult | None,
    half_rate: float,
    conns: int,
) -> None:
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
        print("   " + m.cpu.report(m.server, w["requests"]).replace("\n", "\n   "))
    if half is not None:
        lat = sorted(half.latencies)
        print(
            f"serve, create event at half its peak ({half_rate:.0f} req/s scheduled, open loop, "
            f"{conns} connections): sent {half.sent}, p50 "
            f"{benchlib.percentile(lat, 50) * 1000:.2f} ms, p99 "
            f"{benchlib.percentile(lat, 99) * 1000:.2f} ms, p99.9 "
            f"{benchlib.percentile(lat, 99.9) * 1000:.2f} ms"
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
    sys.exit(main())
