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
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import deliverylib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--path", default="/uniform/0/300", help="the receiver's answer path")
    parser.add_argument("--profile", action="store_true", help="under yappi (else: CPU only)")
    parser.add_argument("--future", type=int, default=0, help="events pending hours ahead")
    parser.add_argument("--at-once", action="store_true", help="all due at once, not at --rate")
    args = parser.parse_args()
    benchlib.exit_cleanly_on_sigterm()
    port = benchlib.free_port()
    with benchlib.project("bench_profile_delivery") as proj:
        bots = deliverylib.make_bots(proj, [f"http://127.0.0.1:{port}{args.path}"] * 20)
        if args.future:
            later = datetime.now(UTC) + timedelta(hours=3)
            deliverylib.seed(
                proj, bots, [later + timedelta(seconds=n) for n in range(args.future)], "scheduled"
            )
            with proj.connect(autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE events_event")
        os.environ.update(proj.env)
        import django

        django.setup()
        import yappi  # type: ignore[import-untyped]

        from events.engine.loop import EngineConfig
        from events.engine.process import EngineThread

        with deliverylib.receiver(port, proj.data_dir / "received.txt"):
            if args.profile:
                yappi.set_clock_type("cpu")
                yappi.start(profile_threads=True)
            engine = EngineThread(EngineConfig.from_settings())
            engine.start()
            engine.ready.wait(10)
            total = int(args.rate * args.seconds)
            postgres = benchlib.cpu_snapshot()
            backends = postgres_backends()
            started, times = time.process_time(), os.times()
            if args.at_once:
                deliverylib.seed(proj, bots, [datetime.now(UTC)] * total, "pending")
                engine.wake()
            else:
                feed(proj, bots, args.rate, total, engine.wake)
            wait_done(proj, total)
            cpu = time.process_time() - started
            pg_cpu = benchlib.cpu_snapshot().by_group["postgres"] - postgres.by_group["postgres"]
            for title, seconds in postgres_backends(since=backends).items():
                if seconds / total > 1e-5:
                    print(f"  postgres {title:60s} {seconds / total * 1e3:.3f} ms/event")
            user, system = (b - a for a, b in zip(times[:2], os.times()[:2], strict=True))
            by_thread = thread_cpu()
            engine.stop()
            if args.profile:
                yappi.stop()
        print(
            f"{total:,} events at {args.rate:.0f}/s: {cpu / total * 1e3:.3f} ms CPU/event "
            f"in this process (engine threads and the feeder; user {user / total * 1e3:.3f}, "
            f"system {system / total * 1e3:.3f}); PostgreSQL {pg_cpu / total * 1e3:.3f} ms/event"
        )
        for name, seconds in sorted(by_thread.items(), key=lambda item: -item[1]):
            print(f"  thread {name:24s} {seconds / total * 1e3:.3f} ms/event")
        if args.profile:
            for thread in yappi.get_thread_stats():
                if thread.ttot / total < 1e-5:
                    continue
                stats = yappi.get_func_stats(ctx_id=thread.id)
                stats.sort(os.environ.get("PROFILE_SORT", "ttot"))
                print(f"\nthread {thread.name} {thread.id}, by total time, ms per event:")
                for stat in list(stats)[: args.top]:
                    print(
                        f"  {stat.ttot / total * 1e3:7.4f} {stat.tsub / total * 1e3:7.4f}  "
                        f"{stat.ncall:8d}  {stat.module.split('site-packages/')[-1]}:"
                        f"{stat.lineno} {stat.name}"
                    )
            for thread in yappi.get_thread_stats():
                print(f"thread {thread.name} {thread.id}: {thread.ttot / total * 1e3:.3f} ms/event")
    return 0


def postgres_backends(since: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds of each PostgreSQL process by its title (less `since`)."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if not title.startswith("postgres"):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        key = f"{entry.name} {title[:50]}"
        found[key] = (int(fields[11]) + int(fields[12])) / tick - (since or {}).get(key, 0.0)
    return found


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by thread name."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.native_id is None:
            continue
        try:
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found[thread.name] = (int(fields[11]) + int(fields[12])) / tick
    return found


def feed(
    proj: benchlib.Project, bots: list[str], rate: float, total: int, wake: Callable[[], None]
) -> None:
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
                deliverylib.copy_events(cursor, rows, now)
                conn.commit()
                made = target
                wake()
                time.sleep(0.01)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def wait_done(proj: benchlib.Project, total: int) -> None:
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
