"""Live-stream latency: a message created through the chat interface, to the
event arriving at each listener of its conversation, with 1,000 listeners.

    .venv/bin/python bench/chat_stream.py [--conversations 250 --per-conversation 4
        --rate 50 --duration 20 --workers 1,2 ...]

1. A fresh database bench_chat, migrated and seeded; Redis database 14 is the
   broker and the live stream's bus (LIVE_STREAM_REDIS_URL).
2. Baseline: the raw Redis PUBLISH -> SUBSCRIBE round trip with the listeners'
   layout (one subscriber connection per listener, 4 per channel), at the
   same rate, from this process.
3. For each configuration (--processes: one uvicorn process as the Procfile
   runs it, then two on ports of their own, as behind a load balancer, with
   each conversation's listeners and the messages alternating between them, so
   that a message created in one process reaches listeners held by the other
   through Redis; uvicorn's own --workers share one socket, and in a trial the
   kernel gave every listener to the same worker):
   a. the chat users (one per listener), conversations and participants,
      made through the chat interface (first configuration only);
   b. baseline: POST /chat/{webhookId}/messages -> 201 at the same steady
      rate, open loop, with no listener connected;
   c. memory of the worker processes, then 1,000 listeners connected (time to
      their first ping), an idle spell longer than the heartbeat interval
      (every listener must get a heartbeat), memory again: per listener;
   d. the load: messages at --rate for --duration, open loop, round-robin
      over the conversations and their participants; latency from the send to
      the arrival at each listener of the conversation, matched by message id;
   e. bot replies through the runtime route POST /v1/chat/messages, one per
      conversation at the same rate: they must stream with isBot true;
   f. the listeners hang up: the server must unsubscribe every channel.

Checks (exit 1 when one fails): every POST answered 201 and stored (a user's
message with exactly one message_created event); every listener connected,
got a heartbeat, and got every message of its own conversation exactly once
and nothing of any other; isBot right; no channel left subscribed.
Nothing asserts on time: figures and ratios are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import api, live, load, machine, servers  # noqa: E402
from harness.api import Sent  # noqa: E402
from harness.project import CHAT_REDIS_URL, ROOT, Project, project, run_queue  # noqa: E402
from harness.report import background_warning, log, ms, percentile, spread, verdict  # noqa: E402

DB = "bench_chat"
QUIET_WAIT = 60.0  # seconds to wait for a quiet machine before a phase
ATTEMPTS = 3  # of a phase spoilt by background load


# ---------------------------------------------------------------- one server configuration


@dataclass
class Run:
    """What one uvicorn configuration measured."""

    label: str
    processes: int
    baseline_attempts: list[Phase] = field(default_factory=list)
    load_attempts: list[Phase] = field(default_factory=list)
    replies_attempts: list[Phase] = field(default_factory=list)
    listeners: list[live.Listener] = field(default_factory=list)
    connect_wall: float = 0.0
    per_process: list[int] = field(default_factory=list)
    memory_none: int = 0  # KiB, the uvicorn processes
    memory_idle: int = 0
    memory_after: int = 0
    idle_seconds: float = 0.0
    db_connections_idle: int = 0
    db_connections_load: int = 0
    channels_listening: int = 0
    channels_after: int = 0
    lag: list[float] = field(default_factory=list)  # of the last load attempt
    drain_waited: float = 0.0

    # The figures are the last attempt's (the first one that background load
    # did not spoil); the checks cover every attempt.
    @property
    def baseline(self) -> Phase:
        return self.baseline_attempts[-1]

    @property
    def load(self) -> Phase:
        return self.load_attempts[-1]

    @property
    def replies(self) -> Phase:
        return self.replies_attempts[-1]

    def latencies(self, sends: list[Sent], *, scheduled: bool = False) -> list[float]:
        return live.latencies(self.listeners, sends, scheduled=scheduled)

    def last_arrivals(self, sends: list[Sent]) -> list[float]:
        return live.last_arrivals(self.listeners, sends)


Phase = machine.Attempt[list[Sent]]


@dataclass
class Configuration:
    """One configuration's servers, what they are measured with, and the run."""

    proj: Project
    started: list[servers.AsgiServer]
    rooms: list[api.Room]
    run: Run
    args: argparse.Namespace
    redis_client: redis.Redis = field(init=False)

    def __post_init__(self) -> None:
        self.redis_client = redis.Redis.from_url(CHAT_REDIS_URL)

    @property
    def bases(self) -> list[str]:
        return [s.base_url for s in self.started]

    @property
    def groups(self) -> dict[str, list[int]]:
        return {
            "uvicorn": [pid for s in self.started for pid in s.pids()],
            "redis": machine.pids_named("redis-server"),
        }

    def memory(self) -> int:
        """Resident KiB of the serving processes."""
        return sum(machine.resident_kib(pid) for s in self.started for pid in s.worker_pids())

    def channels(self) -> int:
        return live.channels_of(self.redis_client, (r.conversation_id for r in self.rooms))

    def messages(self, tag: str, seconds: float) -> Callable[[], Awaitable[list[Sent]]]:
        """Chat messages at --rate for `seconds`, open loop."""
        make = api.chat_message_request(self.bases, self.proj.demo["webhookId"], self.rooms, tag)
        count = int(self.args.rate * seconds)
        return lambda: api.send_open_loop(make, rate=self.args.rate, count=count)

    async def measured(
        self,
        label: str,
        send: Callable[[], Awaitable[list[Sent]]],
        *,
        settle: Callable[[list[Sent]], Awaitable[object]] | None = None,
        attempts: int = ATTEMPTS,
    ) -> list[Phase]:
        """An open-loop phase, measured again while background load spoilt it."""
        return await machine.measure_async(
            f"{self.run.label} {label}",
            send,
            count=lambda: api.messages_stored(self.proj),
            groups=self.groups,
            quiet_wait=QUIET_WAIT,
            settle=settle,
            attempts=attempts,
        )

    async def baseline(self) -> None:
        """A warm-up, then the messages with no listener connected."""
        run, args = self.run, self.args
        log(f"{run.label}: warm-up, {args.rate:g} messages/s for 3 s")
        await self.messages("warm-up", 3)()
        log(
            f"{run.label}: baseline, no listeners, {args.rate:g} messages/s for {args.duration:g} s"
        )
        run.baseline_attempts = await self.measured(
            "baseline", self.messages("baseline", args.duration)
        )

    async def idle(self) -> None:
        """The listeners connected and idle past a heartbeat: memory, channels."""
        run, args = self.run, self.args
        run.per_process = [n for s in self.started for n in s.connections_by_worker()]
        run.channels_listening = self.channels()
        log(f"{run.label}: idle for {args.heartbeat + 3:g} s (heartbeat {args.heartbeat:g} s)")
        loop = asyncio.get_running_loop()
        idle_from = loop.time()
        await asyncio.sleep(args.heartbeat + 3)
        run.idle_seconds = loop.time() - idle_from
        run.memory_idle = self.memory()
        run.db_connections_idle = self.proj.database_connections()

    async def load(self, audience: live.Audience) -> None:
        """The messages with the listeners connected, then the bot replies."""
        run, args = self.run, self.args
        log(f"{run.label}: load, {args.rate:g} messages/s for {args.duration:g} s")
        send = self.messages("load", args.duration)

        async def with_lag() -> list[Sent]:
            run.lag = []
            stop = asyncio.Event()
            lag_task = asyncio.create_task(load.loop_lag(run.lag, stop))
            try:
                return await send()
            finally:
                stop.set()
                await lag_task

        async def drain(sends: list[Sent]) -> None:
            run.db_connections_load = self.proj.database_connections()
            expected = live.expected_by_room(sends)
            run.drain_waited = await live.wait_for_deliveries(audience, expected)

        run.load_attempts = await self.measured("load", with_lag, settle=drain)
        log(f"{run.label}: bot replies, one per conversation at {args.rate:g}/s")
        replies = api.bot_reply_request(self.bases, self.proj.demo, self.rooms)
        run.replies_attempts = await self.measured(
            "bot replies",
            lambda: api.send_open_loop(replies, rate=args.rate, count=len(self.rooms)),
            settle=lambda sends: live.wait_for_deliveries(audience, live.expected_by_room(sends)),
            attempts=1,
        )

    async def hung_up(self) -> None:
        """The server notices the hang-ups and lets go of the subscriptions."""
        for _ in range(100):
            self.run.channels_after = self.channels()
            if self.run.channels_after == 0:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)
        self.run.memory_after = self.memory()
        self.redis_client.close()

    async def measure(self) -> None:
        run = self.run
        await self.baseline()
        await asyncio.sleep(2)
        run.memory_none = self.memory()
        log(f"{run.label}: connecting {sum(len(r.members) for r in self.rooms)} listeners")
        webhook = self.proj.demo["webhookId"]
        audience = await live.connect_audience(self.bases, webhook, self.rooms)
        run.listeners, run.connect_wall = audience.listeners, audience.connect_wall
        try:
            await self.idle()
            await self.load(audience)
        finally:
            await audience.hang_up()
        await self.hung_up()


