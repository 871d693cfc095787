"""Where a worker process's delivery engine spends its CPU: the engine run in
this process (its loop thread and its database thread, as in a worker), on a
fresh PostgreSQL database bench_profile_delivery, fed events at a steady rate
for bots whose webhook (webhook_receiver.py) answers after 0–300 ms, under
yappi's CPU clock across every thread.

    .venv/bin/python bench/profile_delivery.py [--rate 1000] [--seconds 20] [--top 40]

Prints CPU per event by thread, then the functions that take the most. A
diagnostic aid, not a benchmark target.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import event_rows, machine, servers  # noqa: E402
from harness.project import Project, django_setup  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--path", default="/uniform/0/300", help="the receiver's answer path")
    parser.add_argument("--profile", action="store_true", help="under yappi (else: CPU only)")
    parser.add_argument("--future", type=int, default=0, help="events pending hours ahead")
    parser.add_argument("--at-once", action="store_true", help="all due at once, not at --rate")
    args = parser.parse_args()
    args.total = int(args.rate * args.seconds)
    return args


def deliver(rx: event_rows.Receiving, bots: list[str], args: argparse.Namespace) -> None:
    """The engine in this process delivering --total events; CPU printed
    by PostgreSQL backend, this process and thread."""
    from events.engine.loop import EngineConfig
    from events.engine.process import EngineThread

    engine = EngineThread(EngineConfig.from_settings())
    engine.start()
    engine.ready.wait(10)
    total = args.total
    postgres = machine.cpu_snapshot()
    backends = postgres_backends()
    started, times = time.process_time(), os.times()
    if args.at_once:
        event_rows.seed(rx.proj, bots, [datetime.now(UTC)] * total, "pending")
        engine.wake()
    else:
        feed(rx.proj, bots, args.rate, total, engine.wake)
    wait_done(rx.proj, total)
    cpu = time.process_time() - started
    pg_cpu = machine.cpu_snapshot().by_group["postgres"] - postgres.by_group["postgres"]
    for title, seconds in postgres_backends(since=backends).items():
        if seconds / total > 1e-5:
            print(f"  postgres {title:60s} {seconds / total * 1e3:.3f} ms/event")
    user, system = (b - a for a, b in zip(times[:2], os.times()[:2], strict=True))
    by_thread = thread_cpu()
    engine.stop()
    print(
        f"{total:,} events at {args.rate:.0f}/s: {cpu / total * 1e3:.3f} ms CPU/event "
        f"in this process (engine threads and the feeder; user {user / total * 1e3:.3f}, "
        f"system {system / total * 1e3:.3f}); PostgreSQL {pg_cpu / total * 1e3:.3f} ms/event"
    )
    for name, seconds in sorted(by_thread.items(), key=lambda item: -item[1]):
        print(f"  thread {name:24s} {seconds / total * 1e3:.3f} ms/event")


def print_yappi(yappi: Any, total: int, top: int) -> None:
    """The functions that took the most CPU in each thread, per event."""
    for thread in yappi.get_thread_stats():
        if thread.ttot / total < 1e-5:
            continue
        stats = yappi.get_func_stats(ctx_id=thread.id)
        stats.sort(os.environ.get("PROFILE_SORT", "ttot"))
        print(f"\nthread {thread.name} {thread.id}, by total time, ms per event:")
        for stat in list(stats)[:top]:
            print(
                f"  {stat.ttot / total * 1e3:7.4f} {stat.tsub / total * 1e3:7.4f}  "
                f"{stat.ncall:8d}  {stat.module.split('site-packages/')[-1]}:"
                f"{stat.lineno} {stat.name}"
            )
    for thread in yappi.get_thread_stats():
        print(f"thread {thread.name} {thread.id}: {thread.ttot / total * 1e3:.3f} ms/event")


def main() -> int:
    args = parse_args()
    machine.exit_cleanly_on_sigterm()
    with event_rows.receiving_project("bench_profile_delivery") as rx:
        bots = rx.bots(args.path, 20)
        if args.future:
            later = event_rows.due_from(3 * 3600, args.future, 1)
            event_rows.seed(rx.proj, bots, later, "scheduled")
            with rx.proj.connect(autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE events_event")
        django_setup(rx.proj)
        import yappi  # type: ignore[import-untyped]

        with servers.receiver(rx.port, rx.out):
            if args.profile:
                yappi.set_clock_type("cpu")
                yappi.start(profile_threads=True)
            deliver(rx, bots, args)
            if args.profile:
                yappi.stop()
        if args.profile:
            print_yappi(yappi, args.total, args.top)
    return 0


def postgres_backends(since: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds of each PostgreSQL process by its title (less `since`)."""
    found: dict[str, float] = {}
    for pid in machine.pids_named("postgres"):
        title = machine.cmdline(pid).strip()
        if not title.startswith("postgres"):
            continue  # the postmaster: its title is its command line
        with contextlib.suppress(OSError, ValueError, IndexError):
            key = f"{pid} {title[:50]}"
            found[key] = machine.process_cpu(pid)[1] - (since or {}).get(key, 0.0)
    return found


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by thread name."""
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.native_id is not None:
            with contextlib.suppress(OSError):
                found[thread.name] = machine.stat_cpu(f"/proc/self/task/{thread.native_id}/stat")
    return found


def feed(proj: Project, bots: list[str], rate: float, total: int, wake: Callable[[], None]) -> None:
    """Events due now at `rate` a second, from a thread, waking the engine."""
    from ulid import ULID

    def run() -> None:
        made = 0
        start = time.monotonic()
        with proj.connect() as conn, conn.cursor() as cursor:
            while made < total:
                target = min(total, int((time.monotonic() - start) * rate) + 1)
                now = datetime.now(UTC)
                rows = [
                    (f"evt_{ULID()}", bots[n % len(bots)], "profile", now, True)
                    for n in range(made, target)
                ]
                event_rows.copy_events(cursor, rows, now)
                conn.commit()
                made = target
                wake()
                time.sleep(0.01)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def wait_done(proj: Project, total: int) -> None:
    # Through the delivery attempts' (bot, started_at) index, not a scan of
    # the events: the wait must not be what keeps PostgreSQL busy.
    with proj.connect(autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM events_deliveryattempt").fetchone()
            if row is not None and row[0] >= total:
                return
            time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
