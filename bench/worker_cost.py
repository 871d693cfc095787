"""The worker's cost per event under a steady stream, as `make run` runs it:
the Procfile's web line (a process a core), worker and beat, on PostgreSQL
and Redis, events created one at a time through the API.

    .venv/bin/python bench/worker_cost.py [--rates 200,1000] [--duration 20] [--profile]
        [--before-tree DIR] [--rounds 1]

Phases, each after a quiet machine, each on the same running platform:
- `good RATE`: create event (POST /v1/chat/events) open loop at RATE a second
  for --duration seconds, round-robin over 20 bots whose webhook
  (bench/webhook_receiver.py) answers after a uniform 0-300 ms; then until
  every event is delivered. A rate the web line cannot keep up with is
  reported at what it reached.
- `refused`: the same at the lowest rate for one bot whose webhook refuses
  connections (a closed port): every attempt fails, and is retried on the
  backoff schedule.

Figures: CPU by process group (web, the worker's main process and its
pool, beat, PostgreSQL, Redis) over the phase, per delivered event (good)
and per failed attempt (refused), and the worker's log lines at INFO or
above per attempt. --profile samples the
worker's processes with py-spy during each phase (top functions by own
time and by total time, written beside the figures).

Checks (exit 1 when one fails): every create answered 201; in the good
phases every event delivered exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import api, event_rows, machine, servers, stacks  # noqa: E402
from harness.project import Project, project  # noqa: E402
from harness.report import verdict  # noqa: E402

DB = "bench_worker_cost"
QUEUE = "bench-worker-cost"
BOTS = 20
CONNECTIONS = 32
DRAIN_TIMEOUT = 120.0


async def create_events(
    base: str, token: str, bots: list[str], rate: float, duration: float
) -> tuple[int, list[int], float]:
    """Open loop over keep-alive connections: (sent, statuses, seconds taken)."""
    statuses: list[int] = []
    body = api.event_body()
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    count = int(rate * duration)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(index: int, at: float) -> None:
            await asyncio.sleep(max(at - time.monotonic(), 0))
            headers = api.bot_headers(token, bots[index % len(bots)])
            async with session.post(f"{base}/v1/chat/events", data=body, headers=headers) as got:
                await got.read()
                statuses.append(got.status)

        start = time.monotonic() + 0.2
        await asyncio.gather(*(one(n, start + n / rate) for n in range(count)))
        taken = time.monotonic() - start
    return count, statuses, taken


def attempts(proj: Project, bots: list[str]) -> tuple[int, int]:
    """(successful, failed) attempts of these bots so far."""
    row = (
        proj.connect()
        .execute(
            "SELECT count(*) FILTER (WHERE status_code BETWEEN 200 AND 299), "
            "count(*) FILTER (WHERE status_code IS NULL OR status_code >= 300) "
            "FROM events_deliveryattempt WHERE bot_id = ANY(%s)",
            (bots,),
        )
        .fetchone()
    )
    assert row is not None
    return int(row[0]), int(row[1])


def pending(proj: Project, bots: list[str]) -> int:
    return int(
        proj.scalar(
            "SELECT count(*) FROM events_event WHERE bot_id = ANY(%s) AND status = 'pending'",
            (bots,),
        )
    )


def worker_lines(log_path: Path, start: int) -> int:
    """Lines at INFO or above the worker wrote since byte `start`."""
    with log_path.open("rb") as handle:
        handle.seek(start)
        text = handle.read().decode(errors="replace")
    return sum(1 for line in text.splitlines() if "[debug" not in line and line.strip())


@dataclass
class Figures:
    """What one phase measured."""

    worker_ms: float  # worker CPU (main + pool) per delivered event or failed attempt
    web_ms: float  # web CPU per created event
    postgres_ms: float
    lines_per: float  # worker log lines per delivered event or failed attempt


def run_phase(
    proj: Project,
    platform: Platform,
    label: str,
    rate: float,
    bots: list[str],
    good: bool,
    args: argparse.Namespace,
    failures: list[str],
) -> Figures:
    machine.wait_for_quiet(max_wait=120)
    ok_before, failed_before = attempts(proj, bots)
    log_start = platform.worker_log.stat().st_size
    meter = machine.CpuMeter(platform.groups)
    profile_out = proj.data_dir / f"profile-{platform.name}-{label.split()[0]}-{int(rate)}"
    pids = platform.engine.worker_children() if args.profile else []
    with stacks.recorded(pids, profile_out, args.duration):
        sent, statuses, taken = asyncio.run(
            create_events(platform.base_url, platform.token, bots, rate, args.duration)
        )
    if good:
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while pending(proj, bots) and time.monotonic() < deadline:
            time.sleep(0.2)
    cpu = meter.stop()
    ok, failed = attempts(proj, bots)
    delivered, failed_attempts = ok - ok_before, failed - failed_before
    lines = worker_lines(platform.worker_log, log_start)
    created = statuses.count(201)
    name = f"{platform.name} {label}"
    if created != sent:
        failures.append(f"{name}: {sent - created} creates not answered 201")
    if good and (delivered != created or failed_attempts):
        failures.append(f"{name}: {delivered} delivered, {failed_attempts} failed of {created}")
    unit, per = ("delivered event", delivered) if good else ("failed attempt", failed_attempts)
    worker = cpu.per_request_ms("worker main", per) + cpu.per_request_ms("worker pool", per)
    print(
        f"\n{name}: created {created} in {taken:.1f} s ({created / taken:.0f}/s),"
        f" {delivered} delivered, {failed_attempts} failed attempts,"
        f" worker log lines {lines} ({lines / max(per, 1):.3f} per {unit})"
    )
    print(cpu.report(name, per, unit))
    print(f"  worker in all: {worker:.3f} ms CPU per {unit}")
    print(f"  web per created event: {cpu.per_request_ms('web', created):.3f} ms")
    if args.profile:
        print(stacks.summary(profile_out))
    return Figures(
        worker_ms=worker,
        web_ms=cpu.per_request_ms("web", created),
        postgres_ms=cpu.per_request_ms("postgres", per),
        lines_per=lines / max(per, 1),
    )


@dataclass
class Platform:
    name: str
    base_url: str
    token: str
    engine: servers.Engine
    worker_log: Path
    groups: dict[str, list[int]]


@contextmanager
def platform(
    proj: Project, name: str, tree: str, receiver: subprocess.Popen[bytes]
) -> Iterator[Platform]:
    """make run's web, worker and beat, from `tree` (a checkout) if given."""
    worker_log = proj.data_dir / f"worker-{name}.log"
    with (
        servers.engine(
            proj, QUEUE, extra_env={"LOG_LEVEL": "INFO"}, log_path=worker_log, tree=tree
        ) as engine,
        servers.procfile_web(proj, workers=machine.cores(), tree=tree) as web,
    ):
        groups = {
            "web": machine.tree(web.process.pid),
            # The worker's main process (it takes tasks from the broker:
            # wake-ups, when they are tasks) apart from its pool (the
            # tasks, and the delivery engines).
            "worker main": [engine.worker],
            "worker pool": engine.worker_children(),
            "beat": [engine.beat],
            "redis": machine.pids_named("redis-server"),
            "receiver": [receiver.pid],
        }
        yield Platform(
            name, web.base_url, proj.demo["tokens"]["developer"], engine, worker_log, groups
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="200,1000")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--before-tree",
        default="",
        help="a checkout of an earlier commit (with .venv linked in): its platform is "
        "measured too, interleaved, and each figure given as a ratio to it",
    )
    args = parser.parse_args()
    rates = [float(rate) for rate in args.rates.split(",")]
    machine.start("the worker's cost per event, events created through the API")
    failures: list[str] = []
    variants = [("before", args.before_tree)] if args.before_tree else []
    variants.append(("after", ""))
    phases = [(f"good {rate:g}/s", rate, True) for rate in rates]
    phases.append((f"refused {rates[0]:g}/s", rates[0], False))
    figures: dict[tuple[str, str], list[Figures]] = {}
    with project(DB) as proj:
        receiver_port = servers.free_port()
        good_bots = event_rows.make_bots(
            proj, [f"http://127.0.0.1:{receiver_port}/uniform/0/300"] * BOTS
        )
        refused_bots = event_rows.make_bots(proj, [f"http://127.0.0.1:{servers.free_port()}/"])
        with servers.receiver(receiver_port, proj.data_dir / "received.txt") as receiver:
            for _ in range(args.rounds):
                for name, tree in variants:
                    with platform(proj, name, tree, receiver) as running:
                        for label, rate, good in phases:
                            bots = good_bots if good else refused_bots
                            figures.setdefault((name, label), []).append(
                                run_phase(proj, running, label, rate, bots, good, args, failures)
                            )
                    # What the refused bot's retries leave due goes with this platform.
                    with proj.connect() as conn:
                        conn.execute(
                            "UPDATE events_event SET status = 'failed', next_attempt_at = NULL "
                            "WHERE bot_id = ANY(%s) AND status IN ('pending', 'scheduled')",
                            (refused_bots,),
                        )
    print("\nsummary (mean of rounds; ms of CPU):")
    for label, _, good in phases:
        unit = "delivered event" if good else "failed attempt"
        for name, _ in variants:
            runs = figures[(name, label)]
            worker = sum(f.worker_ms for f in runs) / len(runs)
            web = sum(f.web_ms for f in runs) / len(runs)
            line = (
                f"  {label:14} {name:6}: worker {worker:6.3f} per {unit}, web {web:6.3f} per create"
            )
            if name == "after" and args.before_tree:
                before = figures[("before", label)]
                worker_before = sum(f.worker_ms for f in before) / len(before)
                line += f"  (worker after/before {worker / worker_before:.2f})"
            print(line)
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