# ---------------------------------------------------------------- checks


def check_run(run: Run, failures: list[str]) -> None:
    label = run.label
    named = (
        ("baseline", run.baseline_attempts),
        ("load", run.load_attempts),
        ("replies", run.replies_attempts),
    )
    for name, attempts in named:
        for phase in attempts:
            where = f"{label} {name} (attempt {phase.attempt})"
            bad = [s for s in phase.result if s.status != 201]
            if bad:
                failures.append(
                    f"{where}: {len(bad)} of {len(phase.result)} POSTs not 201, e.g. "
                    f"{bad[0].status} {bad[0].error}"
                )
            answered = len(phase.result) - len(bad)
            stored = phase.stored
            if name == "replies":
                if stored["bot"] != answered or stored["user"] or stored["events"]:
                    failures.append(f"{where}: {answered} x 201 but stored {stored}")
            elif stored["user"] != answered or stored["events"] != answered or stored["bot"]:
                failures.append(f"{where}: {answered} x 201 but stored {stored}")
            if stored["unmatched"]:
                failures.append(f"{where}: messages without exactly one event: {stored}")

    load_ids = live.expected_by_room([s for phase in run.load_attempts for s in phase.result])
    reply_ids = live.expected_by_room(run.replies.result)
    problems: Counter[str] = Counter()
    for item in run.listeners:
        if item.error or item.status != 200:
            problems[f"not connected or failed ({item.error or item.status})"] += 1
            continue
        if item.ended:
            problems["stream ended by the server"] += 1
        if len(item.pings) < 2:
            problems["no heartbeat after the first ping"] += 1
        wanted = load_ids.get(item.room, set()) | reply_ids.get(item.room, set())
        got = set(item.arrivals)
        if wanted - got:
            problems["missed messages of its conversation"] += 1
        if any(len(item.arrivals[m]) != 1 for m in got & wanted):
            problems["got a message more than once"] += 1
        if item.foreign:
            problems["got messages of another conversation"] += 1
        if got - wanted - set(item.foreign):
            problems["got messages it did not expect"] += 1
        if any(item.is_bot.get(m) is not False for m in load_ids.get(item.room, set()) & got):
            problems["a user's message without isBot false"] += 1
        if any(item.is_bot.get(m) is not True for m in reply_ids.get(item.room, set()) & got):
            problems["a bot reply without isBot true"] += 1
    for problem, listeners in problems.items():
        failures.append(f"{label}: {listeners} listeners: {problem}")
    if run.channels_after:
        failures.append(f"{label}: {run.channels_after} channels still subscribed after hang-up")


