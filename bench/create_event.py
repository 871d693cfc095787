"""Create event through the full HTTP stack against the raw insert rate.

    .venv/bin/python bench/create_event.py [--workers 4 --threads 1 --connections 16 ...]

1. A fresh database bench_events, migrated and seeded (developer token, bot).
2. gunicorn (platform_site.wsgi, gthread workers: keep-alive) on a free loopback
   port, each worker capped at twice its fair share of the client connections
   (--worker-connections): with gunicorn's default cap (1000) one worker can
   take all of them and, held to one core by the GIL, halve the peak.
3. Warm-up, then peak throughput of POST /v1/chat/events with wrk (Lua script:
   body and headers; keep-alive; N connections) for --duration seconds.
4. Latency at a fixed rate: an open-loop asyncio client that sends on a
   schedule over N keep-alive connections and measures each request from its
   *scheduled* send time (no coordinated omission); first at a low rate
   (--low-rate, 5 s: the cost of one request without queueing), then at half
   the peak rate.
5. The raw rate of inserting the same row (same columns and values as the
   service writes) with psycopg, N connections, autocommit, one INSERT per
   transaction, for --raw-duration seconds.
6. Events stored against 201 answers, then the ratio HTTP / raw.

Target (reported, never asserted): HTTP rate >= 35% of the raw rate, and p99
under 15 ms at half the peak rate. Exit status 1 only if a correctness check
fails (stored events do not match 201 answers, or requests failed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb
from ulid import ULID

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

EVENT_TYPE = "bench.order_created"
EVENT_PAYLOAD: dict[str, Any] = {
    "orderId": "ord_12345",
    "amount": 4200,
    "currency": "EUR",
    "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}],
    "note": "benchmark event",
}
TARGET_RATIO = 0.35
TARGET_P99_MS = 15.0

WRK_LUA = r"""
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  created = 0
  other = 0
end

function response(status, headers, body)
  if status == 201 then
    created = created + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local c, o = 0, 0
  for _, t in ipairs(threads) do
    c = c + t:get("created")
    o = o + t:get("other")
  end
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"created":%d,"other":%d,' ..
    '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, c, o,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""


# ---------------------------------------------------------------- wrk (peak)


def wrk_script(path: Path, *, token: str, bot_id: str, body: str) -> None:
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "x-bot-id": bot_id,
    }
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body)}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    path.write_text("\n".join(lines) + "\n" + WRK_LUA)


def run_wrk(
    wrk: str,
    url: str,
    script: Path,
    *,
    connections: int,
    threads: int,
    seconds: float,
    midway: Callable[[], None] | None = None,
) -> dict[str, int]:
    """wrk's summary; `midway` is called half-way through the run."""
    command = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        if midway is not None:
            time.sleep(seconds / 2)
            midway()
        stdout, stderr = process.communicate(timeout=seconds + 60)
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}):\n{stdout}\n{stderr}")
    for line in stdout.splitlines():
        if line.startswith("WRKJSON "):
            result: dict[str, int] = json.loads(line[len("WRKJSON ") :])
            return result
    raise RuntimeError(f"wrk printed no summary:\n{stdout}\n{stderr}")


# ---------------------------------------------------------------- open-loop client


@dataclass
class OpenLoopResult:
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # from the scheduled time, s
    service: list[float] = field(default_factory=list)  # from the actual send, s
    errors: Counter[str] = field(default_factory=Counter)
    reconnects: int = 0
    wall: float = 0.0
    client_cpu: float = 0.0


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one HTTP/1.1 response; (status, whether the server keeps the connection)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = None
    chunked = False
    keep = True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        value = value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value:
            chunked = True
        elif name == "connection" and value == "close":
            keep = False
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length is not None:
        await reader.readexactly(length)
    else:
        await reader.read()
        keep = False
    return status, keep


