"""Event delivery under realistic load: webhooks that take time to answer,
events arriving all the time, many bots, one of them broken. The project's
worker and beat run as the Procfile starts them, on PostgreSQL and Redis.

Phases (each after waiting for a quiet machine):

1. sustained: events arrive at RATE a second for DURATION seconds, for 20
   bots whose webhook answers after a uniform 0–300 ms; half are due now
   (a worker is woken through the service's own wake-up, as after an API
   call), half are scheduled 1–5 s ahead. The same at higher rates (the
   ladder). Lateness = first attempt's start − due time, and arrival at the
   receiver − due time, for each half; delivered/s over the steady part.
   Baseline, same run: the project's webhook client alone (no database, no
   queue) sending the same schedule to the same receiver.
2. slow throughput: THROUGHPUT events due at once, same receiver: events/s
   against the plain client with as many requests in flight as the worker
   (its processes × EVENT_DELIVERY_CONCURRENCY).
3. bad bot: 50 bots answering in 50 ms and one that never answers, events
   spread evenly at BAD_RATE a second; then the same schedule without the
   bad bot. The others' lateness, and its ratio between the two runs.

Checks (exit 1 when one fails): every event of the good bots processed and
received exactly once, none started before it was due.

    .venv/bin/python bench/delivery_load.py [--rate 1000] [--duration 30] ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402
import deliverylib  # noqa: E402
from benchlib import log, percentile  # noqa: E402

TICK = 0.01  # seconds between two inserts of the generator


# ---------------------------------------------------------------- the generator


def generate(spec: dict[str, Any]) -> None:
    """Runs in a process of its own with the project's settings: inserts the
    events of `spec` at its rate, and wakes a worker as the service does."""
    import django

    django.setup()
    import psycopg
    from django.conf import settings
    from ulid import ULID

    from events.engine.wakeups import deliveries_wake

    bots: list[str] = spec["bots"]
    rate: float = spec["rate"]
    duration: float = spec["duration"]
    kind: str = spec["kind"]
    scheduled_share: float = spec["scheduled_share"]
    # As event_record: wake a worker for what falls due before it would look.
    soon = timedelta(seconds=2 * settings.EVENT_DISPATCH_INTERVAL)
    rng = random.Random(spec["seed"])
    total = int(rate * duration)
    made = 0
    start = time.monotonic()
    with psycopg.connect(spec["dsn"]) as conn, conn.cursor() as cursor:
        while made < total:
            target = min(total, int((time.monotonic() - start) * rate) + 1)
            if target > made:
                now = datetime.now(UTC)
                rows = []
                for n in range(made, target):
                    ahead = rng.random() < scheduled_share
                    due = now + timedelta(seconds=rng.uniform(1, 5)) if ahead else now
                    label = f"{kind}.{'scheduled' if ahead else 'immediate'}"
                    rows.append((f"evt_{ULID()}", bots[n % len(bots)], label, due, not ahead))
                deliverylib.copy_events(cursor, rows, now)
                conn.commit()
                made = target
                if any(due - now < soon for _, _, _, due, _ in rows):
                    deliveries_wake()
            time.sleep(max(0.0, start + (made / rate) - time.monotonic()))
    time.sleep(0.1)  # the last wake-up goes from a thread of this process


def run_generator(proj: benchlib.Project, queue: str, **spec: Any) -> float:
    """Generate events in a subprocess; answers when it began (epoch)."""
    import subprocess

    spec.setdefault("seed", 12345)
    spec["dsn"] = benchlib.admin_dsn(proj.dbname)
    env = {**proj.env, "CELERY_QUEUE": queue}
    began = time.time()
    subprocess.run(
        [benchlib.PYTHON, __file__, "--generate", json.dumps(spec)],
        cwd=benchlib.ROOT,
        env=env,
        check=True,
    )
    return began


def events_of(proj: benchlib.Project, kind: str) -> dict[str, list[str]]:
    """Ids of the events of a generator run, by label (kind.immediate, kind.scheduled)."""
    with proj.connect() as conn:
        rows = conn.execute(
            "SELECT type, id FROM events_event WHERE type LIKE %s", (f"{kind}.%",)
        ).fetchall()
    found: dict[str, list[str]] = {}
    for label, event_id in rows:
        found.setdefault(label, []).append(event_id)
    return found


# ---------------------------------------------------------------- the plain client


def plain_client(url: str, schedule: list[float], in_flight: int) -> tuple[list[float], float]:
    """Send one signed POST at each moment of `schedule` (seconds from now;
    all at once when they are 0) with the project's webhook client, at most
    `in_flight` at a time: each request's lateness, and requests/s."""
    from events.webhook_client import WebhookClient, WebhookRequest

    secret = "whsec_" + "A" * 43 + "="

    async def run() -> tuple[list[float], float]:
        client = WebhookClient()
        limit = asyncio.Semaphore(in_flight)
        loop = asyncio.get_running_loop()
        origin = loop.time()
        late: list[float] = []

        async def one(n: int, at: float) -> None:
            delay = origin + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            async with limit:
                late.append(loop.time() - origin - at)
                body = json.dumps({"id": f"base_{n}", "type": "bench", "payload": {"n": n}})
                await client.post(WebhookRequest(url, f"base_{n}", body, [secret], timeout=10.0))

        await asyncio.gather(*(one(n, at) for n, at in enumerate(schedule)))
        elapsed = loop.time() - origin
        await client.close()
        return late, len(schedule) / elapsed

    return asyncio.run(run())


