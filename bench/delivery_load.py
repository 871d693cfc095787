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
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import event_rows, machine, servers  # noqa: E402
from harness.project import Project  # noqa: E402
from harness.report import failed_lines, indent, lateness_line, log, percentile  # noqa: E402

SLOW = "/uniform/0/300"
STEADY_FROM = 5.0  # seconds into a sustained run from which the rate is counted


# ---------------------------------------------------------------- phases


@dataclass
class Run:
    """One generator run's events and what became of them."""

    label: str
    halves: dict[str, list[tuple[str, float, float, float]]] = field(default_factory=dict)
    delivered_rate: float = 0.0
    cpu: machine.CpuUse | None = None
    baseline: list[float] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [row[0] for rows in self.halves.values() for row in rows]

    def lateness(self, half: str | None = None) -> list[float]:
        rows = self.halves[half] if half else [r for rows in self.halves.values() for r in rows]
        return [start - due for _, due, start, _ in rows]


def sustained(
    proj: Project, queue: str, bots: list[str], rate: float, duration: float, groups: Any
) -> Run:
    kind = f"sustained{int(rate)}"
    log(f"sustained: {rate:.0f} events/s for {duration:.0f} s")
    before = machine.cpu_snapshot(groups)
    began = event_rows.run_generator(
        proj, queue, bots=bots, rate=rate, duration=duration, kind=kind
    )
    ids = event_rows.events_of(proj, kind)
    event_rows.wait_finished(proj, [i for half in ids.values() for i in half], 120)
    run = Run(label=f"{rate:,.0f}/s", cpu=machine.cpu_use(before, machine.cpu_snapshot(groups)))
    run.halves = {half: event_rows.first_attempts(proj, group) for half, group in ids.items()}
    starts = [start for rows in run.halves.values() for _, _, start, _ in rows]
    steady = [s for s in starts if began + STEADY_FROM <= s <= began + duration]
    run.delivered_rate = len(steady) / (duration - STEADY_FROM)
    return run


def bad_bot(
    proj: Project,
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
    with servers.engine(proj, queue):
        log(f"bad bot: {'with' if bad else 'without'} it, {offered:.0f} events/s")
        event_rows.run_generator(proj, queue, bots=bots, rate=offered, duration=duration, kind=kind)
        ids = event_rows.events_of(proj, kind, not_bot=bad or "")
        event_rows.wait_finished(proj, [i for half in ids.values() for i in half], 120)
        run = Run(label=f"{len(good)} good bots, {'with' if bad else 'without'} the bad one")
        run.halves = {half: event_rows.first_attempts(proj, group) for half, group in ids.items()}
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


QUIET_WAIT = 120.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--ladder", default="2000,3000", help="higher rates tried after --rate")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--throughput", type=int, default=20_000)
    parser.add_argument("--bad-rate", type=float, default=500.0)
    parser.add_argument("--bad-duration", type=float, default=30.0)
    parser.add_argument("--phases", default="sustained,slow,bad")
    args = parser.parse_args()
    args.phases = set(args.phases.split(","))
    args.in_flight = 2 * int(os.environ.get("EVENT_DELIVERY_CONCURRENCY", "500"))
    return args


