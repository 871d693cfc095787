"""Load generators: wrk with a Lua script that counts the answers and prints a
JSON summary, an open-loop client on raw sockets (latency from the scheduled
send time: no coordinated omission), and in-process WSGI calls."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from harness import machine
from harness.report import log


def ensure_wrk() -> str:
    """The path of wrk, installed from Debian's packages when missing."""
    found = shutil.which("wrk")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        raise SystemExit("wrk is not installed and apt-get is not available: install wrk")
    prefix: list[str] = []
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        if sudo is None:
            raise SystemExit("wrk is not installed: run `apt-get install wrk` as root")
        prefix = [sudo, "-n"]
    log("wrk not found: installing it with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*prefix, apt, "update", "-qq"], check=True, env=env)
    subprocess.run([*prefix, apt, "install", "-y", "-qq", "wrk"], check=True, env=env)
    found = shutil.which("wrk")
    if found is None:
        raise SystemExit("apt-get installed wrk but it is not on PATH")
    return found


def start_wrk_bench(title: str) -> str:
    """A wrk benchmark's start: Ctrl-C and SIGTERM clean up, wrk installed,
    the title and the machine printed; wrk's path."""
    machine.exit_cleanly_on_sigterm()
    wrk = ensure_wrk()
    machine.start(title)
    return wrk


# ---------------------------------------------------------------- wrk (closed loop)

# Counts the 201s (`created`) and every other answer, and prints wrk's summary
# as one WRKJSON line that `run_wrk` reads.
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


# One script for every phase: a `request` function builds each request, with
# an Idempotency-Key when KEY_PREFIX is a string. It counts the 201s, the
# 429s, every non-201 answer and the answers with a RateLimit header.
LIMIT_LUA = """
local key_prefix = KEY_PREFIX
local threads = {}
local names = {"created", "limited", "other", "headed"}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  created, limited, other, headed, sent = 0, 0, 0, 0, 0
end

function request()
  if key_prefix then
    sent = sent + 1
    wrk.headers["Idempotency-Key"] = key_prefix .. tid .. "-" .. sent
  end
  return wrk.format()
end

function response(status, headers, body)
  created = created + (status == 201 and 1 or 0)
  limited = limited + (status == 429 and 1 or 0)
  other = other + (status ~= 201 and 1 or 0)
  for name, _ in pairs(headers) do
    if string.lower(name) == "ratelimit" then
      headed = headed + 1
      break
    end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write("WRKJSON {")
  io.write(string.format('"requests":%d,"duration_us":%d,', summary.requests, summary.duration))
  for _, name in ipairs(names) do
    local total = 0
    for _, thread in ipairs(threads) do total = total + thread:get(name) end
    io.write(string.format('"%s":%d,', name, total))
  end
  io.write(string.format('"err_connect":%d,"err_read":%d,"err_write":%d,"err_timeout":%d,',
    e.connect, e.read, e.write, e.timeout))
  io.write(string.format('"p50_us":%d,"p99_us":%d}\\n',
    latency:percentile(50), latency:percentile(99)))
end
"""

SOCKET_ERRORS = ("err_connect", "err_read", "err_write", "err_timeout")


def post_script(path: Path, *, headers: dict[str, str], body: str, lua: str = WRK_LUA) -> Path:
    """A wrk script that POSTs `body` with `headers`, then `lua` (the counting part)."""
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body)}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    path.write_text("\n".join(lines) + "\n" + lua)
    return path


def limit_script(
    path: Path, *, headers: dict[str, str], body: str, key_prefix: str | None = None
) -> Path:
    """A wrk script of POSTs counted by LIMIT_LUA, each with an Idempotency-Key
    of `key_prefix`, the thread and a counter when `key_prefix` is given."""
    prefix = "nil" if key_prefix is None else json.dumps(key_prefix)
    lua = LIMIT_LUA.replace("KEY_PREFIX", prefix, 1)
    return post_script(path, headers=headers, body=body, lua=lua)


def get_script(path: Path, *, headers: dict[str, str]) -> Path:
    """A wrk script of GET requests with `headers`; 200 counts as success."""
    lines = ['wrk.method = "GET"']
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    path.write_text("\n".join(lines) + "\n" + WRK_LUA.replace("== 201", "== 200"))
    return path


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


def run_wrks(
    wrk: str,
    url: str,
    script: Path,
    *,
    processes: int,
    connections: int,
    seconds: float,
    midway: Callable[[], None] | None = None,
) -> list[dict[str, int]]:
    """`processes` wrk processes at once (one thread and `connections` each):
    their summaries; `midway` is called half-way through the first one."""

    def one(index: int) -> dict[str, int]:
        return run_wrk(
            wrk,
            url,
            script,
            connections=connections,
            threads=1,
            seconds=seconds,
            midway=midway if index == 0 else None,
        )

    with ThreadPoolExecutor(processes) as pool:
        return list(pool.map(one, range(processes)))