# ---------------------------------------------------------------- phases


def sustained(
    proj: benchlib.Project, queue: str, bots: list[str], rate: float, duration: float, out: dict
) -> dict[str, Any]:
    kind = f"sustained{int(rate)}"
    log(f"sustained: {rate:.0f} events/s for {duration:.0f} s")
    before = benchlib.cpu_snapshot(out["groups"])
    began = run_generator(
        proj, queue, bots=bots, rate=rate, duration=duration, kind=kind, scheduled_share=0.5
    )
    ids = events_of(proj, kind)
    every = [i for group in ids.values() for i in group]
    deliverylib.wait_finished(proj, every, 120)
    cpu = benchlib.cpu_use(before, benchlib.cpu_snapshot(out["groups"]))
    result: dict[str, Any] = {"rate": rate, "cpu": cpu, "count": len(every)}
    for label, group in sorted(ids.items()):
        rows = deliverylib.first_attempts(proj, group)
        result[label.split(".")[1]] = rows
    starts = sorted(
        start
        for group in ids.values()
        for _, _, start, _ in deliverylib.first_attempts(proj, group)
    )
    steady = [s for s in starts if began + 5 <= s <= began + duration]
    result["delivered_rate"] = len(steady) / max(duration - 5, 1)
    result["ids"] = every
    return result


