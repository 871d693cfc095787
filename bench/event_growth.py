"""Growth: the hot statements with 10M events and 10M delivery attempts
stored, against a seeded database, in the same run; and retention of 1M
expired events by dropping their days (issue 29).

    .venv/bin/python bench/event_growth.py [--events 10000000] [--expired 1000000]
        [--messages 2000000] [--runs 40]

1. Four databases, migrated the same way (events partitioned), each with
   the same bench bot (same id) and its conversation and user:
   - `plain`: seeded, events.0009 reversed (the tables as they were before
     partitioning): what partitions cost a small database;
   - `seeded`: seeded, partitioned;
   - `big plain`: events.0009 reversed, then `big`'s rows: what partitions
     cost, or save, a big one;
   - `big`: partitioned, with --events events made over the last 30 days
     (the bench bot 3 % of them, the rest over 1,000 bots; 70/20/10 % of
     three types; 90 % processed, 8 % failed, 2 % ignored), --expired events
     finished 31 to 40 days ago (past the default retention), one delivery
     attempt for each, and --messages messages in 1,000 conversations. Loaded
     by COPY with the secondary indexes dropped and made again (not timed).
   The partitioned ones are laid out as a database partitioned 41 days ago
   is: partitions of EVENT_PARTITION_DAYS from then to
   EVENT_PARTITIONS_AHEAD_DAYS ahead (seeded's empty), so that the ratio is
   of rows, not of partitions; run with EVENT_PARTITION_DAYS=1 for days. Each
   gets --runs x 50 events due now for the bench bot. VACUUM ANALYZE, CHECKPOINT.
2. Statements, three connections per database, autocommit, server-side
   parameters (as the service sends them): as the service connects (by
   default no statement prepared), prepared after 5 runs (PostgreSQL's own
   plan choice: DATABASE_PREPARE_THRESHOLD=5), and prepared with generic
   plans forced. --runs
   interleaved rounds, the connections in turn (their order alternating),
   each statement timed:
   create event (the row POST /v1/chat/events writes), chat message (the
   row a message writes), claim (the engine's claim, 50 events), record
   (the engine's marking of those 50 processed), get by id (a random event
   of the bench bot), list unfiltered, list by a type matching nothing, list
   by status failed (the selector's page of 20, newest first).
3. Retention on `big`: events.services.retention.events_purge_expired() in
   this process, its time and the WAL it wrote (pg_current_wal_lsn before
   and after); now, then as it will run EVENT_PARTITION_DAYS later (the
   partition holding the cutoff goes once its newest event has expired).

Targets (reported): each statement p50 big / seeded <= 1.3; retention of
the expired events <= 5 s and <= 10 MB of WAL. Checks (exit 1): a claim
takes 50 events and the record marks 50; each purge deletes exactly the
expired events of the partitions wholly past retention, with their
attempts, and after the second no event expired a day ago or more is left.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, machine  # noqa: E402
from harness.project import Project, django_setup, project  # noqa: E402
from harness.report import log, percentile, verdict  # noqa: E402

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
TYPES = ("message_created",) * 7 + ("conversation_started",) * 2 + ("bench.custom",)
STATUSES = ("processed",) * 45 + ("failed",) * 4 + ("ignored",)
PAST_DAYS = 41
BOTS = 1000
CLAIM = 50
EVENT_COLUMNS = (
    "id, bot_id, type, payload, status, due_at, lease, attempt_count, created_at, updated_at"
)
ATTEMPT_COLUMNS = (
    "event_id, bot_id, number, started_at, duration_ms, url, status_code, error,"
    " response_excerpt, outcome"
)
MESSAGE_COLUMNS = (
    "id, bot_id, conversation_id, user_id, type, payload, tags, is_bot, origin, "
    "created_at, updated_at"
)
SELECT_EVENT = (
    "SELECT id, bot_id, type, payload, status, failure_reason, conversation_id, user_id,"
    " message_id, workflow_id, integration_id, due_at, next_attempt_at, lease, attempt_count,"
    " first_attempt_at, created_at, updated_at FROM events_event"
)


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--expired", type=int, default=1_000_000)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the plans at the end, and the pages a get by id reads (first and again)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    return parser.parse_args()


def ulid(moment: float, rand: int) -> str:
    """The ULID text of `moment` (seconds) with `rand` as its 80 random bits."""
    value = (int(moment * 1000) << 80) | (rand & ((1 << 80) - 1))
    chars = []
    for _ in range(26):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()


# --- Layout and seeding ---------------------------------------------------


def partitioned_since(proj: Project, days: int) -> None:
    """Lay the partitioned tables out as if partitioned `days` ago: the
    converted partition's rows (the demo's) moved to partitions made from
    then on (EVENT_PARTITION_DAYS each, as beat makes them), the converted
    partition dropped."""
    from django.conf import settings
    from django.db import connections

    from events.services.partitions import day_floor
    from platform_site.foundation.sql.partitioning import partitions_make

    today = datetime.now(UTC).date()
    connection = connections["default"]
    with proj.connect(autocommit=True) as conn:
        for table in ("events_event", "events_deliveryattempt"):
            # The converted partition set aside, the (empty) ones ahead dropped.
            conn.execute(f"ALTER TABLE {table} DETACH PARTITION {table}_p0")
            for (name,) in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = %s::regclass AND c.relname <> %s",
                [table, f"{table}_pdefault"],
            ).fetchall():
                conn.execute(f"DROP TABLE {name}")
    # Django's connection is on `big`'s database; the layout is made on each
    # database through one made for it.
    settings_dict = {**connection.settings_dict, "NAME": proj.dbname}
    alias = f"layout_{proj.dbname}"
    connections.settings[alias] = settings_dict
    try:
        for table in ("events_event", "events_deliveryattempt"):
            partitions_make(
                connections[alias],
                table,
                first=today - timedelta(days=days),
                last=today + timedelta(days=settings.EVENT_PARTITIONS_AHEAD_DAYS),
                span_days=settings.EVENT_PARTITION_DAYS,
                key_at=day_floor,
            )
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]
    with proj.connect(autocommit=True) as conn:
        for table in ("events_event", "events_deliveryattempt"):
            conn.execute(f"INSERT INTO {table} SELECT * FROM {table}_p0")
            conn.execute(f"DROP TABLE {table}_p0")


def bench_bot(proj: Project, bot_id: str) -> tuple[str, str]:
    """The bench bot (id `bot_id`) in the demo workspace, with a conversation
    and a user; their ids."""
    now = datetime.now(UTC)
    with proj.connect() as conn:
        conn.execute(
            "INSERT INTO bots_bot (id, workspace_id, name, tags, dev, webhook_url, signing_secret,"
            " previous_signing_secret, created_at, updated_at, delivery_format, configuration)"
            " SELECT %s, workspace_id, 'bench', '{}', false, 'http://127.0.0.1:9/', signing_secret,"
            " '', %s, %s, 'standard', '{}' FROM bots_bot WHERE id = %s",
            [bot_id, now, now, proj.demo["botId"]],
        )
        conn.commit()
    out = proj.manage(
        "shell",
        "-c",
        "from bots.models import Conversation, User;"
        f"c = Conversation.objects.create(bot_id='{bot_id}', channel='bench');"
        f"u = User.objects.create(bot_id='{bot_id}', chat_id='bench-writer');"
        "print(c.id, u.id)",
    )
    conversation, user = out.split()[-2:]
    return conversation, user


def more_bots(proj: Project, count: int) -> list[str]:
    now = datetime.now(UTC)
    ids = [f"bot_{ulid(time.time(), random.getrandbits(80))}" for _ in range(count)]
    with proj.connect() as conn:
        conn.cursor().executemany(
            "INSERT INTO bots_bot (id, workspace_id, name, tags, dev, webhook_url, signing_secret,"
            " previous_signing_secret, created_at, updated_at, delivery_format, configuration)"
            " SELECT %s, workspace_id, 'bench', '{}', false, '', signing_secret, '', %s, %s,"
            " 'standard', '{}' FROM bots_bot WHERE id = %s",
            [(bot_id, now, now, proj.demo["botId"]) for bot_id in ids],
        )
        conn.commit()
    return ids


@contextlib.contextmanager
def secondary_indexes_dropped(proj: Project, tables: tuple[str, ...]) -> Iterator[None]:
    """Load without the secondary indexes, then make them again (as they were)."""
    with proj.connect(autocommit=True) as conn:
        saved = conn.execute(
            "SELECT c.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x"
            " JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = ANY(%s::regclass[])"
            " AND NOT x.indisprimary",
            [list(tables)],
        ).fetchall()
        for name, _ in saved:
            conn.execute(f'DROP INDEX "{name}"')
    yield
    with proj.connect(autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        for name, definition in saved:
            log(f"  index {name}")
            # A partitioned table's reads ON ONLY, which would make it alone.
            conn.execute(definition.replace(" ON ONLY ", " ON ", 1))


def seed_big(
    proj: Project, hot: str, conversation: str, user: str, args: argparse.Namespace
) -> int:
    """--events over 30 days, --expired 31-40 days ago, an attempt each, and
    --messages; how many events the bench bot has."""
    others = more_bots(proj, BOTS)
    now = time.time()
    hot_count = 0
    log(f"seeding {args.events:,} + {args.expired:,} events with an attempt each")
    with secondary_indexes_dropped(proj, ("events_event", "events_deliveryattempt")):
        with proj.connect() as conn, conn.cursor() as cursor:
            spans = [
                (args.events, now - 30 * 86400, now - 60),
                (args.expired, now - 40 * 86400, now - 31 * 86400),
            ]
            events_copy = f"COPY events_event ({EVENT_COLUMNS}) FROM STDIN"
            attempts_copy = f"COPY events_deliveryattempt ({ATTEMPT_COLUMNS}) FROM STDIN"
            for phase in ("events", "attempts"):
                with cursor.copy(events_copy if phase == "events" else attempts_copy) as copy:
                    rng = random.Random(7)
                    lines = []
                    for count, start, end in spans:
                        step = (end - start) / count
                        for n in range(count):
                            moment = start + step * n
                            bot = hot if n % 33 == 0 else others[n % BOTS]
                            event_id = "evt_" + ulid(moment, rng.getrandbits(80))
                            at = stamp(moment)
                            if phase == "events":
                                hot_count += bot == hot
                                lines.append(
                                    f"{event_id}\t{bot}\t{TYPES[n % 10]}\t{{}}\t"
                                    f"{STATUSES[(n * 7919) % 50]}\t{at}\t0\t1\t{at}\t{at}\n"
                                )
                            else:
                                lines.append(
                                    f"{event_id}\t{bot}\t1\t{at}\t12\thttp://bot.example/\t200"
                                    "\t\t\tprocessed\n"
                                )
                            if len(lines) == 20_000:
                                copy.write("".join(lines))
                                lines = []
                    copy.write("".join(lines))
                conn.commit()
                log(f"  {phase} copied")
    log(f"seeding {args.messages:,} messages")
    with secondary_indexes_dropped(proj, ("bots_message",)):
        with proj.connect() as conn, conn.cursor() as cursor:
            with cursor.copy(f"COPY bots_message ({MESSAGE_COLUMNS}) FROM STDIN") as copy:
                rng = random.Random(11)
                lines = []
                start = now - 30 * 86400
                step = 30 * 86400 / max(args.messages, 1)
                for n in range(args.messages):
                    moment = start + step * n
                    at = stamp(moment)
                    lines.append(
                        f"msg_{ulid(moment, rng.getrandbits(80))}\t{hot}\t{conversation}\t{user}"
                        f'\ttext\t{{"text": "hi"}}\t{{}}\tf\t\t{at}\t{at}\n'
                    )
                    if len(lines) == 20_000:
                        copy.write("".join(lines))
                        lines = []
                copy.write("".join(lines))
            conn.commit()
    return hot_count


def events_copied(proj: Project, bot: str, count: int, *, due: bool) -> None:
    """`count` events of the bench bot: due now (pending, unclaimed), or
    processed over the last day (a young bot's history)."""
    now = time.time()
    rng = random.Random(3)
    with proj.connect() as conn, conn.cursor() as cursor:
        with cursor.copy(
            "COPY events_event (id, bot_id, type, payload, status, due_at, next_attempt_at,"
            " lease, attempt_count, created_at, updated_at) FROM STDIN"
        ) as copy:
            for n in range(count):
                moment = now - 120 + n * 0.01 if due else now - 86400 + n * 60
                at = stamp(moment)
                kind, status, next_at = (
                    ("bench.due", "pending", at) if due else ("message_created", "processed", r"\N")
                )
                copy.write(
                    f"evt_{ulid(moment, rng.getrandbits(80))}\t{bot}\t{kind}\t{{}}\t{status}"
                    f"\t{at}\t{next_at}\t0\t0\t{at}\t{at}\n"
                )
        conn.commit()


def settle(proj: Project) -> None:
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


# --- The statements ---------------------------------------------------------


class Statements:
    """The hot statements against one database, each call timed."""

    def __init__(
        self, proj: Project, bot: str, conversation: str, user: str, connect: dict[str, Any]
    ) -> None:
        from events.engine.claims import _CLAIM_SQL
        from events.engine.delivery import _PROCESSED_SQL

        self.conn = proj.connect(autocommit=True, **connect)
        self.bot, self.conversation, self.user = bot, conversation, user
        self.claim_sql, self.processed_sql = _CLAIM_SQL, _PROCESSED_SQL
        self.claimed: list[tuple[str, int]] = []
        self.event_ids = [
            row[0]
            for row in self.conn.execute(
                "SELECT id FROM events_event WHERE bot_id = %s AND type <> 'bench.due'"
                " ORDER BY random() LIMIT 500",
                [bot],
            )
        ]
        self.rng = random.Random(5)
        self.spent: dict[str, list[float]] = {}
        self.failures: list[str] = []

    def timed(self, name: str, call: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        result = call()
        self.spent.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return result

    def round(self) -> None:
        now = datetime.now(UTC)
        self.timed(
            "create event",
            lambda: self.conn.execute(
                "INSERT INTO events_event (id, bot_id, type, payload, status, due_at,"
                " next_attempt_at, lease, attempt_count, created_at, updated_at)"
                " VALUES (%s, %s, 'bench.created', '{}', 'scheduled', %s, %s, 0, 0, %s, %s)",
                [f"evt_{ulid(time.time(), self.rng.getrandbits(80))}", self.bot]
                + [now + timedelta(days=1)] * 2
                + [now, now],
            ),
        )
        self.timed(
            "chat message",
            lambda: self.conn.execute(
                f"INSERT INTO bots_message ({MESSAGE_COLUMNS}) VALUES"
                " (%s, %s, %s, %s, 'text', '{\"text\": \"hi\"}', '{}', false, '', %s, %s)",
                [
                    f"msg_{ulid(time.time(), self.rng.getrandbits(80))}",
                    self.bot,
                    self.conversation,
                    self.user,
                    now,
                    now,
                ],
            ),
        )
        lease = self.rng.getrandbits(62)
        rows = self.timed(
            "claim (50)",
            lambda: self.conn.execute(
                self.claim_sql,
                {
                    "now": now,
                    "excluded": "",
                    "limit": CLAIM,
                    "lease": lease,
                    "lease_end": now + timedelta(seconds=60),
                },
            ).fetchall(),
        )
        if len(rows) != CLAIM:
            self.failures.append(f"a claim took {len(rows)} events, not {CLAIM}")
        marked = self.timed(
            "record (50 processed)",
            lambda: (
                self.conn.execute(
                    self.processed_sql,
                    {
                        "now": now,
                        "ids": ",".join(row[0] for row in rows),
                        "leases": ",".join(str(lease) for _ in rows),
                    },
                ).rowcount
            ),
        )
        if marked != len(rows):
            self.failures.append(f"a record marked {marked} of {len(rows)} events")
        event_id = self.rng.choice(self.event_ids)
        self.timed(
            "get by id",
            lambda: self.conn.execute(f"{SELECT_EVENT} WHERE id = %s", [event_id]).fetchall(),
        )
        lists: tuple[tuple[str, str, list[str]], ...] = (
            ("list", "", []),
            ("list, type matching nothing", " AND type = %s", ["never.sent"]),
            ("list, status failed", " AND status = %s", ["failed"]),
        )
        for name, condition, params in lists:
            sql = f"{SELECT_EVENT} WHERE bot_id = %s{condition} ORDER BY id DESC LIMIT 21"
            self.timed(name, self._reader(sql, [self.bot, *params]))

    def _reader(self, sql: str, values: list[str]) -> Callable[[], Any]:
        return lambda: self.conn.execute(sql, values).fetchall()

    def reads_of_gets(self, count: int = 100) -> str:
        """What a get by id reads: `count` events of the bench bot the rounds
        did not read (its first read), then the same again, each under
        EXPLAIN (ANALYZE, BUFFERS) with track_io_timing on: per get, the
        pages found in shared buffers and those read from outside (the OS's
        cache or the disk), the time those reads took, planning and execution."""
        self.conn.execute("SET track_io_timing = on")
        ids = [
            row[0]
            for row in self.conn.execute(
                "SELECT id FROM events_event WHERE bot_id = %s AND type <> 'bench.due'"
                " AND NOT id = ANY(%s) ORDER BY random() LIMIT %s",
                [self.bot, self.event_ids, count],
            )
        ]
        out = []
        for label in ("first read", "read again"):
            hit = read = 0
            io = planning = execution = 0.0
            for event_id in ids:
                row = self.conn.execute(
                    f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {SELECT_EVENT} WHERE id = %s",
                    [event_id],
                ).fetchone()
                assert row is not None
                [explained] = row[0]
                for part in (explained["Plan"], explained.get("Planning", {})):
                    hit += part.get("Shared Hit Blocks", 0)
                    read += part.get("Shared Read Blocks", 0)
                    io += part.get("I/O Read Time", 0.0)
                planning += explained["Planning Time"]
                execution += explained["Execution Time"]
            n = max(len(ids), 1)
            out.append(
                f"{label:10}: {hit / n:5.1f} pages in shared buffers, {read / n:4.2f} read"
                f" ({io / n:.3f} ms); planning {planning / n:.3f} ms, execution"
                f" {execution / n:.3f} ms (mean of {len(ids)} gets)"
            )
        self.conn.execute("SET track_io_timing = off")
        return "\n".join(out)

    def files_read(self) -> float:
        """Read every file of this database once, so that the machine's page
        cache holds it (as a server whose memory holds its database does);
        its size in GB. Pages read from outside shared buffers then come
        from memory, until the machine reclaims them (this one pages out
        what is not used for a minute: README of bench/)."""
        data = self.conn.execute("SHOW data_directory").fetchone()
        oid = self.conn.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        assert data is not None and oid is not None
        size = 0
        for path in Path(data[0], "base", str(oid[0])).iterdir():
            with path.open("rb") as file:
                while chunk := file.read(1 << 20):
                    size += len(chunk)
        return size / 1e9

    def plans(self) -> str:
        """EXPLAIN ANALYZE of the claim (rolled back) and of a list matching nothing."""
        now = datetime.now(UTC)
        claim = {"now": now, "excluded": "", "limit": CLAIM, "lease": 1, "lease_end": now}
        out = []
        self.conn.execute("BEGIN")
        rows = self.conn.execute(f"EXPLAIN (ANALYZE, SUMMARY) {self.claim_sql}", claim)
        out.append("\n".join(row[0] for row in rows.fetchall()))
        self.conn.execute("ROLLBACK")
        rows = self.conn.execute(
            f"EXPLAIN (ANALYZE, SUMMARY) {SELECT_EVENT} WHERE bot_id = %s AND type = %s"
            " ORDER BY id DESC LIMIT 21",
            [self.bot, "never.sent"],
        )
        out.append("\n".join(row[0] for row in rows.fetchall()))
        return "\n\n".join(out)


def connection_modes() -> dict[str, dict[str, Any]]:
    """How the statements' connections are made: as the service makes its
    own (its settings: statements not prepared unless
    DATABASE_PREPARE_THRESHOLD says so, each then parsed and planned on every
    run, a plan of its own for the values); prepared after 5 runs with
    PostgreSQL's own choice of plan; and prepared with generic plans forced
    (one plan a statement, pruned as it runs)."""
    from django.conf import settings

    options = settings.DATABASES["default"]["OPTIONS"]
    return {
        "service": {"prepare_threshold": options.get("prepare_threshold")},
        "prepared": {"prepare_threshold": 5},
        "generic": {"prepare_threshold": 5, "options": "-c plan_cache_mode=force_generic_plan"},
    }


def statements_table(title: str, runners: dict[str, Statements]) -> float:
    """Print one mode's p50 per statement and database; the worst big ÷ seeded."""
    print(f"  {title}")
    print(
        f"  {'statement (p50 ms)':28} {'plain':>7} {'seeded':>7} {'big plain':>10} {'big':>7}"
        f" {'big p99':>8} {'big/seeded':>11} {'big/big plain':>14} {'seeded/plain':>13}"
    )
    worst = 0.0
    for name in runners["big"].spent:
        p50 = {label: statistics.median(r.spent[name]) for label, r in runners.items()}
        ratio = p50["big"] / p50["seeded"]
        worst = max(worst, ratio)
        print(
            f"  {name:28} {p50['plain']:7.3f} {p50['seeded']:7.3f} {p50['big plain']:10.3f}"
            f" {p50['big']:7.3f} {percentile(runners['big'].spent[name], 99):8.3f}"
            f" {ratio:11.2f} {p50['big'] / p50['big plain']:14.2f}"
            f" {p50['seeded'] / p50['plain']:13.2f}"
        )
    return worst


# --- Retention ----------------------------------------------------------------


def retention(proj: Project, failures: list[str]) -> list[dict[str, float]]:
    """The purge now, then as it runs a partition's span later: by then
    every expired event of the seed has gone (the first takes the partitions
    wholly past retention; the one holding the cutoff waits for its newest
    event to expire)."""
    django_setup(proj)
    from django.conf import settings

    from events.services.partitions import one_by_one_below
    from events.services.retention import events_purge_expired

    def counts() -> tuple[int, int]:
        return (
            proj.scalar("SELECT count(*) FROM events_event"),
            proj.scalar("SELECT count(*) FROM events_deliveryattempt"),
        )

    runs = []
    now = datetime.now(UTC)
    for when in (now, now + timedelta(days=settings.EVENT_PARTITION_DAYS)):
        cutoff = when - timedelta(days=30)
        # What the purge may take: finished, changed before the cutoff, in
        # a partition wholly before it.
        due = proj.scalar(
            "SELECT count(*) FROM events_event WHERE updated_at < %s AND id < %s"
            " AND status IN ('processed', 'failed', 'ignored', 'canceled')",
            [cutoff, one_by_one_below(cutoff)],
        )
        events_before, attempts_before = counts()
        lsn = proj.scalar("SELECT pg_current_wal_lsn()")
        started = time.perf_counter()
        deleted = events_purge_expired(now=when)
        seconds = time.perf_counter() - started
        wal = proj.scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [lsn])
        events_after, attempts_after = counts()
        gone = events_before - events_after
        if deleted != due or gone != due:
            failures.append(f"the purge at {when:%F} deleted {deleted} ({gone}), not {due}")
        if attempts_before - attempts_after != gone:
            failures.append(f"the purge deleted {attempts_before - attempts_after} attempts")
        runs.append({"seconds": seconds, "wal_mb": float(wal) / 1e6, "deleted": deleted})
    left = proj.scalar(
        "SELECT count(*) FROM events_event WHERE updated_at < now() - interval '31 days'"
    )
    if left:
        failures.append(f"{left} events expired a day ago or more are left")
    return runs


def main() -> int:
    args = parse_args()
    machine.start()
    failures: list[str] = []
    bot_id = f"bot_{ulid(time.time(), random.getrandbits(80))}"
    with (
        project("bench_growth_plain", keep=args.keep) as plain,
        project("bench_growth_seeded", keep=args.keep) as seeded,
        project("bench_growth_big_plain", keep=args.keep) as big_plain,
        project("bench_growth_big", keep=args.keep) as big,
    ):
        django_setup(big)
        databases = {"plain": plain, "seeded": seeded, "big plain": big_plain, "big": big}
        for proj in (plain, big_plain):
            proj.manage("migrate", "events", "0008", "-v", "0")
        for proj in (seeded, big):
            partitioned_since(proj, PAST_DAYS)
        participants = {proj.dbname: bench_bot(proj, bot_id) for proj in databases.values()}
        hot = seed_big(big, bot_id, *participants[big.dbname], args)
        seed_big(big_plain, bot_id, *participants[big_plain.dbname], args)
        for proj in (plain, seeded):
            events_copied(proj, bot_id, 100, due=False)
        modes = connection_modes()
        for proj in databases.values():
            events_copied(proj, bot_id, args.runs * CLAIM * len(modes), due=True)
            settle(proj)
        log("statements")
        runners = {
            (mode, name): Statements(proj, bot_id, *participants[proj.dbname], connect)
            for mode, connect in modes.items()
            for name, proj in databases.items()
        }
        order = list(runners)
        for n in range(args.runs):
            for key in order if n % 2 == 0 else list(reversed(order)):
                runners[key].round()
        for (mode, name), runner in runners.items():
            failures.extend(runner.failures)
            if args.explain:
                print(f"\n--- plans on {name}, {mode}\n{runner.plans()}")
                if mode == "service":
                    print(f"\n--- a get by id's reads on {name}\n{runner.reads_of_gets()}")
                    gigabytes = runner.files_read()
                    print(
                        f"--- the same once its files ({gigabytes:.1f} GB) were read into the"
                        f" page cache\n{runner.reads_of_gets()}"
                    )
        log("retention")
        purges = retention(big, failures)
    print(
        f"\nRESULT event_growth: big = {args.events:,} events in the last 30 days (the bench"
        f" bot {hot:,}) + {args.expired:,} expired, an attempt each, {args.messages:,} messages;"
        f" {args.runs} rounds"
    )
    for mode, connect in modes.items():
        worst = statements_table(
            f"{mode} ({connect})", {n: r for (m, n), r in runners.items() if m == mode}
        )
        print(f"  worst big/seeded, {mode}: {worst:.2f} (target <= 1.3)")
    by_mode = {
        mode: {n: r for (m, n), r in runners.items() if m == mode}
        for mode in ("service", "prepared", "generic")
    }
    for mode in ("prepared", "generic"):
        print(f"  {mode} ÷ the service's connections, p50:")
        for statement in by_mode[mode]["big"].spent:
            ratios = (
                statistics.median(runner.spent[statement])
                / statistics.median(by_mode["service"][name].spent[statement])
                for name, runner in by_mode[mode].items()
            )
            print(
                f"    {statement:28} "
                + "  ".join(
                    f"{name} {ratio:.2f}" for name, ratio in zip(by_mode[mode], ratios, strict=True)
                )
            )
    for label, purge in zip(("now", "a partition's span later"), purges, strict=True):
        print(
            f"  retention {label}: {purge['deleted']:,.0f} events dropped in"
            f" {purge['seconds']:.2f} s, {purge['wal_mb']:.2f} MB of WAL;"
            f" {purge['seconds'] / max(purge['deleted'], 1) * 1e6:.2f} s and"
            f" {purge['wal_mb'] / max(purge['deleted'], 1) * 1e6:.2f} MB per million"
            " (targets <= 5 s, <= 10 MB)"
        )
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
