"""What the delivery benchmarks share: the project's worker and beat started
as the Procfile starts them, the webhook receiver (webhook_receiver.py),
events written straight into the table with COPY (as the service stores
them), and the reading of what was sent and when."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import benchlib
from benchlib import percentile

CELERY = str(Path(benchlib.PYTHON).parent / "celery")
RECEIVER = str(Path(__file__).resolve().parent / "webhook_receiver.py")
PROCFILE = benchlib.ROOT / "platform_site" / "Procfile"


def procfile_command(name: str) -> list[str]:
    """The Procfile's command line for `name` (worker, beat), run with this venv."""
    for line in PROCFILE.read_text().splitlines():
        label, _, command = line.partition(":")
        if label.strip() == name:
            words = command.split()
            words[0] = str(Path(benchlib.PYTHON).parent / Path(words[0]).name)
            return words
    raise LookupError(f"no {name} in {PROCFILE}")


@contextlib.contextmanager
def engine(
    proj: benchlib.Project, queue: str, *, extra_env: dict[str, str] | None = None
) -> Iterator[dict[str, int]]:
    """The Procfile's worker and beat on the project's database and broker,
    on a queue of their own; their pids."""
    env = {**proj.env, "CELERY_QUEUE": queue, "LOG_LEVEL": "WARNING", **(extra_env or {})}
    schedule = proj.data_dir / f"beat-{time.monotonic_ns()}"
    worker = subprocess.Popen(
        procfile_command("worker"),
        cwd=benchlib.ROOT,
        env=env,
        start_new_session=True,
        stdout=sys.stderr,
    )
    beat = subprocess.Popen(
        procfile_command("beat") + ["-s", str(schedule)],
        cwd=benchlib.ROOT,
        env=env,
        start_new_session=True,
        stdout=sys.stderr,
    )
    try:
        wait_for_children(worker.pid, 2)
        yield {"worker": worker.pid, "beat": beat.pid}
    finally:
        benchlib.stop_process(beat)
        benchlib.stop_process(worker, timeout=30)


