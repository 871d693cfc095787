"""Bots written with the official SDK (issue 25), measured as users run them:

1. formats: delivery in `botpress` format (x-bp-* headers, `{"event": …}`)
   against `standard` on the same load, the Procfile's worker and beat, 20
   bots of each format behind a receiver answering in 0-300 ms, events
   carrying a message_created payload. Per round and format: THROUGHPUT
   events due at once (events/s, first attempt start -> last end, and the
   worker's CPU per event), then BURST events due within one second
   (lateness, due -> received). Rounds alternate which format goes first.
   Ratio botpress / standard.

2. states: setState (POST, over STATE_KEYS conversation states, made then
   overwritten) and getState (GET of those) against create event, through
   `make run`'s web (the Procfile's web line, one process a core) with its
   worker and beat running, wrk --connections keep-alive connections,
   --rounds rounds with the order rotated. Requests/s and the web's CPU per
   request; ratios state / create event.

3. expiry: EXPIRING bot states whose expiries fall spread over --spread
   seconds (a minute from the start), 20 bots behind the receiver; the
   Procfile's worker and beat. Lateness of each `state_expired` event:
   expiresAt -> made by the clock, and -> received by the bot. Resident
   memory of the worker (tree) and beat, sampled all along, against the same
   processes idle with no state.

Checks (exit 1 when one fails): every event processed and received exactly
once, every `botpress` request carried the SDK's headers and body; every
state request answered 200 and every create 201, the events and states
stored matching.

    .venv/bin/python bench/sdk_bots.py [--rounds 3] [--throughput 10000] ...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import api, event_rows, load, machine, servers  # noqa: E402
from harness.project import PYTHON, ROOT, Project, project  # noqa: E402
from harness.report import failed_lines, lateness_line, log, median, percentile  # noqa: E402
from ulid import ULID  # noqa: E402

QUIET_WAIT = 120.0
FORMATS = ("standard", "botpress")
# What a message_created event of the chat interface carries (runtime shapes).
MESSAGE_PAYLOAD = json.dumps(
    {
        "message": {
            "id": "msg_01JBENCH0000000000000000000",
            "createdAt": "2026-11-28T10:00:00.000Z",
            "updatedAt": "2026-11-28T10:00:00.000Z",
            "type": "text",
            "payload": {"type": "text", "text": "Hello, I would like to know where my order is."},
            "direction": "incoming",
            "userId": "user_01JBENCH000000000000000000",
            "conversationId": "conv_01JBENCH000000000000000000",
            "tags": {},
        },
        "user": {
            "id": "user_01JBENCH000000000000000000",
            "createdAt": "2026-11-28T09:00:00.000Z",
            "updatedAt": "2026-11-28T09:00:00.000Z",
            "tags": {"chat:id": "customer-42"},
            "name": "Ada",
        },
        "conversation": {
            "id": "conv_01JBENCH000000000000000000",
            "createdAt": "2026-11-28T09:00:00.000Z",
            "updatedAt": "2026-11-28T10:00:00.000Z",
            "channel": "channel",
            "integration": "",
            "tags": {},
        },
    }
)
SDK_CONFIGURATION = {"model": "small", "temperature": 0.2, "greeting": "Hello!"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--throughput", type=int, default=10_000)
    parser.add_argument("--burst", type=int, default=2_000)
    parser.add_argument("--bots", type=int, default=20, help="bots of each format")
    parser.add_argument("--path", default="/uniform/0/300", help="the receiver's answer time")
    parser.add_argument("--sections", default="formats,states,expiry")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--duration", type=float, default=10, help="seconds of each wrk phase")
    parser.add_argument("--warmup", type=float, default=3, help="seconds before each phase")
    parser.add_argument("--expiring", type=int, default=100_000, help="states that expire")
    parser.add_argument("--spread", type=float, default=600, help="seconds their expiries span")
    parser.add_argument("--idle", type=float, default=30, help="seconds of the idle baseline")
    return parser.parse_args()


def sdk_bots(rx: event_rows.Receiving, bots: list[str]) -> None:
    """Make `bots` SDK bots through the service (their bot users included)."""
    code = (
        "import json, sys\n"
        "from bots.models import Bot\n"
        "from bots.services.bots import bot_update\n"
        "ids, configuration = json.loads(sys.stdin.read())\n"
        "for bot in Bot.objects.filter(id__in=ids):\n"
        "    bot_update(bot=bot, delivery_format='botpress', configuration=configuration)\n"
    )
    subprocess.run(
        [PYTHON, "manage.py", "shell", "-c", code],
        input=json.dumps([bots, SDK_CONFIGURATION]),
        text=True,
        cwd=ROOT,
        env=rx.proj.env,
        check=True,
    )


def formats(args: argparse.Namespace) -> int:
    failures: list[str] = []
    phases: dict[tuple[str, str, int], list[str]] = {}
    cpu: dict[tuple[str, int], float] = {}
    with event_rows.receiving_project("bench_sdk_bots") as rx:
        bots = {name: rx.bots(args.path, args.bots) for name in FORMATS}
        sdk_bots(rx, bots["botpress"])
        with (
            servers.receiver(rx.port, rx.out) as receiver,
            servers.engine(rx.proj, rx.queue) as engine,
        ):
            for n in range(args.rounds):
                order = FORMATS if n % 2 == 0 else FORMATS[::-1]
                for name in order:
                    machine.wait_for_quiet(max_wait=QUIET_WAIT)
                    log(f"round {n + 1}: {name}, {args.throughput:,} due at once")
                    meter = machine.CpuMeter(engine.groups(receiver))
                    due = [datetime.now(UTC)] * args.throughput
                    ids = event_rows.seed(
                        rx.proj,
                        bots[name],
                        due,
                        "pending",
                        kind="message_created",
                        payload=MESSAGE_PAYLOAD,
                    )
                    event_rows.wait_finished(rx.proj, ids, 600)
                    cpu[(name, n)] = meter.stop().per_request_ms("worker", len(ids))
                    phases[(name, "throughput", n)] = ids
                    machine.wait_for_quiet(max_wait=QUIET_WAIT)
                    log(f"round {n + 1}: {name}, {args.burst:,} due within 1 s")
                    due = event_rows.due_from(5, args.burst, 1 / args.burst)
                    ids = event_rows.seed(
                        rx.proj,
                        bots[name],
                        due,
                        "scheduled",
                        kind="message_created",
                        payload=MESSAGE_PAYLOAD,
                    )
                    event_rows.wait_finished(rx.proj, ids, 300)
                    phases[(name, "burst", n)] = ids
        arrival = rx.arrivals()
        counts = Counter(mid for mid, _, _ in event_rows.received(rx.out))
        for key, ids in phases.items():
            if any(counts[i] != 1 for i in ids):
                failures.append(f"{key}: an event was not received exactly once")
        rows = {key: event_rows.first_attempts(rx.proj, ids) for key, ids in phases.items()}
        failures += sdk_requests_checked(rx, phases)
    report(args, rows, arrival, cpu)
    return failed_lines(failures)


def sdk_requests_checked(
    rx: event_rows.Receiving, phases: dict[tuple[str, str, int], list[str]]
) -> list[str]:
    """Every request to an SDK bot was in the SDK's format (x-bp-operation,
    x-bp-type, an `{"event": …}` body), and no other was."""
    kinds = event_rows.received_sdk_types(rx.out)
    problems = []
    for (name, phase, n), ids in phases.items():
        expected = "message_created" if name == "botpress" else None
        if any(kinds.get(i) != expected for i in ids):
            problems.append(f"round {n + 1} {name} {phase}: a request not in its format")
    return problems


def report(
    args: argparse.Namespace,
    rows: dict[tuple[str, str, int], Any],
    arrival: dict[str, float],
    cpu: dict[tuple[str, int], float],
) -> None:
    print("\n== 1. delivery formats: botpress (the SDK's) against standard, same load")
    worker = " ".join(servers.procfile_words("worker")[1:])
    print(
        f"{worker}; beat; PostgreSQL, Redis; {args.bots} bots of each format, a receiver "
        f"answering in {args.path}; message_created payloads of {len(MESSAGE_PAYLOAD)} bytes"
    )
    rates: dict[str, list[float]] = {name: [] for name in FORMATS}
    late: dict[str, list[float]] = {name: [] for name in FORMATS}
    for (name, phase, n), spans in sorted(rows.items(), key=lambda item: item[0][2]):
        if phase == "throughput":
            elapsed = max(end for *_, end in spans) - min(start for _, _, start, _ in spans)
            rate = len(spans) / elapsed
            rates[name].append(rate)
            print(
                f"  round {n + 1} {name:9s} throughput {rate:7.0f} events/s, "
                f"worker CPU {cpu[(name, n)]:.3f} ms/event"
            )
        else:
            values = [arrival[i] - d for i, d, _, _ in spans if i in arrival]
            late[name].extend(values)
            print(lateness_line(f"round {n + 1} {name} burst, due -> received", values))
    print("\n  median of rounds            standard   botpress   ratio")
    s, b = median(rates["standard"]), median(rates["botpress"])
    print(f"  throughput (events/s)     {s:9.0f} {b:10.0f} {b / s:7.3f}")
    for q in (50, 99):
        s, b = percentile(late["standard"], q) * 1000, percentile(late["botpress"], q) * 1000
        print(f"  lateness p{q} (ms)         {s:9.1f} {b:10.1f} {s / b:7.3f} (standard/botpress)")
    s = median([v for (name, _), v in cpu.items() if name == "standard"])
    b = median([v for (name, _), v in cpu.items() if name == "botpress"])
    print(f"  worker CPU (ms/event)     {s:9.3f} {b:10.3f} {s / b:7.3f} (standard/botpress)")


# ---------------------------------------------------------------- 2. states

STATE_KEYS = 1000
STATE_PAYLOAD = {"step": "checkout", "cart": ["A-1", "B-7"], "total": 4200, "visits": 3}

# wrk: each request names the next of STATE_KEYS states of the demo
# conversation; answers of status OK count as done, the others as `other`.
STATE_LUA = r"""
local path = PATH
local keys = KEYS
local n = 0