@dataclass
class Bench:
    args: argparse.Namespace
    rx: event_rows.Receiving
    runs: list[Run] = field(default_factory=list)
    throughput: dict[str, float] = field(default_factory=dict)
    bad_runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slow_ids: list[str] = field(default_factory=list)

    def on_engine(self, slow_bots: list[str], receiver: Any) -> None:
        """1 and 2, on one engine: sustained rates, then the slow throughput."""
        proj, queue, args = self.rx.proj, self.rx.queue, self.args
        with servers.engine(proj, queue) as engine:
            groups = engine.groups(receiver)
            if "sustained" in args.phases:
                for rate in [args.rate] + [float(r) for r in args.ladder.split(",") if r]:
                    machine.wait_for_quiet(max_wait=QUIET_WAIT)
                    self.runs.append(sustained(proj, queue, slow_bots, rate, args.duration, groups))
            if "slow" in args.phases:
                machine.wait_for_quiet(max_wait=QUIET_WAIT)
                log(f"slow throughput: {args.throughput:,} due at once")
                now = datetime.now(UTC)
                self.slow_ids = event_rows.seed(proj, slow_bots, [now] * args.throughput, "pending")
                event_rows.wait_finished(proj, self.slow_ids, 300)
                rows = event_rows.first_attempts(proj, self.slow_ids)
                first = min(start for _, _, start, _ in rows)
                last = max(end for *_, end in rows)
                self.throughput["engine"] = len(rows) / (last - first)

    def bad(self, good_bots: list[str], broken: str) -> None:
        """3: with the bad bot, then without it, each on fresh processes."""
        for bad in (broken, None):
            machine.wait_for_quiet(max_wait=QUIET_WAIT)
            run, note = bad_bot(
                self.rx.proj, self.rx.queue, good_bots, bad, self.args.bad_rate,
                self.args.bad_duration,
            )  # fmt: skip
            self.bad_runs.append(run)
            self.notes += [note] if note else []

    def baselines(self) -> None:
        """The plain client on each sustained run's schedule, and all at once."""
        args, rx = self.args, self.rx
        for run in self.runs:
            machine.wait_for_quiet(max_wait=QUIET_WAIT)
            rng = random.Random(1)
            schedule = sorted(rng.uniform(0, args.duration) for _ in range(len(run.ids)))
            with servers.receiver(rx.port, rx.proj.data_dir / "baseline.txt"):
                run.baseline, _ = event_rows.plain_client(rx.url(SLOW), schedule, args.in_flight)
        if self.throughput:
            machine.wait_for_quiet(max_wait=QUIET_WAIT)
            with servers.receiver(rx.port, rx.proj.data_dir / "baseline.txt"):
                _, self.throughput["client"] = event_rows.plain_client(
                    rx.url(SLOW), [0.0] * args.throughput, args.in_flight
                )

    def check(self, got: list[tuple[str, float, str]]) -> list[str]:
        counts = Counter(mid for mid, _, _ in got)
        failures = []
        checked = [i for run in self.runs + self.bad_runs for i in run.ids] + self.slow_ids
        if any(counts[i] != 1 for i in checked):
            failures.append("an event of a good bot was not received exactly once")
        if any(late < -0.001 for run in self.runs + self.bad_runs for late in run.lateness()):
            failures.append("an attempt started before its event was due")
        return failures


def report(bench: Bench, arrival: dict[str, float]) -> None:
    args = bench.args
    print("\n== delivery under load")
    worker = " ".join(servers.procfile_words("worker")[1:])
    print(f"{worker}; beat; PostgreSQL, Redis; webhook_receiver.py")
    if bench.runs:
        print(
            f"\nsustained: events arriving all the time, 20 bots answering in 0-300 ms, "
            f"{args.duration:.0f} s each"
        )
    for run in bench.runs:
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
        print(indent(run.cpu.report(run.label, len(run.ids), "event"), "  "))
    if bench.throughput:
        engine, client = bench.throughput["engine"], bench.throughput["client"]
        print(f"\nslow throughput: {args.throughput:,} due at once, answers in 0-300 ms")
        print(f"  engine        {engine:8.0f} events/s (first start -> last end)")
        print(f"  plain client  {client:8.0f} requests/s ({args.in_flight} in flight)")
        print(f"  ratio         {engine / client:8.2f}")
    if len(bench.bad_runs) == 2:
        print(
            f"\nbad bot: 50 bots answering in 50 ms, one never answering; "
            f"{args.bad_rate:.0f} events/s over the 51, {args.bad_duration:.0f} s"
        )
        for run in bench.bad_runs:
            print(lateness_line(run.label, run.lateness()))
        with_bad, without = (run.lateness() for run in bench.bad_runs)
        print(
            f"  ratio with/without: p50 {percentile(with_bad, 50) / percentile(without, 50):.2f}, "
            f"p99 {percentile(with_bad, 99) / percentile(without, 99):.2f}"
        )
        for note in bench.notes:
            print(note)


def main() -> int:
    args = parse_args()
    machine.start()
    with event_rows.receiving_project("bench_delivery_load") as rx:
        bench = Bench(args, rx)
        slow_bots = rx.bots(SLOW, 20)
        good_bots = rx.bots("/fixed/50", 50)
        [broken] = rx.bots("/never", 1)
        with servers.receiver(rx.port, rx.out) as receiver:
            bench.on_engine(slow_bots, receiver)
            if "bad" in args.phases:
                bench.bad(good_bots, broken)
        got = event_rows.received(rx.out)
        bench.baselines()
    failures = bench.check(got)
    report(bench, {mid: at for mid, at, _ in got})
    return failed_lines(failures)


if __name__ == "__main__":
    sys.exit(main())