def wrk_rate(summary: dict[str, int]) -> float:
    """Requests a second of a wrk run."""
    return summary["requests"] / (summary["duration_us"] / 1e6)


def wrk_failed(summary: dict[str, int], errors: tuple[str, ...] = SOCKET_ERRORS) -> bool:
    """Any answer not counted as success, or any socket error of `errors`."""
    return bool(summary["other"] or any(summary[e] for e in errors))


def wrk_latency(summary: dict[str, int]) -> str:
    """wrk's closed-loop latency percentiles, ms."""
    return (
        f"p50 {summary['p50_us'] / 1000:.2f} ms, p90 {summary['p90_us'] / 1000:.2f} ms, "
        f"p99 {summary['p99_us'] / 1000:.2f} ms, max {summary['max_us'] / 1000:.2f} ms"
    )


T = TypeVar("T")
K = TypeVar("K")


@dataclass
class Counted(Generic[T]):
    """A load run with the CPU it used and the rows counted before and after."""

    result: T
    cpu: machine.CpuUse
    before: dict[str, int]
    after: dict[str, int]
    background: float  # cores busy outside the benchmark before it

    @property
    def stored(self) -> dict[str, int]:
        return {name: self.after[name] - self.before[name] for name in self.after}


def counted(
    run: Callable[[], T],
    *,
    count: Callable[[], dict[str, int]],
    groups: dict[str, list[int]],
    quiet_wait: float,
    pause: float = 1.0,
) -> Counted[T]:
    """`run` after a quiet machine (and `pause` s for the warm-up's last
    requests), with CPU accounting, and `count()` before and after it (1 s
    after: the requests in flight when the client stopped are stored)."""
    background = machine.wait_for_quiet(quiet_wait)
    time.sleep(pause)
    before = count()
    meter = machine.CpuMeter(groups)
    result = run()
    cpu = meter.stop()
    time.sleep(1)
    return Counted(result, cpu, before, count(), background)


def warm_then_counted(
    wrk: str,
    url: str,
    script: Callable[[str], Path],
    *,
    label: str,
    connections: int,
    warmup: float,
    seconds: float,
    count: Callable[[], dict[str, int]],
    groups: dict[str, list[int]],
    quiet_wait: float,
) -> Counted[dict[str, int]]:
    """wrk for `warmup` s with `script("warm")`, then `counted` wrk for
    `seconds` with `script("load")`."""
    log(f"{label}: warm-up {warmup:g} s")
    run_wrk(wrk, url, script("warm"), connections=connections, threads=1, seconds=warmup)

    def measured() -> dict[str, int]:
        log(f"{label}: wrk -c{connections} {seconds:g} s")
        return run_wrk(
            wrk, url, script("load"), connections=connections, threads=1, seconds=seconds
        )

    return counted(measured, count=count, groups=groups, quiet_wait=quiet_wait)


# ---------------------------------------------------------------- open-loop client


async def on_schedule(start: float, rate: float, count: int) -> AsyncIterator[tuple[int, float]]:
    """`count` moments `1 / rate` s apart from `start` (the loop's clock),
    each yielded with its number once it has come: an open-loop client sends
    on this schedule whatever the answers' pace."""
    loop = asyncio.get_running_loop()
    for i in range(count):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i, scheduled


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
    cpu_before = time.process_time()
    start = loop.time() + 0.05
    async for _, scheduled in on_schedule(start, rate, int(rate * seconds)):
        queue.put_nowait(scheduled)
        result.sent += 1
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    result.wall = loop.time() - start
    result.client_cpu = time.process_time() - cpu_before
    return result


def open_loop(host: str, port: int, request: bytes, **options: Any) -> OpenLoopResult:
    """Send `rate` requests a second for `seconds` over `connections` keep-alive
    connections; `connected` is called once they are open (see `_open_loop`)."""
    return asyncio.run(_open_loop(host, port, request, **options))


async def loop_lag(samples: list[float], stop: asyncio.Event) -> None:
    """How late this client's event loop wakes up: its own share of the latencies."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(0.01)
        samples.append(loop.time() - before - 0.01)


# ---------------------------------------------------------------- one client


class KeepAliveClient:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.port = port
        self.headers = headers
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path: str) -> tuple[int, bytes]:
        for attempt in (1, 2):
            try:
                self.conn.request("GET", path, headers=self.headers)
                answer = self.conn.getresponse()
                return answer.status, answer.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def page(self, path: str) -> dict[str, Any]:
        """GET `path`'s JSON, which must answer 200."""
        status, body = self.get(path)
        if status != 200:
            raise RuntimeError(f"GET {path} -> {status}: {body[:300]!r}")
        result: dict[str, Any] = json.loads(body)
        return result


def http_getter(client: KeepAliveClient, target: str) -> Callable[[], None]:
    """A GET of `target` through `client` that must answer 200."""

    def run() -> None:
        status, body = client.get(target)
        if status != 200:
            raise RuntimeError(f"GET {target} -> {status}: {body[:200]!r}")

    return run


# ---------------------------------------------------------------- timing


