"""A database restart under load, and one while idle: what clients, the
readiness probe and the logs see while PostgreSQL restarts, and whether every
created event is delivered afterwards.

    .venv/bin/python bench/db_restart.py [--cluster 15/restartprobe] [--rate 100]   # ~3 min

It restarts a PostgreSQL cluster: give it one of its own, never the one
others use (the script refuses `main` and any cluster on another port than
BENCH_PG_PORT, default 5433):

    pg_createcluster 15 restartprobe -p 5433   # its pg_hba.conf: trust on 127.0.0.1
    pg_ctlcluster --skip-systemctl-redirect 15 restartprobe start

1. A fresh database bench_restart on that cluster, migrated and seeded
   (seed_demo: a bot whose webhook is bench/webhook_receiver.py), DATA_DIR
   var/restartprobe (the processes' logs are kept there), Redis database 5
   as broker (emptied first) and Celery queue `restartprobe`.
2. The Procfile's web (one process per core, on --port), worker and beat, as
   `make run` starts them, text logs at INFO.
3. Under load: create event (POST /v1/chat/events as the demo bot) open loop
   at --rate a second over --connections keep-alive connections for
   --before seconds; `pg_ctlcluster --skip-systemctl-redirect VERSION NAME
   restart`, the load going on for --after seconds more; then --idle
   seconds without load. GET /readyz every 100 ms throughout, on a new
   connection each (every web process gets some).
4. While idle: no request at all while the cluster restarts (an
   orchestrator's probes are seconds apart; a process may get no request
   during a restart), then GET /readyz every 100 ms for --probe-alone
   seconds (the pools still hold the connections the restart broke), then
   creates at 10 a second, each on a new connection, for 3 s, the probes
   going on.
   (--tree DIR runs web, worker and beat from another checkout: a change
   measured before it is made here.)
5. Every event answered 201 must be stored and end `processed` (delivered
   to the receiver) within --settle seconds.

Figures, for each restart: the answers by status, the time window of the
failed creates (seconds from the restart's start) and their Retry-After; the
readiness samples by status and the not-ready ones once the database was
back (sent after the restart command returned: must be none; and those after
the first ready sample then); each process's log lines by level, its WARNING
and ERROR lines by logger and message, and its tracebacks (records that
carry one, and the `Traceback` headers of their chained exceptions). Last,
events created, stored, processed and lost. Exit status 1 when a check fails: an event
answered 201 but lost or not processed, a failed create that is not a 503
with Retry-After, /readyz not ready once the database was back, a traceback
in any process's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The cluster this script restarts: one of its own, not the machine's main
# one (before harness.project reads it).
os.environ.setdefault("BENCH_PG_PORT", "5433")

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp  # noqa: E402
import redis  # noqa: E402
from harness import api, machine, servers  # noqa: E402
from harness.load import on_schedule  # noqa: E402
from harness.project import (  # noqa: E402
    PG_PORT,
    RATE_LIMITS_OUT_OF_REACH,
    ROOT,
    Project,
    admin_connection,
    database_url,
    delete_queue,
)
from harness.report import log, percentile, verdict  # noqa: E402
from psycopg import sql  # noqa: E402

DB = "bench_restart"
REDIS_URL = "redis://127.0.0.1:6379/5"
QUEUE = "restartprobe"
DATA_DIR = ROOT / "var" / "restartprobe"
READY_EVERY = 0.1  # seconds between two readiness probes
IDLE_CREATE_RATE = 10.0  # creates a second after the idle restart
IDLE_CREATE_SECONDS = 3.0
ENGINE_STARTED = "Delivering events: up to"  # events/engine/process.py, per worker process
TRACEBACK = "Traceback (most recent call last):"
CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# A text log line (structlog's console renderer): time, [level], message,
# [logger], then key=value pairs.
LINE = re.compile(
    r"^\d{4}-\S+ \[(?P<level>[a-z]+)\s*\] (?P<message>.*) +\[(?P<logger>[\w.]+)\](?: \w+=.*)?$"
)
LEVEL = re.compile(r"^\d{4}-\S+ \[(?P<level>[a-z]+)\s*\] ")
LEVELS = ("warning", "error", "critical")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", default="15/restartprobe", help="VERSION/NAME to restart")
    parser.add_argument("--port", type=int, default=8791, help="the web process's port")
    parser.add_argument("--rate", type=float, default=100, help="creates a second")
    parser.add_argument("--connections", type=int, default=16, help="client keep-alive connections")
    parser.add_argument("--before", type=float, default=10, help="seconds of load before")
    parser.add_argument("--after", type=float, default=20, help="seconds of load after")
    parser.add_argument("--idle", type=float, default=40, help="seconds without load after")
    parser.add_argument(
        "--probe-alone",
        type=float,
        default=3,
        help="seconds of probes alone after the idle restart",
    )
    parser.add_argument("--settle", type=float, default=90, help="seconds for events to finish")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of every process (e.g. DATABASE_CONN_HEALTH_CHECKS=1)",
    )
    parser.add_argument(
        "--tree",
        default="",
        help="run web, worker and beat from this checkout instead (its code; with a .venv "
        "link to this one's): a change to files this tree does not have yet",
    )
    return parser.parse_args()


# ---------------------------------------------------------------- the cluster


def cluster_checked(cluster: str) -> tuple[str, str]:
    """(version, name) of the cluster to restart, after making sure it is
    not the main one and that it is the one BENCH_PG_PORT reaches."""
    version, _, name = cluster.partition("/")
    if not name or name == "main":
        raise SystemExit(f"--cluster {cluster!r}: give VERSION/NAME of a cluster of its own")
    listed = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True
    ).stdout
    for line in listed.splitlines():
        cols = line.split()
        if cols[:2] == [version, name]:
            if int(cols[2]) != PG_PORT:
                raise SystemExit(f"cluster {cluster} listens on {cols[2]}, not {PG_PORT}")
            if cols[3] != "online":
                raise SystemExit(f"cluster {cluster} is {cols[3]}: start it first")
            return version, name
    raise SystemExit(f"no cluster {cluster} (pg_lsclusters)")


def restart_cluster(version: str, name: str) -> tuple[float, float]:
    """Restart it; wall-clock (start, end) of the command."""
    started = time.time()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"],
        check=True,
        capture_output=True,
    )
    return started, time.time()


# ---------------------------------------------------------------- the project


@contextlib.contextmanager
def restart_project(webhook_url: str, extra_env: dict[str, str]) -> Iterator[Project]:
    """Database DB on the cluster, DATA_DIR, Redis database 5 emptied;
    migrated and seeded. The database is dropped afterwards, the data folder
    (with the logs) kept until the next run."""
    shutil.rmtree(DATA_DIR, ignore_errors=True)
    DATA_DIR.mkdir(parents=True)
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(DB),
        "CELERY_BROKER_URL": REDIS_URL,
        "CELERY_QUEUE": QUEUE,
        "DATA_DIR": str(DATA_DIR),
        "DJANGO_SETTINGS_MODULE": "platform_site.settings",
        "LOG_LEVEL": "INFO",
        "LOG_FORMAT": "text",
        "WEB_ACCESS_LOG": "0",
        "DEBUG": "false",
        "PYTHONUNBUFFERED": "1",
        **RATE_LIMITS_OUT_OF_REACH,
        **extra_env,
    }
    env.pop("SECRET_KEY", None)

    def drop() -> None:
        with admin_connection() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB))
            )

    drop()
    with admin_connection() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    try:
        proj = Project(dbname=DB, data_dir=DATA_DIR, env=env)
        log(f"database {DB} on port {PG_PORT}: migrate, seed_demo")
        proj.manage("migrate", "--no-input", "-v", "0")
        out = proj.manage("seed_demo", "--json", "--webhook-url", webhook_url)
        proj.demo = json.loads(out.strip().splitlines()[-1])
        yield proj
    finally:
        log(f"dropping database {DB}")
        with contextlib.suppress(Exception):
            drop()
        delete_queue(REDIS_URL, QUEUE)


@contextlib.contextmanager
def started(
    name: str, command: list[str], proj: Project, tree: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A Procfile process, its log in DATA_DIR/<name>.log, run from `tree`
    (this checkout when empty); stopped afterwards."""
    with (DATA_DIR / f"{name}.log").open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=tree or ROOT,
            env={**proj.env, **({"PYTHONPATH": tree} if tree else {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        servers.stop_process(process, timeout=30)


def wait_for_engines(count: int, timeout: float = 60) -> None:
    """Until `count` worker processes have started delivering (their log line)."""
    deadline = time.monotonic() + timeout
    while (DATA_DIR / "worker.log").read_text(errors="replace").count(ENGINE_STARTED) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker's delivery engines did not start: see {DATA_DIR}")
        time.sleep(0.2)


# ---------------------------------------------------------------- load and probes


@dataclass
class Answer:
    sent: float  # wall clock
    done: float
    status: int  # -1: no answer
    retry_after: str | None = None
    event_id: str | None = None
    detail: str = ""


async def create_load(
    base_url: str,
    demo: dict[str, Any],
    *,
    rate: float,
    seconds: float,
    connections: int,
    fresh: bool = False,
) -> list[Answer]:
    """POST /v1/chat/events `rate` a second for `seconds`, open loop, over
    `connections` keep-alive connections (`fresh`: a new one each)."""
    headers = api.demo_headers(demo)
    body = api.event_body().encode()
    connector = aiohttp.TCPConnector(limit=connections, force_close=fresh)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one() -> Answer:
            sent = time.time()
            try:
                url = f"{base_url}/v1/chat/events"
                async with session.post(url, data=body, headers=headers) as answer:
                    text = await answer.text()
                    if answer.status == 201:
                        event_id = json.loads(text)["event"]["id"]
                        return Answer(sent, time.time(), 201, event_id=event_id)
                    retry_after = answer.headers.get("Retry-After")
                    return Answer(sent, time.time(), answer.status, retry_after, detail=text[:300])
            except (aiohttp.ClientError, TimeoutError) as exc:
                return Answer(sent, time.time(), -1, detail=repr(exc))

        loop = asyncio.get_running_loop()
        tasks = []
        async for _, _ in on_schedule(loop.time() + 0.01, rate, int(rate * seconds)):
            tasks.append(asyncio.create_task(one()))
        return list(await asyncio.gather(*tasks))


@dataclass
class Probes:
    """GET /readyz every READY_EVERY seconds on a thread, each on a new
    connection, while `running`."""

    base_url: str
    samples: list[tuple[float, int, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            sent = time.time()
            try:
                with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=15) as answer:
                    self.samples.append((sent, answer.status, ""))
            except urllib.error.HTTPError as error:
                self.samples.append((sent, error.code, error.read().decode(errors="replace")))
            except OSError as exc:
                self.samples.append((sent, -1, repr(exc)))
            self._stop.wait(max(0.0, sent + READY_EVERY - time.time()))

    @contextlib.contextmanager
    def running(self) -> Iterator[Probes]:
        self._stop.clear()
        thread = threading.Thread(target=self.run, name="readyz", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(20)


@dataclass
class Restart:
    """What one restart's scenario saw."""

    title: str
    began: float = 0.0  # wall clock: the restart command's start and end
    back: float = 0.0
    answers: list[Answer] = field(default_factory=list)
    samples: list[tuple[float, int, str]] = field(default_factory=list)
    logs: dict[str, int] = field(default_factory=dict)  # each log's size at the start


LOGS = ("web", "worker", "beat")


def log_path(name: str, port: int) -> Path:
    return DATA_DIR / (f"web-{port}.log" if name == "web" else f"{name}.log")


def log_sizes(port: int) -> dict[str, int]:
    return {name: log_path(name, port).stat().st_size for name in LOGS}


def under_load(
    args: argparse.Namespace, cluster: tuple[str, str], base_url: str, demo: dict[str, Any]
) -> Restart:
    """Creates open loop and /readyz every 100 ms; the restart midway."""
    seen = Restart(f"restart under load ({args.rate:.0f} creates/s)")
    log(f"{seen.title}: load for {args.before:.0f} s, restart, load for {args.after:.0f} s more")

    def restart_later() -> None:
        time.sleep(args.before)
        log(f"restarting {args.cluster}")
        seen.began, seen.back = restart_cluster(*cluster)
        log(f"restarted in {seen.back - seen.began:.2f} s")

    probes = Probes(base_url)
    with probes.running():
        restarter = threading.Thread(target=restart_later, daemon=True)
        restarter.start()
        seen.answers = asyncio.run(
            create_load(
                base_url,
                demo,
                rate=args.rate,
                seconds=args.before + args.after,
                connections=args.connections,
            )
        )
        restarter.join()
        if not seen.back:
            raise RuntimeError(f"restarting {args.cluster} failed")
        log(f"load done; /readyz alone for {args.idle:.0f} s")
        time.sleep(args.idle)
    seen.samples = probes.samples
    return seen


def while_idle(
    args: argparse.Namespace, cluster: tuple[str, str], base_url: str, demo: dict[str, Any]
) -> Restart:
    """The restart with no request at all; then /readyz alone, then creates."""
    seen = Restart("restart while idle (no request during it)")
    log(f"{seen.title}: restarting {args.cluster}")
    seen.began, seen.back = restart_cluster(*cluster)
    log(f"restarted in {seen.back - seen.began:.2f} s; /readyz alone for {args.probe_alone:.0f} s")
    probes = Probes(base_url)
    with probes.running():
        time.sleep(args.probe_alone)
        log(f"creates at {IDLE_CREATE_RATE:.0f}/s for {IDLE_CREATE_SECONDS:.0f} s")
        seen.answers = asyncio.run(
            create_load(
                base_url,
                demo,
                rate=IDLE_CREATE_RATE,
                seconds=IDLE_CREATE_SECONDS,
                connections=4,
                fresh=True,
            )
        )
        time.sleep(1.0)
    seen.samples = probes.samples
    return seen


# ---------------------------------------------------------------- outcomes


def wait_processed(proj: Project, ids: list[str], timeout: float) -> Counter[str]:
    """Statuses of the events `ids` once none is pending, or at `timeout`;
    `lost` counts those not stored."""
    deadline = time.monotonic() + timeout
    while True:
        with proj.connect(autocommit=True) as conn:
            rows = conn.execute(
                "SELECT status, count(*) FROM events_event WHERE id = ANY(%s) GROUP BY status",
                (ids,),
            ).fetchall()
        statuses: Counter[str] = Counter({status: count for status, count in rows})
        statuses["lost"] = len(ids) - sum(statuses.values())
        waiting = statuses["pending"] + statuses["scheduled"]
        if not waiting or time.monotonic() > deadline:
            return statuses
        time.sleep(1.0)


@dataclass
class LogFigures:
    by_level: Counter[str] = field(default_factory=Counter)
    lines: Counter[str] = field(default_factory=Counter)  # "level [logger] message" -> count
    # Each record with a trace: its line, and its (last chained) exception's.
    traced: list[list[str]] = field(default_factory=list)
    headers: int = 0  # Traceback headers (a record's chained exceptions have one each)


def read_log(path: Path, start: int, end: int) -> LogFigures:
    """The figures of bytes `start` to `end` of a log."""
    with path.open("rb") as file:
        file.seek(start)
        text = file.read(end - start).decode(errors="replace")
    figures = LogFigures()
    last_line = record_line = ""
    for line in text.splitlines():
        level = LEVEL.match(line)
        if level is not None:
            record_line = line
            figures.by_level[level["level"]] += 1
            if level["level"] in LEVELS:
                figures.lines[summary(line)] += 1
        elif line.startswith(TRACEBACK):
            figures.headers += 1
            if last_line not in CHAINED:  # not a chained exception: a record's own trace
                figures.traced.append([record_line, ""])
        elif figures.traced and line.strip() and line[0] not in " \t" and line not in CHAINED:
            figures.traced[-1][1] = line  # the exception raised, after its frames
        if line.strip():
            last_line = line.strip()
    return figures


def summary(line: str) -> str:
    """A log line without its time, ids, numbers and key=value pairs."""
    match = LINE.match(line)
    if match is None:
        return line[28:130]
    message = re.sub(r"\berr_\w+|\b[0-9a-f]{32}\b|0x[0-9a-f]+", "<id>", match["message"])
    message = re.sub(r"\d+", "N", message).strip()
    return f"{match['level']} [{match['logger']}] {message[:110]}"


def counts(counter: Counter[Any]) -> str:
    """`key count, ...` in key order (an answer's status -1: none)."""
    return ", ".join(f"{'none' if k == -1 else k} {v}" for k, v in sorted(counter.items()))


def report(seen: Restart, port: int, next_sizes: dict[str, int]) -> list[str]:
    """The figures of one restart; the checks that failed."""
    failures: list[str] = []
    began, back = seen.began, seen.back
    print(f"\n== {seen.title}: the restart took {back - began:.2f} s (times from its start)")

    answers = seen.answers
    print(
        f"create event: {len(answers)} sent; answers: {counts(Counter(a.status for a in answers))}"
    )
    failed = [a for a in answers if a.status != 201]
    if failed:
        first, last = min(a.sent for a in failed), max(a.done for a in failed)
        print(
            f"  failed: {len(failed)}, sent from {first - began:+.2f} s, answered until "
            f"{last - began:+.2f} s (window {last - first:.2f} s); Retry-After: "
            f"{dict(Counter(a.retry_after for a in failed))}"
        )
        for kind, count in Counter(a.detail[:60] + "..." for a in failed).most_common(3):
            print(f"    {count} x {kind}")
        wrong = [a for a in failed if a.status != 503 or not a.retry_after]
        if wrong:
            failures.append(f"{seen.title}: {len(wrong)} failed creates not 503 with Retry-After")
    latencies = [a.done - a.sent for a in answers if a.status == 201]
    if latencies:
        p50, p99 = percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000
        print(f"  201s: p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(latencies) * 1000:.0f} ms")

    samples = seen.samples
    probed = Counter(s for _, s, _ in samples)
    print(f"/readyz: {len(samples)} samples, {READY_EVERY * 1000:.0f} ms apart: {counts(probed)}")
    not_ready = [t for t, s, _ in samples if s != 200]
    if not_ready:
        print(f"  not ready from {not_ready[0] - began:+.2f} s to {not_ready[-1] - began:+.2f} s")
    once_back = [t for t, s, _ in samples if t >= back and s != 200]
    print(f"  not ready once the restart command returned: {len(once_back)}")
    if once_back:
        failures.append(f"{seen.title}: /readyz not ready {len(once_back)} times once back")
    ready_again = next((t for t, s, _ in samples if t >= back and s == 200), None)
    if ready_again is None:
        failures.append(f"{seen.title}: /readyz never answered ready after the restart")
    else:
        flaps = [(t, s, body) for t, s, body in samples if t > ready_again and s != 200]
        print(
            f"  first ready after the restart at {ready_again - began:+.2f} s "
            f"({ready_again - back:.2f} s after the command returned); not ready after that: "
            f"{len(flaps)}"
        )
        for t, s, body in flaps[:6]:
            print(f"    {t - began:+.2f} s: {s} {body[:150]}")

    for name in LOGS:
        path = log_path(name, port)
        figures = read_log(path, seen.logs[name], next_sizes[name])
        traced = len(figures.traced)
        print(
            f"{name} log: {traced} records with a traceback ({figures.headers} Traceback "
            f"headers); lines: {counts(figures.by_level) or 'none'}"
        )
        for line, count in figures.lines.most_common(10):
            print(f"  {count:4d} x {line}")
        kinds = Counter((summary(line), error[:120]) for line, error in figures.traced)
        for (line, error), count in kinds.most_common(4):
            print(f"  {count:4d} traced: {line}\n         raised: {error}")
        if figures.traced:
            failures.append(f"{seen.title}: {len(figures.traced)} tracebacks in the {name} log")
    return failures


def main() -> int:
    args = parse_args()
    machine.start("Database restarts: create event, /readyz and the worker")
    cluster = cluster_checked(args.cluster)
    extra = dict(item.split("=", 1) for item in args.env)
    print(f"cluster {args.cluster} on port {PG_PORT}, web port {args.port}, settings {extra}")
    if args.tree:
        print(f"web, worker and beat run the code of {args.tree}")
    receiver_port = servers.free_port()
    failures: list[str] = []
    with contextlib.ExitStack() as stack:
        proj = stack.enter_context(restart_project(f"http://127.0.0.1:{receiver_port}/now", extra))
        stack.enter_context(servers.receiver(receiver_port, DATA_DIR / "receiver.txt"))
        for name in ("worker", "beat"):
            stack.enter_context(started(name, servers.procfile_words(name), proj, args.tree))
        web = stack.enter_context(
            servers.procfile_web(proj, workers=machine.cores(), port=args.port, tree=args.tree)
        )
        wait_for_engines(2)
        runs: list[Restart] = []
        for scenario in (under_load, while_idle):
            sizes = log_sizes(args.port)
            seen = scenario(args, cluster, web.base_url, proj.demo)
            seen.logs = sizes
            runs.append(seen)
        ids = [a.event_id for seen in runs for a in seen.answers if a.event_id]
        log(f"waiting for {len(ids)} events to be processed")
        statuses = wait_processed(proj, ids, args.settle)
        time.sleep(1.0)  # the last lines of the logs
        sizes = log_sizes(args.port)
        for seen, after in zip(runs, [*(r.logs for r in runs[1:]), sizes], strict=True):
            failures += report(seen, args.port, after)
        print(f"\nevents answered 201: {len(ids)}; now: {counts(statuses)}")
        if statuses["lost"]:
            failures.append(f"{statuses['lost']} events answered 201 are not stored")
        unfinished = len(ids) - statuses["processed"] - statuses["lost"]
        if unfinished:
            failures.append(f"{unfinished} events answered 201 are not processed")
        log("stopping")
    print(f"logs kept in {DATA_DIR}")
    return verdict(failures, "All checks passed.")


if __name__ == "__main__":
    sys.exit(main())
