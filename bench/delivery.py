"""Event delivery: throughput, lateness and the memory of worker and beat,
measured on the project's own worker and beat processes (as the Procfile
starts them) against PostgreSQL, Redis and a fast local webhook receiver.

Phases (each after waiting for a quiet machine):
1. memory: worker and beat resident memory after an idle spell with no
   events, then (fresh processes) with FUTURE events pending: the ratio.
2. trickle (baseline of lateness): TRICKLE events due spread over 20 s.
3. burst: BURST events due spread over one second; lateness = first attempt's
   start (events_deliveryattempt.started_at) - due_at, and receiver arrival -
   due_at; p50/p90/p99/max, and the ratio to the trickle's.
4. throughput: THROUGHPUT events due now; events/s from the first attempt's
   start to the last one's end, against a plain aiohttp client POSTing the
   same signed bodies to the same receiver in this process (the baseline).

Checks (exit 1 when one fails): every event processed and received exactly
once, none started before its due time, the FUTURE events untouched.

    .venv/bin/python bench/delivery.py [--future 100000] [--burst 10000] ...
    .venv/bin/python bench/delivery.py --receiver PORT FILE   (the receiver alone)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402
from benchlib import log, percentile  # noqa: E402

CELERY = str(Path(benchlib.PYTHON).parent / "celery")


# ---------------------------------------------------------------- the receiver


class _ReceiverProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive and Content-Length bodies: all a webhook
    client sends. Records (webhook-id, arrival time) and answers 200."""

    records: list[tuple[str, float]] = []

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length, message_id = 0, ""
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                name = name.lower()
                if name == "content-length":
                    length = int(value)
                elif name == "webhook-id":
                    message_id = value.strip()
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.records.append((message_id, time.time()))
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


def receiver_main(port: int, out: Path) -> None:
    async def serve() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        server = await loop.create_server(_ReceiverProtocol, "127.0.0.1", port, backlog=1024)
        await stop
        server.close()

    asyncio.run(serve())
    out.write_text("\n".join(f"{mid} {at}" for mid, at in _ReceiverProtocol.records))