function request()
  n = n + 1
  return wrk.format(nil, path .. "k" .. (n % keys))
end
"""


def state_script(path: Path, demo: dict[str, Any], method: str) -> Path:
    """A wrk script of setState (POST) or getState (GET) over STATE_KEYS keys."""
    states = f"/v1/chat/states/conversation/{demo['conversationId']}/"
    auth = api.demo_headers(demo) if method == "POST" else api.demo_auth(demo)
    lines = [f'wrk.method = "{method}"']
    if method == "POST":
        lines.append(f"wrk.body = {json.dumps(json.dumps({'payload': STATE_PAYLOAD}))}")
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in auth.items()]
    picker = STATE_LUA.replace("PATH", json.dumps(states)).replace("KEYS", str(STATE_KEYS))
    path.write_text("\n".join(lines) + "\n" + picker + load.WRK_LUA.replace("== 201", "== 200"))
    return path


def state_rows(proj: Project) -> dict[str, int]:
    return {**api.stored(proj), "states": int(proj.scalar("SELECT count(*) FROM chat_state"))}


def states_web(args: argparse.Namespace) -> int:
    failures: list[str] = []
    results: dict[str, list[tuple[float, float]]] = {"event": [], "setState": [], "getState": []}
    wrk = load.ensure_wrk()
    with (
        project("bench_sdk_states") as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
        servers.web_server("serve", proj) as web,
        servers.engine(proj, f"bench-{os.getpid()}") as engine,
    ):
        demo = proj.demo
        scripts = {
            "event": (api.event_script(Path(tmp) / "event.lua", demo), "/v1/chat/events"),
            "setState": (state_script(Path(tmp) / "set.lua", demo, "POST"), "/"),
            "getState": (state_script(Path(tmp) / "get.lua", demo, "GET"), "/"),
        }
        groups = {"web": web.pids(), "worker": machine.tree(engine.worker), "beat": [engine.beat]}

        def phase(name: str) -> None:
            script, path = scripts[name]
            done = load.warm_then_counted(
                wrk,
                web.base_url + path,
                lambda _: script,
                label=name,
                connections=args.connections,
                warmup=args.warmup,
                seconds=args.duration,
                count=lambda: state_rows(proj),
                groups=groups,
                quiet_wait=QUIET_WAIT,
            )
            summary = done.result
            if load.wrk_failed(summary):
                failures.append(f"{name}: answers other than success: {summary}")
            # Requests in flight when wrk stopped are stored without their
            # answer being counted: at most one per connection.
            extra = done.stored["events"] - summary["created"] if name == "event" else 0
            if not 0 <= extra <= args.connections:
                failures.append(f"event: {done.stored['events']} stored, {summary['created']} 201s")
            cpu_ms = done.cpu.per_request_ms("web", summary["requests"])
            results[name].append((load.wrk_rate(summary), cpu_ms))

        order = list(scripts)
        for n in range(args.rounds):
            for name in order[n % 3 :] + order[: n % 3]:
                phase(name)
        if proj.scalar("SELECT count(*) FROM chat_state") != STATE_KEYS:
            failures.append("the states written are not the keys set")
    report_states(args, results)
    return failed_lines(failures)


def report_states(args: argparse.Namespace, results: dict[str, list[tuple[float, float]]]) -> None:
    print("\n== 2. states through `make run`'s web (with its worker and beat) against create event")
    print(
        f"Procfile web, {machine.cores()} processes; wrk -c{args.connections}, "
        f"{args.duration:g} s a phase, {args.rounds} rounds rotated; {STATE_KEYS} keys"
    )
    print("  request      rounds (req/s)                  median   web CPU ms/req   ÷ create event")
    base = median([rate for rate, _ in results["event"]])
    for name, runs in results.items():
        rates = [rate for rate, _ in runs]
        cpu = median([ms for _, ms in runs])
        rounds = " ".join(f"{rate:7.0f}" for rate in rates)
        print(f"  {name:11s} {rounds:30s} {median(rates):7.0f}   {cpu:8.3f}        "
              f"{median(rates) / base:6.3f}")  # fmt: skip


# ---------------------------------------------------------------- 3. expiry

STATE_COLUMNS = (
    "id, bot_id, type, target_id, name, payload, expiry, expires_at, created_at, updated_at"
)


def copy_states(proj: Project, bots: list[str], count: int, first: datetime, spread: float) -> None:
    """`count` bot states (round-robin over `bots`) expiring from `first`
    on, evenly over `spread` seconds, as a setState with that expiry leaves them."""
    now = datetime.now(UTC)
    step = spread / count
    payload = json.dumps(STATE_PAYLOAD)
    with proj.connect() as conn, conn.cursor() as cursor:
        with cursor.copy(f"COPY chat_state ({STATE_COLUMNS}) FROM STDIN") as copy:
            for n in range(count):
                expires_at = first + timedelta(seconds=n * step)
                expiry = round((expires_at - now).total_seconds() * 1000)
                bot = bots[n % len(bots)]
                row = (f"state_{ULID()}", bot, "bot", bot, f"session{n}", payload, expiry)
                copy.write_row(row + (expires_at, now, now))
        conn.commit()
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE chat_state")


def expired_events(proj: Project) -> list[tuple[str, float, float, str]]:
    """(event id, the state's expiresAt, when the event was made, status)."""
    with proj.connect() as conn:
        rows = conn.execute(
            "SELECT id, extract(epoch FROM (payload->'state'->>'expiresAt')::timestamptz), "
            "extract(epoch FROM created_at), status FROM events_event "
            "WHERE type = 'state_expired'"
        ).fetchall()
    return [(r[0], float(r[1]), float(r[2]), r[3]) for r in rows]


def expiry(args: argparse.Namespace) -> int:
    failures: list[str] = []
    memory: dict[str, list[tuple[float, float]]] = {"none": [], "expiring": []}
    with event_rows.receiving_project("bench_sdk_expiry") as rx:
        bots = rx.bots(args.path, 20)
        with servers.receiver(rx.port, rx.out):
            machine.wait_for_quiet(max_wait=QUIET_WAIT)
            with servers.engine(rx.proj, rx.queue) as engine:
                log(f"no state: worker and beat idle {args.idle:g} s")
                for _ in range(max(1, int(args.idle / 5))):
                    time.sleep(5)
                    memory["none"].append(rss(engine))
            first = datetime.now(UTC) + timedelta(seconds=60)
            log(f"{args.expiring:,} states expiring over {args.spread:g} s from {first:%H:%M:%S}")
            copy_states(rx.proj, bots, args.expiring, first, args.spread)
            with servers.engine(rx.proj, rx.queue) as engine:
                deadline = time.monotonic() + 60 + args.spread + 300
                while time.monotonic() < deadline:
                    time.sleep(5)
                    memory["expiring"].append(rss(engine))
                    made = expired_events(rx.proj)
                    if len(made) == args.expiring and all(r[3] == "processed" for r in made):
                        break
                    left = rx.proj.scalar("SELECT count(*) FROM chat_state")
                    log(f"{len(made):,} expired, {left:,} left")
        made = expired_events(rx.proj)
        arrival = rx.arrivals()
        counts = Counter(mid for mid, _, _ in event_rows.received(rx.out))
    if len(made) != args.expiring:
        failures.append(f"{len(made):,} state_expired events for {args.expiring:,} states")
    if any(counts[event_id] != 1 for event_id, *_ in made):
        failures.append("a state_expired event was not received exactly once")
    report_expiry(args, made, arrival, memory)
    return failed_lines(failures)


def rss(engine: servers.Engine) -> tuple[float, float]:
    worker = sum(machine.rss_mb(pid) for pid in machine.tree(engine.worker))
    return worker, machine.rss_mb(engine.beat)


def report_expiry(
    args: argparse.Namespace,
    made: list[tuple[str, float, float, str]],
    arrival: dict[str, float],
    memory: dict[str, list[tuple[float, float]]],
) -> None:
    print(f"\n== 3. state expiry: {args.expiring:,} states expiring over {args.spread:g} s")
    worker = " ".join(servers.procfile_words("worker")[1:])
    print(f"{worker}; beat; PostgreSQL, Redis; 20 bots, a receiver answering in {args.path}")
    swept = [created - expires for _, expires, created, _ in made]
    received = [arrival[i] - expires for i, expires, _, _ in made if i in arrival]
    print(lateness_line("expiresAt -> event made", swept))
    print(lateness_line("expiresAt -> received by the bot", received))
    print("\n  resident memory (MB)        worker tree (max)   beat (max)")
    for label, samples in memory.items():
        print(
            f"  {label:28s} {max(w for w, _ in samples):10.1f} {max(b for _, b in samples):12.1f}"
        )
    none, busy = memory["none"], memory["expiring"]
    ratio = max(w for w, _ in busy) / max(w for w, _ in none)
    beat = max(b for _, b in busy) / max(b for _, b in none)
    print(f"  ratio expiring/none         {ratio:10.3f} {beat:12.3f}")


def main() -> int:
    args = parse_args()
    machine.start()
    started = time.monotonic()
    sections = {"formats": formats, "states": states_web, "expiry": expiry}
    status = 0
    for name in args.sections.split(","):
        status |= sections[name](args)
    log(f"done in {time.monotonic() - started:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
