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
import contextlib
import json
import os
import resource
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis
from redis import asyncio as redis_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from benchlib import log, percentile  # noqa: E402

REDIS_URL = os.environ.get("BENCH_CHAT_REDIS_URL", "redis://127.0.0.1:6379/14")
DB = "bench_chat"
CONNECT_CONCURRENCY = 50  # listeners connecting at once
SETUP_CONCURRENCY = 8  # requests in flight while making users and conversations
POST_CONNECTIONS = 16  # keep-alive connections of the message sender
QUIET_WAIT = 60.0  # seconds to wait for a quiet machine before a phase
DRAIN_TIMEOUT = 10.0  # seconds to wait for the last deliveries after a phase
BACKGROUND_LIMIT = 0.3  # cores used by other processes that spoil a phase
ATTEMPTS = 3  # of a phase spoilt by background load


# ---------------------------------------------------------------- data


@dataclass
class Member:
    user_id: str  # chat id
    key: str


@dataclass
class Room:
    conversation_id: str  # chat id (here also the runtime id: no caller-chosen id)
    members: list[Member]


@dataclass
class Sent:
    room: int
    scheduled: float
    started: float
    done: float
    status: int
    message_id: str | None
    error: str = ""


@dataclass
class Listener:
    room: int
    member: Member
    requested_at: float = 0.0
    status: int = 0
    pings: list[float] = field(default_factory=list)
    arrivals: dict[str, list[float]] = field(default_factory=dict)  # message id -> times
    is_bot: dict[str, Any] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)  # message ids of other conversations
    other_types: Counter[str] = field(default_factory=Counter)
    error: str = ""
    ended: bool = False  # the server ended the stream
    connected: asyncio.Event = field(default_factory=asyncio.Event)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def spread(values: list[float]) -> str:
    if not values:
        return "no samples"
    return (
        f"p50 {ms(percentile(values, 50))}  p90 {ms(percentile(values, 90))}  "
        f"p99 {ms(percentile(values, 99))}  max {ms(max(values))}  (n={len(values)})"
    )


# ---------------------------------------------------------------- machine


