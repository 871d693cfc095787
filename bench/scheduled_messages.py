"""Scheduled bot messages: how late a message sent with a `schedule` reaches
a conversation's listener, against events due at the same moments reaching
their webhook, in the same run, through the same claims of the project's
own worker (as the Procfile starts it) on PostgreSQL and Redis.

Both sets are written straight into their tables (as the service stores
them), COUNT of each, due spread over SPREAD seconds a few seconds ahead, in
CONVERSATIONS conversations; a Redis subscriber stands for the listeners
(the live stream's bus, chat/live/redis_bus.py), the local webhook receiver
(webhook_receiver.py) for the bots. Lateness: arrival - due.

Checks (exit 1 when one fails): every message heard exactly once, none
before its due time, every event processed.

    .venv/bin/python bench/scheduled_messages.py [--count 1000] [--spread 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import event_rows, machine, servers  # noqa: E402
from harness.project import REDIS_URL, Project  # noqa: E402
from harness.report import failed_lines, lateness_line, log, percentile  # noqa: E402


def make_conversations(proj: Project, count: int) -> list[str]:
    from ulid import ULID

    now = datetime.now(UTC)
    ids = [f"conv_{ULID()}" for _ in range(count)]
    with proj.connect() as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO bots_conversation (id, bot_id, chat_id, tags, created_at, updated_at) "
            "VALUES (%s, %s, %s, '{}', %s, %s)",
            [(c, proj.demo["botId"], c, now, now) for c in ids],
        )
        conn.commit()
    return ids


def seed_messages(proj: Project, conversations: list[str], due: list[datetime]) -> dict[str, float]:
    """Scheduled messages due at `due`, round-robin over the conversations; id → due."""
    from ulid import ULID

    now = datetime.now(UTC)
    rows = [
        (f"msg_{ULID.from_datetime(when)}", conversations[n % len(conversations)], when)
        for n, when in enumerate(due)
    ]
    with proj.connect() as conn, conn.cursor() as cursor:
        columns = (
            "id, bot_id, conversation_id, user_id, type, payload, tags, origin, due_at, created_at"
        )
        with cursor.copy(f"COPY chat_scheduledmessage ({columns}) FROM STDIN") as copy:
            for message_id, conversation, when in rows:
                copy.write_row(
                    (message_id, proj.demo["botId"], conversation, proj.demo["userId"], "text")
                    + ('{"type": "text", "text": "later"}', "{}", "", when, now)
                )
        conn.commit()
    return {message_id: when.timestamp() for message_id, _, when in rows}


class Listener:
    """Every message_created published on the project's channels, with its arrival time."""

    def __init__(self, redis_url: str) -> None:
        import redis

        self.heard: list[tuple[str, float]] = []
        database = redis.connection.parse_url(redis_url).get("db", 0)
        self._pubsub = redis.Redis.from_url(redis_url).pubsub()
        self._pubsub.psubscribe(f"db{database}:chat:conversation:*")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if message is not None:
                at = time.time()
                self.heard.append((json.loads(message["data"])["data"]["id"], at))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._pubsub.close()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1000, help="messages, and as many events")
    parser.add_argument("--spread", type=float, default=1.0, help="seconds the due times span")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--lead", type=float, default=8.0, help="seconds before the first is due")
    return parser.parse_args()


def deliver(
    rx: event_rows.Receiving, listener: Listener, args: argparse.Namespace
) -> tuple[dict[str, float], list[str]]:
    """The messages and as many events, due at the same times, delivered by
    the Procfile's worker: the messages' due times by id, the events' ids."""
    bots = rx.bots("/now", 20)
    conversations = make_conversations(rx.proj, args.conversations)
    with servers.receiver(rx.port, rx.out), servers.engine(rx.proj, rx.queue):
        machine.wait_for_quiet(max_wait=120)
        due = event_rows.due_from(args.lead, args.count, args.spread / args.count)
        messages = seed_messages(rx.proj, conversations, due)
        events = event_rows.seed(rx.proj, bots, due, "scheduled")
        if datetime.now(UTC) >= due[0]:
            raise SystemExit("FAILED: seeding took longer than the lead time")
        event_rows.wait_finished(rx.proj, events, 120)
        deadline = time.monotonic() + 60
        while len(listener.heard) < len(messages) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # anything heard twice arrives meanwhile
    return messages, events


def main() -> int:
    args = parse_args()
    machine.start()
    failures = []
    with event_rows.receiving_project("bench_scheduled_messages") as rx:
        listener = Listener(REDIS_URL)
        messages, events = deliver(rx, listener, args)
        listener.close()
        heard = listener.heard
        arrivals = {message_id: at for message_id, at in heard}
        if len(heard) != len(messages) or set(arrivals) != set(messages):
            failures.append(f"{len(heard)} messages heard for {len(messages)} scheduled")
        message_lateness = [arrivals[m] - messages[m] for m in messages if m in arrivals]
        if any(late < 0 for late in message_lateness):
            failures.append("a message was heard before it was due")
        received = rx.arrivals()
        event_due = {e: d for e, d, _, _ in event_rows.first_attempts(rx.proj, events)}
        event_lateness = [received[e] - event_due[e] for e in events if e in received]
    print(
        f"\n{args.count:,} scheduled messages and {args.count:,} events due over {args.spread:g} s"
    )
    print(lateness_line("messages: due -> listener", message_lateness))
    print(lateness_line("events: due -> webhook (baseline)", event_lateness))
    for q in (50, 99):
        ratio = percentile(message_lateness, q) / max(percentile(event_lateness, q), 1e-6)
        print(f"  ratio p{q} messages / events: {ratio:.2f}")
    log("done")
    return failed_lines(failures)


if __name__ == "__main__":
    sys.exit(main())
