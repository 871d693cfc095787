"""The project's own API as several benchmarks use it: the create-event
request (its body, headers, wrk script and raw bytes), the same row inserted
straight with psycopg (the raw baseline), the rows stored counted against
the 201 answers, the limits set through the ORM, and chat users with their
conversations made through the chat interface."""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path
from typing import Any

import aiohttp
from psycopg import sql
from psycopg.types.json import Jsonb
from ulid import ULID

from harness.load import (
    SOCKET_ERRORS,
    WRK_LUA,
    Counted,
    limit_script,
    on_schedule,
    post_script,
    warm_then_counted,
    wrk_failed,
    wrk_rate,
)
from harness.machine import CpuUse
from harness.project import Project
from harness.report import log
from harness.servers import WebServer

EVENT_TYPE = "bench.order_created"
EVENT_PAYLOAD: dict[str, Any] = {
    "orderId": "ord_12345",
    "amount": 4200,
    "currency": "EUR",
    "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}],
    "note": "benchmark event",
}
JSON = "application/json"


# ---------------------------------------------------------------- create event


def event_body(event_type: str = EVENT_TYPE) -> str:
    """POST /v1/chat/events's body, compact."""
    return json.dumps({"type": event_type, "payload": EVENT_PAYLOAD}, separators=(",", ":"))


def bot_headers(token: str, bot_id: str) -> dict[str, str]:
    """A runtime request's headers: the token and the bot it acts as."""
    return {"Content-Type": JSON, "Authorization": f"Bearer {token}", "x-bot-id": bot_id}


def demo_headers(demo: dict[str, Any]) -> dict[str, str]:
    """`bot_headers` of the demo's developer token and bot."""
    return bot_headers(demo["tokens"]["developer"], demo["botId"])


def demo_auth(demo: dict[str, Any]) -> dict[str, str]:
    """A read's headers: the demo's developer token and bot, no body type."""
    return {"Authorization": f"Bearer {demo['tokens']['developer']}", "x-bot-id": demo["botId"]}


def event_script(path: Path, demo: dict[str, Any]) -> Path:
    """A wrk script of create event as the demo bot."""
    return post_script(path, headers=demo_headers(demo), body=event_body())


def limited_event_script(
    path: Path,
    demo: dict[str, Any],
    *,
    token: str = "developer",
    key_prefix: str | None = None,
    event_type: str = EVENT_TYPE,
) -> Path:
    """A wrk script of create event as `token` (the demo's developer token, or
    `outsider`: another workspace's), counted by load.LIMIT_LUA (201s, 429s,
    RateLimit headers), each with an Idempotency-Key when `key_prefix`."""
    if token == "developer":
        headers = demo_headers(demo)
    else:
        headers = bot_headers(demo["outsiderToken"], demo["otherBotId"])
    return limit_script(path, headers=headers, body=event_body(event_type), key_prefix=key_prefix)


def http_request(*, port: int, token: str, bot_id: str, body: str) -> bytes:
    """Create event as raw HTTP/1.1 bytes, for the open-loop client."""
    data = body.encode()
    head = (
        f"POST /v1/chat/events HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\n"
        f"x-bot-id: {bot_id}\r\n"
        f"Content-Length: {len(data)}\r\n"
        f"\r\n"
    )
    return head.encode() + data