async def _open_loop(
    host: str,
    port: int,
    request: bytes,
    *,
    rate: float,
    seconds: float,
    connections: int,
    connected: Callable[[], None] | None = None,
) -> OpenLoopResult:
    loop = asyncio.get_running_loop()
    result = OpenLoopResult()
    queue: asyncio.Queue[float | None] = asyncio.Queue()

    async def connection_worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while True:
                scheduled = await queue.get()
                if scheduled is None:
                    return
                sent_at = loop.time()
                for attempt in (1, 2):
                    try:
                        writer.write(request)
                        status, keep = await _read_response(reader)
                        break
                    except (ConnectionError, asyncio.IncompleteReadError) as exc:
                        # A kept-alive connection the server closed while idle:
                        # nothing was read, so the request was not served; resend once.
                        writer.close()
                        reader, writer = await asyncio.open_connection(host, port)
                        result.reconnects += 1
                        if attempt == 2:
                            result.errors[type(exc).__name__] += 1
                            status, keep = -1, True
                done_at = loop.time()
                result.latencies.append(done_at - scheduled)
                result.service.append(done_at - sent_at)
                result.statuses[status] += 1
                if not keep:
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    result.reconnects += 1
        finally:
            writer.close()

    workers = [asyncio.create_task(connection_worker()) for _ in range(connections)]
    await asyncio.sleep(0.2)  # connections open before the clock starts
    if connected is not None:
        connected()
    total = int(rate * seconds)
    cpu_before = time.process_time()
    start = loop.time() + 0.05
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait(scheduled)
        result.sent += 1
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    result.wall = loop.time() - start
    result.client_cpu = time.process_time() - cpu_before
    return result


def open_loop(
    host: str,
    port: int,
    request: bytes,
    *,
    rate: float,
    seconds: float,
    connections: int,
    connected: Callable[[], None] | None = None,
) -> OpenLoopResult:
    """Send `rate` requests a second for `seconds` over `connections` keep-alive
    connections; `connected` is called once they are open."""
    return asyncio.run(
        _open_loop(
            host,
            port,
            request,
            rate=rate,
            seconds=seconds,
            connections=connections,
            connected=connected,
        )
    )


def http_request(*, port: int, token: str, bot_id: str, body: str) -> bytes:
    data = body.encode()
    head = (
        f"POST /v1/chat/events HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\n"
        f"x-bot-id: {bot_id}\r\n"
        f"Content-Length: {len(data)}\r\n"
        f"\r\n"
    )
    return head.encode() + data


# ---------------------------------------------------------------- raw inserts

INSERT_EVENT = """
INSERT INTO events_event
  (id, bot_id, type, payload, status, failure_reason, conversation_id, user_id,
   message_id, workflow_id, integration_id, due_at, next_attempt_at, lease,
   attempt_count, first_attempt_at, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, NULL, NULL, NULL, NULL, NULL, NULL, %s, %s, 0, 0, NULL, %s, %s)
"""


def raw_inserts(
    proj: benchlib.Project, *, bot_id: str, connections: int, seconds: float
) -> tuple[int, float]:
    """Rows inserted and the wall time: `connections` threads, one connection
    each, autocommit, one INSERT (one transaction) at a time."""
    counts = [0] * connections
    conns = [proj.connect(autocommit=True) for _ in range(connections)]
    barrier = threading.Barrier(connections + 1)
    stop_at = [0.0]

    def worker(index: int) -> None:
        conn = conns[index]
        with conn.cursor() as cursor:
            barrier.wait()
            n = 0
            while time.monotonic() < stop_at[0]:
                now = datetime.now(UTC)
                cursor.execute(
                    INSERT_EVENT,
                    (
                        f"evt_{ULID()}",
                        bot_id,
                        EVENT_TYPE,
                        Jsonb(EVENT_PAYLOAD),
                        "pending",
                        now,
                        now,
                        now,
                        now,
                    ),
                )
                n += 1
            counts[index] = n

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    stop_at[0] = started + seconds
    barrier.wait()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    for conn in conns:
        conn.close()
    return sum(counts), wall


