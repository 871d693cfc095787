"""Event delivery under realistic load: webhooks that take time to answer,
events arriving all the time, many bots, one of them broken. The project's
worker and beat run as the Procfile starts them, on PostgreSQL and Redis;
the bots' webhook is webhook_receiver.py.

Phases (each after waiting for a quiet machine):

1. sustained: events arrive at RATE a second for DURATION seconds (then at
   each rate of the LADDER), round-robin over 20 bots whose webhook answers
   after a uniform 0-300 ms; half are due now (a worker is woken through the
   service's own wake-up, as after an API call), half are scheduled 1-5 s
   ahead. Lateness = first attempt's start - due time (and arrival at the
   receiver - due time), for each half; delivered/s over the steady part
   (from 5 s in). Baseline, same run: the project's webhook client alone (no
   database, no queue) sending as many requests on the same kind of schedule
   to the same receiver.
2. slow throughput: THROUGHPUT events due at once for those bots: events/s
   against the plain client with as many requests in flight as the worker
   (its 2 processes x EVENT_DELIVERY_CONCURRENCY).
3. bad bot: 50 bots answering in 50 ms and one never answering (each of its
   requests waits for the 10 s timeout), events spread evenly over the 51 at
   BAD_RATE a second for BAD_DURATION seconds; then the same schedule without
   the bad bot. The other bots' lateness, and its ratio between the two runs.

Checks (exit 1 when one fails): every event of the good bots processed and
received exactly once, none started before it was due.

    .venv/bin/python bench/delivery_load.py [--rate 1000] [--ladder 2000,3000] ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402
import deliverylib  # noqa: E402
from benchlib import log, percentile  # noqa: E402
from deliverylib import lateness_line  # noqa: E402

SLOW = "/uniform/0/300"
STEADY_FROM = 5.0  # seconds into a sustained run from which the rate is counted


# ---------------------------------------------------------------- the generator


def generate(spec: dict[str, Any]) -> None:
    """Runs in a process of its own with the project's settings: inserts the
    events of `spec` at its rate, and wakes a worker as event_record does."""
    import django

    django.setup()
    import psycopg
    from django.conf import settings
    from ulid import ULID

    from events.engine.wakeups import deliveries_wake

    bots: list[str] = spec["bots"]
    rate: float = spec["rate"]
    total = int(rate * spec["duration"])
    soon = timedelta(seconds=2 * settings.EVENT_DISPATCH_INTERVAL)
    rng = random.Random(spec["seed"])
    made = 0
    start = time.monotonic()
    with psycopg.connect(spec["dsn"]) as conn, conn.cursor() as cursor:
        while made < total:
            target = min(total, int((time.monotonic() - start) * rate) + 1)
            now = datetime.now(UTC)
            rows = []
            for n in range(made, target):
                ahead = rng.random() < spec["scheduled_share"]
                due = now + timedelta(seconds=rng.uniform(1, 5)) if ahead else now
                kind = f"{spec['kind']}.{'scheduled' if ahead else 'immediate'}"
                rows.append((f"evt_{ULID()}", bots[n % len(bots)], kind, due, not ahead))
            deliverylib.copy_events(cursor, rows, now)
            conn.commit()
            made = target
            if any(due - now < soon for _, _, _, due, _ in rows):
                deliveries_wake()
            time.sleep(max(0.0, start + made / rate - time.monotonic()))
    time.sleep(0.1)  # the last wake-up goes from a thread of this process


def run_generator(proj: benchlib.Project, queue: str, **spec: Any) -> float:
    """Generate events in a subprocess; answers when it began (epoch)."""
    spec = {"seed": 12345, "scheduled_share": 0.5, "dsn": benchlib.admin_dsn(proj.dbname), **spec}
    began = time.time()
    subprocess.run(
        [benchlib.PYTHON, __file__, "--generate", json.dumps(spec)],
        cwd=benchlib.ROOT,
        env={**proj.env, "CELERY_QUEUE": queue},
        check=True,
    )
    return began


def events_of(proj: benchlib.Project, kind: str, *, not_bot: str = "") -> dict[str, list[str]]:
    """Ids of a generator run's events, by half (immediate, scheduled)."""
    with proj.connect() as conn:
        rows = conn.execute(
            "SELECT type, id FROM events_event WHERE type LIKE %s AND bot_id <> %s",
            (f"{kind}.%", not_bot),
        ).fetchall()
    found: dict[str, list[str]] = {}
    for label, event_id in rows:
        found.setdefault(label.split(".")[1], []).append(event_id)
    return found


# ---------------------------------------------------------------- the plain client