def wait_for_children(pid: int, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(benchlib.children_of(pid)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"worker {pid} did not start {count} processes")
        time.sleep(0.2)
    time.sleep(2.0)  # the children import the project and start their engines


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


@contextlib.contextmanager
def receiver(port: int, out: Path) -> Iterator[subprocess.Popen[bytes]]:
    """webhook_receiver.py on `port`; its records land in `out` when it stops."""
    process = subprocess.Popen([benchlib.PYTHON, RECEIVER, str(port), str(out)])
    time.sleep(1.0)
    try:
        yield process
    finally:
        benchlib.stop_process(process)


def received(out: Path) -> list[tuple[str, float, str]]:
    """(webhook-id, arrival time, path) of every request the receiver got."""
    rows = []
    for line in out.read_text().splitlines():
        mid, at, path = line.split(" ")
        rows.append((mid, float(at), path))
    return rows


def make_bots(proj: benchlib.Project, urls: Sequence[str]) -> list[str]:
    """Bots of the demo workspace, one per webhook URL; their ids."""
    from ulid import ULID

    now = datetime.now(UTC)
    ids = [f"bot_{ULID()}" for _ in urls]
    with proj.connect() as conn, conn.cursor() as cursor:
        workspace = proj.demo["workspaceId"]
        row = cursor.execute(
            "SELECT signing_secret FROM bots_bot WHERE id = %s", (proj.demo["botId"],)
        ).fetchone()
        assert row is not None
        # Copied as stored, encrypted: the bench bots sign with the demo bot's secret.
        secret = row[0]
        cursor.executemany(
            "INSERT INTO bots_bot (id, workspace_id, name, tags, dev, webhook_url, "
            "signing_secret, previous_signing_secret, created_at, updated_at) "
            "VALUES (%s, %s, %s, '{}', false, %s, %s, '', %s, %s)",
            [
                (bot_id, workspace, f"bench {n}", url, secret, now, now)
                for n, (bot_id, url) in enumerate(zip(ids, urls, strict=True))
            ],
        )
        conn.commit()
    return ids


COLUMNS = (
    "id, bot_id, type, payload, status, due_at, next_attempt_at, lease, attempt_count, "
    "created_at, updated_at"
)


def copy_events(
    cursor: Any, rows: Sequence[tuple[str, str, str, datetime, bool]], now: datetime
) -> None:
    """COPY events: (id, bot id, type, due time, due now?) each; due now is
    pending, the others scheduled, as the service stores them."""
    with cursor.copy(f"COPY events_event ({COLUMNS}) FROM STDIN") as copy:
        for event_id, bot_id, kind, due, due_now in rows:
            copy.write_row(
                (event_id, bot_id, kind, "{}", "pending" if due_now else "scheduled")
                + (due, due, 0, 0, now, now)
            )


def seed(proj: benchlib.Project, bots: list[str], due: list[datetime], status: str) -> list[str]:
    """Insert events due at `due` (round-robin over `bots`) with COPY; their ids."""
    from ulid import ULID

    now = datetime.now(UTC)
    ids = [f"evt_{ULID()}" for _ in due]
    rows = [
        (event_id, bots[n % len(bots)], "bench", when, status == "pending")
        for n, (event_id, when) in enumerate(zip(ids, due, strict=True))
    ]
    with proj.connect() as conn, conn.cursor() as cursor:
        copy_events(cursor, rows, now)
        conn.commit()
    return ids


def wait_finished(
    proj: benchlib.Project, ids: list[str], timeout: float, status: str = "processed"
) -> None:
    """Wait until every event of `ids` has `status`. The poll looks the ids up
    one by one through the primary key: `id = ANY(array)` would compare each
    row of the table with the whole array, and the benchmark's own polling
    would then be what keeps PostgreSQL busy."""
    deadline = time.monotonic() + timeout
    with proj.connect(autocommit=True) as conn:
        while time.monotonic() < deadline:
            done = conn.execute(
                "SELECT count(*) FROM unnest(%s::text[]) AS wanted (id) "
                "JOIN events_event e USING (id) WHERE e.status = %s",
                (ids, status),
            ).fetchone()
            if done and done[0] == len(ids):
                return
            time.sleep(0.5)
    raise SystemExit(f"FAILED: not every event was {status} within {timeout:.0f} s")


def first_attempts(
    proj: benchlib.Project, ids: list[str], *, exactly_one: bool = True
) -> list[tuple[str, float, float, float]]:
    """(event id, due, first attempt's start, its end) as epoch seconds."""
    with proj.connect() as conn:
        rows = conn.execute(
            "SELECT e.id, extract(epoch FROM e.due_at), extract(epoch FROM a.started_at), "
            "a.duration_ms, (SELECT count(*) FROM events_deliveryattempt x "
            " WHERE x.event_id = e.id) FROM events_event e JOIN events_deliveryattempt a "
            "ON a.event_id = e.id AND a.number = 1 WHERE e.id = ANY(%s)",
            (ids,),
        ).fetchall()
    if len(rows) != len(ids) or (exactly_one and any(row[4] != 1 for row in rows)):
        raise SystemExit("FAILED: an event does not have exactly one attempt")
    return [(r[0], float(r[1]), float(r[2]), float(r[2]) + r[3] / 1000) for r in rows]


def lateness_line(label: str, values: Sequence[float]) -> str:
    ms = [v * 1000 for v in values]
    if not ms:
        return f"  {label:34s} (none)"
    return (
        f"  {label:34s} p50 {percentile(ms, 50):8.1f}  p90 {percentile(ms, 90):8.1f}  "
        f"p99 {percentile(ms, 99):8.1f}  max {max(ms):8.1f} ms"
    )
