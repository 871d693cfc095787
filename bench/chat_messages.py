"""Create-message throughput through the chat interface against create-event
throughput, measured in the same run on the same server.

    .venv/bin/python bench/chat_messages.py [--connections 16 --duration 10 --rounds 2 ...]

1. A fresh database bench_chat_messages, migrated and seeded; Redis database
   14 is the broker and the live stream's bus (creating a message publishes to
   its conversation's channel, listened to or not).
2. --senders chat users (default 64), each with a conversation of its own,
   made through the chat interface.
3. uvicorn (platform_site.asgi, one process: what `make run` serves), peak
   throughput with wrk (keep-alive, --connections), in --rounds rounds that
   alternate the order:
   - POST /chat/{webhookId}/messages, a text message; the Lua script rotates
     the sender (x-user-key) and its conversation on every request;
   - POST /v1/chat/events (the body of bench/create_event.py), the baseline;
   then once more create-message with every connection posting into one
   conversation (a group chat: each message updates the conversation's row).
4. gunicorn (platform_site.wsgi, 4 gthread workers x 1 thread, as in
   bench/create_event.py, BENCHMARKS.md section 1), the same two, alternated.

Checks (exit 1 when one fails): no answer other than 201 and no socket error;
stored messages and their message_created events (exactly one each), and
stored events, match the 201 answers (plus the requests in flight when wrk
stops, at most one per connection). Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, load, machine, servers  # noqa: E402
from harness.project import ROOT, Project, bus_project  # noqa: E402
from harness.report import background_warning, log, verdict  # noqa: E402

DB = "bench_chat_messages"
QUIET_WAIT = 60.0
SERVERS = ("uvicorn", "gunicorn")
REQUESTS = ("message", "event")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=16, help="wrk keep-alive connections")
    parser.add_argument("--duration", type=float, default=10, help="seconds of each phase")
    parser.add_argument("--warmup", type=float, default=4, help="seconds, each request")
    parser.add_argument("--rounds", type=int, default=2, help="message/event pairs per server")
    parser.add_argument("--senders", type=int, default=64, help="users, one conversation each")
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    return parser.parse_args()


@dataclass
class Phase:
    server: str
    label: str  # "message", "event", "message, one conversation"
    round: int
    wrk: dict[str, int]
    cpu: machine.CpuUse
    stored: dict[str, int]
    background: float
    db_connections: int

    @property
    def rate(self) -> float:
        return load.wrk_rate(self.wrk)


@dataclass
class Bench:
    """What every phase needs: the project, wrk, its scripts by request, the
    connections, and the failures found so far."""

    args: argparse.Namespace
    proj: Project
    wrk: str
    scripts: dict[str, Path]
    failures: list[str]

    def phase(
        self,
        server: str,
        label: str,
        round_: int,
        url: str,
        script: Path,
        seconds: float,
        pids: list[int],
    ) -> Phase:
        """wrk for `seconds` after a quiet machine, checked."""
        log(f"{server}: {label}, round {round_}: wrk {seconds:g} s")
        sampled: list[int] = []
        groups = {server: pids, "redis": machine.pids_named("redis-server")}
        run = load.counted(
            lambda: load.run_wrk(
                self.wrk,
                url,
                script,
                connections=self.args.connections,
                threads=1,
                seconds=seconds,
                midway=lambda: sampled.append(self.proj.database_connections()),
            ),
            count=lambda: api.stored(self.proj),
            groups=groups,
            quiet_wait=QUIET_WAIT,
            pause=0,
        )
        done = Phase(
            server=server,
            label=label,
            round=round_,
            wrk=run.result,
            cpu=run.cpu,
            stored=run.stored,
            background=run.background,
            db_connections=sampled[0] if sampled else -1,
        )
        check_phase(done, self.args.connections, self.failures)
        return done

    def rounds(self, server: str, base: str, pids: list[int]) -> list[Phase]:
        """A warm-up of each request, then --rounds rounds alternating the order."""
        webhook = self.proj.demo["webhookId"]
        urls = {"message": f"{base}/chat/{webhook}/messages", "event": f"{base}/v1/chat/events"}

        def phase(kind: str, round_: int, seconds: float) -> Phase:
            return self.phase(server, kind, round_, urls[kind], self.scripts[kind], seconds, pids)

        for kind in REQUESTS:
            phase(kind, 0, self.args.warmup)
        measured = []
        for round_ in range(1, self.args.rounds + 1):
            order = REQUESTS if round_ % 2 else REQUESTS[::-1]
            measured += [phase(kind, round_, self.args.duration) for kind in order]
        return measured


def check_phase(phase: Phase, connections: int, failures: list[str]) -> None:
    name = f"{phase.server} {phase.label} round {phase.round}"
    w = phase.wrk
    if load.wrk_failed(w):
        failures.append(f"{name}: non-201 answers or socket errors: {w}")
    if phase.label.startswith("message"):
        created = phase.stored["messages"]
        if phase.stored["message_events"] != created or phase.stored["events"]:
            failures.append(f"{name}: stored {phase.stored}")
    else:
        created = phase.stored["events"]
        if phase.stored["messages"] or phase.stored["message_events"]:
            failures.append(f"{name}: stored {phase.stored}")
    if not 0 <= created - w["created"] <= connections:
        failures.append(f"{name}: {created} stored but {w['created']} answered 201")


def on_uvicorn(bench: Bench, tmp: Path) -> list[Phase]:
    """uvicorn, one process, as `make run` serves it: the rounds, then every
    connection posting into one conversation."""
    args, webhook = bench.args, bench.proj.demo["webhookId"]
    with servers.uvicorn(bench.proj) as server:
        rooms = api.make_rooms_sync(server.base_url, webhook, rooms=args.senders, per_room=1)
        api.message_script(bench.scripts["message"], rooms)
        one = tmp / "one.lua"
        api.message_script(one, rooms[:1])
        print(
            f"uvicorn: one process (platform_site.asgi, --lifespan off, asyncio loop, h11, "
            f"no access log); wrk -t1 -c{args.connections}, {args.duration:g} s a phase, "
            f"{args.rounds} rounds alternating the order; {args.senders} senders, one "
            f"conversation each, rotated on every request"
        )
        phases = bench.rounds("uvicorn", server.base_url, server.pids())
        url = f"{server.base_url}/chat/{webhook}/messages"
        label = "message, one conversation"
        return phases + [bench.phase("uvicorn", label, 1, url, one, args.duration, server.pids())]


def on_gunicorn(bench: Bench) -> list[Phase]:
    """gunicorn as in create_event.py (BENCHMARKS.md section 1): the rounds."""
    workers = bench.args.gunicorn_workers
    worker_connections = servers.spread_connections(bench.args.connections, workers)
    with servers.gunicorn(
        bench.proj, workers=workers, threads=1, worker_connections=worker_connections
    ) as wsgi:
        print(
            f"gunicorn: {workers} gthread workers x 1 thread "
            f"(platform_site.wsgi), worker_connections {worker_connections}, no access log"
        )
        return bench.rounds("gunicorn", wsgi.base_url, wsgi.pids())


def print_phase(phase: Phase) -> None:
    w = phase.wrk
    print(
        f"{phase.server}, {phase.label}, round {phase.round} (background {phase.background:.2f} "
        f"cores): {w['requests']} requests in {w['duration_us'] / 1e6:.1f} s = "
        f"{phase.rate:.0f} req/s, {w['created']} x 201, stored {phase.stored}"
    )
    print(
        f"  closed-loop latency: {load.wrk_latency(w)}; PostgreSQL "
        f"connections of the database midway: {phase.db_connections}"
    )
    print(phase.cpu.report(f"{phase.server} {phase.label}", w["requests"]))


def total_rate(phases: list[Phase], server: str, label: str) -> float:
    """Requests over seconds, all rounds of one server and request together."""
    chosen = [p for p in phases if p.server == server and p.label == label]
    seconds = sum(p.wrk["duration_us"] for p in chosen) / 1e6
    return sum(p.wrk["requests"] for p in chosen) / seconds if seconds else float("nan")


def print_result(phases: list[Phase]) -> None:
    rates = {
        (name, label): total_rate(phases, name, label) for name in SERVERS for label in REQUESTS
    }
    hot_rate = next(p.rate for p in phases if p.label == "message, one conversation")

    def line(label: str, value: float, note: str = "") -> str:
        return f"  {label:40s} {value:8.0f} req/s{note}"

    def ratio(label: str, value: float) -> str:
        return f"  {label:40s} {value:8.2f}"

    def by_round(server: str, label: str) -> str:
        chosen = [p for p in phases if p.server == server and p.label == label]
        return "  (rounds: " + ", ".join(f"{p.rate:.0f}" for p in chosen) + ")"

    print()
    print("RESULT chat_messages")
    for name in SERVERS:
        message, event = rates[(name, "message")], rates[(name, "event")]
        print(line(f"{name}: create message (chat)", message, by_round(name, "message")))
        print(line(f"{name}: create event (runtime)", event, by_round(name, "event")))
        print(ratio(f"{name}: ratio message / event", message / event))
    print(line("uvicorn: create message, one conversation", hot_rate))
    print(ratio("one conversation / many", hot_rate / rates[("uvicorn", "message")]))
    for label, kind in (("create event", "event"), ("create message", "message")):
        value = rates[("uvicorn", kind)] / rates[("gunicorn", kind)]
        print(ratio(f"{label} uvicorn / gunicorn", value))
    background_warning(
        [
            f"{p.server} {p.label} round {p.round} {p.cpu.other:.2f}"
            for p in phases
            if p.cpu.other > machine.BACKGROUND_LIMIT
        ]
    )


def main() -> int:
    args = parse_args()
    wrk = load.start_wrk_bench(
        "== chat messages: create-message throughput against create-event, same server"
    )
    failures: list[str] = []
    with (
        bus_project(DB, queue="bench-chat") as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
    ):
        scripts = {
            "message": Path(tmp) / "messages.lua",
            "event": api.event_script(Path(tmp) / "events.lua", proj.demo),
        }
        bench = Bench(args, proj, wrk, scripts, failures)
        phases = on_uvicorn(bench, Path(tmp)) + on_gunicorn(bench)
        unmatched = api.stored(proj)["unmatched"]
        if unmatched:
            failures.append(f"{unmatched} user messages without exactly one message_created event")

    print()
    for done in phases:
        print_phase(done)
    print_result(phases)
    return verdict(
        failures,
        "  correctness: every answer 201; stored messages (each with exactly one message_created "
        "event) and events match the 201s, plus requests in flight at wrk's stop",
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