def raise_file_limit(needed: int) -> None:
    """Listeners are sockets on both ends: the client here and the server (a
    child, which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < needed:
            raise SystemExit(f"open files limited to {hard}: {needed} needed")


def pids_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
    return found


async def quiet() -> float:
    """Wait for a quiet machine without stalling the event loop (listeners)."""
    return await asyncio.to_thread(benchlib.wait_for_quiet, QUIET_WAIT)


def database_connections(proj: benchlib.Project) -> int:
    with benchlib.admin_connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (proj.dbname,)
        ).fetchone()
        return int(row[0]) if row else 0


def stored_counts(proj: benchlib.Project) -> dict[str, int]:
    """Messages (user's and bot's) and message_created events, and the user
    messages that do not have exactly one message_created event."""
    with proj.connect(autocommit=True) as conn:
        row = conn.execute(
            """
            SELECT
              (SELECT count(*) FROM bots_message WHERE NOT is_bot),
              (SELECT count(*) FROM bots_message WHERE is_bot),
              (SELECT count(*) FROM events_event WHERE type = 'message_created'),
              (SELECT count(*) FROM bots_message m WHERE NOT m.is_bot AND (
                 SELECT count(*) FROM events_event e
                 WHERE e.message_id = m.id AND e.type = 'message_created') <> 1)
            """
        ).fetchone()
    assert row is not None
    return {"user": row[0], "bot": row[1], "events": row[2], "unmatched": row[3]}


def channels_of(client: redis.Redis, conversation_ids: Iterable[str]) -> int:
    """Redis channels subscribed now that name one of these conversations."""
    wanted = set(conversation_ids)
    count = 0
    for raw in client.pubsub_channels():
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        if any(part in wanted for part in name.split(":")):
            count += 1
    return count


# ---------------------------------------------------------------- HTTP helpers


async def post_json(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    async with session.post(url, json=body, headers=headers) as answer:
        text = await answer.text()
        if answer.status != 201:
            raise RuntimeError(f"POST {url}: {answer.status} {text[:300]}")
        result: dict[str, Any] = json.loads(text)
        return result


async def bounded(jobs: list[Callable[[], Awaitable[Any]]], limit: int) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def run(job: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            return await job()

    return await asyncio.gather(*(run(job) for job in jobs))


async def make_rooms(base: str, webhook: str, *, rooms: int, per_room: int) -> list[Room]:
    """Users (one per listener), conversations made by their first member, the
    others added as participants by that owner: all through the chat interface."""
    chat = f"{base}/chat/{webhook}"
    async with aiohttp.ClientSession() as session:

        def new_user() -> Callable[[], Awaitable[Member]]:
            async def job() -> Member:
                answer = await post_json(session, f"{chat}/users", {}, {})
                return Member(user_id=answer["user"]["id"], key=answer["key"])

            return job

        members: list[Member] = await bounded(
            [new_user() for _ in range(rooms * per_room)], SETUP_CONCURRENCY
        )
        groups = [members[i * per_room : (i + 1) * per_room] for i in range(rooms)]

        def new_room(group: list[Member]) -> Callable[[], Awaitable[Room]]:
            async def job() -> Room:
                owner = {"x-user-key": group[0].key}
                answer = await post_json(session, f"{chat}/conversations", {}, owner)
                conversation_id = answer["conversation"]["id"]
                for member in group[1:]:
                    await post_json(
                        session,
                        f"{chat}/conversations/{conversation_id}/participants",
                        {"userId": member.user_id},
                        owner,
                    )
                return Room(conversation_id=conversation_id, members=group)

            return job

        made: list[Room] = await bounded([new_room(g) for g in groups], SETUP_CONCURRENCY)
        return made


# ---------------------------------------------------------------- sending (open loop)


async def send_open_loop(
    make_request: Callable[[int], tuple[str, dict[str, Any], dict[str, str], int]],
    *,
    rate: float,
    count: int,
) -> list[Sent]:
    """POST `count` requests at `rate` a second on a fixed schedule over
    POST_CONNECTIONS keep-alive connections, whatever the answers' pace.
    `make_request(i)` gives (url, body, headers, room index)."""
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=POST_CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int, scheduled: float) -> Sent:
            url, body, headers, room = make_request(i)
            started = loop.time()
            try:
                async with session.post(url, json=body, headers=headers) as answer:
                    text = await answer.text()
                    done = loop.time()
                    if answer.status != 201:
                        return Sent(room, scheduled, started, done, answer.status, None, text[:200])
                    message_id = json.loads(text)["message"]["id"]
                    return Sent(room, scheduled, started, done, 201, message_id)
            except (aiohttp.ClientError, TimeoutError) as exc:
                return Sent(room, scheduled, started, loop.time(), -1, None, repr(exc))

        tasks = []
        start = loop.time() + 0.05
        for i in range(count):
            scheduled = start + i / rate
            delay = scheduled - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
        return list(await asyncio.gather(*tasks))


def chat_message_request(
    bases: list[str], webhook: str, rooms: list[Room], tag: str
) -> Callable[[int], tuple[str, dict[str, Any], dict[str, str], int]]:
    """Round-robin over the servers, the conversations, and within each
    conversation over its participants."""

    def make(i: int) -> tuple[str, dict[str, Any], dict[str, str], int]:
        url = f"{bases[i % len(bases)]}/chat/{webhook}/messages"
        index = i % len(rooms)
        room = rooms[index]
        sender = room.members[(i // len(rooms)) % len(room.members)]
        body = {
            "payload": {"type": "text", "text": f"{tag} message {i}"},
            "conversationId": room.conversation_id,
        }
        return url, body, {"x-user-key": sender.key}, index

    return make


def bot_reply_request(
    bases: list[str], demo: dict[str, Any], rooms: list[Room]
) -> Callable[[int], tuple[str, dict[str, Any], dict[str, str], int]]:
    headers = {"Authorization": f"Bearer {demo['tokens']['developer']}", "x-bot-id": demo["botId"]}

    def make(i: int) -> tuple[str, dict[str, Any], dict[str, str], int]:
        url = f"{bases[i % len(bases)]}/v1/chat/messages"
        index = i % len(rooms)
        body = {
            "payload": {"type": "text", "text": f"bot reply {i}"},
            # Without a caller-chosen id the chat id is the runtime conv_ id.
            "conversationId": rooms[index].conversation_id,
            "userId": demo["botId"],
        }
        return url, body, headers, index

    return make


# ---------------------------------------------------------------- listening


async def listen(
    session: aiohttp.ClientSession, url: str, listener: Listener, gate: asyncio.Semaphore
) -> None:
    """One listener: reads the stream until cancelled, recording each event's
    arrival. Holds `gate` until its first ping (connecting at a bounded pace)."""
    loop = asyncio.get_running_loop()
    room_id = url.rsplit("/conversations/", 1)[1].rsplit("/listen", 1)[0]
    await gate.acquire()
    holding = True
    try:
        listener.requested_at = loop.time()
        async with session.get(
            url, headers={"x-user-key": listener.member.key, "Accept": "text/event-stream"}
        ) as answer:
            listener.status = answer.status
            if answer.status != 200:
                listener.error = f"HTTP {answer.status}: {(await answer.text())[:200]}"
                return
            async for line in answer.content:
                now = loop.time()
                if not line.startswith(b"data: "):
                    continue
                event = json.loads(line[6:])
                kind = event.get("type")
                if kind == "ping":
                    listener.pings.append(now)
                    if holding:
                        holding = False
                        gate.release()
                        listener.connected.set()
                elif kind == "message_created":
                    data = event.get("data", {})
                    message_id = str(data.get("id"))
                    listener.arrivals.setdefault(message_id, []).append(now)
                    listener.is_bot[message_id] = data.get("isBot")
                    if data.get("conversationId") != room_id:
                        listener.foreign.append(message_id)
                else:
                    listener.other_types[str(kind)] += 1
            listener.ended = True
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        listener.error = repr(exc)
    finally:
        if holding:
            gate.release()
            listener.connected.set()


@dataclass
class Audience:
    listeners: list[Listener]
    tasks: list[asyncio.Task[None]]
    session: aiohttp.ClientSession
    connect_wall: float

    async def hang_up(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.session.close()


async def connect_audience(bases: list[str], webhook: str, rooms: list[Room]) -> Audience:
    """One listener per participant; a conversation's listeners alternate
    between the servers."""
    loop = asyncio.get_running_loop()
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None),
    )
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    listeners = [
        Listener(room=index, member=member)
        for index, room in enumerate(rooms)
        for member in room.members
    ]
    started = loop.time()
    tasks = [
        asyncio.create_task(
            listen(
                session,
                f"{bases[n % len(bases)]}/chat/{webhook}/conversations/"
                f"{rooms[item.room].conversation_id}/listen",
                item,
                gate,
            )
        )
        for n, item in enumerate(listeners)
    ]
    async with asyncio.timeout(180):
        await asyncio.gather(*(item.connected.wait() for item in listeners))
    return Audience(listeners, tasks, session, loop.time() - started)


async def wait_for_deliveries(audience: Audience, expected: dict[int, set[str]]) -> float:
    """Until every listener has every expected message of its room, or
    DRAIN_TIMEOUT; answers the seconds waited."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while loop.time() - started < DRAIN_TIMEOUT:
        if all(
            expected.get(item.room, set()) <= item.arrivals.keys() for item in audience.listeners
        ):
            break
        await asyncio.sleep(0.1)
    return loop.time() - started


