"""What the delivery benchmarks share: bots whose webhook is the receiver,
events written straight into the table with COPY (as the service stores
them), once or arriving all the time from a generator process, the reading
of what was sent and when, and the project's webhook client alone (the
baseline of a delivery: no database, no queue)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ulid import ULID

from harness.project import PYTHON, ROOT, Project, admin_dsn, project
from harness.servers import free_port


def received(out: Path) -> list[tuple[str, float, str]]:
    """(webhook-id, arrival time, path) of every request the receiver got."""
    rows = []
    for line in out.read_text().splitlines():
        mid, at, path, _ = line.split(" ", 3)
        rows.append((mid, float(at), path))
    return rows


def received_sdk_types(out: Path) -> dict[str, str]:
    """webhook-id -> the `x-bp-type` of each request the receiver got in the
    official SDK's format (with x-bp-operation and an `{"event": …}` body)."""
    found = {}
    for line in out.read_text().splitlines():
        mid, _, _, kind = line.split(" ", 3)
        if kind:
            found[mid] = kind
    return found


def make_bots(proj: Project, urls: Sequence[str]) -> list[str]:
    """Bots of the demo workspace, one per webhook URL; their ids."""
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
            "signing_secret, previous_signing_secret, created_at, updated_at, "
            "delivery_format, configuration) "
            "VALUES (%s, %s, %s, '{}', false, %s, %s, '', %s, %s, 'standard', '{}')",
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
    cursor: Any,
    rows: Sequence[tuple[str, str, str, datetime, bool]],
    now: datetime,
    payload: str = "{}",
) -> None:
    """COPY events: (id, bot id, type, due time, due now?) each, all with
    `payload` (JSON); due now is pending, the others scheduled, as the
    service stores them."""
    with cursor.copy(f"COPY events_event ({COLUMNS}) FROM STDIN") as copy:
        for event_id, bot_id, kind, due, due_now in rows:
            copy.write_row(
                (event_id, bot_id, kind, payload, "pending" if due_now else "scheduled")
                + (due, due, 0, 0, now, now)
            )


def due_from(lead: float, count: int, step: float) -> list[datetime]:
    """`count` due times `step` s apart, the first `lead` s from now."""
    start = datetime.now(UTC) + timedelta(seconds=lead)
    return [start + timedelta(seconds=n * step) for n in range(count)]


def seed(
    proj: Project,
    bots: list[str],
    due: list[datetime],
    status: str,
    *,
    kind: str = "bench",
    payload: str = "{}",
) -> list[str]:
    """Insert events due at `due` (round-robin over `bots`) with COPY; their ids."""
    now = datetime.now(UTC)
    ids = [f"evt_{ULID()}" for _ in due]
    rows = [
        (event_id, bots[n % len(bots)], kind, when, status == "pending")
        for n, (event_id, when) in enumerate(zip(ids, due, strict=True))
    ]
    with proj.connect() as conn, conn.cursor() as cursor:
        copy_events(cursor, rows, now, payload)
        conn.commit()
    return ids


def wait_finished(proj: Project, ids: list[str], timeout: float, status: str = "processed") -> None:
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
    proj: Project, ids: list[str], *, exactly_one: bool = True
) -> list[tuple[str, float, float, float]]:
    """(event id, due, first attempt's start, its end) as epoch seconds."""
    with proj.connect() as conn:
        rows = conn.execute(
            # Through unnest, as in wait_finished: `e.id = ANY(array)` over a
            # table of tens of thousands of events ran for minutes.
            "SELECT e.id, extract(epoch FROM e.due_at), extract(epoch FROM a.started_at), "
            "a.duration_ms, (SELECT count(*) FROM events_deliveryattempt x "
            " WHERE x.event_id = e.id) FROM unnest(%s::text[]) AS wanted (id) "
            "JOIN events_event e USING (id) JOIN events_deliveryattempt a "
            "ON a.event_id = e.id AND a.number = 1",
            (ids,),
        ).fetchall()
    if len(rows) != len(ids) or (exactly_one and any(row[4] != 1 for row in rows)):
        raise SystemExit("FAILED: an event does not have exactly one attempt")
    return [(r[0], float(r[1]), float(r[2]), float(r[2]) + r[3] / 1000) for r in rows]


@dataclass
class Receiving:
    """A project whose bots' webhooks are the receiver on `port` (which
    writes what it got to `out`), with a Celery queue of the run's own."""

    proj: Project
    queue: str
    port: int
    out: Path

    def url(self, path: str = "/now") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def bots(self, path: str, count: int) -> list[str]:
        """`count` bots whose webhook answers as the receiver's `path` says."""
        return make_bots(self.proj, [self.url(path)] * count)

    def arrivals(self) -> dict[str, float]:
        """webhook-id -> arrival time of what the receiver got (once stopped)."""
        return {mid: at for mid, at, _ in received(self.out)}


