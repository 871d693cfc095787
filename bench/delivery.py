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
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import event_rows, machine, servers  # noqa: E402
from harness.report import failed_lines, lateness_line, log, percentile  # noqa: E402

# ---------------------------------------------------------------- baseline client


def baseline_rate(url: str, count: int, in_flight: int) -> float:
    """requests/s of a plain aiohttp client POSTing signed event bodies: what
    a typical Python program gets from the same receiver (the engine's own
    client alone is measured by bench/delivery_load.py)."""
    import aiohttp
    from standardwebhooks.webhooks import Webhook

    # The same signing as the engine's (events.engine.signing), without Django.
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


QUIET_WAIT = 120.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--future", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--bursts", type=int, default=3, help="bursts, one after the other")
    parser.add_argument("--trickle", type=int, default=200)
    parser.add_argument("--throughput", type=int, default=20_000)
    parser.add_argument("--bots", type=int, default=20)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds before reading memory")
    return parser.parse_args()


def memory(rx: event_rows.Receiving, bots: list[str], args: argparse.Namespace) -> dict:
    """1. Resident MB of worker (tree) and beat, idle, then with fresh
    processes and the future events pending."""
    found = {}
    for label in ("none pending", f"{args.future:,} pending"):
        if label != "none pending":
            event_rows.seed(
                rx.proj, bots, event_rows.due_from(3 * 3600, args.future, 1), "scheduled"
            )
            with rx.proj.connect(autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE events_event")
        machine.wait_for_quiet(max_wait=QUIET_WAIT)
        with servers.engine(rx.proj, rx.queue) as engine:
            time.sleep(args.idle)
            found[label] = (machine.rss_mb(engine.worker), machine.rss_mb(engine.beat))
    return found


@dataclass
class Delivered:
    phases: dict[str, list[str]]  # label -> event ids: trickle, bursts, throughput
    cpu: machine.CpuUse


def deliveries(
    rx: event_rows.Receiving, bots: list[str], receiver: Any, args: argparse.Namespace
) -> Delivered:
    """2-4. The trickle, the bursts, then the throughput, on one engine."""
    phases: dict[str, list[str]] = {}
    with servers.engine(rx.proj, rx.queue) as engine:
        machine.wait_for_quiet(max_wait=QUIET_WAIT)
        trickle = event_rows.seed(
            rx.proj,
            bots,
            event_rows.due_from(5, args.trickle, 20.0 / max(args.trickle, 1)),
            "scheduled",
        )
        event_rows.wait_finished(rx.proj, trickle, 60)
        phases["trickle"] = trickle
        for n in range(args.bursts):
            machine.wait_for_quiet(max_wait=QUIET_WAIT)
            due = event_rows.due_from(10, args.burst, 1 / args.burst)
            burst = event_rows.seed(rx.proj, bots, due, "scheduled")
            if datetime.now(UTC) >= due[0]:
                raise SystemExit("FAILED: seeding the burst took longer than its lead time")
            event_rows.wait_finished(rx.proj, burst, 300)
            phases[f"burst {n + 1}"] = burst
        machine.wait_for_quiet(max_wait=QUIET_WAIT)
        meter = machine.CpuMeter(engine.groups(receiver))
        bulk = event_rows.seed(rx.proj, bots, [datetime.now(UTC)] * args.throughput, "pending")
        event_rows.wait_finished(rx.proj, bulk, 600)
        phases["throughput"] = bulk
        return Delivered(phases, meter.stop())


def check(
    rx: event_rows.Receiving, delivered: Delivered, future: int, failures: list[str]
) -> dict[str, Any]:
    """Each event received exactly once and started when due, the future
    events untouched; the first attempts, by phase."""
    counts = Counter(mid for mid, _, _ in event_rows.received(rx.out))
    log(f"receiver: {sum(counts.values())} requests, {len(counts)} distinct webhook-ids")
    rows: dict[str, Any] = {}
    for label, ids in delivered.phases.items():
        if any(counts[i] != 1 for i in ids):
            failures.append(f"{label}: an event was not received exactly once")
    for label, ids in delivered.phases.items():
        rows[label] = event_rows.first_attempts(rx.proj, ids)
        if any(start_at < due - 0.001 for _, due, start_at, _ in rows[label]):
            failures.append(f"{label}: an attempt started before its event was due")
    untouched = rx.proj.scalar(
        "SELECT count(*) FROM events_event WHERE status = 'scheduled' "
        "AND attempt_count = 0 AND lease = 0"
    )
    if untouched != future:
        failures.append("the future events were touched")
    return rows


def report(
    args: argparse.Namespace,
    found: dict,
    rows: dict[str, Any],
    arrival: dict[str, float],
    cpu: machine.CpuUse,
    base: float,
) -> None:
    print("\n== delivery")
    worker = " ".join(servers.procfile_words("worker")[1:])
    print(f"{worker}; beat; PostgreSQL, Redis; {args.bots} bots, a receiver answering at once")
    print("\nmemory (resident, MB)          worker tree      beat")
    for label, (worker_mb, beat_mb) in found.items():
        print(f"  {label:28s} {worker_mb:10.1f} {beat_mb:9.1f}")
    (w0, b0), (w1, b1) = found.values()
    print(f"  ratio loaded/none            {w1 / w0:10.3f} {b1 / b0:9.3f}")
    print(f"\nlateness (due -> first attempt starts), {args.future:,} future events pending")
    late = {k: [s - d for _, d, s, _ in v] for k, v in rows.items()}
    arrive = {k: [arrival[i] - d for i, d, _, _ in v if i in arrival] for k, v in rows.items()}
    print(lateness_line(f"trickle {len(rows['trickle'])} over 20 s", late["trickle"]))
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


def main() -> int:
    args = parse_args()
    machine.start()
    failures: list[str] = []
    with event_rows.receiving_project("bench_delivery") as rx:
        bots = rx.bots("/now", args.bots)
        with servers.receiver(rx.port, rx.out) as receiver:
            found = memory(rx, bots, args)
            delivered = deliveries(rx, bots, receiver, args)
        # the receiver has written what it got
        machine.wait_for_quiet(max_wait=QUIET_WAIT)
        with servers.receiver(rx.port, rx.proj.data_dir / "baseline.txt"):
            base = baseline_rate(rx.url(), args.throughput, 256)
        rows = check(rx, delivered, args.future, failures)
        arrival = rx.arrivals()
    report(args, found, rows, arrival, delivered.cpu, base)
    return failed_lines(failures)


if __name__ == "__main__":
    sys.exit(main())