# ---------------------------------------------------------------- report


def print_run(run: Run, args: argparse.Namespace) -> None:
    listeners = len(run.listeners)
    print()
    print(f"--- {run.label}")
    connect = [item.pings[0] - item.requested_at for item in run.listeners if item.pings]
    print(
        f"listeners: {listeners} connected in {run.connect_wall:.1f} s "
        f"({live.CONNECT_CONCURRENCY} connecting at once); request -> first ping {spread(connect)}"
    )
    print(f"client connections held by each uvicorn process: {run.per_process}")
    print(
        f"redis channels of the conversations subscribed: {run.channels_listening} with the "
        f"listeners, {run.channels_after} after they hung up"
    )
    beats = [item.pings[1] - item.pings[0] for item in run.listeners if len(item.pings) > 1]
    with_beat = sum(len(item.pings) > 1 for item in run.listeners)
    print(
        f"heartbeat (LIVE_STREAM_HEARTBEAT {args.heartbeat:g} s, idle {run.idle_seconds:.1f} s): "
        f"{with_beat}/{listeners} listeners got one; first ping -> next: "
        + (
            f"min {min(beats):.2f} s, p50 {percentile(beats, 50):.2f} s, max {max(beats):.2f} s"
            if beats
            else "none"
        )
    )
    per = (run.memory_idle - run.memory_none) / max(listeners, 1)
    print(
        f"memory (resident, uvicorn processes): no listeners {run.memory_none / 1024:.1f} MB, "
        f"{listeners} idle listeners {run.memory_idle / 1024:.1f} MB "
        f"(+{(run.memory_idle - run.memory_none) / 1024:.1f} MB = {per:.1f} KB per listener), "
        f"after they hung up {run.memory_after / 1024:.1f} MB"
    )
    print(
        f"PostgreSQL connections of {DB}: {run.db_connections_idle} with the listeners idle, "
        f"{run.db_connections_load} at the end of the load"
    )
    print_phases(run)


