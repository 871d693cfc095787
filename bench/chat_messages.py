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
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import chat_stream  # noqa: E402
import create_event  # noqa: E402
from benchlib import log  # noqa: E402

REDIS_URL = chat_stream.REDIS_URL
DB = "bench_chat_messages"
QUIET_WAIT = 60.0
BACKGROUND_LIMIT = 0.3

MESSAGE_LUA_HEAD = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local senders = {{
{senders}
}}
local sent = 0
request = function()
  sent = sent + 1
  local sender = senders[(sent % #senders) + 1]
  wrk.headers["x-user-key"] = sender[1]
  return wrk.format(nil, nil, nil, sender[2])
end
"""


def message_script(path: Path, rooms: list[chat_stream.Room]) -> None:
    """A wrk script that sends each request as the next sender, into its conversation."""
    senders = []
    for room in rooms:
        body = json.dumps(
            {"payload": {"type": "text", "text": "hello"}, "conversationId": room.conversation_id},
            separators=(",", ":"),
        )
        senders.append(f"  {{{json.dumps(room.members[0].key)}, {json.dumps(body)}}},")
    path.write_text(
        MESSAGE_LUA_HEAD.format(senders="\n".join(senders)) + create_event.WRK_LUA,
    )


def event_script(path: Path, demo: dict[str, Any]) -> None:
    body = json.dumps(
        {"type": create_event.EVENT_TYPE, "payload": create_event.EVENT_PAYLOAD},
        separators=(",", ":"),
    )
    create_event.wrk_script(
        path, token=demo["tokens"]["developer"], bot_id=demo["botId"], body=body
    )


def stored(proj: benchlib.Project) -> dict[str, int]:
    with proj.connect(autocommit=True) as conn:
        row = conn.execute(
            """
            SELECT
              (SELECT count(*) FROM bots_message WHERE NOT is_bot),
              (SELECT count(*) FROM events_event WHERE type = 'message_created'),
              (SELECT count(*) FROM events_event WHERE type = %s),
              (SELECT count(*) FROM bots_message m WHERE NOT m.is_bot AND (
                 SELECT count(*) FROM events_event e
                 WHERE e.message_id = m.id AND e.type = 'message_created') <> 1)
            """,
            (create_event.EVENT_TYPE,),
        ).fetchone()
    assert row is not None
    return {"messages": row[0], "message_events": row[1], "events": row[2], "unmatched": row[3]}


@dataclass
class Phase:
    server: str
    label: str  # "message", "event", "message, one conversation"
    round: int
    wrk: dict[str, int]
    cpu: benchlib.CpuUse
    stored: dict[str, int]
    background: float
    db_connections: int

    @property
    def rate(self) -> float:
        return self.wrk["requests"] / (self.wrk["duration_us"] / 1e6)


def run_phase(
    *,
    server: str,
    label: str,
    round_: int,
    wrk: str,
    url: str,
    script: Path,
    proj: benchlib.Project,
    groups: dict[str, list[int]],
    connections: int,
    seconds: float,
) -> Phase:
    background = benchlib.wait_for_quiet(QUIET_WAIT)
    sampled: list[int] = []
    before = stored(proj)
    cpu_before = benchlib.cpu_snapshot(groups)
    result = create_event.run_wrk(
        wrk,
        url,
        script,
        connections=connections,
        threads=1,
        seconds=seconds,
        midway=lambda: sampled.append(chat_stream.database_connections(proj)),
    )
    cpu = benchlib.cpu_use(cpu_before, benchlib.cpu_snapshot(groups))
    time.sleep(1)  # requests in flight when wrk stopped
    after = stored(proj)
    return Phase(
        server=server,
        label=label,
        round=round_,
        wrk=result,
        cpu=cpu,
        stored={name: after[name] - before[name] for name in after},
        background=background,
        db_connections=sampled[0] if sampled else -1,
    )


def check_phase(phase: Phase, connections: int, failures: list[str]) -> None:
    name = f"{phase.server} {phase.label} round {phase.round}"
    w = phase.wrk
    if w["other"] or w["err_connect"] or w["err_read"] or w["err_write"] or w["err_timeout"]:
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


def print_phase(phase: Phase) -> None:
    w = phase.wrk
    print(
        f"{phase.server}, {phase.label}, round {phase.round} (background {phase.background:.2f} "
        f"cores): {w['requests']} requests in {w['duration_us'] / 1e6:.1f} s = "
        f"{phase.rate:.0f} req/s, {w['created']} x 201, stored {phase.stored}"
    )
    print(
        f"  closed-loop latency: p50 {w['p50_us'] / 1000:.2f} ms, p90 {w['p90_us'] / 1000:.2f} "
        f"ms, p99 {w['p99_us'] / 1000:.2f} ms, max {w['max_us'] / 1000:.2f} ms; PostgreSQL "
        f"connections of the database midway: {phase.db_connections}"
    )
    print(phase.cpu.report(f"{phase.server} {phase.label}", w["requests"]))


def total_rate(phases: list[Phase], server: str, label: str) -> float:
    """Requests over seconds, all rounds of one server and request together."""
    chosen = [p for p in phases if p.server == server and p.label == label]
    seconds = sum(p.wrk["duration_us"] for p in chosen) / 1e6
    return sum(p.wrk["requests"] for p in chosen) / seconds if seconds else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=16, help="wrk keep-alive connections")
    parser.add_argument("--duration", type=float, default=10, help="seconds of each phase")
    parser.add_argument("--warmup", type=float, default=4, help="seconds, each request")
    parser.add_argument("--rounds", type=int, default=2, help="message/event pairs per server")
    parser.add_argument("--senders", type=int, default=64, help="users, one conversation each")
    parser.add_argument("--gunicorn-workers", type=int, default=4)
    args = parser.parse_args()
    conns = args.connections

    benchlib.exit_cleanly_on_sigterm()
    wrk = benchlib.ensure_wrk()
    print("== chat messages: create-message throughput against create-event, same server")
    benchlib.print_machine()
    failures: list[str] = []
    phases: list[Phase] = []
    # The bus on the run's Redis database, for gunicorn too (it publishes).
    server_env = {"LIVE_STREAM_REDIS_URL": REDIS_URL}

    with (
        chat_stream.run_queue(),
        benchlib.project(DB, redis_url=REDIS_URL) as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
    ):
        proj.env.update(server_env)
        webhook = proj.demo["webhookId"]
        messages_lua, one_lua, events_lua = (
            Path(tmp) / "messages.lua",
            Path(tmp) / "one.lua",
            Path(tmp) / "events.lua",
        )
        event_script(events_lua, proj.demo)

        def measure_server(name: str, base: str, pids: list[int], rounds: int) -> None:
            groups = {name: pids, "redis": chat_stream.pids_named("redis-server")}
            urls = {"message": f"{base}/chat/{webhook}/messages", "event": f"{base}/v1/chat/events"}
            scripts = {"message": messages_lua, "event": events_lua}

            def phase(kind: str, round_: int, seconds: float) -> Phase:
                log(f"{name}: {kind}, round {round_}: wrk {seconds:g} s")
                return run_phase(
                    server=name,
                    label=kind,
                    round_=round_,
                    wrk=wrk,
                    url=urls[kind],
                    script=scripts[kind],
                    proj=proj,
                    groups=groups,
                    connections=conns,
                    seconds=seconds,
                )

            for kind in ("message", "event"):
                check_phase(phase(kind, 0, args.warmup), conns, failures)
            for round_ in range(1, rounds + 1):
                order = ("message", "event") if round_ % 2 else ("event", "message")
                for kind in order:
                    done = phase(kind, round_, args.duration)
                    check_phase(done, conns, failures)
                    phases.append(done)

        with benchlib.uvicorn(proj) as server:
            log(f"making {args.senders} users, each with a conversation")
            rooms = asyncio.run(
                chat_stream.make_rooms(server.base_url, webhook, rooms=args.senders, per_room=1)
            )
            message_script(messages_lua, rooms)
            message_script(one_lua, rooms[:1])
            print(
                f"uvicorn: one process (platform_site.asgi, --lifespan off, asyncio loop, h11, "
                f"no access log); wrk -t1 -c{conns}, {args.duration:g} s a phase, "
                f"{args.rounds} rounds alternating the order; {args.senders} senders, one "
                f"conversation each, rotated on every request"
            )
            measure_server("uvicorn", server.base_url, server.pids(), args.rounds)
            hot = run_phase(
                server="uvicorn",
                label="message, one conversation",
                round_=1,
                wrk=wrk,
                url=f"{server.base_url}/chat/{webhook}/messages",
                script=one_lua,
                proj=proj,
                groups={"uvicorn": server.pids(), "redis": chat_stream.pids_named("redis-server")},
                connections=conns,
                seconds=args.duration,
            )
            check_phase(hot, conns, failures)
            phases.append(hot)

        worker_connections = 2 * -(-conns // args.gunicorn_workers)
        with benchlib.gunicorn(
            proj,
            workers=args.gunicorn_workers,
            threads=1,
            worker_connections=worker_connections,
        ) as wsgi:
            print(
                f"gunicorn: {args.gunicorn_workers} gthread workers x 1 thread "
                f"(platform_site.wsgi), worker_connections {worker_connections}, no access log"
            )
            measure_server("gunicorn", wsgi.base_url, wsgi.pids(), args.rounds)
        unmatched = stored(proj)["unmatched"]
        if unmatched:
            failures.append(f"{unmatched} user messages without exactly one message_created event")

    print()
    for done in phases:
        print_phase(done)

    rates: dict[tuple[str, str], float] = {
        (name, label): total_rate(phases, name, label)
        for name in ("uvicorn", "gunicorn")
        for label in ("message", "event")
    }
    hot_rate = hot.rate

    def line(label: str, value: float, note: str = "") -> str:
        return f"  {label:40s} {value:8.0f} req/s{note}"

    def by_round(server: str, label: str) -> str:
        chosen = [p for p in phases if p.server == server and p.label == label]
        return "  (rounds: " + ", ".join(f"{p.rate:.0f}" for p in chosen) + ")"

    print()
    print("RESULT chat_messages")
    for name in ("uvicorn", "gunicorn"):
        message, event = rates[(name, "message")], rates[(name, "event")]
        print(line(f"{name}: create message (chat)", message, by_round(name, "message")))
        print(line(f"{name}: create event (runtime)", event, by_round(name, "event")))
        print(f"  {name + ': ratio message / event':40s} {message / event:8.2f}")
    print(line("uvicorn: create message, one conversation", hot_rate))
    print(f"  {'one conversation / many':40s} {hot_rate / rates[('uvicorn', 'message')]:8.2f}")
    print(
        f"  {'create event uvicorn / gunicorn':40s} "
        f"{rates[('uvicorn', 'event')] / rates[('gunicorn', 'event')]:8.2f}"
    )
    print(
        f"  {'create message uvicorn / gunicorn':40s} "
        f"{rates[('uvicorn', 'message')] / rates[('gunicorn', 'message')]:8.2f}"
    )
    noisy = [
        f"{p.server} {p.label} round {p.round} {p.cpu.other:.2f}"
        for p in phases
        if p.cpu.other > BACKGROUND_LIMIT
    ]
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(
        "  correctness: every answer 201; stored messages (each with exactly one message_created "
        "event) and events match the 201s, plus requests in flight at wrk's stop"
    )
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
