"""The live stream as its clients see it: listeners of conversations
(`GET /chat/{webhookId}/conversations/{id}/listen`, server-sent events) that
record when each message arrives, connected at a bounded pace, waited on
until they have what was sent; the latencies from each send; the Redis
channels the servers hold; and the raw Redis PUBLISH -> SUBSCRIBE round trip
that the stream's latency is compared with."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import redis
from redis import asyncio as redis_asyncio

from harness import load, machine
from harness.api import Member, Room, Sent
from harness.project import CHAT_REDIS_URL

CONNECT_CONCURRENCY = 50  # listeners connecting at once
DRAIN_TIMEOUT = 10.0  # seconds to wait for the last deliveries after a phase


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


def expected_by_room(sends: list[Sent]) -> dict[int, set[str]]:
    expected: dict[int, set[str]] = {}
    for sent in sends:
        if sent.message_id:
            expected.setdefault(sent.room, set()).add(sent.message_id)
    return expected


def latencies(
    listeners: list[Listener], sends: list[Sent], *, scheduled: bool = False
) -> list[float]:
    """Send (or scheduled send) -> arrival, for each listener of each message's room."""
    by_id = {s.message_id: s for s in sends if s.message_id}
    values: list[float] = []
    for item in listeners:
        for message_id, times in item.arrivals.items():
            sent = by_id.get(message_id)
            if sent is not None and sent.room == item.room:
                origin = sent.scheduled if scheduled else sent.started
                values.extend(t - origin for t in times)
    return values


def last_arrivals(listeners: list[Listener], sends: list[Sent]) -> list[float]:
    """Per message: send -> arrival at the last of its conversation's listeners."""
    last: dict[str, float] = {}
    for item in listeners:
        for message_id, times in item.arrivals.items():
            last[message_id] = max(last.get(message_id, 0.0), *times)
    return [last[s.message_id] - s.started for s in sends if s.message_id in last]


def channels_of(client: redis.Redis, conversation_ids: Iterable[str]) -> int:
    """Redis channels subscribed now that name one of these conversations."""
    wanted = set(conversation_ids)
    count = 0
    for raw in client.pubsub_channels():
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        if any(part in wanted for part in name.split(":")):
            count += 1
    return count


async def redis_round_trip(
    *, channels: int, per_channel: int, rate: float, seconds: float
) -> tuple[list[float], int, int, float]:
    """PUBLISH -> message at each subscriber, one subscriber connection per
    listener; (latencies, expected deliveries, deliveries, client CPU s)."""
    loop = asyncio.get_running_loop()
    prefix = f"bench-chat-raw-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}:{i}" for i in range(channels)]
    client = redis_asyncio.Redis.from_url(
        CHAT_REDIS_URL, max_connections=channels * per_channel + 10
    )
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
        publisher = redis_asyncio.Redis.from_url(CHAT_REDIS_URL)
        cpu_before = time.process_time()
        start = loop.time() + 0.05
        body = json.dumps({"type": "message_created", "data": {"payload": "x" * 200}})
        async for i, _ in load.on_schedule(start, rate, int(rate * seconds)):
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


@dataclass
class RawRedis:
    """The raw Redis baseline: latencies, deliveries, CPU."""

    latencies: list[float]
    expected: int
    delivered: int
    client_cpu: float
    background: float  # cores busy before it, outside the benchmark
    cpu: machine.CpuUse


def raw_redis(
    *, channels: int, per_channel: int, rate: float, seconds: float, quiet_wait: float
) -> RawRedis:
    """`redis_round_trip` after a quiet machine, with Redis's CPU."""
    background = machine.wait_for_quiet(quiet_wait)
    meter = machine.CpuMeter({"redis": machine.pids_named("redis-server")})
    latencies, expected, delivered, client_cpu = asyncio.run(
        redis_round_trip(channels=channels, per_channel=per_channel, rate=rate, seconds=seconds)
    )
    return RawRedis(latencies, expected, delivered, client_cpu, background, meter.stop())