def print_phases(run: Run) -> None:
    """The baseline, the load and the bot replies: latencies, CPU, rows stored."""
    listeners = len(run.listeners)
    baseline, loaded, replies = run.baseline, run.load, run.replies
    print(f"baseline, no listeners ({about(baseline)}):")
    print(f"  POST -> 201                     {spread(api.post_latencies(baseline.result))}")
    print(baseline.cpu.report("the baseline", len(baseline.result), unit="message"))
    print(
        f"load, {listeners} listeners ({about(loaded)}; all delivered "
        f"{run.drain_waited:.1f} s after the last answer):"
    )
    print(f"  POST -> 201                     {spread(api.post_latencies(loaded.result))}")
    print(f"  send -> each listener           {spread(run.latencies(loaded.result))}")
    from_schedule = run.latencies(loaded.result, scheduled=True)
    print(f"  scheduled -> each listener      {spread(from_schedule)}")
    print(f"  send -> last listener of a msg  {spread(run.last_arrivals(loaded.result))}")
    print(f"  client event loop lag           {spread(run.lag)}")
    print(loaded.cpu.report("the load", len(loaded.result), unit="message"))
    print(f"bot replies through POST /v1/chat/messages ({about(replies)}):")
    print(f"  POST -> 201                     {spread(api.post_latencies(replies.result))}")
    print(f"  send -> each listener           {spread(run.latencies(replies.result))}")
    for name, attempts in (
        ("baseline", run.baseline_attempts),
        ("load", run.load_attempts),
        ("replies", run.replies_attempts),
    ):
        print(
            f"stored during the {name}: "
            + "; ".join(
                f"attempt {p.attempt}: {sum(s.status == 201 for s in p.result)} x 201, {p.stored}"
                for p in attempts
            )
        )
    others: Counter[str] = Counter()
    for item in run.listeners:
        others.update(item.other_types)
    if others:
        print(f"other event types received: {dict(others)}")


def about(phase: Phase) -> str:
    return (
        f"attempt {phase.attempt}, background {phase.background:.2f} cores before, "
        f"{phase.cpu.other:.2f} during"
    )


def result_lines(run: Run, raw: list[float]) -> list[str]:
    alone = api.post_latencies(run.baseline.result)
    fan = run.latencies(run.load.result)
    p50, p99 = percentile(fan, 50), percentile(fan, 99)
    per = (run.memory_idle - run.memory_none) / max(len(run.listeners), 1)
    with_them = api.post_latencies(run.load.result)
    replies = run.latencies(run.replies.result)
    return [
        f"  {run.label}",
        f"    send -> listener            p50 {ms(p50)}   p99 {ms(p99)}   ({len(fan)} deliveries)",
        f"    POST -> 201, no listeners   p50 {ms(percentile(alone, 50))}   "
        f"p99 {ms(percentile(alone, 99))}",
        f"    POST -> 201, with them      p50 {ms(percentile(with_them, 50))}   "
        f"p99 {ms(percentile(with_them, 99))}",
        f"    ratio listener / POST alone p50 {p50 / percentile(alone, 50):8.2f} x    "
        f"p99 {p99 / percentile(alone, 99):8.2f} x",
        f"    ratio listener / raw Redis  p50 {p50 / percentile(raw, 50):8.1f} x    "
        f"p99 {p99 / percentile(raw, 99):8.1f} x",
        f"    bot reply -> listener       p50 {ms(percentile(replies, 50))}   "
        f"p99 {ms(percentile(replies, 99))}",
        f"    memory per idle listener    {per:8.1f} KB  ({run.memory_none / 1024:.1f} -> "
        f"{run.memory_idle / 1024:.1f} MB)",
    ]


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=250)
    parser.add_argument(
        "--per-conversation", type=int, default=4, help="participants, each listening once"
    )
    parser.add_argument("--rate", type=float, default=50, help="messages a second")
    parser.add_argument("--duration", type=float, default=20, help="seconds of each phase")
    parser.add_argument(
        "--processes",
        default="1,2,serve",
        help="uvicorn processes (one worker each, on ports of their own) of each run, "
        "comma-separated: listeners and messages alternate between them; `serve`: the "
        "Procfile's web line (platform_site.serve, one process per core on one port)",
    )
    parser.add_argument(
        "--heartbeat", type=float, default=15.0, help="LIVE_STREAM_HEARTBEAT of the server"
    )
    args = parser.parse_args()
    args.listeners = args.conversations * args.per_conversation
    return args


def raw_redis(args: argparse.Namespace) -> live.RawRedis:
    log(
        f"raw Redis baseline: {args.listeners} subscribers on {args.conversations} channels, "
        f"{args.rate:g}/s for {args.duration:g} s"
    )
    return live.raw_redis(
        channels=args.conversations,
        per_channel=args.per_conversation,
        rate=args.rate,
        seconds=args.duration,
        quiet_wait=QUIET_WAIT,
    )


