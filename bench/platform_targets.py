"""Issue 28's throughput targets, each a ratio to raw psycopg inserts of the
same event row measured in the same run, on PostgreSQL + Redis with the rate
limiter on and every quota out of reach (harness/project.py,
RATE_LIMITS_OUT_OF_REACH).

    .venv/bin/python bench/platform_targets.py [--duration 10] [--connections 16]

One fresh database bench_platform_targets, Redis database 14 as broker,
live-stream bus and the limiter's store. In order:

1. Raw inserts: --connections psycopg connections, autocommit, one INSERT
   of create event's row at a time, --raw-duration seconds (after a 2 s
   warm-up). Again at the end, after the servers: the ratios are to the mean.
2. The web line alone: platform_site/Procfile's `web:` line as `make run`
   starts it (python -m platform_site.serve, one process per core, access log
   on, to a file), no worker. A wrk warm-up (--warmup s), then --duration s
   of each request, closed loop:
   - create event: POST /v1/chat/events, --connections keep-alive connections;
   - chat message: POST {chat_url}/{webhookId}/messages, half as many
     connections, the sender rotated over --senders end users with a
     conversation each (made through the chat interface beforehand).
3. The whole platform as `make run` starts it: seed_demo --json with the
   demo bot's webhook at the echo bot's port into DATA_DIR/demo.json (make
   run's line), the metrics folder emptied, then platform_site.procfile_runner
   on the whole Procfile (web, worker, beat and demo_bot: examples/echo_bot.py,
   which answers every user's text message with a reply through
   POST /v1/chat/messages), LOG_LEVEL INFO, access log on, the runner's
   output to a file. What the earlier phases left waiting (events of a bot
   without a webhook: raw inserts, the web line's) is marked ignored first,
   as a worker would, so that the worker here delivers this phase's events
   only. Its readiness: one chat message answered by the echo bot.
   - create event, as above, for the seeded demo bot, whose every event is
     delivered to the echo bot; the phase runs until the last event the load
     created is delivered (none waits any more), and its rate is the events
     answered over that time (wrk's seconds + the drain);
   - create event at half its peak (the rate wrk's were answered at), open
     loop (sent on a fixed schedule over --connections keep-alive connections
     whatever the answers' pace), for --latency-duration s: p50 / p99 /
     p99.9 from the scheduled send time, then drained as above;
   - chat message, as above, with listeners (GET .../conversations/{id}/listen,
     the live stream) on --listened of the conversations, connected before
     the warm-up: each message is stored, delivered to the echo bot, replied
     to, and the reply heard; the phase runs until no event waits, every
     message has its reply and the listeners heard every message of their
     conversation, the bot's replies included. Its rate: messages answered
     over that time.
   A phase's CPU is counted from the load's start to its end (the drain
   included), by process: web, worker, beat, the runner, the demo bot
   (platform_groups), PostgreSQL, Redis; and the client (wrk, this script
   and its listeners).

Figures: raw rows/s; for each (web line | platform) x (create event | chat
message) its req/s, the ratio to raw against the target (web line: event
0.22, message 0.15; platform: event 0.15, message 0.08) and the CPU ms per
request of each process; the p99 of the platform's create event at half its
peak against 25 ms. Nothing asserts on time: a missed target is printed.

Checks (exit 1 when one fails): every answer 201, no socket error; stored
events and messages (each with exactly one message_created event) match the
201 answers, plus at most one request in flight per connection when wrk
stops; on the platform, within --deadline s of the load's end, every event
delivered (none waits, and every event of the demo bot processed), every
user message replied to exactly once, and every listener heard every message
of its conversation exactly once (the bot's replies with isBot true),
nothing of another, its stream neither refused nor ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, live, load, machine, servers, stacks  # noqa: E402
from harness.project import PYTHON, ROOT, Project, bus_project  # noqa: E402
from harness.report import indent, log, percentile, verdict  # noqa: E402

DB = "bench_platform_targets"
START_TIMEOUT = 120.0  # seconds for the platform to serve and its bot to answer
POLL = 0.05  # seconds between looks at the backlog while a phase drains
REQUESTS = {"event": "create event", "message": "chat message"}
TARGETS = {
    ("web line", "event"): 0.22,
    ("web line", "message"): 0.15,
    ("platform", "event"): 0.15,
    ("platform", "message"): 0.08,
}
P99_TARGET_MS = 25.0
# The table's processes: the Procfile's (machine.platform_groups), then the stores.
PROCESSES = ("web", "worker", "beat", "runner", "demo bot", "postgres", "redis")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=16, help="create event's, wrk")
    parser.add_argument("--duration", type=float, default=10, help="seconds of each phase")
    parser.add_argument("--warmup", type=float, default=3, help="seconds before each phase")
    parser.add_argument("--raw-duration", type=float, default=10)
    parser.add_argument("--latency-duration", type=float, default=10, help="the open loop's")
    parser.add_argument("--senders", type=int, default=64, help="end users, a conversation each")
    parser.add_argument("--listened", type=int, default=16, help="conversations with a listener")
    parser.add_argument(
        "--deadline", type=float, default=30, help="seconds after the load to deliver and reply"
    )
    parser.add_argument(
        "--quiet-wait", type=float, default=60, help="seconds to wait for a quiet machine"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="a folder: py-spy samples the thread holding the interpreter lock in each web,"
        " worker and demo bot process during the platform's loads, and prints where their"
        " CPU went (py-spy's own CPU counts as the client's; its pauses slow the platform)",
    )
    parser.add_argument("--profile-top", type=int, default=30)
    return parser.parse_args()


# ---------------------------------------------------------------- the platform


@dataclass
class Platform:
    """make run's processes under the runner, serving on `port`."""

    process: subprocess.Popen[bytes]  # the runner
    port: int
    demo: dict[str, Any]
    out: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def groups(self) -> dict[str, list[int]]:
        """CPU groups: each of the runner's processes by role, and Redis."""
        return {
            **machine.platform_groups(self.process.pid),
            "redis": machine.pids_named("redis-server"),
        }

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.out.read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def platform(proj: Project) -> Iterator[Platform]:
    """`make run` on the run's project: seed_demo with the demo bot's webhook
    at the echo bot (DATA_DIR/demo.json), the metrics folder emptied, and the
    runner on the whole Procfile, output to a file; stopped afterwards
    (SIGTERM: the runner stops each process as on Ctrl-C)."""
    port, bot_port = servers.free_port(), servers.free_port()
    proj.env["PUBLIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    seeded = proj.manage("seed_demo", "--json", "--webhook-url", f"http://127.0.0.1:{bot_port}/")
    text = seeded.strip().splitlines()[-1]
    (proj.data_dir / "demo.json").write_text(text)
    shutil.rmtree(proj.data_dir / "metrics", ignore_errors=True)
    env = {
        **proj.env,
        "PORT": str(port),
        "ECHO_BOT_PORT": str(bot_port),
        "LOG_LEVEL": "INFO",  # make run's
        "WEB_ACCESS_LOG": "1",
    }
    command = [PYTHON, "-m", "platform_site.procfile_runner", "-f", "platform_site/Procfile"]
    out = proj.data_dir / "make-run-output.txt"
    log(f"make run: web on {port}, demo bot on {bot_port}, output to {out}")
    with servers.started(command, cwd=ROOT, env=env, log_path=out) as process:
        plat = Platform(process, port, json.loads(text), out)
        deadline = time.monotonic() + START_TIMEOUT
        while not (servers.ready(port) and "listening on" in out.read_text(errors="replace")):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the platform did not start:\n{plat.tail()}")
            time.sleep(0.5)
        # The worker's pool (--concurrency 2) up beside its main process.
        while len(plat.groups()["worker"]) < 3:
            if time.monotonic() > deadline:
                raise SystemExit(f"the worker's pool did not start:\n{plat.tail()}")
            time.sleep(0.5)
        yield plat


# ---------------------------------------------------------------- listeners


@dataclass
class Heard:
    """What one listener heard, copied off the listeners' event loop."""

    room: int
    counts: dict[str, int]  # message id -> arrivals
    is_bot: dict[str, Any]
    status: int
    error: str
    ended: bool
    foreign: int


class Ears:
    """Listeners of some conversations (one each), on an event loop in a
    thread of their own while wrk loads the platform."""

    def __init__(self, base_url: str, webhook: str, rooms: list[api.Room]) -> None:
        self.rooms = rooms
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        log(f"{len(rooms)} listeners connecting")
        self.audience = self.call(live.connect_audience([base_url], webhook, rooms))

    def call(self, coroutine: Any, timeout: float = 200) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def heard(self) -> list[Heard]:
        async def copy() -> list[Heard]:
            return [
                Heard(
                    item.room,
                    {key: len(times) for key, times in item.arrivals.items()},
                    dict(item.is_bot),
                    item.status,
                    item.error,
                    item.ended,
                    len(item.foreign),
                )
                for item in self.audience.listeners
            ]

        result: list[Heard] = self.call(copy())
        return result

    def close(self) -> None:
        self.call(self.audience.hang_up())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


# ---------------------------------------------------------------- the run


@dataclass
class Row:
    """One measured request: wrk's summary, the seconds its rate is over
    (wrk's, plus the drain on the platform), the CPU of the phase and the
    rows it stored."""

    tier: str
    request: str  # "event" or "message"
    wrk: dict[str, int]
    seconds: float
    cpu: machine.CpuUse
    stored: dict[str, int]
    drain: float = 0.0  # seconds from wrk's end to the last delivery / reply heard
    background: float = 0.0

    @property
    def rate(self) -> float:
        return self.wrk["requests"] / self.seconds

    def ms(self, group: str) -> float | None:
        if group not in self.cpu.cores:
            return None
        return self.cpu.per_request_ms(group, self.wrk["requests"])


@dataclass
class Bench:
    args: argparse.Namespace
    proj: Project
    wrk: str
    tmp: Path
    failures: list[str] = field(default_factory=list)
    raws: list[float] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    half: load.OpenLoopResult | None = None
    half_rate: float = 0.0
    half_drain: float = 0.0
    notes: list[str] = field(default_factory=list)

    # ------------------------------------------------------------ raw inserts

    def raw(self) -> None:
        """Raw inserts: a 2 s warm-up, then --raw-duration seconds."""
        machine.wait_for_quiet(self.args.quiet_wait)
        bot, conns = self.proj.demo["botId"], self.args.connections
        api.raw_inserts(self.proj, bot_id=bot, connections=conns, seconds=2)
        rows, wall = api.raw_inserts(
            self.proj, bot_id=bot, connections=conns, seconds=self.args.raw_duration
        )
        self.raws.append(rows / wall)
        log(f"raw inserts: {rows / wall:.0f} rows/s")

    # ------------------------------------------------------------ counts

    def counts(self) -> dict[str, int]:
        """`api.stored` (users' messages, message_created events, created
        events), and the bots' replies."""
        return {**api.stored(self.proj), "replies": api.messages_stored(self.proj)["bot"]}

    def scripts(self, base_url: str, demo: dict[str, Any], label: str) -> list[api.Room]:
        """Create event's and chat message's wrk scripts for `demo`, the
        end users and their conversations made through `base_url`."""
        rooms = api.make_rooms_sync(
            base_url, demo["webhookId"], rooms=self.args.senders, per_room=1
        )
        api.message_script(self.tmp / f"{label}-message.lua", rooms)
        api.event_script(self.tmp / f"{label}-event.lua", demo)
        return rooms

    def target(
        self, base_url: str, demo: dict[str, Any], request: str, label: str
    ) -> tuple[str, Path, int]:
        """(url, wrk script, connections) of `request`."""
        if request == "event":
            url, connections = f"{base_url}/v1/chat/events", self.args.connections
        else:
            url, connections = (
                f"{base_url}/chat/{demo['webhookId']}/messages",
                self.args.connections // 2,
            )
        return url, self.tmp / f"{label}-{request}.lua", connections

    def checked(
        self, row: Row, connections: int, before: dict[str, int], after: dict[str, int]
    ) -> None:
        created = row.stored["events" if row.request == "event" else "messages"]
        measured = api.Measured("web", row.request, row.wrk, row.cpu, created)
        api.check_measured(measured, connections, before, after, self.failures)
        if row.request == "event" and row.stored["messages"]:
            self.failures.append(f"{row.tier} event: stored messages {row.stored}")
        if row.request == "message" and row.stored["events"]:
            self.failures.append(f"{row.tier} message: stored events {row.stored}")

    # ------------------------------------------------------------ the web line

    def web_line(self) -> None:
        """The Procfile's web line alone: create event, then chat message."""
        with servers.web_server("serve", self.proj) as server:
            groups = {"web": server.pids(), "redis": machine.pids_named("redis-server")}
            self.scripts(server.base_url, self.proj.demo, "web")
            for request in REQUESTS:
                self.web_request(server, groups, request)

    def web_request(
        self, server: servers.WebServer, groups: dict[str, list[int]], request: str
    ) -> None:
        """A wrk warm-up, then --duration s of `request`, counted and checked."""
        args = self.args
        url, script, n = self.target(server.base_url, self.proj.demo, request, "web")
        load.run_wrk(self.wrk, url, script, connections=n, threads=1, seconds=args.warmup)

        def measured() -> dict[str, int]:
            log(f"web line: {request}, wrk -c{n} {args.duration:g} s")
            return load.run_wrk(
                self.wrk, url, script, connections=n, threads=1, seconds=args.duration
            )

        run = load.counted(
            measured, count=self.counts, groups=groups, quiet_wait=self.args.quiet_wait
        )
        seconds = run.result["duration_us"] / 1e6
        row = Row("web line", request, run.result, seconds, run.cpu, run.stored)
        row.background = run.background
        self.rows.append(row)
        self.checked(row, n, run.before, run.after)

    # ------------------------------------------------------------ the platform

    def leftovers_ignored(self) -> None:
        """What the earlier phases left waiting (events of a bot without a
        webhook) finished as a worker finishes them (ignored), and the table
        vacuumed, so that the platform's worker has its own events only."""
        with self.proj.connect(autocommit=True) as conn:
            done = conn.execute(
                "UPDATE events_event SET status = 'ignored', next_attempt_at = NULL, "
                "updated_at = now() WHERE next_attempt_at IS NOT NULL"
            ).rowcount
            conn.execute("VACUUM (ANALYZE) events_event")
        log(f"{done} waiting events of earlier phases marked ignored")

    def drained(self, conn: psycopg.Connection[Any], since: float) -> float | None:
        """Seconds from `since` until no event waits, or None after --deadline."""
        while True:
            row = conn.execute(
                "SELECT count(*) FROM events_event WHERE next_attempt_at IS NOT NULL"
            ).fetchone()
            now = time.monotonic()
            if row is not None and row[0] == 0:
                return now - since
            if now - since > self.args.deadline:
                return None
            time.sleep(POLL)

    def expected_heard(self, plat: Platform, ears: Ears) -> dict[str, dict[str, bool]]:
        """By conversation (chat id) of a listener: its messages' ids, and
        whether the bot sent each."""
        chat_ids = [room.conversation_id for room in ears.rooms]
        with self.proj.connect(autocommit=True) as conn:
            rows = conn.execute(
                "SELECT c.chat_id, m.id, m.is_bot FROM bots_message m "
                "JOIN bots_conversation c ON c.id = m.conversation_id "
                "WHERE c.bot_id = %s AND c.chat_id = ANY(%s)",
                (plat.demo["botId"], chat_ids),
            ).fetchall()
        expected: dict[str, dict[str, bool]] = {chat_id: {} for chat_id in chat_ids}
        for chat_id, message_id, is_bot in rows:
            expected[chat_id][message_id] = is_bot
        return expected

    def all_heard(self, plat: Platform, ears: Ears, since: float) -> float | None:
        """Seconds from `since` until every listener heard every message of
        its conversation, or None after --deadline."""
        expected = self.expected_heard(plat, ears)
        while True:
            heard = ears.heard()
            now = time.monotonic()
            if all(
                expected[ears.rooms[h.room].conversation_id].keys() <= h.counts.keys()
                for h in heard
            ):
                return now - since
            if now - since > self.args.deadline:
                return None
            time.sleep(POLL)

    def delivery_checked(self, plat: Platform, label: str) -> None:
        """Every event of the demo bot processed; every user message of its
        conversations replied to exactly once."""
        bot = plat.demo["botId"]
        with self.proj.connect(autocommit=True) as conn:
            statuses = dict(
                conn.execute(
                    "SELECT status, count(*) FROM events_event WHERE bot_id = %s GROUP BY status",
                    (bot,),
                ).fetchall()
            )
            unreplied = conn.execute(
                "SELECT count(*), coalesce(sum(users - bots), 0) FROM ("
                "  SELECT count(*) FILTER (WHERE NOT is_bot) AS users,"
                "         count(*) FILTER (WHERE is_bot) AS bots"
                "  FROM bots_message WHERE bot_id = %s GROUP BY conversation_id"
                ") AS c WHERE users <> bots",
                (bot,),
            ).fetchone()
        assert unreplied is not None
        if set(statuses) - {"processed"}:
            self.failures.append(f"platform {label}: the demo bot's events by status {statuses}")
        if unreplied[0]:
            self.failures.append(
                f"platform {label}: {unreplied[0]} conversations where the user's messages and "
                f"the bot's replies differ in number (users - bot: {unreplied[1]})"
            )

    def heard_checked(self, plat: Platform, ears: Ears) -> tuple[int, int]:
        """Every listener heard each message of its conversation once (the
        bot's with isBot true) and nothing else; (replies heard, replies)."""
        expected = self.expected_heard(plat, ears)
        heard_replies = replies = 0
        for h in ears.heard():
            want = expected[ears.rooms[h.room].conversation_id]
            replies += sum(want.values())
            heard_replies += sum(1 for key, bot in want.items() if bot and h.counts.get(key) == 1)
            problems = []
            if h.status != 200 or h.error or h.ended:
                problems.append(f"status {h.status}, error {h.error!r}, ended {h.ended}")
            if set(h.counts) != set(want):
                missing, extra = len(set(want) - set(h.counts)), len(set(h.counts) - set(want))
                problems.append(f"{missing} messages missing, {extra} not of its conversation")
            if any(count != 1 for count in h.counts.values()):
                problems.append("a message heard more than once")
            if any(h.is_bot.get(key) is not bot for key, bot in want.items() if key in h.counts):
                problems.append("isBot wrong")
            if h.foreign:
                problems.append(f"{h.foreign} messages of other conversations")
            if problems:
                self.failures.append(f"listener of room {h.room}: {'; '.join(problems)}")
        return heard_replies, replies

    @contextmanager
    def sampled(self, groups: dict[str, list[int]], phase: str) -> Iterator[None]:
        """With --profile: the platform's processes sampled during the block,
        then where each role's CPU went."""
        if self.args.profile is None:
            yield
            return
        roles = ("web", "worker", "demo bot")
        folder = self.args.profile / phase
        folder.mkdir(parents=True, exist_ok=True)
        with ExitStack() as spies:
            for role in roles:
                out = folder / role.replace(" ", "-")
                spies.enter_context(
                    stacks.recorded(groups[role], out, self.args.duration, rate=250, gil=True)
                )
            yield
        for role in roles:
            print(f"\n==== {phase}: {role}")
            print(stacks.summary(folder / role.replace(" ", "-"), self.args.profile_top))

    def platform_request(self, plat: Platform, request: str, ears: Ears | None = None) -> None:
        """A warm-up (drained), then --duration s of `request` and the drain,
        with the CPU of every process."""
        url, script, n = self.target(plat.base_url, plat.demo, request, "platform")
        load.run_wrk(self.wrk, url, script, connections=n, threads=1, seconds=self.args.warmup)
        with self.proj.connect(autocommit=True) as conn:
            if self.drained(conn, time.monotonic()) is None:
                self.failures.append(f"platform {request}: the warm-up's events still waiting")
            background = machine.wait_for_quiet(self.args.quiet_wait)
            before = self.counts()
            groups = plat.groups()
            log(f"platform: {request}, wrk -c{n} {self.args.duration:g} s")
            meter = machine.CpuMeter(groups)
            with self.sampled(groups, f"platform-{request}"):
                result = load.run_wrk(
                    self.wrk, url, script, connections=n, threads=1, seconds=self.args.duration
                )
            stopped = time.monotonic()
            drain = self.drained(conn, stopped)
            if drain is not None and ears is not None:
                drain = self.all_heard(plat, ears, stopped)
            cpu = meter.stop()
        if drain is None:
            self.failures.append(
                f"platform {request}: not all delivered"
                + (", replied to and heard" if ears else "")
                + f" within {self.args.deadline:g} s of the load's end"
            )
            drain = self.args.deadline
        time.sleep(0.5)
        after = self.counts()
        seconds = result["duration_us"] / 1e6 + drain
        stored = {name: after[name] - before[name] for name in after}
        row = Row("platform", request, result, seconds, cpu, stored, drain, background)
        self.rows.append(row)
        self.checked(row, n, before, after)
        self.delivery_checked(plat, request)
        if request == "message":
            if stored["replies"] != stored["messages"]:
                replies, messages = stored["replies"], stored["messages"]
                self.failures.append(f"platform message: {replies} replies to {messages} messages")
            if ears is not None:
                heard, replies = self.heard_checked(plat, ears)
                self.notes.append(
                    f"platform chat message: the {len(ears.rooms)} listeners heard {heard} of the "
                    f"{replies} bot replies in their conversations"
                )

    def half_peak(self, plat: Platform) -> None:
        """Create event at half the platform's peak, open loop, then drained."""
        # The peak: the rate wrk's create events were answered at.
        peak = next(r.wrk for r in self.rows if r.tier == "platform" and r.request == "event")
        self.half_rate = load.wrk_rate(peak) / 2
        request = api.http_request(
            port=plat.port,
            token=plat.demo["tokens"]["developer"],
            bot_id=plat.demo["botId"],
            body=api.event_body(),
        )
        machine.wait_for_quiet(self.args.quiet_wait)
        before = self.counts()
        log(f"platform: open loop at {self.half_rate:.0f} req/s, {self.args.latency_duration:g} s")
        self.half = load.open_loop(
            "127.0.0.1",
            plat.port,
            request,
            rate=self.half_rate,
            seconds=self.args.latency_duration,
            connections=self.args.connections,
        )
        with self.proj.connect(autocommit=True) as conn:
            drain = self.drained(conn, time.monotonic())
        if drain is None:
            self.failures.append(
                f"platform open loop: not all delivered within {self.args.deadline:g} s"
            )
        self.half_drain = drain or self.args.deadline
        stored = self.counts()["events"] - before["events"]
        if set(self.half.statuses) != {201} or stored != self.half.statuses[201]:
            self.failures.append(
                f"platform open loop: statuses {dict(self.half.statuses)}, {stored} stored"
            )
        self.delivery_checked(plat, "open loop")

    def answered_once(self, plat: Platform, room: api.Room) -> None:
        """The platform ready: one chat message answered by the echo bot."""
        url = f"{plat.base_url}/chat/{plat.demo['webhookId']}/messages"
        body = {
            "payload": {"type": "text", "text": "ready?"},
            "conversationId": room.conversation_id,
        }
        started = time.monotonic()
        with urllib.request.urlopen(
            urllib.request.Request(
                url,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", "x-user-key": room.members[0].key},
                method="POST",
            ),
            timeout=10,
        ) as answer:
            if answer.status != 201:
                raise SystemExit(f"a first chat message answered {answer.status}")
        while not api.messages_stored(self.proj)["bot"]:
            if time.monotonic() - started > START_TIMEOUT:
                raise SystemExit(f"the demo bot never answered:\n{plat.tail()}")
            time.sleep(0.2)
        log(f"the demo bot answered a first message in {time.monotonic() - started:.2f} s")

    def platform(self) -> None:
        """make run's platform: create event, create event at half its peak,
        then chat messages answered by the demo bot and heard by listeners."""
        self.leftovers_ignored()
        with platform(self.proj) as plat:
            rooms = self.scripts(plat.base_url, plat.demo, "platform")
            self.answered_once(plat, rooms[-1])  # a conversation nobody listens to
            self.platform_request(plat, "event")
            self.half_peak(plat)
            ears = Ears(plat.base_url, plat.demo["webhookId"], rooms[: self.args.listened])
            try:
                self.platform_request(plat, "message", ears)
            finally:
                ears.close()
            access = plat.out.read_bytes().count(b"POST /v1/chat/events 201")
            self.notes.append(
                f"platform output ({plat.out.stat().st_size / 1e6:.1f} MB): {access} access "
                f"lines of create event"
            )


# ---------------------------------------------------------------- report


def cell(value: float | None) -> str:
    return f"{value:8.3f}" if value is not None else f"{'-':>8s}"


def report(bench: Bench) -> None:
    raw = sum(bench.raws) / len(bench.raws)
    conns = bench.args.connections
    print()
    print(
        f"raw psycopg INSERT ({conns} connections): "
        + ", ".join(f"{r:.0f}" for r in bench.raws)
        + f" rows/s (mean {raw:.0f})"
    )
    for row in bench.rows:
        w = row.wrk
        print(
            f"{row.tier} {REQUESTS[row.request]}: {w['requests']} answered in "
            f"{w['duration_us'] / 1e6:.1f} s ({load.wrk_rate(w):.0f} req/s; "
            f"{load.wrk_latency(w)})"
            + (
                f"; all delivered{' and replies heard' if row.request == 'message' else ''} "
                f"{row.drain:.2f} s after the load: {row.rate:.0f} req/s over {row.seconds:.2f} s"
                if row.tier == "platform"
                else ""
            )
            + f"; stored {row.stored}"
        )
        print(indent(row.cpu.report(f"{row.tier} {REQUESTS[row.request]}", w["requests"])))
    for note in bench.notes:
        print(note)
    half = bench.half
    if half is not None:
        lat = sorted(half.latencies)
        print(
            f"platform create event at half its peak ({bench.half_rate:.0f} req/s scheduled, open "
            f"loop, {conns} connections, {bench.args.latency_duration:g} s): sent {half.sent}, "
            f"p50 {percentile(lat, 50) * 1000:.2f} ms, p99 {percentile(lat, 99) * 1000:.2f} ms, "
            f"p99.9 {percentile(lat, 99.9) * 1000:.2f} ms, max {lat[-1] * 1000:.2f} ms; "
            f"all delivered {bench.half_drain:.2f} s after the last send"
        )

    print()
    print(f"RESULT platform_targets (ratios to raw inserts, {raw:.0f} rows/s)")
    head = "".join(f"{name:>9s}" for name in (*PROCESSES, "total"))
    print(
        f"  {'':24s} {'req/s':>7s} {'÷ raw':>7s} {'target':>7s} {'verdict':>8s}   CPU ms/request:"
    )
    print(f"  {'':24s} {'':7s} {'':7s} {'':7s} {'':8s} {head}")
    for row in bench.rows:
        ratio, target = row.rate / raw, TARGETS[(row.tier, row.request)]
        values = [row.ms(name) for name in PROCESSES]
        total = sum(v for v in values if v is not None)
        label = f"{row.tier}, {REQUESTS[row.request]}"
        print(
            f"  {label:24s} {row.rate:7.0f} {ratio:7.3f} {'≥ ' + format(target, '.2f'):>7s} "
            f"{'met' if ratio >= target else 'MISSED':>8s} "
            + "".join(f" {cell(v)}" for v in values)
            + f" {cell(total)}"
        )
    print(
        "  req/s: requests answered over the load's seconds; on the platform, until the last "
        "event it set off was delivered (chat message: replied to and heard)"
    )
    if half is not None:
        p99 = percentile(sorted(half.latencies), 99) * 1000
        print(
            f"  platform, create event at half its peak ({bench.half_rate:.0f} req/s, open loop): "
            f"p99 {p99:.2f} ms (target ≤ {P99_TARGET_MS:g} ms) "
            f"{'met' if p99 <= P99_TARGET_MS else 'MISSED'}"
        )
    noisy = [
        f"{r.tier} {r.request} {r.cpu.other:.2f}"
        for r in bench.rows
        if r.cpu.other > machine.BACKGROUND_LIMIT
    ]
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")


def main() -> int:
    args = parse_args()
    wrk = load.start_wrk_bench(
        "== issue 28's targets: the web line and make run's platform against raw inserts"
    )
    with (
        bus_project(DB, queue="bench-platform-targets") as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
    ):
        bench = Bench(args, proj, wrk, Path(tmp))
        bench.raw()
        bench.web_line()
        bench.platform()
        bench.raw()
        unmatched = api.stored(proj)["unmatched"]
        if unmatched:
            bench.failures.append(
                f"{unmatched} user messages without exactly one message_created event"
            )
    report(bench)
    return verdict(bench.failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