def post_event(
    base_url: str, demo: dict[str, Any], body: str, key: str | None = None
) -> tuple[int, Message, bytes]:
    """One create event with urllib (an Idempotency-Key when `key`): status,
    headers, body."""
    headers = demo_headers(demo)
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(
        base_url + "/v1/chat/events", data=body.encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def demo_webhook_to(proj: Project, url: str) -> None:
    """The demo bot's webhook pointed at `url` (the receiver, say)."""
    with proj.connect() as conn:
        conn.execute(
            "UPDATE bots_bot SET webhook_url = %s WHERE id = %s", (url, proj.demo["botId"])
        )


def set_limits(proj: Project, *, workspace: int, token: int) -> None:
    """The demo workspace's limit and every token's own ceiling, through the ORM."""
    log(f"limits: workspace {workspace}/min, tokens {token}/min")
    proj.manage(
        "shell",
        "-c",
        "from bots.models import AccessToken, WorkspaceSettings\n"
        "WorkspaceSettings.objects.update_or_create(\n"
        f"    workspace_id={proj.demo['workspaceId']!r},\n"
        f"    defaults={{'rate_limit_per_minute': {workspace:d}}},\n"
        ")\n"
        f"AccessToken.objects.update(rate_limit_per_minute={token:d})\n",
    )


# ---------------------------------------------------------------- raw inserts

INSERT_EVENT = """
INSERT INTO events_event
  (id, bot_id, type, payload, status, failure_reason, conversation_id, user_id,
   message_id, workflow_id, integration_id, due_at, next_attempt_at, lease,
   attempt_count, first_attempt_at, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, NULL, NULL, NULL, NULL, NULL, NULL, %s, %s, 0, 0, NULL, %s, %s)
"""


def raw_inserts(
    proj: Project, *, bot_id: str, connections: int, seconds: float
) -> tuple[int, float]:
    """Rows inserted and the wall time: `connections` threads, one connection
    each, autocommit, one INSERT (one transaction) at a time."""
    counts = [0] * connections
    conns = [proj.connect(autocommit=True) for _ in range(connections)]
    barrier = threading.Barrier(connections + 1)
    stop_at = [0.0]

    def worker(index: int) -> None:
        conn = conns[index]
        with conn.cursor() as cursor:
            barrier.wait()
            n = 0
            while time.monotonic() < stop_at[0]:
                now = datetime.now(UTC)
                cursor.execute(
                    INSERT_EVENT,
                    (
                        f"evt_{ULID()}",
                        bot_id,
                        EVENT_TYPE,
                        Jsonb(EVENT_PAYLOAD),
                        "pending",
                        now,
                        now,
                        now,
                        now,
                    ),
                )
                n += 1
            counts[index] = n

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    stop_at[0] = started + seconds
    barrier.wait()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    for conn in conns:
        conn.close()
    return sum(counts), wall


# ---------------------------------------------------------------- rows stored


def count_events(proj: Project) -> int:
    return int(proj.scalar("SELECT count(*) FROM events_event"))


def stored(proj: Project) -> dict[str, int]:
    """Users' messages, message_created events, create-event events, and the
    users' messages without exactly one message_created event."""
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
            (EVENT_TYPE,),
        ).fetchone()
    assert row is not None
    return {"messages": row[0], "message_events": row[1], "events": row[2], "unmatched": row[3]}


def idempotency_table(proj: Project) -> tuple[str | None, str]:
    """The IdempotencyKey model's table, or None and why not."""
    out = proj.manage(
        "shell",
        "-c",
        "try:\n"
        "    from bots.models import IdempotencyKey\n"
        "except ImportError:\n"
        "    print('TABLE -')\n"
        "else:\n"
        "    print('TABLE', IdempotencyKey._meta.db_table)\n",
    )
    table = out.strip().splitlines()[-1].split()[-1]
    if table == "-":
        return None, "bots.models has no IdempotencyKey"
    with proj.connect(autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    if not row or not row[0]:
        return None, f"table {table} is missing (migration not there or not applied)"
    return table, ""


def stored_with_keys(proj: Project, table: str | None) -> dict[str, int]:
    """`stored`'s counts, plus the idempotency keys of `table` (all, and
    those still claimed without an answer)."""
    counts = stored(proj)
    counts["keys"] = counts["keys_open"] = 0
    if table is not None:
        with proj.connect(autocommit=True) as conn:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*), count(*) FILTER (WHERE status_code IS NULL) FROM {}"
                ).format(sql.Identifier(table))
            ).fetchone()
        assert row is not None
        counts["keys"], counts["keys_open"] = int(row[0]), int(row[1])
    return counts


@dataclass
class WrkRun:
    """What the wrk phases of a run share: its options, project, wrk, a
    folder for the Lua scripts, and the failed checks so far."""

    args: argparse.Namespace
    proj: Project
    wrk: str
    tmp: Path
    failures: list[str] = field(default_factory=list)

    def event_phase(
        self,
        server: WebServer,
        script: Callable[[str], Path],
        *,
        label: str,
        request: str,
        count: Callable[[], dict[str, int]] | None = None,
        groups: dict[str, list[int]] | None = None,
    ) -> tuple[Measured, Counted[dict[str, int]]]:
        """Create event on `server` under wrk (the run's --connections,
        --warmup, --duration, --quiet-wait): `script("warm")` for the warm-up,
        then `script("load")` counted (`count`, by default `stored`) with the
        CPU of the serving processes ("serve") and of `groups`; checked
        (`check_measured`)."""
        args = self.args
        done = warm_then_counted(
            self.wrk,
            f"{server.base_url}/v1/chat/events",
            script,
            label=label,
            connections=args.connections,
            warmup=args.warmup,
            seconds=args.duration,
            count=count or (lambda: stored(self.proj)),
            groups={"serve": server.pids(), **(groups or {})},
            quiet_wait=args.quiet_wait,
        )
        measured = Measured("serve", request, done.result, done.cpu, done.stored["events"])
        check_measured(measured, args.connections, done.before, done.after, self.failures)
        return measured, done