def configuration_run(
    configuration: str, proj: Project, rooms: list[api.Room], args: argparse.Namespace
) -> tuple[Run, list[api.Room]]:
    """One configuration measured: `1`, `2`... uvicorn processes on ports of
    their own, or `serve` (the Procfile's web line); the chat users are made
    through the first one."""
    env = {"LIVE_STREAM_REDIS_URL": CHAT_REDIS_URL, "LIVE_STREAM_HEARTBEAT": str(args.heartbeat)}
    serve = configuration == "serve"
    processes = (os.cpu_count() or 1) if serve else int(configuration)
    label = (
        f"make run's web ({processes} processes, SO_REUSEPORT)"
        if serve
        else f"{processes} uvicorn process{'es' if processes > 1 else ''}"
    )
    run = Run(label=label, processes=processes)
    with servers.asgi_servers(proj, processes, procfile=serve, env=env) as started:
        if not rooms:
            rooms = api.make_rooms_sync(
                started[0].base_url,
                proj.demo["webhookId"],
                rooms=args.conversations,
                per_room=args.per_conversation,
            )
        asyncio.run(Configuration(proj, started, rooms, run, args).measure())
    return run, rooms


def print_summary(args: argparse.Namespace, raw: live.RawRedis, runs: list[Run]) -> None:
    print()
    print(
        f"layout: {args.conversations} conversations x {args.per_conversation} participants, "
        f"each participant a user of its own with one listener ({args.listeners} listeners); "
        f"messages round-robin over the conversations and their participants, "
        f"{args.rate:g}/s for {args.duration:g} s, open loop, {api.POST_CONNECTIONS} keep-alive "
        f"connections; {' then '.join(args.processes.split(','))} uvicorn process(es) "
        "(asyncio loop, h11, no access log), PostgreSQL, Redis bus"
    )
    print(
        f"raw Redis PUBLISH -> SUBSCRIBE ({args.listeners} subscriber connections, "
        f"{args.per_conversation} per channel, redis-py asyncio in this process; background "
        f"{raw.background:.2f} cores before, {raw.cpu.other:.2f} during): "
        f"{spread(raw.latencies)}; {raw.delivered}/{raw.expected} delivered; client CPU while "
        f"publishing {raw.client_cpu:.1f} s"
    )
    for run in runs:
        print_run(run, args)


def print_result(args: argparse.Namespace, raw: live.RawRedis, runs: list[Run]) -> None:
    print()
    print("RESULT chat_stream")
    print(
        f"  {args.listeners} listeners = {args.conversations} conversations x "
        f"{args.per_conversation}; {args.rate:g} messages/s for {args.duration:g} s"
    )
    print(
        f"  raw Redis PUBLISH -> SUBSCRIBE  p50 {ms(percentile(raw.latencies, 50))}   "
        f"p99 {ms(percentile(raw.latencies, 99))}"
    )
    for run in runs:
        for line in result_lines(run, raw.latencies):
            print(line)
    noisy = [
        f"{run.label} {name} {phase.cpu.other:.2f}"
        for run in runs
        for name, phase in (("baseline", run.baseline), ("load", run.load))
        if phase.cpu.other > machine.BACKGROUND_LIMIT
    ]
    if raw.cpu.other > machine.BACKGROUND_LIMIT:
        noisy.insert(0, f"raw Redis {raw.cpu.other:.2f}")
    background_warning(noisy)


def main() -> int:
    args = parse_args()
    machine.raise_file_limit(2 * args.listeners + 1000)
    machine.start("== chat live stream: message created -> event received by each listener")
    failures: list[str] = []
    runs: list[Run] = []
    with run_queue("bench-chat"), project(DB, redis_url=CHAT_REDIS_URL) as proj:
        raw = raw_redis(args)
        if raw.delivered != raw.expected:
            failures.append(f"raw Redis: {raw.delivered} of {raw.expected} deliveries arrived")
        rooms: list[api.Room] = []
        for configuration in args.processes.split(","):
            run, rooms = configuration_run(configuration, proj, rooms, args)
            runs.append(run)
            check_run(run, failures)
    print_summary(args, raw, runs)
    print_result(args, raw, runs)
    return verdict(
        failures,
        "  correctness: every POST 201 and stored (one message_created event per user message); "
        "every listener got a heartbeat and each message of its conversation exactly once, "
        "nothing of others, isBot right; no channel left subscribed",
    )


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