def interleaved(
    samples: int, first: Callable[[], Any], second: Callable[[], Any]
) -> tuple[list[float], list[float]]:
    """`samples` timings of each, interleaved, alternating which one goes first."""
    a: list[float] = []
    b: list[float] = []
    for i in range(samples):
        order = [(first, a), (second, b)] if i % 2 == 0 else [(second, b), (first, a)]
        for call, out in order:
            started = time.perf_counter()
            call()
            out.append(time.perf_counter() - started)
    return a, b


def rotated_rounds(repeats: int, phases: list[Callable[[int], None]]) -> None:
    """`repeats` rounds of `phases` (each given the round's number), the order
    rotated each round so a drift of the host's speed does not always favour
    the same phase."""
    for number in range(repeats):
        shift = number % len(phases)
        for phase in phases[shift:] + phases[:shift]:
            phase(number)


@contextlib.contextmanager
def stopwatches(targets: Sequence[tuple[Any, str, str]]) -> Iterator[dict[str, list[float]]]:
    """While inside, each function `module.name` is wrapped to record the wall
    time of each of its calls in the answered dict under `label`; put back on
    the way out. Patch a function in the module that looks it up when the
    code timed runs (where it is called from, not where it is defined)."""
    spent: dict[str, list[float]] = {label: [] for _, _, label in targets}
    originals = []
    for module, name, label in targets:
        original = getattr(module, name)
        originals.append((module, name, original))

        def timed(*args: Any, _original: Any = original, _label: str = label, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label].append(time.perf_counter() - started)

        setattr(module, name, timed)
    try:
        yield spent
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def timed_rounds(
    calls: dict[K, Callable[[], Any]],
    samples: int,
    *,
    quiet_wait: float,
    groups: dict[str, list[int]] | None = None,
) -> tuple[dict[K, list[float]], machine.CpuUse]:
    """20 untimed rounds of every call, a quiet machine, then `samples` timed
    rounds, the order rotated each round; with the CPU of `groups`."""
    order = list(calls.items())
    times: dict[K, list[float]] = {key: [] for key in calls}
    for _ in range(20):
        for _key, call in order:
            call()
    machine.wait_for_quiet(max_wait=quiet_wait)
    log(f"timing {samples} rounds of {len(order)} calls")
    meter = machine.CpuMeter(groups)
    for round_number in range(samples):
        shift = round_number % len(order)
        for key, call in order[shift:] + order[:shift]:
            started = time.perf_counter()
            call()
            times[key].append(time.perf_counter() - started)
    return times, meter.stop()


def warm_interleaved(
    samples: int, first: Callable[[], Any], second: Callable[[], Any]
) -> tuple[list[float], list[float]]:
    """`interleaved` after 20 untimed rounds (caches, connections, JIT-less warm-up)."""
    interleaved(20, first, second)
    return interleaved(samples, first, second)


# ---------------------------------------------------------------- in-process WSGI


def wsgi_call(
    app: Any,
    method: str,
    path: str,
    *,
    query: str = "",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """Call a WSGI application in this process, as a gunicorn worker does
    (minus the socket and the HTTP parsing); (status, response body)."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if body:
        environ["CONTENT_TYPE"] = "application/json"
        environ["CONTENT_LENGTH"] = str(len(body))
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    status: list[str] = []

    def start_response(line: str, response_headers: Any, *exc_info: Any) -> Any:
        status.append(line)

    result = app(environ, start_response)
    try:
        content = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return int(status[0].split()[0]), content


def wsgi_getter(app: Any, target: str, headers: dict[str, str]) -> Callable[[], bytes]:
    """A GET of `target` (path?query) through `app` in this process that
    must answer 200; the body."""
    path, _, query = target.partition("?")

    def run() -> bytes:
        status, body = wsgi_call(app, "GET", path, query=query, headers=headers)
        if status != 200:
            raise RuntimeError(f"in-process GET {target} -> {status}: {body[:200]!r}")
        return body

    return run


# ---------------------------------------------------------------- SQL statements

Statement = tuple[str, Any]  # SQL text and its parameters, as Django hands them to psycopg


def django_statements(call: Callable[[], Any]) -> list[Statement]:
    """The statements Django's connection sends while `call` runs in this
    process (SQL with its parameters, before psycopg binds them)."""
    from django.db import connection

    captured: list[Statement] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    return captured


def sql_call(conn: Any, statement: Statement, rows: int) -> Callable[[], None]:
    """`statement` run through the psycopg connection `conn`; it must answer `rows` rows."""
    sql, params = statement

    def run() -> None:
        if len(conn.execute(sql, params).fetchall()) != rows:
            raise RuntimeError(f"the passages query did not answer {rows} rows")

    return run


def sql_calls(conn: Any, statements: list[Statement]) -> Callable[[], None]:
    """`statements` run in a row through the psycopg connection `conn`."""

    def run() -> None:
        for sql, params in statements:
            cursor = conn.execute(sql, params)
            if cursor.description is not None:
                cursor.fetchall()

    return run