async def loop_lag(samples: list[float], stop: asyncio.Event) -> None:
    """How late this client's event loop wakes up: its own share of the latencies."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(0.01)
        samples.append(loop.time() - before - 0.01)


# ---------------------------------------------------------------- raw Redis baseline


async def redis_round_trip(
    *, channels: int, per_channel: int, rate: float, seconds: float
) -> tuple[list[float], int, int, float]:
    """PUBLISH -> message at each subscriber, one subscriber connection per
    listener; (latencies, expected deliveries, deliveries, client CPU s)."""
    loop = asyncio.get_running_loop()
    prefix = f"bench-chat-raw-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}:{i}" for i in range(channels)]
    client = redis_asyncio.Redis.from_url(REDIS_URL, max_connections=channels * per_channel + 10)
    arrivals: dict[str, list[float]] = {}
    subscribers = []
    readers = []
    try:
        for name in names:
            for _ in range(per_channel):
                pubsub = client.pubsub()
                await pubsub.subscribe(name)
                subscribers.append(pubsub)

        async def read(pubsub: Any) -> None:
            async for message in pubsub.listen():
                if message["type"] == "message":
                    arrivals.setdefault(message["data"].decode(), []).append(loop.time())

        readers = [asyncio.create_task(read(p)) for p in subscribers]
        await asyncio.sleep(1)  # every subscription confirmed and read
        sent: dict[str, float] = {}
        publisher = redis_asyncio.Redis.from_url(REDIS_URL)
        cpu_before = time.process_time()
        start = loop.time() + 0.05
        body = json.dumps({"type": "message_created", "data": {"payload": "x" * 200}})
        for i in range(int(rate * seconds)):
            scheduled = start + i / rate
            delay = scheduled - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            token = f"{i}|{body}"
            sent[token] = loop.time()
            await publisher.publish(names[i % channels], token)
        await asyncio.sleep(1)
        cpu = time.process_time() - cpu_before
        await publisher.aclose()
        latencies = [t - sent[token] for token, times in arrivals.items() for t in times]
        delivered = sum(len(times) for times in arrivals.values())
        return latencies, len(sent) * per_channel, delivered, cpu
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for pubsub in subscribers:
            await pubsub.aclose()
        await client.aclose()


# ---------------------------------------------------------------- one server configuration


@dataclass
class Run:
    """What one uvicorn configuration measured."""

    label: str
    processes: int
    baseline_attempts: list[Phase] = field(default_factory=list)
    load_attempts: list[Phase] = field(default_factory=list)
    replies_attempts: list[Phase] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
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
        by_id = {s.message_id: s for s in sends if s.message_id}
        values: list[float] = []
        for item in self.listeners:
            for message_id, times in item.arrivals.items():
                sent = by_id.get(message_id)
                if sent is not None and sent.room == item.room:
                    origin = sent.scheduled if scheduled else sent.started
                    values.extend(t - origin for t in times)
        return values

    def last_arrivals(self, sends: list[Sent]) -> list[float]:
        """Per message: send -> arrival at the last of its conversation's listeners."""
        last: dict[str, float] = {}
        for item in self.listeners:
            for message_id, times in item.arrivals.items():
                last[message_id] = max(last.get(message_id, 0.0), *times)
        return [last[s.message_id] - s.started for s in sends if s.message_id in last]