def lateness(rows: list[tuple[str, float, float, float]]) -> list[float]:
    return [start - due for _, due, start, _ in rows]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--ladder", default="2000,3000", help="higher rates tried after --rate")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--throughput", type=int, default=20_000)
    parser.add_argument("--bad-rate", type=float, default=500.0)
    parser.add_argument("--bad-duration", type=float, default=30.0)
    parser.add_argument("--phases", default="sustained,slow,bad")
    parser.add_argument("--generate", metavar="SPEC")
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
    failures: list[str] = []
    report: list[str] = []
    with benchlib.project("bench_delivery_load") as proj:
        out = proj.data_dir / "received.txt"
        slow_bots = deliverylib.make_bots(proj, [f"{base}/uniform/0/300"] * 20)
        fast_bots = deliverylib.make_bots(proj, [f"{base}/fixed/50"] * 50)
        [bad_bot] = deliverylib.make_bots(proj, [f"{base}/never"])
        concurrency = int(proj.env.get("EVENT_DELIVERY_CONCURRENCY", "500"))
        with deliverylib.receiver(port, out) as receiver_process:
            results: list[dict[str, Any]] = []
            throughput: dict[str, float] = {}
            bad: dict[str, list[float]] = {}
            with deliverylib.engine(proj, queue) as pids:
                groups = {
                    "worker": deliverylib.tree(pids["worker"]),
                    "beat": [pids["beat"]],
                    "receiver": [receiver_process.pid],
                }
                shared = {"groups": groups}
                if "sustained" in phases:
                    rates = [args.rate] + [float(r) for r in args.ladder.split(",") if r]
                    for rate in rates:
                        benchlib.wait_for_quiet(max_wait=120)
                        results.append(
                            sustained(proj, queue, slow_bots, rate, args.duration, shared)
                        )
                if "slow" in phases:
                    benchlib.wait_for_quiet(max_wait=120)
                    log(f"slow throughput: {args.throughput:,} due at once")
                    now = datetime.now(UTC)
                    ids = deliverylib.seed(proj, slow_bots, [now] * args.throughput, "pending")
                    deliverylib.wait_finished(proj, ids, 300)
                    rows = deliverylib.first_attempts(proj, ids)
                    first = min(start for _, _, start, _ in rows)
                    last = max(end for *_, end in rows)
                    throughput["engine"] = len(rows) / (last - first)
                    results_ids = ids
            if "bad" in phases:
                for label, with_bad in (("with the bad bot", True), ("without it", False)):
                    benchlib.wait_for_quiet(max_wait=120)
                    with deliverylib.engine(proj, queue):
                        kind = "bad" if with_bad else "good"
                        bots = fast_bots + ([bad_bot] if with_bad else [])
                        log(f"bad bot: {label}, {args.bad_rate:.0f} events/s")
                        rate = args.bad_rate * len(bots) / (len(fast_bots) + 1)
                        run_generator(
                            proj,
                            queue,
                            bots=bots,
                            rate=rate,
                            duration=args.bad_duration,
                            kind=kind,
                            scheduled_share=0.5,
                        )
                        ids = events_of(proj, kind)
                        with proj.connect() as conn:
                            good = [
                                row[0]
                                for row in conn.execute(
                                    "SELECT id FROM events_event WHERE type LIKE %s "
                                    "AND bot_id <> %s",
                                    (f"{kind}.%", bad_bot),
                                ).fetchall()
                            ]
                        deliverylib.wait_finished(proj, good, 120)
                        bad[label] = lateness(deliverylib.first_attempts(proj, good))
                    with proj.connect() as conn:
                        attempted = conn.execute(
                            "SELECT count(*), count(*) FILTER (WHERE attempt_count > 0) "
                            "FROM events_event WHERE bot_id = %s",
                            (bad_bot,),
                        ).fetchone()
                        conn.execute(
                            "UPDATE events_event SET status = 'canceled', next_attempt_at = NULL "
                            "WHERE bot_id = %s AND next_attempt_at IS NOT NULL",
                            (bad_bot,),
                        )
                        conn.commit()
                    if with_bad:
                        report.append(
                            f"  bad bot: {attempted[0]:,} events, {attempted[1]:,} attempted "
                            "(each timing out), the rest waiting in the table"
                        )
        got = deliverylib.received(out)
        if "slow" in phases:
            benchlib.wait_for_quiet(max_wait=120)
            with deliverylib.receiver(port, proj.data_dir / "baseline.txt"):
                _, throughput["client"] = plain_client(
                    f"{base}/uniform/0/300", [0.0] * args.throughput, 2 * concurrency
                )
        baseline: dict[float, list[float]] = {}
        if "sustained" in phases:
            for result in results:
                benchlib.wait_for_quiet(max_wait=120)
                rng = random.Random(1)
                schedule = sorted(rng.uniform(0, args.duration) for _ in range(result["count"]))
                with deliverylib.receiver(port, proj.data_dir / "baseline-s.txt"):
                    baseline[result["rate"]], _ = plain_client(
                        f"{base}/uniform/0/300", schedule, 2 * concurrency
                    )

        counts = Counter(mid for mid, _, _ in got)
        checked = [i for result in results for i in result["ids"]]
        if "slow" in phases:
            checked += results_ids
        if any(counts[i] != 1 for i in checked):
            failures.append("an event of a good bot was not received exactly once")
        arrival = {mid: at for mid, at, _ in got}

    print("\n== delivery under load")
    print("worker and beat as the Procfile starts them; PostgreSQL, Redis; webhook_receiver.py")
    if "sustained" in phases:
        print("\nsustained: events arriving all the time, 20 bots answering in 0-300 ms")
        for result in results:
            rate = result["rate"]
            print(
                f"\n  offered {rate:,.0f}/s for {args.duration:.0f} s ({result['count']:,} events):"
                f" delivered {result['delivered_rate']:,.0f}/s over the steady part"
            )
            for half in ("immediate", "scheduled"):
                rows = result.get(half, [])
                late = lateness(rows)
                if any(value < -0.001 for value in late):
                    failures.append(f"{half}: an attempt started before its event was due")
                print(deliverylib.lateness_line(f"{half}: due -> attempt", late))
                arrive = [arrival[i] - due for i, due, _, _ in rows if i in arrival]
                print(deliverylib.lateness_line(f"{half}: due -> received", arrive))
            base_late = baseline.get(rate, [])
            print(deliverylib.lateness_line("plain client: schedule -> sent", base_late))
            print(
                "  "
                + result["cpu"]
                .report(f"{rate:.0f}/s", result["count"], "event")
                .replace("\n", "\n  ")
            )
    if throughput:
        print(f"\nslow throughput: {args.throughput:,} due at once, receiver answering in 0-300 ms")
        print(f"  engine        {throughput['engine']:8.0f} events/s (first start -> last end)")
        print(
            f"  plain client  {throughput['client']:8.0f} requests/s ({2 * concurrency} in flight)"
        )
        print(f"  ratio         {throughput['engine'] / throughput['client']:8.2f}")
    if bad:
        print(f"\nbad bot: 50 bots answering in 50 ms, one never answering, {args.bad_rate:.0f}/s")
        for label, values in bad.items():
            print(deliverylib.lateness_line(f"others, {label}", values))
        (with_bad, without) = bad.values()
        print(
            f"  ratio p50 {percentile(with_bad, 50) / percentile(without, 50):.2f}, "
            f"p99 {percentile(with_bad, 99) / percentile(without, 99):.2f}"
        )
        for line in report:
            print(line)
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