@contextlib.contextmanager
def receiver(port: int, out: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([benchlib.PYTHON, __file__, "--receiver", str(port), str(out)])
    time.sleep(1.0)
    try:
        yield process
    finally:
        benchlib.stop_process(process)


def received(out: Path) -> list[tuple[str, float]]:
    rows = []
    for line in out.read_text().splitlines():
        mid, at = line.split(" ")
        rows.append((mid, float(at)))
    return rows


# ---------------------------------------------------------------- worker and beat


@contextlib.contextmanager
def engine(proj: benchlib.Project, queue: str, concurrency: int) -> Iterator[dict[str, int]]:
    env = {**proj.env, "CELERY_QUEUE": queue, "LOG_LEVEL": "WARNING"}
    schedule = proj.data_dir / f"beat-{time.monotonic_ns()}"
    worker = subprocess.Popen(
        [CELERY, "-A", "platform_site", "worker", "--concurrency", str(concurrency)]
        + ["--without-mingle", "--without-gossip", "--loglevel", "WARNING"],
        cwd=benchlib.ROOT,
        env=env,
        start_new_session=True,
        stdout=sys.stderr,
    )
    beat = subprocess.Popen(
        [CELERY, "-A", "platform_site", "beat", "-s", str(schedule), "--loglevel", "WARNING"],
        cwd=benchlib.ROOT,
        env=env,
        start_new_session=True,
        stdout=sys.stderr,
    )
    try:
        yield {"worker": worker.pid, "beat": beat.pid}
    finally:
        benchlib.stop_process(beat)
        benchlib.stop_process(worker, timeout=30)


def tree(pid: int) -> list[int]:
    found = [pid]
    for child in benchlib.children_of(pid):
        found += tree(child)
    return found


def rss_mb(pid: int) -> float:
    total = 0
    for member in tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


# ---------------------------------------------------------------- seeding


def seed(proj: benchlib.Project, bots: list[str], due: list[datetime], status: str) -> list[str]:
    """Insert events due at `due` (round-robin over `bots`) with COPY; their ids."""
    from ulid import ULID

    now = datetime.now(UTC)
    ids = [f"evt_{ULID()}" for _ in due]
    columns = (
        "id, bot_id, type, payload, status, due_at, next_attempt_at, lease, attempt_count, "
        "created_at, updated_at"
    )
    with proj.connect() as conn, conn.cursor() as cursor:
        with cursor.copy(f"COPY events_event ({columns}) FROM STDIN") as copy:
            for n, (event_id, when) in enumerate(zip(ids, due, strict=True)):
                copy.write_row(
                    (event_id, bots[n % len(bots)], "bench", f'{{"n": {n}}}', status)
                    + (when, when, 0, 0, now, now)
                )
        conn.commit()
    return ids


def wait_processed(proj: benchlib.Project, ids: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with proj.connect(autocommit=True) as conn:
        while time.monotonic() < deadline:
            done = conn.execute(
                "SELECT count(*) FROM events_event WHERE id = ANY(%s) AND status = 'processed'",
                (ids,),
            ).fetchone()
            if done and done[0] == len(ids):
                return
            time.sleep(0.2)
    raise SystemExit(f"FAILED: not every event was processed within {timeout:.0f} s")


def attempts(proj: benchlib.Project, ids: list[str]) -> list[tuple[str, float, float, float]]:
    """(event id, due, attempt start, attempt end) as epoch seconds, first attempts."""
    with proj.connect() as conn:
        rows = conn.execute(
            "SELECT e.id, extract(epoch FROM e.due_at), extract(epoch FROM a.started_at), "
            "a.duration_ms, (SELECT count(*) FROM events_deliveryattempt x "
            " WHERE x.event_id = e.id) FROM events_event e JOIN events_deliveryattempt a "
            "ON a.event_id = e.id AND a.number = 1 WHERE e.id = ANY(%s)",
            (ids,),
        ).fetchall()
    if any(row[4] != 1 for row in rows) or len(rows) != len(ids):
        raise SystemExit("FAILED: an event does not have exactly one attempt")
    return [(r[0], float(r[1]), float(r[2]), float(r[2]) + r[3] / 1000) for r in rows]


def lateness_line(label: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"  {label:34s} p50 {percentile(ms, 50):8.1f}  p90 {percentile(ms, 90):8.1f}  "
        f"p99 {percentile(ms, 99):8.1f}  max {max(ms):8.1f} ms"
    )


# ---------------------------------------------------------------- baseline client


def baseline_rate(url: str, count: int, in_flight: int) -> float:
    """requests/s of a plain aiohttp client POSTing signed event bodies."""
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
    parser.add_argument("--trickle", type=int, default=200)
    parser.add_argument("--throughput", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds before reading memory")
    parser.add_argument("--receiver", nargs=2, metavar=("PORT", "FILE"))
    args = parser.parse_args()
    if args.receiver:
        receiver_main(int(args.receiver[0]), Path(args.receiver[1]))
        return 0
    benchlib.exit_cleanly_on_sigterm()
    benchlib.print_machine()
    queue = f"bench-{os.getpid()}"
    port = benchlib.free_port()
    url = f"http://127.0.0.1:{port}/hook"
    with benchlib.project("bench_delivery") as proj:
        out = proj.data_dir / "received.txt"
        bots = [proj.demo["botId"], proj.demo["otherBotId"]]
        with proj.connect() as conn:
            conn.execute("UPDATE bots_bot SET webhook_url = %s WHERE id = ANY(%s)", (url, bots))
            conn.commit()
        with receiver(port, out) as receiver_process:
            # 1. memory, idle then with the future events pending
            memory = {}
            for label in ("none pending", f"{args.future:,} pending"):
                if label != "none pending":
                    start = datetime.now(UTC) + timedelta(hours=3)
                    seed(
                        proj,
                        bots,
                        [start + timedelta(seconds=n) for n in range(args.future)],
                        "scheduled",
                    )
                    with proj.connect(autocommit=True) as conn:
                        conn.execute("VACUUM ANALYZE events_event")
                benchlib.wait_for_quiet(max_wait=120)
                with engine(proj, queue, args.concurrency) as pids:
                    time.sleep(args.idle)
                    memory[label] = (rss_mb(pids["worker"]), rss_mb(pids["beat"]))
            future_count = args.future
            with engine(proj, queue, args.concurrency) as pids:
                time.sleep(5)
                # 2. trickle
                benchlib.wait_for_quiet(max_wait=120)
                start = datetime.now(UTC) + timedelta(seconds=5)
                spread = 20.0 / max(args.trickle, 1)
                trickle = seed(
                    proj,
                    bots,
                    [start + timedelta(seconds=n * spread) for n in range(args.trickle)],
                    "scheduled",
                )
                wait_processed(proj, trickle, 60)
                # 3. burst
                benchlib.wait_for_quiet(max_wait=120)
                start = datetime.now(UTC) + timedelta(seconds=10)
                burst = seed(
                    proj,
                    bots,
                    [start + timedelta(seconds=n / args.burst) for n in range(args.burst)],
                    "scheduled",
                )
                if datetime.now(UTC) >= start:
                    raise SystemExit("FAILED: seeding the burst took longer than its lead time")
                wait_processed(proj, burst, 300)
                # 4. throughput
                benchlib.wait_for_quiet(max_wait=120)
                groups = {
                    "worker": tree(pids["worker"]),
                    "beat": [pids["beat"]],
                    "receiver": [receiver_process.pid],
                }
                before = benchlib.cpu_snapshot(groups)
                now = datetime.now(UTC)
                bulk = seed(proj, bots, [now] * args.throughput, "pending")
                wait_processed(proj, bulk, 600)
                cpu = benchlib.cpu_use(before, benchlib.cpu_snapshot(groups))
        # the receiver has written what it got
        got = received(out)
        benchlib.wait_for_quiet(max_wait=120)
        with receiver(port, proj.data_dir / "baseline.txt"):
            base = baseline_rate(url, args.throughput, 256)

        counts = Counter(mid for mid, _ in got)
        log(f"receiver: {len(got)} requests, {len(counts)} distinct webhook-ids")
        failures = []
        for label, ids in (("trickle", trickle), ("burst", burst), ("throughput", bulk)):
            if any(counts[i] != 1 for i in ids):
                failures.append(f"{label}: an event was not received exactly once")
        arrival = {mid: at for mid, at in got}
        rows: dict[str, Any] = {}
        for label, ids in (("trickle", trickle), ("burst", burst), ("throughput", bulk)):
            rows[label] = attempts(proj, ids)
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
    print(f"worker --concurrency {args.concurrency}, beat, PostgreSQL, Redis, local receiver")
    print("\nmemory (resident, MB)          worker tree      beat")
    for label, (worker_mb, beat_mb) in memory.items():
        print(f"  {label:28s} {worker_mb:10.1f} {beat_mb:9.1f}")
    (w0, b0), (w1, b1) = memory.values()
    print(f"  ratio loaded/none            {w1 / w0:10.3f} {b1 / b0:9.3f}")
    print(f"\nlateness (due -> first attempt starts), {future_count:,} future events pending")
    late = {k: [s - d for _, d, s, _ in v] for k, v in rows.items()}
    arrive = {k: [arrival[i] - d for i, d, _, _ in v if i in arrival] for k, v in rows.items()}
    print(lateness_line(f"trickle {len(trickle)} over 20 s", late["trickle"]))
    print(lateness_line(f"burst {len(burst):,} in 1 s", late["burst"]))
    print(lateness_line("burst, due -> received", arrive["burst"]))
    ratio50 = percentile(late["burst"], 50) / max(percentile(late["trickle"], 50), 1e-6)
    ratio99 = percentile(late["burst"], 99) / max(percentile(late["trickle"], 99), 1e-6)
    print(f"  burst/trickle: p50 {ratio50:.1f}x, p99 {ratio99:.1f}x")
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