def post_latencies(sends: list[Sent]) -> list[float]:
    return [s.done - s.started for s in sends if s.status == 201]


@dataclass
class Phase:
    """One attempt at an open-loop phase."""

    sends: list[Sent]
    cpu: benchlib.CpuUse
    stored: dict[str, int]  # rows added during the attempt
    background: float  # cores busy before it, outside the benchmark
    attempt: int


async def measured_phase(
    label: str,
    send: Callable[[], Awaitable[list[Sent]]],
    *,
    proj: benchlib.Project,
    groups: dict[str, list[int]],
    settle: Callable[[list[Sent]], Awaitable[object]] | None = None,
    attempts: int = ATTEMPTS,
) -> list[Phase]:
    """Run an open-loop phase after waiting for a quiet machine, and again
    (up to `attempts` times) while other processes took more than
    BACKGROUND_LIMIT cores during it. `settle` waits for the deliveries
    before the stored rows are counted."""
    done: list[Phase] = []
    for attempt in range(1, attempts + 1):
        background = await quiet()
        before = stored_counts(proj)
        cpu_before = benchlib.cpu_snapshot(groups)
        sends = await send()
        cpu = benchlib.cpu_use(cpu_before, benchlib.cpu_snapshot(groups))
        if settle is not None:
            await settle(sends)
        done.append(Phase(sends, cpu, delta(before, stored_counts(proj)), background, attempt))
        if cpu.other <= BACKGROUND_LIMIT:
            break
        log(f"{label}: background load {cpu.other:.2f} cores (attempt {attempt})")
    return done


