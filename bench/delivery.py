"""Event delivery: throughput, lateness and the memory of worker and beat,
measured on the project's own worker and beat processes (as the Procfile
starts them) against PostgreSQL, Redis and a local webhook receiver that
answers at once (webhook_receiver.py), for BOTS bots.

Phases (each after waiting for a quiet machine):
1. memory: worker and beat resident memory after an idle spell with no
   events, then (fresh processes) with FUTURE events pending: the ratio.
2. trickle (baseline of lateness): TRICKLE events due spread over 20 s.
3. bursts: BURST events due spread over one second, BURSTS times, one after
   the other; lateness = first attempt's start (started_at) - due_at, and
   receiver arrival - due_at; p50/p90/p99/max of each, and the median burst's
   ratio to the trickle's.
4. throughput: THROUGHPUT events due now; events/s from the first attempt's
   start to the last one's end, against a plain aiohttp client POSTing the
   same signed bodies to the same receiver in this process (the baseline).

Checks (exit 1 when one fails): every event processed and received exactly
once, none started before its due time, the FUTURE events untouched.

    .venv/bin/python bench/delivery.py [--future 100000] [--burst 10000] ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
from deliverylib import lateness_line  # noqa: E402

# ---------------------------------------------------------------- baseline client


def baseline_rate(url: str, count: int, in_flight: int) -> float:
    """requests/s of a plain aiohttp client POSTing signed event bodies: what
    a typical Python program gets from the same receiver (the engine's own
    client alone is measured by bench/delivery_load.py)."""
    import aiohttp
    from standardwebhooks.webhooks import Webhook

    # The same signing as the engine's (events.signing), without Django.
    signer = Webhook("whsec_" + "A" * 43 + "=")

    async def run() -> float:
        limit = asyncio.Semaphore(in_flight)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def one(n: int) -> None:
                body = json.dumps({"id": f"base_{n}", "type": "bench", "payload": {"n": n}})
                async with limit:
                    moment = datetime.now(UTC)
                    headers = {
                        "webhook-id": f"base_{n}",
                        "webhook-timestamp": str(int(moment.timestamp())),
                        "webhook-signature": signer.sign(f"base_{n}", moment, body),
                    }
                    headers["Content-Type"] = "application/json"
                    async with session.post(url, data=body.encode(), headers=headers) as response:
                        await response.read()

            started = time.perf_counter()
            await asyncio.gather(*(one(n) for n in range(count)))
            return count / (time.perf_counter() - started)

    return asyncio.run(run())


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--future", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--bursts", type=int, default=3, help="bursts, one after the other")
    parser.add_argument("--trickle", type=int, default=200)
    parser.add_argument("--throughput", type=int, default=20_000)
    parser.add_argument("--bots", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds before reading memory")
    args = parser.parse_args()
    benchlib.exit_cleanly_on_sigterm()
    benchlib.print_machine()
    queue = f"bench-{os.getpid()}"
    port = benchlib.free_port()
    url = f"http://127.0.0.1:{port}/now"
    with benchlib.project("bench_delivery") as proj:
        out = proj.data_dir / "received.txt"
        bots = deliverylib.make_bots(proj, [url] * args.bots)
        with deliverylib.receiver(port, out) as receiver_process:
            # 1. memory, idle then with the future events pending
            memory = {}
            for label in ("none pending", f"{args.future:,} pending"):
                if label != "none pending":
                    start = datetime.now(UTC) + timedelta(hours=3)
                    deliverylib.seed(
                        proj,
                        bots,
                        [start + timedelta(seconds=n) for n in range(args.future)],
                        "scheduled",
                    )
                    with proj.connect(autocommit=True) as conn:
                        conn.execute("VACUUM ANALYZE events_event")
                benchlib.wait_for_quiet(max_wait=120)
                with deliverylib.engine(proj, queue) as pids:
                    time.sleep(args.idle)
                    memory[label] = (
                        deliverylib.rss_mb(pids["worker"]),
                        deliverylib.rss_mb(pids["beat"]),
                    )
            future_count = args.future
            with deliverylib.engine(proj, queue) as pids:
                # 2. trickle
                benchlib.wait_for_quiet(max_wait=120)
                start = datetime.now(UTC) + timedelta(seconds=5)
                spread = 20.0 / max(args.trickle, 1)
                trickle = deliverylib.seed(
                    proj,
                    bots,
                    [start + timedelta(seconds=n * spread) for n in range(args.trickle)],
                    "scheduled",
                )
                deliverylib.wait_finished(proj, trickle, 60)
                # 3. bursts
                bursts = []
                for _ in range(args.bursts):
                    benchlib.wait_for_quiet(max_wait=120)
                    start = datetime.now(UTC) + timedelta(seconds=10)
                    burst = deliverylib.seed(
                        proj,
                        bots,
                        [start + timedelta(seconds=n / args.burst) for n in range(args.burst)],
                        "scheduled",
                    )
                    if datetime.now(UTC) >= start:
                        raise SystemExit("FAILED: seeding the burst took longer than its lead time")
                    deliverylib.wait_finished(proj, burst, 300)
                    bursts.append(burst)
                # 4. throughput
                benchlib.wait_for_quiet(max_wait=120)
                groups = {
                    "worker": deliverylib.tree(pids["worker"]),
                    "beat": [pids["beat"]],
                    "receiver": [receiver_process.pid],
                }
                before = benchlib.cpu_snapshot(groups)
                now = datetime.now(UTC)
                bulk = deliverylib.seed(proj, bots, [now] * args.throughput, "pending")
                deliverylib.wait_finished(proj, bulk, 600)
                cpu = benchlib.cpu_use(before, benchlib.cpu_snapshot(groups))
        # the receiver has written what it got
        got = deliverylib.received(out)
        benchlib.wait_for_quiet(max_wait=120)
        with deliverylib.receiver(port, proj.data_dir / "baseline.txt"):
            base = baseline_rate(url, args.throughput, 256)

        counts = Counter(mid for mid, _, _ in got)
        log(f"receiver: {len(got)} requests, {len(counts)} distinct webhook-ids")
        failures = []
        phases = [("trickle", trickle)] + [(f"burst {n + 1}", ids) for n, ids in enumerate(bursts)]
        phases.append(("throughput", bulk))
        for label, ids in phases:
            if any(counts[i] != 1 for i in ids):
                failures.append(f"{label}: an event was not received exactly once")
        arrival = {mid: at for mid, at, _ in got}
        rows: dict[str, Any] = {}
        for label, ids in phases:
            rows[label] = deliverylib.first_attempts(proj, ids)
            if any(start_at < due - 0.001 for _, due, start_at, _ in rows[label]):
                failures.append(f"{label}: an attempt started before its event was due")
        with proj.connect() as conn:
            untouched = conn.execute(
                "SELECT count(*) FROM events_event WHERE status = 'scheduled' "
                "AND attempt_count = 0 AND lease = 0"
            ).fetchone()
        if not untouched or untouched[0] != future_count:
            failures.append("the future events were touched")

    print("\n== delivery")
    worker = " ".join(deliverylib.procfile_command("worker")[1:])
    print(f"{worker}; beat; PostgreSQL, Redis; {args.bots} bots, a receiver answering at once")
    print("\nmemory (resident, MB)          worker tree      beat")
    for label, (worker_mb, beat_mb) in memory.items():
        print(f"  {label:28s} {worker_mb:10.1f} {beat_mb:9.1f}")
    (w0, b0), (w1, b1) = memory.values()
    print(f"  ratio loaded/none            {w1 / w0:10.3f} {b1 / b0:9.3f}")
    print(f"\nlateness (due -> first attempt starts), {future_count:,} future events pending")
    late = {k: [s - d for _, d, s, _ in v] for k, v in rows.items()}
    arrive = {k: [arrival[i] - d for i, d, _, _ in v if i in arrival] for k, v in rows.items()}
    print(lateness_line(f"trickle {len(trickle)} over 20 s", late["trickle"]))
    names = [label for label in rows if label.startswith("burst")]
    for label in names:
        print(lateness_line(f"{label}: {args.burst:,} in 1 s", late[label]))
        print(lateness_line(f"{label}, due -> received", arrive[label]))
    # The median burst by its p50: the machine's speed drifts from one minute
    # to the next, and one burst lasts one second.
    middle = sorted(names, key=lambda label: percentile(late[label], 50))[len(names) // 2]
    ratio50 = percentile(late[middle], 50) / max(percentile(late["trickle"], 50), 1e-6)
    ratio99 = percentile(late[middle], 99) / max(percentile(late["trickle"], 99), 1e-6)
    print(f"  median burst ({middle})/trickle: p50 {ratio50:.1f}x, p99 {ratio99:.1f}x")
    spans = rows["throughput"]
    elapsed = max(end for *_, end in spans) - min(start for _, _, start, _ in spans)
    rate = len(spans) / elapsed
    print(f"\nthroughput: {len(spans):,} events due at once")
    print(f"  engine    {rate:8.0f} events/s  (first attempt start -> last attempt end)")
    print(
        f"  baseline  {base:8.0f} requests/s (plain aiohttp client, same receiver, 256 in flight)"
    )
    print(f"  ratio     {rate / base:8.2f}")
    print(cpu.report("throughput", len(spans), "event"))
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
