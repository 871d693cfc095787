"""Slow clients (the slowloris shape) against the service as `make run`
starts it: the Procfile's web line (one process a core), worker and beat,
on PostgreSQL and Redis, the demo bot's webhook answered in 0-300 ms.

    .venv/bin/python bench/slow_clients.py [--slow 300] [--rate 100] [--duration 20] [--rounds 2]

Other clients: create event (POST /v1/chat/events) open loop at --rate a
second for --duration seconds over keep-alive connections; latency = the
request's scheduled start -> its answer, so a queue shows.

Phases, interleaved (quiet, slow, quiet, slow …, --rounds of each):
- quiet: the other clients alone (the baseline);
- slow: the same, while --slow connections hold the server as slowloris
  does: half send a request head a few bytes at a time, a piece every
  SLOW_EVERY seconds and never its end; half send a whole head announcing a
  900 kB body and then a byte every SLOW_EVERY seconds. A connection the
  server closes (408: the head or the body too slow) is opened again at
  once, so --slow are held all along.

Figures: p50, p99 and max of each phase, the ratio slow / quiet of the p99
(target: at most 2), the 408s the slow clients got and the connections they
reopened. Checks (exit 1 when one fails): every create answered 201, the
slow connections held through each slow phase, and the database holds as
many events as 201s. Nothing asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import api, machine, servers  # noqa: E402
from harness.project import project  # noqa: E402
from harness.report import log, percentile, verdict  # noqa: E402

DB = "bench_slow_clients"
SLOW_EVERY = 5.0  # seconds between two pieces of a slow client
CONNECTIONS = 16  # keep-alive connections of the other clients


@dataclass
class Slow:
    """What the slow clients went through in a phase."""

    refused_408: int = 0
    reopened: int = 0
    open_now: int = 0
    fewest_open: int = 1 << 30
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


async def slow_client(port: int, index: int, stop: asyncio.Event, slow: Slow) -> None:
    """One slow connection, opened again whenever the server closes it."""
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        slow.open_now += 1
        try:
            if index % 2:
                head = b"POST /v1/chat/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                pieces = [b"X-Slow-%d: a\r\n" % n for n in range(1000)]
            else:
                head = (
                    b"POST /v1/chat/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 900000\r\n\r\n{"
                )
                pieces = [b" "] * 100_000
            writer.write(head)
            # Spread over the period, as a real crowd arrives.
            await asyncio.sleep(random.uniform(0, SLOW_EVERY))
            for piece in pieces:
                if stop.is_set() or reader.at_eof():
                    break
                writer.write(piece)
                try:
                    answer = await asyncio.wait_for(reader.read(65536), SLOW_EVERY)
                except TimeoutError:
                    continue
                if answer.startswith(b"HTTP/1.1 408"):
                    slow.refused_408 += 1
                break  # answered (or closed): start again
        except (ConnectionError, OSError):
            pass
        finally:
            slow.open_now -= 1
            writer.close()
        if not stop.is_set():
            slow.reopened += 1


async def others(
    base: str, headers: dict[str, str], body: str, rate: float, duration: float
) -> tuple[list[float], list[int]]:
    """Open loop: request i starts at i / rate, whatever came before."""
    latencies: list[float] = []
    statuses: list[int] = []
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(at: float) -> None:
            await asyncio.sleep(max(at - time.monotonic(), 0))
            async with session.post(f"{base}/v1/chat/events", data=body, headers=headers) as got:
                await got.read()
                statuses.append(got.status)
            latencies.append(time.monotonic() - at)

        start = time.monotonic() + 0.2
        count = int(rate * duration)
        await asyncio.gather(*(one(start + n / rate) for n in range(count)))
    return latencies, statuses


async def phase(
    name: str, base: str, port: int, args: argparse.Namespace, demo: dict[str, object]
) -> tuple[list[float], list[int], Slow]:
    slow = Slow()
    stop = asyncio.Event()
    if name == "slow":
        slow.tasks = [
            asyncio.create_task(slow_client(port, index, stop, slow)) for index in range(args.slow)
        ]
        # Every slow connection open and a piece sent before the others come.
        await asyncio.sleep(SLOW_EVERY + 1)
        log(f"  {slow.open_now} slow connections open")

    async def watch() -> None:
        while not stop.is_set():
            slow.fewest_open = min(slow.fewest_open, slow.open_now)
            await asyncio.sleep(0.5)

    watcher = asyncio.create_task(watch())
    latencies, statuses = await others(
        base, api.demo_headers(demo), api.event_body(), args.rate, args.duration
    )
    stop.set()
    await asyncio.gather(watcher, *slow.tasks, return_exceptions=True)
    return latencies, statuses, slow


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", type=int, default=300)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    machine.exit_cleanly_on_sigterm()
    machine.start("slow clients (slowloris) against make run's web, worker and beat")
    failures: list[str] = []
    results: dict[str, list[list[float]]] = {"quiet": [], "slow": []}
    created = 0
    with project(DB) as proj:
        receiver_port = servers.free_port()
        api.demo_webhook_to(proj, f"http://127.0.0.1:{receiver_port}/uniform/0/300")
        with (
            servers.receiver(receiver_port, proj.data_dir / "received.txt"),
            servers.engine(proj, "bench-slow-clients"),
            servers.procfile_web(proj, workers=machine.cores()) as web,
        ):
            for round_ in range(args.rounds):
                for name in ("quiet", "slow"):
                    log(f"round {round_ + 1}: {name}")
                    latencies, statuses, slow = asyncio.run(
                        phase(name, web.base_url, web.port, args, proj.demo)
                    )
                    results[name].append(latencies)
                    created += statuses.count(201)
                    wrong = [status for status in statuses if status != 201]
                    if wrong:
                        failures.append(f"{name}: {len(wrong)} answers not 201: {wrong[:5]}")
                    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
                    print(
                        f"round {round_ + 1} {name:5}: p50 {p50 * 1000:7.1f} ms"
                        f"  p99 {p99 * 1000:7.1f} ms"
                        f"  max {max(latencies) * 1000:7.1f} ms"
                        + (
                            f"  | slow held >= {slow.fewest_open}, 408s {slow.refused_408},"
                            f" reopened {slow.reopened}"
                            if name == "slow"
                            else ""
                        ),
                        flush=True,
                    )
                    if name == "slow" and slow.fewest_open < args.slow * 0.9:
                        failures.append(f"slow connections held: {slow.fewest_open} < 90%")
        stored = proj.scalar("SELECT count(*) FROM events_event WHERE type = %s", (api.EVENT_TYPE,))
        if stored != created:
            failures.append(f"{stored} events stored for {created} answered 201")
    quiet = [value for run in results["quiet"] for value in run]
    slow_all = [value for run in results["slow"] for value in run]
    ratio = percentile(slow_all, 99) / percentile(quiet, 99)
    print(
        f"\nall rounds: quiet p99 {percentile(quiet, 99) * 1000:.1f} ms,"
        f" slow p99 {percentile(slow_all, 99) * 1000:.1f} ms,"
        f" ratio slow/quiet p99 {ratio:.2f} (target <= 2)"
    )
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