async def measure_configuration(
    proj: benchlib.Project,
    servers: list[benchlib.AsgiServer],
    rooms: list[Room],
    run: Run,
    args: argparse.Namespace,
) -> None:
    bases, webhook, demo = [s.base_url for s in servers], proj.demo["webhookId"], proj.demo
    count = int(args.rate * args.duration)
    groups = {
        "uvicorn": [pid for s in servers for pid in s.pids()],
        "redis": pids_named("redis-server"),
    }
    workers = [pid for s in servers for pid in s.worker_pids()]
    redis_client = redis.Redis.from_url(REDIS_URL)

    log(f"{run.label}: warm-up, {args.rate:g} messages/s for 3 s")
    await send_open_loop(
        chat_message_request(bases, webhook, rooms, "warm-up"),
        rate=args.rate,
        count=int(args.rate * 3),
    )

    log(f"{run.label}: baseline, no listeners, {args.rate:g} messages/s for {args.duration:g} s")
    run.baseline_attempts = await measured_phase(
        f"{run.label} baseline",
        lambda: send_open_loop(
            chat_message_request(bases, webhook, rooms, "baseline"), rate=args.rate, count=count
        ),
        proj=proj,
        groups=groups,
    )

    await asyncio.sleep(2)
    run.memory_none = sum(benchlib.resident_kib(pid) for pid in workers)
    log(f"{run.label}: connecting {sum(len(r.members) for r in rooms)} listeners")
    audience = await connect_audience(bases, webhook, rooms)
    run.listeners, run.connect_wall = audience.listeners, audience.connect_wall
    try:
        run.per_process = [n for s in servers for n in s.connections_by_worker()]
        run.channels_listening = channels_of(redis_client, (r.conversation_id for r in rooms))
        log(f"{run.label}: idle for {args.heartbeat + 3:g} s (heartbeat {args.heartbeat:g} s)")
        loop = asyncio.get_running_loop()
        idle_from = loop.time()
        await asyncio.sleep(args.heartbeat + 3)
        run.idle_seconds = loop.time() - idle_from
        run.memory_idle = sum(benchlib.resident_kib(pid) for pid in workers)
        run.db_connections_idle = database_connections(proj)

        log(f"{run.label}: load, {args.rate:g} messages/s for {args.duration:g} s")

        async def load() -> list[Sent]:
            run.lag = []
            stop = asyncio.Event()
            lag_task = asyncio.create_task(loop_lag(run.lag, stop))
            try:
                return await send_open_loop(
                    chat_message_request(bases, webhook, rooms, "load"),
                    rate=args.rate,
                    count=count,
                )
            finally:
                stop.set()
                await lag_task

        async def drain(sends: list[Sent]) -> None:
            run.db_connections_load = database_connections(proj)
            run.drain_waited = await wait_for_deliveries(audience, expected_by_room(sends))

        run.load_attempts = await measured_phase(
            f"{run.label} load", load, proj=proj, groups=groups, settle=drain
        )

        log(f"{run.label}: bot replies, one per conversation at {args.rate:g}/s")
        run.replies_attempts = await measured_phase(
            f"{run.label} bot replies",
            lambda: send_open_loop(
                bot_reply_request(bases, demo, rooms), rate=args.rate, count=len(rooms)
            ),
            proj=proj,
            groups=groups,
            settle=lambda sends: wait_for_deliveries(audience, expected_by_room(sends)),
            attempts=1,
        )
    finally:
        await audience.hang_up()
    # The server notices the hang-ups and lets go of the subscriptions.
    for _ in range(100):
        run.channels_after = channels_of(redis_client, (r.conversation_id for r in rooms))
        if run.channels_after == 0:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(2)
    run.memory_after = sum(benchlib.resident_kib(pid) for pid in workers)
    redis_client.close()


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in after}


