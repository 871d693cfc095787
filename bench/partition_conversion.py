"""Converting a populated events table to partitions (events.0009) while
events keep being written: how long the migration takes per million rows,
and how long it holds the writers, against the same writers just before.

    .venv/bin/python bench/partition_conversion.py [--events 3000000] [--every 0.005]

1. A fresh database bench_partition_conversion, migrated, then events.0009
   reversed (the tables as they were before it). --events events (over the
   last 30 days, processed) and one delivery attempt each, by COPY (not timed).
   VACUUM ANALYZE, CHECKPOINT.
2. A writer thread inserts an event and its attempt (one transaction, as a
   create and a delivery write them) every --every seconds, each timed, from
   10 s before the migration until 5 s after it.
3. `manage.py migrate events 0009`, timed: the attempts' new primary key
   built concurrently, both tables' rows proved below the boundary (a read
   that lets writes through), then the switch (one short transaction each).

Reported: the migration's seconds, per million events (+ attempts); the
writer's p50, p99 and longest write during the migration and in the 10 s
before (the ratio of the longest: what the switch holds them for). Checks
(exit 1): every row is there afterwards, both tables partitioned, and a write
after the migration lands in the converted partition (today is below its
bound).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from event_growth import ulid  # noqa: E402
from harness import cli, machine  # noqa: E402
from harness.project import Project, project  # noqa: E402
from harness.report import log, percentile, verdict  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    parser.add_argument("--events", type=int, default=3_000_000)
    parser.add_argument("--every", type=float, default=0.005, help="seconds between writes")
    cli.add_db(parser, "bench_partition_conversion")
    return parser.parse_args()


def seed(proj: Project, count: int) -> None:
    bot = proj.demo["botId"]
    now = time.time()
    step = 30 * 86400 / count
    log(f"seeding {count:,} events and attempts")
    with proj.connect() as conn, conn.cursor() as cursor:
        for table, columns in (
            (
                "events_event",
                "id, bot_id, type, payload, status, due_at, lease, attempt_count, created_at,"
                " updated_at",
            ),
            (
                "events_deliveryattempt",
                "event_id, bot_id, number, started_at, duration_ms, url, status_code, error,"
                " response_excerpt, outcome",
            ),
        ):
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                lines = []
                for n in range(count):
                    moment = now - 30 * 86400 + step * n
                    at = datetime.fromtimestamp(moment, UTC).isoformat()
                    event_id = f"evt_{ulid(moment, n)}"
                    lines.append(
                        f"{event_id}\t{bot}\tmessage_created\t{{}}\tprocessed\t{at}\t0\t1\t{at}\t{at}\n"
                        if table == "events_event"
                        else f"{event_id}\t{bot}\t1\t{at}\t9\thttp://bot.example/\t200\t\t\tprocessed\n"
                    )
                    if len(lines) == 20_000:
                        copy.write("".join(lines))
                        lines = []
                copy.write("".join(lines))
            conn.commit()
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE events_event")
        conn.execute("VACUUM ANALYZE events_deliveryattempt")
        conn.execute("CHECKPOINT")


class Writer(threading.Thread):
    """An event and its attempt every `every` seconds, each write timed."""

    def __init__(self, proj: Project, every: float) -> None:
        super().__init__(daemon=True)
        self.proj, self.every = proj, every
        self.writes: list[tuple[float, float]] = []  # (start, seconds)
        self.ids: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        bot = self.proj.demo["botId"]
        with self.proj.connect(autocommit=True) as conn:
            n = 0
            while not self.stop.is_set():
                started = time.time()
                event_id = f"evt_{ulid(started, 10**9 + n)}"
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO events_event (id, bot_id, type, payload, status, due_at,"
                        " lease, attempt_count, created_at, updated_at) VALUES"
                        " (%s, %s, 'bench.live', '{}', 'processed', now(), 0, 1, now(), now())",
                        [event_id, bot],
                    )
                    conn.execute(
                        "INSERT INTO events_deliveryattempt (event_id, bot_id, number,"
                        " started_at, duration_ms, url, status_code, error, response_excerpt,"
                        " outcome) VALUES (%s, %s, 1, now(), 9, 'http://bot.example/', 200,"
                        " '', '', 'processed')",
                        [event_id, bot],
                    )
                self.writes.append((started, time.time() - started))
                self.ids.append(event_id)
                n += 1
                time.sleep(max(0.0, self.every - (time.time() - started)))


def summary(writes: list[tuple[float, float]], start: float, end: float) -> list[float]:
    return [seconds * 1000 for at, seconds in writes if start <= at < end]


def main() -> int:
    args = parse_args()
    machine.start()
    failures: list[str] = []
    with project(args.db) as proj:
        proj.manage("migrate", "events", "0008", "-v", "0")
        seed(proj, args.events)
        base = {
            table: proj.scalar(f"SELECT count(*) FROM {table}")
            for table in ("events_event", "events_deliveryattempt")
        }
        writer = Writer(proj, args.every)
        writer.start()
        time.sleep(10)
        log("migrate events 0009")
        started = time.time()
        proj.manage("migrate", "events", "0009", "-v", "0")
        ended = time.time()
        time.sleep(5)
        writer.stop.set()
        writer.join()
        kinds = proj.scalar(
            "SELECT string_agg(relkind::text, '') FROM pg_class"
            " WHERE relname IN ('events_event', 'events_deliveryattempt')"
        )
        if kinds != "pp":
            failures.append(f"the tables are not both partitioned ({kinds})")
        for table in ("events_event", "events_deliveryattempt"):
            found = proj.scalar(f"SELECT count(*) FROM {table}")
            if found != base[table] + len(writer.ids):
                failures.append(
                    f"{table}: {found:,} rows, {base[table] + len(writer.ids):,} expected"
                )
        last = proj.scalar(
            "SELECT tableoid::regclass::text FROM events_event WHERE id = %s", [writer.ids[-1]]
        )
        if last != "events_event_p0":
            failures.append(f"a write after the migration is in {last}, not in the converted one")
    before = summary(writer.writes, started - 10, started)
    during = summary(writer.writes, started, ended)
    seconds = ended - started
    print(f"\nRESULT partition_conversion ({args.events:,} events + as many attempts)")
    print(
        f"  migrate events 0009: {seconds:.2f} s, {seconds / (args.events / 1e6):.2f} s per"
        " million events (and their attempts)"
    )
    print(f"  writes (event + attempt)  {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for label, values in (("10 s before", before), ("during", during)):
        print(
            f"  {label:25} {len(values):6d} {statistics.median(values):8.2f}"
            f" {percentile(values, 99):8.2f} {max(values):8.2f}"
        )
    print(f"  longest write during / before: {max(during) / max(before):.2f}x")
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
