"""Many hosts on one machine: the platform on 2 web hosts + 2 worker hosts
against 1 + 1, in the same run, each host a network namespace with its own
address, processes and DATA_DIR (tests/hosts.py), PostgreSQL and Redis
reached over the bridge; events created through the web hosts while the
worker hosts deliver them to webhooks answering in 0-300 ms.

    .venv/bin/python bench/many_hosts.py [--duration 15] [--rounds 2] [--connections 16]

1. A fresh database bench_many_hosts, migrated and seeded; --bots bots of the
   demo workspace whose webhook is a receiver (bench/webhook_receiver.py) on
   the bridge's address, answering after 0-300 ms.
2. Each round, each configuration in turn (their order alternating): the
   hosts' processes started afresh: on each web host the production
   launcher (`python -m platform_site.serve`, one process: a host is a
   core's worth), on each worker host the Procfile's worker (`celery worker`,
   one process), beat on the first worker host. wrk posts create event
   (the demo's developer token, the bots in turn) to every web host at
   once, --connections in all, --warmup then --duration seconds.
3. Measured over --duration: events created per second (wrk's 201s) and
   events delivered per second (those the database has processed in that
   window). After the last round, every created event is waited for
   (delivered, or at least attempted) before the run ends.

Reported: each configuration's created/s and delivered/s, and 2 + 2 ÷ 1 + 1.
The hosts share this machine's 2 cores with PostgreSQL, Redis, wrk and the
receiver, so the ratio says what spreading costs or gains here, not what
two machines would carry. Checks (exit 1): no non-201 answer, no socket
error, every event created is processed in the end (none lost).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from harness import api, cli, load, machine  # noqa: E402
from harness.event_rows import make_bots  # noqa: E402
from harness.project import PYTHON, Project, project  # noqa: E402
from harness.report import log, verdict  # noqa: E402
from harness.servers import free_port, ready_at, started  # noqa: E402

from tests.hosts import Host, Network, hosts_made, hosts_supported  # noqa: E402

WEB_PORT = 8000
CELERY_APP = [str(Path(PYTHON).parent / "celery"), "--quiet", "-A", "platform_site"]
CONFIGURATIONS = {"1 + 1": (1, 1), "2 + 2": (2, 2)}

ROTATE_LUA = """
local bots = {BOTS}
local sent = 0
function request()
  sent = sent + 1
  wrk.headers["x-bot-id"] = bots[(sent % #bots) + 1]
  return wrk.format()
end
"""


def parse_args() -> argparse.Namespace:
    parser = cli.parser(__doc__)
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--bots", type=int, default=20)
    cli.add_db(parser, "bench_many_hosts")
    return parser.parse_args()


def host_env(proj: Project, host: Host, folder: Path) -> dict[str, str]:
    """The project's settings as `host` reaches the stores, with a data
    folder of its own holding the project's keys."""
    data_dir = folder / host.name
    if not data_dir.exists():
        shutil.copytree(proj.data_dir, data_dir)
    env = dict(proj.env)
    env.update(
        {
            "DATABASE_URL": host.url(proj.env["DATABASE_URL"]),
            "CELERY_BROKER_URL": host.url(proj.env["CELERY_BROKER_URL"]),
            "LIVE_STREAM_REDIS_URL": host.url(proj.env["CELERY_BROKER_URL"]),
            "DATA_DIR": str(data_dir),
            "ALLOWED_HOSTS": "*",
            "PUBLIC_BASE_URL": f"http://{host.address}:{WEB_PORT}",
            "WEB_CONCURRENCY": "1",
        }
    )
    for name in ("RATE_LIMIT_REDIS_URL",):
        if env.get(name):
            env[name] = host.url(env[name])
    return env


@contextlib.contextmanager
def platform_on(
    proj: Project, network: Network, webs: int, workers: int, folder: Path
) -> Iterator[list[str]]:
    """The platform's processes on `webs` web hosts and `workers` worker
    hosts, stopped afterwards whatever happened; the web hosts' base URLs."""
    with contextlib.ExitStack() as stack:

        def spawn(host: Host, command: list[str]) -> None:
            log_path = folder / f"{host.name}-{Path(command[0]).name}-{len(os.listdir(folder))}.log"
            stack.enter_context(
                started(
                    [*host.prefix(), *command],
                    cwd=ROOT,
                    env=host_env(proj, host, folder),
                    log_path=log_path,
                )
            )

        urls = []
        for n in range(1, webs + 1):
            host = network.hosts[f"web{n}"]
            spawn(
                host,
                [
                    PYTHON,
                    "-m",
                    "platform_site.serve",
                    "--host",
                    host.address,
                    "--port",
                    str(WEB_PORT),
                ],
            )
            urls.append(f"http://{host.address}:{WEB_PORT}")
        for n in range(1, workers + 1):
            host = network.hosts[f"worker{n}"]
            spawn(host, [*CELERY_APP, "worker", "--concurrency", "1", "--loglevel", "WARNING"])
            if n == 1:
                spawn(host, [*CELERY_APP, "beat", "--loglevel", "WARNING"])
        for url in urls:
            wait_ready(url)
        time.sleep(3)  # the workers' engines started
        yield urls


def wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready_at(url):
            return
        time.sleep(0.3)
    raise RuntimeError(f"{url} not ready after {timeout} s")


def processed_between(proj: Project, start: datetime, end: datetime) -> int:
    return int(
        proj.scalar(
            "SELECT count(*) FROM events_event WHERE status = 'processed'"
            " AND updated_at >= %s AND updated_at < %s",
            [start, end],
        )
    )


def phase(
    wrk: str, urls: list[str], script: Path, connections: int, seconds: float
) -> list[dict[str, int]]:
    """wrk against every web host at once, the connections shared out."""
    each = max(1, connections // len(urls))

    def one(url: str) -> dict[str, int]:
        return load.run_wrk(
            wrk, f"{url}/v1/chat/events", script, connections=each, threads=1, seconds=seconds
        )

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(one, urls))


def main() -> int:
    args = parse_args()
    reason = hosts_supported()
    if reason:
        print(f"SKIPPED: {reason}")
        return 0
    machine.start()
    wrk = load.ensure_wrk()
    failures: list[str] = []
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CONFIGURATIONS}
    with (
        project(args.db) as proj,
        hosts_made(("web1", "web2", "worker1", "worker2")) as network,
        # Beside the project's data folder, which each host's is a copy of.
        tempfile.TemporaryDirectory(prefix="bench-many-hosts-") as tmp,
    ):
        folder = Path(tmp)
        receiver_port = free_port()
        receiver = [
            PYTHON,
            str(ROOT / "bench" / "webhook_receiver.py"),
            str(receiver_port),
            str(folder / "receiver.txt"),
            network.gateway,
        ]
        with started(receiver, cwd=ROOT, env=dict(os.environ), log_path=folder / "receiver.log"):
            webhook = f"http://{network.gateway}:{receiver_port}/uniform/0/300"
            bots = make_bots(proj, [webhook] * args.bots)
            script = load.post_script(
                folder / "create.lua",
                headers=api.demo_headers(proj.demo),
                body=api.event_body(),
                lua=ROTATE_LUA.replace("BOTS", ", ".join(f'"{b}"' for b in bots)) + load.WRK_LUA,
            )
            for round_ in range(args.rounds):
                names = list(CONFIGURATIONS)
                for name in names if round_ % 2 == 0 else list(reversed(names)):
                    webs, workers = CONFIGURATIONS[name]
                    log(f"round {round_ + 1}: {name}")
                    with platform_on(proj, network, webs, workers, folder) as urls:
                        phase(wrk, urls, script, args.connections, args.warmup)
                        start = datetime.now(UTC)
                        summaries = phase(wrk, urls, script, args.connections, args.duration)
                        end = datetime.now(UTC)
                        time.sleep(1)  # the last outcomes recorded
                        delivered = processed_between(proj, start, end)
                    created = sum(s["created"] for s in summaries)
                    for summary in summaries:
                        if load.wrk_failed(summary):
                            failures.append(f"{name}: {summary}")
                    seconds = (end - start).total_seconds()
                    results[name].append((created / seconds, delivered / seconds))
            created_total = int(proj.scalar("SELECT count(*) FROM events_event"))
            log("every event delivered")
            with platform_on(proj, network, 1, 2, folder):
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    waiting = proj.scalar(
                        "SELECT count(*) FROM events_event WHERE status <> 'processed'"
                    )
                    if not waiting:
                        break
                    time.sleep(2)
            if waiting:
                failures.append(f"{waiting} of {created_total} events not processed")
    print(
        f"\nRESULT many_hosts ({args.rounds} rounds of {args.duration:.0f} s,"
        f" {args.connections} connections, {args.bots} bots, webhooks 0-300 ms)"
    )
    print(f"  {'hosts (web + worker)':22} {'created/s':>12} {'delivered/s':>12}   rounds")
    means: dict[str, tuple[float, float]] = {}
    for name, rows in results.items():
        rate = sum(r[0] for r in rows) / len(rows)
        delivery = sum(r[1] for r in rows) / len(rows)
        means[name] = (rate, delivery)
        detail = ", ".join(f"{c:.0f}/{d:.0f}" for c, d in rows)
        print(f"  {name:22} {rate:12.1f} {delivery:12.1f}   {detail}")
    one, two = means["1 + 1"], means["2 + 2"]
    print(
        f"  2 + 2 ÷ 1 + 1: created {two[0] / one[0]:.2f}, delivered {two[1] / one[1]:.2f}"
        " (reported; the hosts share 2 cores)"
    )
    return verdict(failures, "CORRECTNESS CHECKS PASSED")


if __name__ == "__main__":
    sys.exit(main())