def plain_client(url: str, schedule: list[float], in_flight: int) -> tuple[list[float], float]:
    """One signed POST at each moment of `schedule` (seconds from the start;
    0 for all at once) with the project's webhook client, at most `in_flight`
    at a time: each request's lateness, and requests/s."""
    from events.webhook_client import WebhookClient, WebhookRequest

    secret = "whsec_" + "A" * 43 + "="

    async def run() -> tuple[list[float], float]:
        client = WebhookClient()
        limit = asyncio.Semaphore(in_flight)
        loop = asyncio.get_running_loop()
        origin = loop.time()
        late: list[float] = []

        async def one(n: int, at: float) -> None:
            if (wait := origin + at - loop.time()) > 0:
                await asyncio.sleep(wait)
            async with limit:
                late.append(loop.time() - origin - at)
                body = json.dumps({"id": f"base_{n}", "type": "bench", "payload": {"n": n}})
                await client.post(WebhookRequest(url, f"base_{n}", body, [secret], 10.0))

        await asyncio.gather(*(one(n, at) for n, at in enumerate(schedule)))
        elapsed = loop.time() - origin
        await client.close()
        return late, len(schedule) / elapsed

    return asyncio.run(run())


# ---------------------------------------------------------------- phases


@dataclass
class Run:
    """One generator run's events and what became of them."""

    label: str
    halves: dict[str, list[tuple[str, float, float, float]]] = field(default_factory=dict)
    delivered_rate: float = 0.0
    cpu: benchlib.CpuUse | None = None
    baseline: list[float] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [row[0] for rows in self.halves.values() for row in rows]

    def lateness(self, half: str | None = None) -> list[float]:
        rows = self.halves[half] if half else [r for rows in self.halves.values() for r in rows]
        return [start - due for _, due, start, _ in rows]


def sustained(
    proj: benchlib.Project, queue: str, bots: list[str], rate: float, duration: float, groups: Any
) -> Run:
    kind = f"sustained{int(rate)}"
    log(f"sustained: {rate:.0f} events/s for {duration:.0f} s")
    before = benchlib.cpu_snapshot(groups)
    began = run_generator(proj, queue, bots=bots, rate=rate, duration=duration, kind=kind)
    ids = events_of(proj, kind)
    deliverylib.wait_finished(proj, [i for half in ids.values() for i in half], 120)
    run = Run(label=f"{rate:,.0f}/s", cpu=benchlib.cpu_use(before, benchlib.cpu_snapshot(groups)))
    run.halves = {half: deliverylib.first_attempts(proj, group) for half, group in ids.items()}
    starts = [start for rows in run.halves.values() for _, _, start, _ in rows]
    steady = [s for s in starts if began + STEADY_FROM <= s <= began + duration]
    run.delivered_rate = len(steady) / (duration - STEADY_FROM)
    return run