def expected_by_room(sends: list[Sent]) -> dict[int, set[str]]:
    expected: dict[int, set[str]] = {}
    for sent in sends:
        if sent.message_id:
            expected.setdefault(sent.room, set()).add(sent.message_id)
    return expected


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
            bad = [s for s in phase.sends if s.status != 201]
            if bad:
                failures.append(
                    f"{where}: {len(bad)} of {len(phase.sends)} POSTs not 201, e.g. "
                    f"{bad[0].status} {bad[0].error}"
                )
            answered = len(phase.sends) - len(bad)
            stored = phase.stored
            if name == "replies":
                if stored["bot"] != answered or stored["user"] or stored["events"]:
                    failures.append(f"{where}: {answered} x 201 but stored {stored}")
            elif stored["user"] != answered or stored["events"] != answered or stored["bot"]:
                failures.append(f"{where}: {answered} x 201 but stored {stored}")
            if stored["unmatched"]:
                failures.append(f"{where}: messages without exactly one event: {stored}")

    load_ids = expected_by_room([s for phase in run.load_attempts for s in phase.sends])
    reply_ids = expected_by_room(run.replies.sends)
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
        f"({CONNECT_CONCURRENCY} connecting at once); request -> first ping {spread(connect)}"
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
    baseline, load, replies = run.baseline, run.load, run.replies
    print(f"baseline, no listeners ({about(baseline)}):")
    print(f"  POST -> 201                     {spread(post_latencies(baseline.sends))}")
    print(baseline.cpu.report("the baseline", len(baseline.sends), unit="message"))
    print(
        f"load, {listeners} listeners ({about(load)}; all delivered "
        f"{run.drain_waited:.1f} s after the last answer):"
    )
    print(f"  POST -> 201                     {spread(post_latencies(load.sends))}")
    print(f"  send -> each listener           {spread(run.latencies(load.sends))}")
    print(f"  scheduled -> each listener      {spread(run.latencies(load.sends, scheduled=True))}")
    print(f"  send -> last listener of a msg  {spread(run.last_arrivals(load.sends))}")
    print(f"  client event loop lag           {spread(run.lag)}")
    print(load.cpu.report("the load", len(load.sends), unit="message"))
    print(f"bot replies through POST /v1/chat/messages ({about(replies)}):")
    print(f"  POST -> 201                     {spread(post_latencies(replies.sends))}")
    print(f"  send -> each listener           {spread(run.latencies(replies.sends))}")
    for name, attempts in (
        ("baseline", run.baseline_attempts),
        ("load", run.load_attempts),
        ("replies", run.replies_attempts),
    ):
        print(
            f"stored during the {name}: "
            + "; ".join(
                f"attempt {p.attempt}: {sum(s.status == 201 for s in p.sends)} x 201, {p.stored}"
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
    alone = post_latencies(run.baseline.sends)
    fan = run.latencies(run.load.sends)
    p50, p99 = percentile(fan, 50), percentile(fan, 99)
    per = (run.memory_idle - run.memory_none) / max(len(run.listeners), 1)
    with_them = post_latencies(run.load.sends)
    replies = run.latencies(run.replies.sends)
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


@contextlib.contextmanager
def run_queue() -> Iterator[str]:
    """A Celery queue of the run's own (seed_demo enqueues the demo file's
    indexing), deleted at the end."""
    queue = f"bench-chat-{os.getpid()}"
    os.environ["CELERY_QUEUE"] = queue
    try:
        yield queue
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        client.close()


def main() -> int:
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
    configurations = args.processes.split(",")
    listeners = args.conversations * args.per_conversation
    raise_file_limit(2 * listeners + 1000)

    benchlib.exit_cleanly_on_sigterm()
    print("== chat live stream: message created -> event received by each listener")
    benchlib.print_machine()
    failures: list[str] = []
    runs: list[Run] = []
    server_env = {"LIVE_STREAM_REDIS_URL": REDIS_URL, "LIVE_STREAM_HEARTBEAT": str(args.heartbeat)}

    with run_queue(), benchlib.project(DB, redis_url=REDIS_URL) as proj:
        log(
            f"raw Redis baseline: {listeners} subscribers on {args.conversations} channels, "
            f"{args.rate:g}/s for {args.duration:g} s"
        )
        raw_background = benchlib.wait_for_quiet(QUIET_WAIT)
        redis_group = {"redis": pids_named("redis-server")}
        raw_before = benchlib.cpu_snapshot(redis_group)
        raw, raw_expected, raw_delivered, raw_client_cpu = asyncio.run(
            redis_round_trip(
                channels=args.conversations,
                per_channel=args.per_conversation,
                rate=args.rate,
                seconds=args.duration,
            )
        )
        raw_cpu = benchlib.cpu_use(raw_before, benchlib.cpu_snapshot(redis_group))
        if raw_delivered != raw_expected:
            failures.append(f"raw Redis: {raw_delivered} of {raw_expected} deliveries arrived")
        rooms: list[Room] = []
        for configuration in configurations:
            serve = configuration == "serve"
            processes = (os.cpu_count() or 1) if serve else int(configuration)
            label = (
                f"make run's web ({processes} processes, SO_REUSEPORT)"
                if serve
                else f"{processes} uvicorn process{'es' if processes > 1 else ''}"
            )
            run = Run(label=label, processes=processes)
            with contextlib.ExitStack() as stack:
                if serve:
                    servers = [
                        stack.enter_context(
                            benchlib.procfile_web(
                                proj, workers=processes, env={**server_env, "WEB_ACCESS_LOG": "0"}
                            )
                        )
                    ]
                else:
                    servers = [
                        stack.enter_context(benchlib.uvicorn(proj, env=server_env))
                        for _ in range(processes)
                    ]
                if not rooms:
                    log(f"making {listeners} users, {args.conversations} conversations")
                    rooms = asyncio.run(
                        make_rooms(
                            servers[0].base_url,
                            proj.demo["webhookId"],
                            rooms=args.conversations,
                            per_room=args.per_conversation,
                        )
                    )
                asyncio.run(measure_configuration(proj, servers, rooms, run, args))
            runs.append(run)
            check_run(run, failures)

    print()
    print(
        f"layout: {args.conversations} conversations x {args.per_conversation} participants, "
        f"each participant a user of its own with one listener ({listeners} listeners); "
        f"messages round-robin over the conversations and their participants, "
        f"{args.rate:g}/s for {args.duration:g} s, open loop, {POST_CONNECTIONS} keep-alive "
        f"connections; {' then '.join(configurations)} uvicorn process(es) "
        "(asyncio loop, h11, no access log), PostgreSQL, Redis bus"
    )
    print(
        f"raw Redis PUBLISH -> SUBSCRIBE ({listeners} subscriber connections, "
        f"{args.per_conversation} per channel, redis-py asyncio in this process; background "
        f"{raw_background:.2f} cores before, {raw_cpu.other:.2f} during): {spread(raw)}; "
        f"{raw_delivered}/{raw_expected} delivered; client CPU while publishing "
        f"{raw_client_cpu:.1f} s"
    )
    for run in runs:
        print_run(run, args)

    print()
    print("RESULT chat_stream")
    print(
        f"  {listeners} listeners = {args.conversations} conversations x {args.per_conversation}; "
        f"{args.rate:g} messages/s for {args.duration:g} s"
    )
    print(
        f"  raw Redis PUBLISH -> SUBSCRIBE  p50 {ms(percentile(raw, 50))}   "
        f"p99 {ms(percentile(raw, 99))}"
    )
    for run in runs:
        for line in result_lines(run, raw):
            print(line)
    noisy = [
        f"{run.label} {name} {phase.cpu.other:.2f}"
        for run in runs
        for name, phase in (("baseline", run.baseline), ("load", run.load))
        if phase.cpu.other > BACKGROUND_LIMIT
    ]
    if raw_cpu.other > BACKGROUND_LIMIT:
        noisy.insert(0, f"raw Redis {raw_cpu.other:.2f}")
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print(
        "  correctness: every POST 201 and stored (one message_created event per user message); "
        "every listener got a heartbeat and each message of its conversation exactly once, "
        "nothing of others, isBot right; no channel left subscribed"
    )
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