@contextlib.contextmanager
def receiving_project(dbname: str) -> Iterator[Receiving]:
    with project(dbname) as proj:
        yield Receiving(proj, f"bench-{os.getpid()}", free_port(), proj.data_dir / "received.txt")


# ---------------------------------------------------------------- events arriving all the time


def generate(spec: dict[str, Any]) -> None:
    """Runs in a process of its own with the project's settings: inserts the
    events of `spec` at its rate, and wakes a worker as event_record does."""
    import django

    django.setup()
    import psycopg
    from django.conf import settings
    from ulid import ULID

    from events.engine.wakeups import deliveries_wake

    bots: list[str] = spec["bots"]
    rate: float = spec["rate"]
    total = int(rate * spec["duration"])
    soon = timedelta(seconds=2 * settings.EVENT_DISPATCH_INTERVAL)
    rng = random.Random(spec["seed"])
    made = 0
    start = time.monotonic()
    with psycopg.connect(spec["dsn"]) as conn, conn.cursor() as cursor:
        while made < total:
            target = min(total, int((time.monotonic() - start) * rate) + 1)
            now = datetime.now(UTC)
            rows = []
            for n in range(made, target):
                ahead = rng.random() < spec["scheduled_share"]
                due = now + timedelta(seconds=rng.uniform(1, 5)) if ahead else now
                kind = f"{spec['kind']}.{'scheduled' if ahead else 'immediate'}"
                rows.append((f"evt_{ULID()}", bots[n % len(bots)], kind, due, not ahead))
            copy_events(cursor, rows, now)
            conn.commit()
            made = target
            if any(due - now < soon for _, _, _, due, _ in rows):
                deliveries_wake()
            time.sleep(max(0.0, start + made / rate - time.monotonic()))
    time.sleep(0.1)  # the last wake-up goes from a thread of this process


# The generator's process: the project's settings (cwd: the project), this
# harness importable.
_GENERATOR = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); "
    "from harness.event_rows import generate; generate(json.loads(sys.argv[2]))"
)


def run_generator(proj: Project, queue: str, **spec: Any) -> float:
    """Generate events in a subprocess (`generate`: bots, rate, duration, kind
    of `spec`); answers when it began (epoch)."""
    spec = {"seed": 12345, "scheduled_share": 0.5, "dsn": admin_dsn(proj.dbname), **spec}
    began = time.time()
    subprocess.run(
        [PYTHON, "-c", _GENERATOR, str(Path(__file__).resolve().parent.parent), json.dumps(spec)],
        cwd=ROOT,
        env={**proj.env, "CELERY_QUEUE": queue},
        check=True,
    )
    return began


def events_of(proj: Project, kind: str, *, not_bot: str = "") -> dict[str, list[str]]:
    """Ids of a generator run's events, by half (immediate, scheduled)."""
    with proj.connect() as conn:
        rows = conn.execute(
            "SELECT type, id FROM events_event WHERE type LIKE %s AND bot_id <> %s",
            (f"{kind}.%", not_bot),
        ).fetchall()
    found: dict[str, list[str]] = {}
    for label, event_id in rows:
        found.setdefault(label.split(".")[1], []).append(event_id)
    return found


# ---------------------------------------------------------------- the plain client


def plain_client(url: str, schedule: list[float], in_flight: int) -> tuple[list[float], float]:
    """One signed POST at each moment of `schedule` (seconds from the start;
    0 for all at once) with the project's webhook client, at most `in_flight`
    at a time: each request's lateness, and requests/s."""
    from events.engine.webhook_client import WebhookClient, WebhookRequest

    secret = "whsec_" + "A" * 43 + "="

    async def run() -> tuple[list[float], float]:
        client = WebhookClient()
        limit = asyncio.Semaphore(in_flight)
        loop = asyncio.get_running_loop()
        origin = loop.time()
        late: list[float] = []

        async def one(n: int, at: float) -> None:
            if (wait := origin + at - loop.time()) > 0:
                await asyncio.sleep(wait)
            async with limit:
                late.append(loop.time() - origin - at)
                body = json.dumps({"id": f"base_{n}", "type": "bench", "payload": {"n": n}})
                await client.post(WebhookRequest(url, f"base_{n}", body, [secret], 10.0))

        await asyncio.gather(*(one(n, at) for n, at in enumerate(schedule)))
        elapsed = loop.time() - origin
        await client.close()
        return late, len(schedule) / elapsed

    return asyncio.run(run())