def bad_bot(
    proj: benchlib.Project,
    queue: str,
    good: list[str],
    bad: str | None,
    rate: float,
    duration: float,
) -> tuple[Run, str]:
    """Events for the good bots (and the bad one), the good ones' lateness,
    and what became of the bad bot's events."""
    kind = "bad" if bad else "good"
    bots = good + ([bad] if bad else [])
    # The same schedule for the good bots either way: the bad one adds its share.
    offered = rate * len(bots) / (len(good) + 1)
    with deliverylib.engine(proj, queue):
        log(f"bad bot: {'with' if bad else 'without'} it, {offered:.0f} events/s")
        run_generator(proj, queue, bots=bots, rate=offered, duration=duration, kind=kind)
        ids = events_of(proj, kind, not_bot=bad or "")
        deliverylib.wait_finished(proj, [i for half in ids.values() for i in half], 120)
        run = Run(label=f"{len(good)} good bots, {'with' if bad else 'without'} the bad one")
        run.halves = {half: deliverylib.first_attempts(proj, group) for half, group in ids.items()}
    note = ""
    if bad:
        with proj.connect() as conn:
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE attempt_count > 0), "
                "coalesce(sum(attempt_count), 0) FROM events_event WHERE bot_id = %s",
                (bad,),
            ).fetchone()
            assert row is not None
            total, tried, attempts = row
            # Out of the way of the next run.
            conn.execute(
                "UPDATE events_event SET status = 'canceled', next_attempt_at = NULL "
                "WHERE bot_id = %s AND next_attempt_at IS NOT NULL",
                (bad,),
            )
            conn.commit()
        note = (
            f"  the bad bot: {total:,} events, {tried:,} tried ({attempts:,} attempts, each timing "
            "out), the rest waiting in the table, left out of the claims"
        )
    return run, note


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--ladder", default="2000,3000", help="higher rates tried after --rate")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--throughput", type=int, default=20_000)
    parser.add_argument("--bad-rate", type=float, default=500.0)
    parser.add_argument("--bad-duration", type=float, default=30.0)
    parser.add_argument("--phases", default="sustained,slow,bad")
    parser.add_argument("--generate", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(json.loads(args.generate))
        return 0
    benchlib.exit_cleanly_on_sigterm()
    benchlib.print_machine()
    phases = set(args.phases.split(","))
    queue = f"bench-{os.getpid()}"
    port = benchlib.free_port()
    base = f"http://127.0.0.1:{port}"
    in_flight = 2 * int(os.environ.get("EVENT_DELIVERY_CONCURRENCY", "500"))
    runs: list[Run] = []
    throughput: dict[str, float] = {}
    bad_runs: list[Run] = []
    notes: list[str] = []
    slow_ids: list[str] = []
    with benchlib.project("bench_delivery_load") as proj:
        out = proj.data_dir / "received.txt"
        slow_bots = deliverylib.make_bots(proj, [base + SLOW] * 20)
        good_bots = deliverylib.make_bots(proj, [f"{base}/fixed/50"] * 50)
        [broken] = deliverylib.make_bots(proj, [f"{base}/never"])
        with deliverylib.receiver(port, out) as receiver_process:
            with deliverylib.engine(proj, queue) as pids:
                groups = {
                    "worker": deliverylib.tree(pids["worker"]),
                    "beat": [pids["beat"]],
                    "receiver": [receiver_process.pid],
                }
                if "sustained" in phases:
                    for rate in [args.rate] + [float(r) for r in args.ladder.split(",") if r]:
                        benchlib.wait_for_quiet(max_wait=120)
                        runs.append(sustained(proj, queue, slow_bots, rate, args.duration, groups))
                if "slow" in phases:
                    benchlib.wait_for_quiet(max_wait=120)
                    log(f"slow throughput: {args.throughput:,} due at once")
                    now = datetime.now(UTC)
                    slow_ids = deliverylib.seed(proj, slow_bots, [now] * args.throughput, "pending")
                    deliverylib.wait_finished(proj, slow_ids, 300)
                    rows = deliverylib.first_attempts(proj, slow_ids)
                    first = min(start for _, _, start, _ in rows)
                    last = max(end for *_, end in rows)
                    throughput["engine"] = len(rows) / (last - first)
            if "bad" in phases:
                for bad in (broken, None):
                    benchlib.wait_for_quiet(max_wait=120)
                    run, note = bad_bot(
                        proj, queue, good_bots, bad, args.bad_rate, args.bad_duration
                    )
                    bad_runs.append(run)
                    notes += [note] if note else []
        got = deliverylib.received(out)
        for run in runs:
            benchlib.wait_for_quiet(max_wait=120)
            rng = random.Random(1)
            count = len(run.ids)
            schedule = sorted(rng.uniform(0, args.duration) for _ in range(count))
            with deliverylib.receiver(port, proj.data_dir / "baseline.txt"):
                run.baseline, _ = plain_client(base + SLOW, schedule, in_flight)
        if throughput:
            benchlib.wait_for_quiet(max_wait=120)
            with deliverylib.receiver(port, proj.data_dir / "baseline.txt"):
                _, throughput["client"] = plain_client(
                    base + SLOW, [0.0] * args.throughput, in_flight
                )

    counts = Counter(mid for mid, _, _ in got)
    arrival = {mid: at for mid, at, _ in got}
    failures = []
    checked = [i for run in runs + bad_runs for i in run.ids] + slow_ids
    if any(counts[i] != 1 for i in checked):
        failures.append("an event of a good bot was not received exactly once")
    if any(late < -0.001 for run in runs + bad_runs for late in run.lateness()):
        failures.append("an attempt started before its event was due")

    print("\n== delivery under load")
    worker = " ".join(deliverylib.procfile_command("worker")[1:])
    print(f"{worker}; beat; PostgreSQL, Redis; webhook_receiver.py")
    if runs:
        print(
            f"\nsustained: events arriving all the time, 20 bots answering in 0-300 ms, "
            f"{args.duration:.0f} s each"
        )
    for run in runs:
        print(
            f"\n  offered {run.label} ({len(run.ids):,} events): delivered "
            f"{run.delivered_rate:,.0f}/s from {STEADY_FROM:.0f} s on"
        )
        for half in ("immediate", "scheduled"):
            print(lateness_line(f"{half}: due -> attempt", run.lateness(half)))
            received = [arrival[i] - due for i, due, _, _ in run.halves[half] if i in arrival]
            print(lateness_line(f"{half}: due -> received", received))
        print(lateness_line("plain client: schedule -> sent", run.baseline))
        assert run.cpu is not None
        print("  " + run.cpu.report(run.label, len(run.ids), "event").replace("\n", "\n  "))
    if throughput:
        print(f"\nslow throughput: {args.throughput:,} due at once, answers in 0-300 ms")
        print(f"  engine        {throughput['engine']:8.0f} events/s (first start -> last end)")
        print(f"  plain client  {throughput['client']:8.0f} requests/s ({in_flight} in flight)")
        print(f"  ratio         {throughput['engine'] / throughput['client']:8.2f}")
    if len(bad_runs) == 2:
        print(
            f"\nbad bot: 50 bots answering in 50 ms, one never answering; "
            f"{args.bad_rate:.0f} events/s over the 51, {args.bad_duration:.0f} s"
        )
        for run in bad_runs:
            print(lateness_line(run.label, run.lateness()))
        with_bad, without = (run.lateness() for run in bad_runs)
        print(
            f"  ratio with/without: p50 {percentile(with_bad, 50) / percentile(without, 50):.2f}, "
            f"p99 {percentile(with_bad, 99) / percentile(without, 99):.2f}"
        )
        for note in notes:
            print(note)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
