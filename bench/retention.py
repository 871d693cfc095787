"""Event retention: how fast the beat task's purge deletes expired events
(with their delivery attempts), and how long it holds a transaction, against
one plain DELETE of the same rows measured in the same run.

    .venv/bin/python bench/retention.py [--expired 200000 --kept 100000 --waiting 50000 --rounds 2]

1. A fresh database bench_retention, migrated and seeded; 20 bots in the
   demo workspace (retention 30 days, the default).
2. Each round, for each contender, the same rows are COPYed in afresh (the
   tables emptied first) and VACUUM ANALYZEd, not timed:
   - `--expired` processed/failed/ignored/canceled events last changed 40
     days ago, each with one delivery attempt;
   - `--kept` processed events changed a day ago (within retention);
   - `--waiting` pending events changed 90 days ago (never purged).
3. Contenders, alternating which goes first each round:
   - purge: events.services.retention.events_purge_expired(), batches of
     EVENT_RETENTION_BATCH (5,000) in transactions of their own; every
     batch's transaction timed;
   - baseline: one transaction, `DELETE` of the expired events' attempts then
     of the events, the cutoff a constant (what a person would type in psql).
4. Then, with nothing expired any more, one purge pass: what the hourly run
   costs in the steady state.

Checks (exit 1 if one fails): after each contender exactly the expired
events and their attempts are gone, every kept and waiting event is there.
Ratios (reported, never asserted): purge events/s ÷ baseline events/s, and
the purge's longest transaction ÷ the baseline's one transaction.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cli, load, machine, report  # noqa: E402
from harness.project import Project, django_setup, project  # noqa: E402

FINISHED = ("processed", "failed", "ignored", "canceled")


def seed(proj: Project, bots: list[str], args: argparse.Namespace) -> None:
    from ulid import ULID

    now = datetime.now(UTC)
    columns = (
        "id, bot_id, type, payload, status, due_at, next_attempt_at, lease, attempt_count, "
        "created_at, updated_at"
    )
    attempt_columns = (
        "event_id, bot_id, number, started_at, duration_ms, url, status_code, error, "
        "response_excerpt, outcome"
    )
    old, recent, older = now - timedelta(days=40), now - timedelta(days=1), now - timedelta(days=90)
    expired_ids = [f"evt_{ULID()}" for _ in range(args.expired)]
    with proj.connect() as conn, conn.cursor() as cursor:
        cursor.execute("TRUNCATE events_deliveryattempt, events_event")
        with cursor.copy(f"COPY events_event ({columns}) FROM STDIN") as copy:
            for n, event_id in enumerate(expired_ids):
                status = FINISHED[n % len(FINISHED)]
                copy.write_row(
                    (event_id, bots[n % len(bots)], "bench", "{}", status, old, None, 0, 1)
                    + (old, old)
                )
            for n in range(args.kept):
                copy.write_row(
                    (f"evt_{ULID()}", bots[n % len(bots)], "bench", "{}", "processed", recent)
                    + (None, 0, 1, recent, recent)
                )
            for n in range(args.waiting):
                copy.write_row(
                    (f"evt_{ULID()}", bots[n % len(bots)], "bench", "{}", "pending", older)
                    + (now + timedelta(days=1), 0, 0, older, older)
                )
        with cursor.copy(f"COPY events_deliveryattempt ({attempt_columns}) FROM STDIN") as copy:
            for n, event_id in enumerate(expired_ids):
                copy.write_row(
                    (event_id, bots[n % len(bots)], 1, old, 12, "http://127.0.0.1:9/")
                    + (200, "", "", "processed")
                )
        conn.commit()
    with proj.connect(autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE events_event")
        conn.execute("VACUUM ANALYZE events_deliveryattempt")
        conn.execute("CHECKPOINT")


def check(proj: Project, args: argparse.Namespace, label: str) -> list[str]:
    with proj.connect() as conn:
        events, attempts, waiting = conn.execute(
            "SELECT (SELECT count(*) FROM events_event),"
            " (SELECT count(*) FROM events_deliveryattempt),"
            " (SELECT count(*) FROM events_event WHERE status = 'pending')"
        ).fetchall()[0]
    failures = []
    if events != args.kept + args.waiting or waiting != args.waiting:
        failures.append(f"{label}: {events} events left ({waiting} waiting)")
    if attempts != 0:
        failures.append(f"{label}: {attempts} attempts left")
    return failures


def run_purge() -> tuple[float, int, list[float]]:
    """The purge, each batch's transaction timed (_delete_batch, where the
    purge looks it up)."""
    from events.services import retention

    with load.stopwatches([(retention, "_delete_batch", "batch")]) as spent:
        started = time.perf_counter()
        deleted = retention.events_purge_expired()
        return time.perf_counter() - started, deleted, spent["batch"]


def run_baseline(proj: Project) -> float:
    cutoff = datetime.now(UTC) - timedelta(days=30)
    expired = (
        "SELECT id FROM events_event WHERE status = ANY(%(finished)s) AND updated_at < %(cutoff)s"
    )
    params = {"finished": list(FINISHED), "cutoff": cutoff}
    with proj.connect() as conn:
        started = time.perf_counter()
        conn.execute(f"DELETE FROM events_deliveryattempt WHERE event_id IN ({expired})", params)
        conn.execute(f"DELETE FROM events_event WHERE id IN ({expired})", params)
        conn.commit()
        return time.perf_counter() - started


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--expired", type=int, default=200_000)
    parser.add_argument("--kept", type=int, default=100_000)
    parser.add_argument("--waiting", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    cli.add_db(parser, "bench_retention")
    return parser.parse_args()


def make_bots(proj: Project, args: argparse.Namespace) -> list[str]:
    """20 bots of the demo workspace (the demo bot and 19 more)."""
    from django.conf import settings

    from bots.models import Bot, Workspace
    from bots.services.bots import bot_create

    workspace = Workspace.objects.get(id=proj.demo["workspaceId"])
    for n in range(19):
        bot_create(workspace=workspace, name=f"Bench bot {n}")
    bots = list(Bot.objects.filter(workspace=workspace).values_list("id", flat=True))
    print(
        f"rows: {args.expired:,} expired events (+ one attempt each), {args.kept:,} kept,"
        f" {args.waiting:,} waiting; {len(bots)} bots; batch {settings.EVENT_RETENTION_BATCH:,}"
    )
    return bots


@dataclass
class Rounds:
    purge: list[float] = field(default_factory=list)
    longest: list[float] = field(default_factory=list)  # the purge's longest transaction
    baseline: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def purge_round(number: int, args: argparse.Namespace, rounds: Rounds) -> None:
    seconds, deleted, batches = run_purge()
    if deleted != args.expired:
        rounds.failures.append(f"purge deleted {deleted}, not {args.expired}")
    rounds.purge.append(seconds)
    rounds.longest.append(max(batches))
    print(
        f"round {number} purge: {seconds:.2f} s,"
        f" {len(batches)} transactions, longest {max(batches) * 1000:.0f} ms,"
        f" median {statistics.median(batches) * 1000:.0f} ms"
    )


def measure(proj: Project, bots: list[str], args: argparse.Namespace) -> Rounds:
    """Purge and baseline, each on fresh rows, alternating which goes first."""
    rounds = Rounds()
    for round_number in range(args.rounds):
        order = ["purge", "baseline"] if round_number % 2 == 0 else ["baseline", "purge"]
        for contender in order:
            seed(proj, bots, args)
            report.log(f"round {round_number + 1}: {contender}")
            if contender == "purge":
                purge_round(round_number + 1, args, rounds)
            else:
                seconds = run_baseline(proj)
                rounds.baseline.append(seconds)
                print(f"round {round_number + 1} baseline: {seconds:.2f} s, 1 transaction")
            rounds.failures += check(proj, args, contender)
    return rounds


def print_result(args: argparse.Namespace, rounds: Rounds, steady: float) -> None:
    purge = statistics.median(rounds.purge)
    baseline = statistics.median(rounds.baseline)
    longest = statistics.median(rounds.longest)
    print()
    print(
        f"purge:    {args.expired / purge:,.0f} events/s ({purge:.2f} s),"
        f" longest tx {longest * 1000:.0f} ms"
    )
    print(
        f"baseline: {args.expired / baseline:,.0f} events/s ({baseline:.2f} s),"
        f" one tx of {baseline * 1000:.0f} ms"
    )
    print(f"ratio purge/baseline throughput: {baseline / purge:.2f}")
    print(f"ratio longest purge tx / baseline tx: {longest / baseline:.3f}")
    left = args.kept + args.waiting
    print(f"steady state (nothing expired, {left:,} events): {steady * 1000:.1f} ms")


def main() -> None:
    args = parse_args()
    machine.start()
    with project(args.db) as proj:
        django_setup(proj)
        rounds = measure(proj, make_bots(proj, args), args)
        steady, deleted, _ = run_purge()
        if deleted:
            rounds.failures.append(f"the steady-state pass deleted {deleted}")
    print_result(args, rounds, steady)
    if rounds.failures:
        print("FAILED:\n  " + "\n  ".join(rounds.failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