def count_events(proj: benchlib.Project) -> int:
    with proj.connect(autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM events_event").fetchone()
        return int(row[0]) if row else 0


# ---------------------------------------------------------------- phases

BACKGROUND_LIMIT = 0.3  # cores used by other processes that spoil a phase


@dataclass
class Phase:
    result: Any
    cpu: benchlib.CpuUse
    stored: int  # events added to the table during the phase
    attempts: int


def measure(
    label: str,
    run: Callable[[], Any],
    *,
    count: Callable[[], int],
    groups: dict[str, list[int]] | None = None,
    attempts: int = 3,
    settle: float = 0.0,
) -> Phase:
    """Run a phase with CPU accounting; run it again (after waiting for a quiet
    machine) while other processes took more than BACKGROUND_LIMIT cores."""
    for attempt in range(1, attempts + 1):
        benchlib.wait_for_quiet()
        stored_before = count()
        before = benchlib.cpu_snapshot(groups)
        result = run()
        after = benchlib.cpu_snapshot(groups)
        time.sleep(settle)  # requests in flight when the client stopped
        phase = Phase(result, benchlib.cpu_use(before, after), count() - stored_before, attempt)
        if phase.cpu.other <= BACKGROUND_LIMIT or attempt == attempts:
            return phase
        benchlib.log(f"{label}: background load {phase.cpu.other:.2f} cores: measuring again")
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- main


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    parser.add_argument("--connections", type=int, default=16, help="HTTP and raw connections")
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=5, help="seconds")
    parser.add_argument("--duration", type=float, default=15, help="peak phase, seconds")
    parser.add_argument("--latency-duration", type=float, default=15, help="seconds")
    parser.add_argument("--raw-duration", type=float, default=10, help="seconds")
    parser.add_argument(
        "--low-rate", type=float, default=20, help="req/s of the low-load latency phase (5 s)"
    )
    parser.add_argument(
        "--worker-connections",
        type=int,
        default=0,
        help="gunicorn's cap of connections per worker; 0 (default): twice connections / "
        "workers, which keeps one worker from taking most keep-alive connections; 1000 is "
        "gunicorn's own default (and the Procfile's)",
    )
    parser.add_argument(
        "--worker-class",
        choices=["gthread", "sync"],
        default="gthread",
        help="gthread keeps connections alive; sync closes each after one response",
    )
    parser.add_argument("--db", default="bench_events")
    args = parser.parse_args()
    conns = args.connections
    worker_connections = args.worker_connections or 2 * -(-conns // args.workers)

    benchlib.exit_cleanly_on_sigterm()
    wrk = benchlib.ensure_wrk()
    print("== create event: full HTTP stack against raw psycopg inserts")
    benchlib.print_machine()
    body = json.dumps({"type": EVENT_TYPE, "payload": EVENT_PAYLOAD}, separators=(",", ":"))
    failures: list[str] = []

    with (
        benchlib.project(args.db) as proj,
        tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp,
    ):
        token = proj.demo["tokens"]["developer"]
        bot_id = proj.demo["botId"]
        script = Path(tmp) / "create_event.lua"
        wrk_script(script, token=token, bot_id=bot_id, body=body)
        stored_start = count_events(proj)

        def count() -> int:
            return count_events(proj)

        with benchlib.gunicorn(
            proj,
            workers=args.workers,
            threads=args.threads,
            worker_connections=worker_connections,
            worker_class=args.worker_class,
        ) as server:
            url = f"{server.base_url}/v1/chat/events"
            print(
                f"server: gunicorn {args.worker_class}, {server.workers} workers x "
                f"{server.threads} threads, "
                f"worker_connections {worker_connections}, no access log; "
                f"clients: {conns} keep-alive connections"
            )
            print(f"request: POST /v1/chat/events, body {len(body)} bytes: {body}")
            groups = {"gunicorn": server.pids()}
            spread: dict[str, list[int]] = {}

            def record_spread(label: str) -> Callable[[], None]:
                def record() -> None:
                    spread[label] = server.connections_by_worker()

                return record

            def load(seconds: float) -> Callable[[], dict[str, int]]:
                return lambda: run_wrk(
                    wrk,
                    url,
                    script,
                    connections=conns,
                    threads=args.wrk_threads,
                    seconds=seconds,
                    midway=record_spread("peak"),
                )

            benchlib.log(f"warm-up: wrk {args.warmup:.0f} s")
            warm = measure("warm-up", load(args.warmup), count=count, attempts=1, settle=1)
            benchlib.log(f"peak: wrk {args.duration:.0f} s")
            peak = measure("peak", load(args.duration), count=count, groups=groups, settle=1)
            peak_rps = peak.result["requests"] / (peak.result["duration_us"] / 1e6)

            request = http_request(port=server.port, token=token, bot_id=bot_id, body=body)
            benchlib.log(f"latency at low load: open loop, {args.low_rate:.0f} req/s, 5 s")
            low = measure(
                "low-load latency",
                lambda: open_loop(
                    "127.0.0.1",
                    server.port,
                    request,
                    rate=args.low_rate,
                    seconds=5,
                    connections=conns,
                    connected=record_spread("low load"),
                ),
                count=count,
                groups=groups,
            )

            rate = peak_rps / 2
            benchlib.log(f"latency: open loop, {rate:.0f} req/s, {args.latency_duration:.0f} s")
            half = measure(
                "half-peak latency",
                lambda: open_loop(
                    "127.0.0.1",
                    server.port,
                    request,
                    rate=rate,
                    seconds=args.latency_duration,
                    connections=conns,
                    connected=record_spread("half-peak"),
                ),
                count=count,
                groups=groups,
            )

        stored_http = count()
        benchlib.log(f"raw inserts: {conns} connections, {args.raw_duration:.0f} s")
        raw_warm = measure(
            "raw warm-up",
            lambda: raw_inserts(proj, bot_id=bot_id, connections=conns, seconds=2),
            count=count,
            attempts=1,
        )
        raw = measure(
            "raw inserts",
            lambda: raw_inserts(proj, bot_id=bot_id, connections=conns, seconds=args.raw_duration),
            count=count,
        )
        stored_end = count()

    # ------------------------------------------------------------ report
    w, pk = warm.result, peak.result
    latency: OpenLoopResult = half.result
    raw_rows, raw_wall = raw.result
    raw_rate = raw_rows / raw_wall
    lat = latency.latencies
    ok = latency.statuses.get(201, 0)
    print()
    print(f"warm-up (wrk {args.warmup:.0f} s): {w['requests']} requests, {w['created']} x 201")
    print(
        f"peak (wrk -t{args.wrk_threads} -c{conns}, {pk['duration_us'] / 1e6:.1f} s, "
        f"attempt {peak.attempts}): {pk['requests']} requests = {peak_rps:.0f} req/s, "
        f"{pk['created']} x 201, {pk['other']} other, socket errors connect/read/write/timeout "
        f"{pk['err_connect']}/{pk['err_read']}/{pk['err_write']}/{pk['err_timeout']}"
    )
    print(
        f"  closed-loop latency at peak (wrk, {conns} connections): "
        f"p50 {pk['p50_us'] / 1000:.2f} ms, p90 {pk['p90_us'] / 1000:.2f} ms, "
        f"p99 {pk['p99_us'] / 1000:.2f} ms, max {pk['max_us'] / 1000:.2f} ms"
    )
    print(peak.cpu.report("the peak phase", pk["requests"]))
    print(
        "client connections held by each gunicorn worker: "
        + "; ".join(f"{label} {counts}" for label, counts in spread.items())
    )
    print(
        f"half-peak latency (open loop, {rate:.0f} req/s scheduled, {conns} connections, "
        f"attempt {half.attempts}): sent {latency.sent} in {latency.wall:.1f} s = "
        f"{latency.sent / latency.wall:.0f} req/s, statuses {dict(latency.statuses)}, "
        f"reconnects {latency.reconnects}"
    )
    print(
        f"  from the scheduled send: p50 {ms(benchlib.percentile(lat, 50))}, "
        f"p90 {ms(benchlib.percentile(lat, 90))}, p99 {ms(benchlib.percentile(lat, 99))}, "
        f"p99.9 {ms(benchlib.percentile(lat, 99.9))}, max {ms(max(lat))}"
    )
    print(
        f"  service time (from the actual send): "
        f"p50 {ms(benchlib.percentile(latency.service, 50))}, "
        f"p99 {ms(benchlib.percentile(latency.service, 99))}"
    )
    print(half.cpu.report("the half-peak phase", latency.sent))
    quiet: OpenLoopResult = low.result
    print(
        f"low-load latency (open loop, {args.low_rate:.0f} req/s, 5 s): "
        f"p50 {ms(benchlib.percentile(quiet.latencies, 50))}, "
        f"p90 {ms(benchlib.percentile(quiet.latencies, 90))}, "
        f"p99 {ms(benchlib.percentile(quiet.latencies, 99))}, statuses {dict(quiet.statuses)}; "
        f"{low.cpu.cores['gunicorn'] * low.cpu.wall / max(quiet.sent, 1) * 1000:.2f} ms "
        f"gunicorn CPU per request"
    )
    print(
        f"raw inserts (psycopg, {conns} connections, autocommit, one INSERT per transaction, "
        f"attempt {raw.attempts}): {raw_rows} rows in {raw_wall:.1f} s = {raw_rate:.0f} rows/s"
    )
    print(raw.cpu.report("the raw phase", raw_rows, unit="row"))

    # ------------------------------------------------------------ correctness
    in_flight = peak.stored - pk["created"]
    print("events stored against 201 answers:")
    print(f"  before the load: {stored_start}")
    print(f"  warm-up: stored {warm.stored}, 201s {w['created']}")
    print(
        f"  peak: stored {peak.stored}, 201s {pk['created']} (difference {in_flight}: "
        f"requests in flight when wrk stopped, at most {conns})"
    )
    print(f"  low load: stored {low.stored}, 201s {quiet.statuses.get(201, 0)}")
    print(f"  half-peak: stored {half.stored}, 201s {ok}")
    print(f"  raw: stored {raw.stored}, inserted {raw_rows} (+{raw_warm.result[0]} warm-up)")
    print(f"  events in the table at the end: {stored_end}")
    if pk["other"] or pk["err_connect"] or pk["err_read"] or pk["err_timeout"]:
        failures.append("peak phase had non-201 answers or socket errors")
    if not 0 <= in_flight <= conns:
        failures.append(f"peak: {peak.stored} stored but {pk['created']} answered 201")
    if low.stored != quiet.statuses.get(201, 0) or quiet.statuses.get(201, 0) != quiet.sent:
        failures.append(f"low load: {low.stored} stored, {dict(quiet.statuses)} answered")
    if half.stored != ok:
        failures.append(f"half-peak: {half.stored} stored but {ok} answered 201")
    if ok != latency.sent:
        failures.append(f"half-peak: {latency.sent - ok} of {latency.sent} requests not 201")
    if raw.stored != raw_rows:
        failures.append("raw: rows stored differ from rows inserted")

    p50 = benchlib.percentile(lat, 50) * 1000
    p99 = benchlib.percentile(lat, 99) * 1000
    ratio = peak_rps / raw_rate
    print()
    print("RESULT create_event")
    print(f"  HTTP create event      {peak_rps:10.0f} req/s")
    print(f"  raw psycopg INSERT     {raw_rate:10.0f} rows/s")
    print(
        f"  ratio HTTP / raw       {ratio:10.1%}    target >= {TARGET_RATIO:.0%}: "
        f"{'met' if ratio >= TARGET_RATIO else 'MISSED'}"
    )
    print(f"  p50 at half peak       {p50:10.2f} ms  ({rate:.0f} req/s)")
    print(
        f"  p99 at half peak       {p99:10.2f} ms  target < {TARGET_P99_MS:.0f} ms: "
        f"{'met' if p99 < TARGET_P99_MS else 'MISSED'}"
    )
    print(
        f"  events stored by HTTP  {stored_http - stored_start:10d}    (all phases and attempts; "
        f"peak + half-peak: {peak.stored + half.stored} stored, {pk['created'] + ok} answered 201)"
    )
    noisy = [
        f"{name} {phase.cpu.other:.2f}"
        for name, phase in (("peak", peak), ("half-peak", half), ("raw", raw))
        if phase.cpu.other > BACKGROUND_LIMIT
    ]
    if noisy:
        print(f"  WARNING: background load (cores) during {', '.join(noisy)}: figures understated")
    if failures:
        print("CORRECTNESS CHECKS FAILED:")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print("  correctness: stored events match 201 answers (peak: plus requests in flight at stop)")
    return 0


if __name__ == "__main__":
    os.chdir(benchlib.ROOT)
    sys.exit(main())
