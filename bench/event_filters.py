"""Filtered event lists on a bot with millions of events, and what the
indexes that serve them cost each write, against the same database without
them (events.0007), measured in the same run; and a message's write with
the indexes bots.0012 dropped against without.

    .venv/bin/python bench/event_filters.py [--events 3000000] [--runs 40] [--writes 3000]
        [--due 1000000]

1. A fresh database bench_event_filters, migrated and seeded. The demo bot
   gets --events events by COPY (not timed): ids in creation order over the
   last 30 days, types `message_created` (70 %), `conversation_started`
   (20 %), `bench.custom` (10 %); statuses processed (90 %), failed (8 %),
   ignored (2 %). VACUUM ANALYZE, CHECKPOINT.
2. Lists, through the application's selector (events.selectors.events_list,
   in this process: its SQL, its page of 20), each --runs times, p50 and
   p99: unfiltered; `type` matching nothing, `type` matching 10 %; `status`
   matching nothing (canceled), `status` failed (8 %). Twice: `with` the
   indexes, and `without` (event_by_type_idx and event_by_status_idx
   dropped, then made again), which is the table before events.0007.
3. Writes, one connection, autocommit, --writes single-row INSERTs of an
   event (the row create event writes) and of a message, each timed; p50
   per configuration. Events: with against without the two indexes;
   messages: the 3 secondary indexes kept against the 9 before bots.0012
   (the 6 dropped made again). Configurations alternate over 3 rounds.
4. /metrics' backlog: --due of the events made due and unclaimed; the
   collector as it reads them (counted up to METRICS_BACKLOG_COUNT_LIMIT)
   against the full count it made before, --runs times each.

Targets (reported): a filter matching nothing answers in <= 20 ms (issue
29: 1,050 ms before at 278k events); a write's cost with the indexes is
reported as a ratio. Checks (exit 1): each list answers what a count says
it should (the filtered pages' first ids match a direct query).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, machine  # noqa: E402
from harness.project import Project, django_setup, project  # noqa: E402
from harness.report import log, percentile, verdict  # noqa: E402

TYPES = (("message_created", 70), ("conversation_started", 20), ("bench.custom", 10))
STATUSES = (("processed", 90), ("failed", 8), ("ignored", 2))
EVENT_INDEXES = {
    "event_by_type_idx": '("bot_id", "type", "id")',
    "event_by_status_idx": '("bot_id", "status", "id")',
}
# What bots.0012 dropped: (name suffix, columns) on bots_message.
MESSAGE_INDEXES = {
    "bench_message_bot": '("bot_id")',
    "bench_message_bot_like": '("bot_id" varchar_pattern_ops)',
    "bench_message_conversation": '("conversation_id")',
    "bench_message_conversation_like": '("conversation_id" varchar_pattern_ops)',
    "bench_message_user_like": '("user_id" varchar_pattern_ops)',
    "bench_message_id_like": '("id" varchar_pattern_ops)',
}
LISTS = {
    "unfiltered": {},
    "type matching nothing": {"type": "never.sent"},
    "type matching 10 %": {"type": "bench.custom"},
    "status matching nothing": {"status": "canceled"},
    "status failed (8 %)": {"status": "failed"},
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=3_000_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--due", type=int, default=1_000_000, help="events due for /metrics")
    cli.add_db(parser, "bench_event_filters")
    return parser.parse_args()


def _weighted(choices: tuple[tuple[str, int], ...], n: int) -> str:
    point = (n * 7919) % 100  # spread, not striped: every page mixes them
    for value, weight in choices:
        if point < weight:
            return value
        point -= weight
    return choices[-1][0]


def seed(proj: Project, bot_id: str, count: int) -> None:
    from ulid import ULID

    now = datetime.now(UTC)
    start = now - timedelta(days=30)
    step = (now - start) / max(count, 1)
    columns = (
        "id, bot_id, type, payload, status, due_at, lease, attempt_count, created_at, updated_at"
    )
    log(f"seeding {count:,} events")
    with proj.connect() as conn, conn.cursor() as cursor:
        with cursor.copy(f"COPY events_event ({columns}) FROM STDIN") as copy:
            for n in range(count):
                at = start + step * n
                copy.write_row(
                    (
                        f"evt_{ULID.from_datetime(at)}",
                        bot_id,
                        _weighted(TYPES, n),
                        "{}",
                        _weighted(STATUSES, n),
                        at,
                        0,
                        1,
                        at,
                        at,
                    )
                )
        conn.commit()
    settle(proj)


def settle(proj: Project) -> None:
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE events_event")
        conn.execute("VACUUM ANALYZE bots_message")
        conn.execute("CHECKPOINT")


def indexes_set(proj: Project, table: str, indexes: dict[str, str], present: bool) -> None:
    with proj.connect(autocommit=True) as conn:
        for name, columns in indexes.items():
            if present:
                conn.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" {columns}')
            else:
                conn.execute(f'DROP INDEX IF EXISTS "{name}"')
        conn.execute(f'ANALYZE "{table}"')


def timed(call: Callable[[], Any], runs: int) -> list[float]:
    spent = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1000)
    return spent


def lists(proj: Project, bot_id: str, runs: int, failures: list[str]) -> dict[str, list[float]]:
    from django.db import connection

    from bots.models import Bot
    from events.selectors.events import events_list
    from platform_site.foundation.pagination import PageRequest

    bot = Bot.objects.get(id=bot_id)
    found: dict[str, list[float]] = {}
    for name, query in LISTS.items():
        page = PageRequest(size=20, token=None)

        def listed(query: dict[str, str] = query, page: PageRequest = page) -> list[str]:
            return [event.id for event in events_list(bot=bot, query=query, page=page).items]

        ids = listed()
        where = " AND ".join(["bot_id = %s", *(f"{field} = %s" for field in query)])
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id FROM events_event WHERE {where} ORDER BY id DESC LIMIT 20",
                [bot_id, *query.values()],
            )
            expected = [row[0] for row in cursor.fetchall()]
        if ids != expected:
            failures.append(f"{name}: the page differs from the direct query")
        found[name] = timed(listed, runs)
    return found


def writes(proj: Project, bot_id: str, count: int) -> dict[str, list[float]]:
    """Single-row INSERTs, autocommit, one connection: an event's, a message's."""
    from ulid import ULID

    with proj.connect(autocommit=True) as conn:
        conversation, user = conn.execute(  # type: ignore[misc]
            "SELECT c.id, u.id FROM bots_conversation c, bots_user u"
            " WHERE c.bot_id = %s AND u.bot_id = %s LIMIT 1",
            [bot_id, bot_id],
        ).fetchone()
        now = datetime.now(UTC)
        event_sql = (
            "INSERT INTO events_event (id, bot_id, type, payload, status, due_at, next_attempt_at,"
            " lease, attempt_count, created_at, updated_at)"
            " VALUES (%s, %s, 'message_created', '{}', 'pending', %s, %s, 0, 0, %s, %s)"
        )
        message_sql = (
            "INSERT INTO bots_message (id, bot_id, conversation_id, user_id, type, payload, tags,"
            " is_bot, origin, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, 'text', '{\"text\": \"hi\"}', '{}', false, '', %s, %s)"
        )
        events, messages = [], []
        for _ in range(count):
            started = time.perf_counter()
            conn.execute(event_sql, [f"evt_{ULID()}", bot_id, now, now, now, now])
            events.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            conn.execute(message_sql, [f"msg_{ULID()}", bot_id, conversation, user, now, now])
            messages.append((time.perf_counter() - started) * 1000)
    return {"event": events, "message": messages}


def backlog(proj: Project, bot_id: str, due: int, runs: int) -> dict[str, list[float]]:
    """--due of the events made due and unclaimed (pending, their next
    attempt in the past); /metrics' backlog collector, as it reads them now,
    against the full count it made before (Count + Min over every due row)."""
    from django.db.models import Count, Min
    from django.utils import timezone

    from events.metrics import DeliveryBacklogCollector
    from events.models import Event

    with proj.connect(autocommit=True) as conn:
        conn.execute(
            "UPDATE events_event SET status = 'pending', next_attempt_at = created_at"
            " WHERE id IN (SELECT id FROM events_event WHERE bot_id = %s ORDER BY id LIMIT %s)",
            [bot_id, due],
        )
    settle(proj)
    collector = DeliveryBacklogCollector()

    def full_count() -> None:
        Event.objects.filter(next_attempt_at__lte=timezone.now()).aggregate(
            due=Count("next_attempt_at"), oldest=Min("next_attempt_at")
        )

    return {
        "collector, counted up to the limit": timed(lambda: list(collector.collect()), runs),
        "full count (before)": timed(full_count, runs),
    }


def participants_made(bot_id: str) -> None:
    """A conversation and a user of the bot, for the messages written."""
    from bots.models import Conversation, User

    Conversation.objects.create(bot_id=bot_id, channel="bench")
    User.objects.create(bot_id=bot_id, chat_id="bench-writer")


def main() -> int:
    args = parse_args()
    machine.start()
    failures: list[str] = []
    with project(args.db) as proj:
        django_setup(proj)
        bot_id = proj.demo["botId"]
        seed(proj, bot_id, args.events)
        participants_made(bot_id)
        listed: dict[str, dict[str, list[float]]] = {}
        for present in (False, True):
            label = "with" if present else "without"
            indexes_set(proj, "events_event", EVENT_INDEXES, present)
            log(f"lists {label} the filter indexes")
            listed[label] = lists(proj, bot_id, args.runs, failures)
        written: dict[str, dict[str, list[float]]] = {}
        for round_ in range(3):
            for present in (True, False) if round_ % 2 == 0 else (False, True):
                label = "with" if present else "without"
                indexes_set(proj, "events_event", EVENT_INDEXES, present)
                indexes_set(proj, "bots_message", MESSAGE_INDEXES, not present)
                log(f"writes round {round_ + 1}: {label} the event indexes")
                for kind, spent in writes(proj, bot_id, args.writes).items():
                    written.setdefault(label, {}).setdefault(kind, []).extend(spent)
        indexes_set(proj, "events_event", EVENT_INDEXES, True)
        indexes_set(proj, "bots_message", MESSAGE_INDEXES, False)
        log(f"the /metrics backlog with {args.due:,} events due")
        scraped = backlog(proj, bot_id, args.due, args.runs)
    print(f"\nRESULT event_filters ({args.events:,} events on one bot, {args.runs} runs a list)")
    print(f"  {'list (page of 20)':28} {'without: p50 / p99 ms':>24} {'with: p50 / p99 ms':>22}")
    for name in LISTS:
        cells = []
        for label in ("without", "with"):
            spent = listed[label][name]
            cells.append(f"{statistics.median(spent):9.2f} / {percentile(spent, 99):8.2f}")
        print(f"  {name:28} {cells[0]:>24} {cells[1]:>22}")
    worst = max(statistics.median(listed["with"][name]) for name in LISTS if "nothing" in name)
    print(f"  a filter matching nothing: {worst:.2f} ms p50 (target <= 20 ms)")
    event_with = statistics.median(written["with"]["event"])
    event_without = statistics.median(written["without"]["event"])
    # "with" the event indexes is the tree's state: the message's 3 indexes.
    message_now = statistics.median(written["with"]["message"])
    message_before = statistics.median(written["without"]["message"])
    print(
        f"  event INSERT p50: {event_with:.3f} ms with the 2 filter indexes, {event_without:.3f}"
        f" without: {event_with / event_without:.3f}x"
    )
    print(
        f"  message INSERT p50: {message_now:.3f} ms with 3 secondary indexes,"
        f" {message_before:.3f} with the 9 before bots.0012: {message_now / message_before:.3f}x"
    )
    print(f"  /metrics backlog, {args.due:,} events due (p50 / p99 ms):")
    for name, spent in scraped.items():
        print(f"    {name:36} {statistics.median(spent):9.2f} / {percentile(spent, 99):8.2f}")
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