@dataclass
class Measured:
    """One wrk phase against a server: its summary, CPU and rows stored."""

    server: str
    request: str  # "event", "message", "get", "list", or a configuration's label
    wrk: dict[str, int]
    cpu: CpuUse
    created: int  # rows stored during the phase

    @property
    def rate(self) -> float:
        return wrk_rate(self.wrk)

    @property
    def server_ms_per_request(self) -> float:
        return self.cpu.per_request_ms(self.server, self.wrk["requests"])


def check_measured(
    measured: Measured,
    connections: int,
    before: dict[str, int],
    after: dict[str, int],
    failures: list[str],
) -> None:
    """Every answer a success, rows stored = 201s (+ at most one request in
    flight per connection when wrk stopped), reads store nothing, each
    message with one message_created event."""
    w = measured.wrk
    name = f"{measured.server} {measured.request}"
    if wrk_failed(w, SOCKET_ERRORS):
        failures.append(f"{name}: non-201 answers or socket errors: {w}")
    if measured.request in ("get", "list"):
        if after["events"] != before["events"] or after["messages"] != before["messages"]:
            failures.append(f"{name}: a read stored something: {before} -> {after}")
    elif not 0 <= measured.created - w["created"] <= connections:
        failures.append(f"{name}: {measured.created} stored but {w['created']} answered 201")
    messages = after["messages"] - before["messages"]
    if after["message_events"] - before["message_events"] != messages:
        failures.append(f"{name}: messages {messages} without one message_created event each")


# ---------------------------------------------------------------- chat users

SETUP_CONCURRENCY = 8  # requests in flight while making users and conversations


@dataclass
class Member:
    user_id: str  # chat id
    key: str


@dataclass
class Room:
    conversation_id: str  # chat id (here also the runtime id: no caller-chosen id)
    members: list[Member]


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


def make_rooms_sync(base: str, webhook: str, *, rooms: int, per_room: int) -> list[Room]:
    log(f"making {rooms * per_room} chat users, {rooms} conversations")
    return asyncio.run(make_rooms(base, webhook, rooms=rooms, per_room=per_room))


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


def message_script(path: Path, rooms: list[Room]) -> None:
    """A wrk script that sends each request as the next sender, into its conversation."""
    senders = []
    for room in rooms:
        body = json.dumps(
            {"payload": {"type": "text", "text": "hello"}, "conversationId": room.conversation_id},
            separators=(",", ":"),
        )
        senders.append(f"  {{{json.dumps(room.members[0].key)}, {json.dumps(body)}}},")
    path.write_text(MESSAGE_LUA_HEAD.format(senders="\n".join(senders)) + WRK_LUA)


# ---------------------------------------------------------------- chat messages, open loop

POST_CONNECTIONS = 16  # keep-alive connections of the open-loop message sender

MessageRequest = Callable[[int], tuple[str, dict[str, Any], dict[str, str], int]]


@dataclass
class Sent:
    room: int
    scheduled: float
    started: float
    done: float
    status: int
    message_id: str | None
    error: str = ""


async def send_open_loop(
    make_request: MessageRequest,
    *,
    rate: float,
    count: int,
    connections: int = POST_CONNECTIONS,
) -> list[Sent]:
    """POST `count` messages at `rate` a second on a fixed schedule over
    `connections` keep-alive connections, whatever the answers' pace (open
    loop). `make_request(i)` gives (url, body, headers, room index)."""
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=connections)
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
        async for i, scheduled in on_schedule(loop.time() + 0.05, rate, count):
            tasks.append(asyncio.create_task(one(i, scheduled)))
        return list(await asyncio.gather(*tasks))


def post_latencies(sends: list[Sent]) -> list[float]:
    return [s.done - s.started for s in sends if s.status == 201]


def chat_message_request(
    bases: list[str], webhook: str, rooms: list[Room], tag: str
) -> MessageRequest:
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


def bot_reply_request(bases: list[str], demo: dict[str, Any], rooms: list[Room]) -> MessageRequest:
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


def messages_stored(proj: Project) -> dict[str, int]:
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
