"""Shared plumbing of the benchmarks: a throwaway PostgreSQL database, the
project's own migrate/seed commands, a gunicorn server on a free loopback port,
machine facts, percentiles and CPU accounting from /proc.

Nothing here asserts on time: the scripts print figures and ratios measured in
the same run. Every resource made here is undone by the context managers, even
when a step fails or the run is interrupted (SIGINT, SIGTERM).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG_HOST = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("BENCH_PG_PORT", "5432"))
PG_USER = os.environ.get("BENCH_PG_USER", "postgres")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def exit_cleanly_on_sigterm() -> None:
    """SIGTERM and SIGHUP unwind the stack like Ctrl-C, so every `finally` runs."""
    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)


# ---------------------------------------------------------------- tools


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


# ---------------------------------------------------------------- machine


def machine_facts() -> dict[str, str]:
    facts = {
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                kib = int(line.split()[1])
                facts["memory"] = f"{kib / 1024 / 1024:.1f} GiB"
                break
    with contextlib.suppress(Exception), admin_connection() as conn:
        row = conn.execute("SHOW server_version").fetchone()
        facts["postgresql"] = str(row[0]) if row else "?"
        for name in ("shared_buffers", "synchronous_commit", "fsync", "max_connections"):
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            facts[f"pg.{name}"] = str(row[0]) if row else "?"
    with contextlib.suppress(Exception):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        facts["commit"] = commit + (" (with uncommitted changes)" if changed else "")
    with contextlib.suppress(Exception):
        out = subprocess.run(
            [
                PYTHON,
                "-c",
                "import django, rest_framework, gunicorn, psycopg; print("
                "django.__version__, rest_framework.__version__, gunicorn.__version__, "
                "psycopg.__version__)",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        facts["django/drf/gunicorn/psycopg"] = "/".join(out)
    return facts


def print_machine() -> None:
    print("machine:")
    for key, value in machine_facts().items():
        print(f"  {key:28s} {value}")


def machine_busy_cores(seconds: float = 2.0) -> float:
    """Cores busy or waiting for the disk on average over `seconds` (all
    processes): disk writeback (a dropped database, a checkpoint) slows every
    commit's fsync as surely as a busy core slows the server."""
    busy, iowait = _machine_cpu()
    time.sleep(seconds)
    busy_after, iowait_after = _machine_cpu()
    return (busy_after - busy + iowait_after - iowait) / seconds


def wait_for_quiet(max_wait: float = 300.0, threshold: float = 0.25) -> float:
    """Wait (up to `max_wait` s) until other processes leave the cores idle,
    so that the figures measure the service, not someone's test suite running
    beside it. Returns the background load seen last (cores); prints a warning
    when the machine never went quiet."""
    deadline = time.monotonic() + max_wait
    busy = machine_busy_cores()
    while busy > threshold and time.monotonic() < deadline:
        log(f"machine busy ({busy:.2f} cores busy or in iowait): waiting for quiet")
        busy = machine_busy_cores(5.0)
    if busy > threshold:
        print(f"WARNING: background load {busy:.2f} cores: figures are understated")
    return busy


# ---------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# ---------------------------------------------------------------- database


def admin_dsn(dbname: str = "postgres") -> str:
    return f"host={PG_HOST} port={PG_PORT} user={PG_USER} dbname={dbname}"


def database_url(dbname: str) -> str:
    return f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{dbname}"


@contextlib.contextmanager
def admin_connection(dbname: str = "postgres") -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(admin_dsn(dbname), autocommit=True) as conn:
        yield conn


def _drop_database(name: str) -> None:
    with admin_connection() as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@dataclass
class Project:
    """A migrated, seeded project on its own database and data folder."""

    dbname: str
    data_dir: Path
    env: dict[str, str]
    demo: dict[str, Any] = field(default_factory=dict)

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            raise RuntimeError(f"manage.py {' '.join(args)} failed ({done.returncode})")
        return done.stdout

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(admin_dsn(self.dbname), **kwargs)


@contextlib.contextmanager
def project(dbname: str, *, redis_url: str = REDIS_URL) -> Iterator[Project]:
    """Create database `dbname` (bench_*), migrate it, seed a demo workspace;
    drop the database and the data folder afterwards, whatever happened.
    `redis_url` is the broker of every process of the project."""
    if not dbname.startswith("bench_"):
        raise ValueError("benchmark databases are named bench_*")
    data_dir = Path(tempfile.mkdtemp(prefix=f"{dbname}-"))
    env = {
        **os.environ,
        "DATABASE_URL": database_url(dbname),
        "CELERY_BROKER_URL": redis_url,
        "DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "platform_site.settings",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "false",
    }
    env.pop("SECRET_KEY", None)  # generated into DATA_DIR, shared by every process here
    _drop_database(dbname)
    with admin_connection() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        proj = Project(dbname=dbname, data_dir=data_dir, env=env)
        log(f"database {dbname}: migrate")
        proj.manage("migrate", "--no-input", "-v", "0")
        log(f"database {dbname}: seed_demo")
        out = proj.manage("seed_demo", "--json")
        proj.demo = json.loads(out.strip().splitlines()[-1])
        yield proj
    finally:
        log(f"dropping database {dbname}")
        try:
            _drop_database(dbname)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)


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


# ---------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    workers: int
    threads: int
    worker_connections: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pids(self) -> list[int]:
        """The master and its workers."""
        return [self.process.pid, *children_of(self.process.pid)]

    def connections_by_worker(self) -> list[int]:
        """Established client connections each worker holds now, most first."""
        inodes: set[str] = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError):
                for line in Path(table).read_text().splitlines()[1:]:
                    cols = line.split()
                    if cols[3] == "01" and int(cols[1].rsplit(":", 1)[1], 16) == self.port:
                        inodes.add(cols[9])
        counts = []
        for pid in children_of(self.process.pid):
            held = 0
            with contextlib.suppress(OSError):
                for fd in (Path("/proc") / str(pid) / "fd").iterdir():
                    with contextlib.suppress(OSError):
                        target = os.readlink(fd)
                        if target.startswith("socket:[") and target[8:-1] in inodes:
                            held += 1
            counts.append(held)
        return sorted(counts, reverse=True)


@contextlib.contextmanager
def gunicorn(
    proj: Project,
    *,
    workers: int,
    threads: int,
    worker_connections: int = 1000,
    worker_class: str = "gthread",
) -> Iterator[Server]:
    """gunicorn serving platform_site.wsgi on a free loopback port (gthread
    workers: keep-alive connections), stopped afterwards whatever happened.

    A gthread worker keeps every connection it accepts, and accepts while it
    holds fewer than `worker_connections` (gunicorn's default: 1000): a burst
    of keep-alive connections can pile onto one worker, which the GIL holds to
    one core. A benchmark with N client connections passes a small multiple
    of N / workers to spread them. (A worker at its cap closes a connection
    once `worker_connections - threads` of its connections are idle, and
    accepts again only on its next loop turn, so a cap too tight costs
    reconnects and delays.)"""
    port = free_port()
    log_path = proj.data_dir / "gunicorn.log"
    command = [
        str(Path(PYTHON).parent / "gunicorn"),
        "platform_site.wsgi",
        "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers),
        "--worker-class", worker_class,
        "--threads", str(threads),
        "--keep-alive", "5",
        "--worker-connections", str(worker_connections),
        "--log-level", "warning",
    ]  # fmt: skip
    log(
        f"gunicorn: {workers} {worker_class} workers x {threads} threads, worker_connections "
        f"{worker_connections}, port {port}"
    )
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=proj.env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process, port, workers, threads, worker_connections, log_path)
    try:
        _wait_ready(server)
        yield server
    finally:
        stop_process(process)
        tail = log_path.read_text(errors="replace").strip().splitlines()[-20:]
        errors = [line for line in tail if "Error" in line or "Traceback" in line]
        if errors:
            log("gunicorn log (last lines):\n" + "\n".join(tail))


def _wait_ready(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    workers_seen = 0
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"gunicorn exited ({server.process.returncode}):\n"
                + server.log_path.read_text(errors="replace")
            )
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(f"{server.base_url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    workers_seen = len(children_of(server.process.pid))
                    if workers_seen >= server.workers:
                        return
        time.sleep(0.2)
    raise RuntimeError(f"gunicorn not ready after {timeout}s ({workers_seen} workers)")


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM the process we started (gunicorn's master stops its own workers),
    SIGKILL its process group if it does not go."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


# ---------------------------------------------------------------- CPU accounting


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                found.append(int(entry.name))
    return found


_TICK = os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> tuple[str, float]:
    """(command name, user+system CPU seconds) of one process."""
    stat = (Path("/proc") / str(pid) / "stat").read_text()
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat.rsplit(")", 1)[1].split()
    return name, (int(fields[11]) + int(fields[12])) / _TICK


def _machine_cpu() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of the whole machine (all cores), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    iowait = values[4] if len(values) > 4 else 0
    return (sum(values[:8]) - values[3] - iowait) / _TICK, iowait / _TICK


def _total_cpu() -> float:
    """Busy CPU seconds of the whole machine (all cores)."""
    return _machine_cpu()[0]


@dataclass
class CpuSnapshot:
    at: float
    machine_busy: float
    machine_iowait: float
    by_group: dict[str, float]


def _client_cpu() -> float:
    """CPU seconds of this process and of its children that have ended (wrk)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def cpu_snapshot(groups: dict[str, list[int]] | None = None) -> CpuSnapshot:
    """CPU seconds so far of each named group of pids, plus `postgres` (every
    process named postgres), `client` (this process and its ended children:
    the load generator) and the machine's busy total."""
    by_group: dict[str, float] = {}
    for group, pids in (groups or {}).items():
        total = 0.0
        for pid in pids:
            with contextlib.suppress(OSError):
                total += _process_cpu(pid)[1]
        by_group[group] = total
    postgres = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                name, seconds = _process_cpu(int(entry.name))
                if name == "postgres":
                    postgres += seconds
    by_group["postgres"] = postgres
    by_group["client"] = _client_cpu()
    busy, iowait = _machine_cpu()
    return CpuSnapshot(time.monotonic(), busy, iowait, by_group)


@dataclass
class CpuUse:
    """Cores used on average during a phase, by group; `other` is everything
    outside the benchmark (background load: it understates the figures)."""

    wall: float
    cores: dict[str, float]
    other: float
    busy: float
    iowait: float

    def report(self, label: str, requests: int = 0, unit: str = "request") -> str:
        lines = [f"CPU during {label} ({self.wall:.1f} s, {os.cpu_count()} cores):"]
        for group, cores in self.cores.items():
            per = f"  {cores * self.wall / requests * 1000:6.3f} ms CPU/{unit}" if requests else ""
            lines.append(f"  {group:12s} {cores:5.2f} cores{per}")
        lines.append(f"  {'other':12s} {self.other:5.2f} cores  (background, not the benchmark)")
        lines.append(f"  {'machine busy':12s} {self.busy:5.2f} cores")
        lines.append(f"  {'iowait':12s} {self.iowait:5.2f} cores  (idle, waiting for the disk)")
        return "\n".join(lines)


def cpu_use(before: CpuSnapshot, after: CpuSnapshot) -> CpuUse:
    wall = after.at - before.at
    cores = {
        group: (after.by_group[group] - before.by_group.get(group, 0.0)) / wall
        for group in after.by_group
    }
    busy = (after.machine_busy - before.machine_busy) / wall
    iowait = (after.machine_iowait - before.machine_iowait) / wall
    return CpuUse(wall, cores, max(busy - sum(cores.values()), 0.0), busy, iowait)


# ---------------------------------------------------------------- ASGI server


@dataclass
class AsgiServer:
    """uvicorn serving platform_site.asgi: one process, or a supervisor and
    `workers` worker processes."""

    process: subprocess.Popen[bytes]
    port: int
    workers: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_pids(self) -> list[int]:
        """The processes that serve requests: the process itself, or the
        workers its supervisor spawned (not multiprocessing's resource tracker)."""
        if self.workers == 1:
            return [self.process.pid]
        return [pid for pid in children_of(self.process.pid) if "spawn_main" in _cmdline(pid)]

    def pids(self) -> list[int]:
        """Every process of the server (the supervisor too)."""
        return [self.process.pid, *children_of(self.process.pid)]

    def connections_by_worker(self) -> list[int]:
        """Established client connections each worker holds now, in worker order."""
        return [_sockets_on_port(pid, self.port) for pid in self.worker_pids()]


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def _sockets_on_port(pid: int, port: int) -> int:
    """Established TCP connections to local `port` whose socket `pid` holds."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "01" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    held = 0
    with contextlib.suppress(OSError):
        for fd in (Path("/proc") / str(pid) / "fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    held += 1
    return held


def resident_kib(pid: int) -> int:
    """Resident memory (VmRSS) of one process, KiB; 0 once it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def uvicorn(
    proj: Project,
    *,
    workers: int = 1,
    access_log: bool = False,
    env: dict[str, str] | None = None,
    app: tuple[str, ...] = ("platform_site.asgi:application",),
    cwd: Path | str = ROOT,
) -> Iterator[AsgiServer]:
    """uvicorn serving platform_site.asgi:application on a free loopback port
    with the Procfile's options (`--lifespan off --timeout-graceful-shutdown
    5`), stopped afterwards whatever happened. `workers` > 1 runs uvicorn's
    supervisor with that many worker processes sharing the socket. `env` is
    added to the project's environment. Without an access log by default, like
    `gunicorn(...)`. `app` names another application (with uvicorn's options
    for it, e.g. --factory)."""
    port = free_port()
    log_path = proj.data_dir / f"uvicorn-{port}.log"
    command = [
        str(Path(PYTHON).parent / "uvicorn"),
        *app,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--lifespan", "off",
        "--timeout-graceful-shutdown", "5",
        # info: each worker logs "Started server process", which tells it is up.
        "--log-level", "info",
    ]  # fmt: skip
    if workers > 1:
        command += ["--workers", str(workers)]
    if not access_log:
        command.append("--no-access-log")
    access = "on" if access_log else "off"
    log(f"uvicorn: {workers} worker process(es), access log {access}, port {port}")
    with _asgi_server(
        command, port=port, workers=workers, env={**proj.env, **(env or {})}, cwd=cwd,
        log_path=log_path,
    ) as server:  # fmt: skip
        yield server


@contextlib.contextmanager
def procfile_web(
    proj: Project, *, workers: int, env: dict[str, str] | None = None
) -> Iterator[AsgiServer]:
    """The web process exactly as `make run` starts it: platform_site/Procfile's
    `web:` line, on a free port. `workers` is how many serving processes it
    is expected to start (platform_site.serve chooses)."""
    port = free_port()
    log_path = proj.data_dir / f"web-{port}.log"
    line = next(
        text.split(":", 1)[1].strip()
        for text in (ROOT / "platform_site" / "Procfile").read_text().splitlines()
        if text.startswith("web:")
    )
    log(f"Procfile web: {line} (PORT={port})")
    with _asgi_server(
        ["sh", "-c", f"exec {line}"], port=port, workers=workers,
        env={**proj.env, **(env or {}), "PORT": str(port)}, cwd=ROOT, log_path=log_path,
    ) as server:  # fmt: skip
        yield server


@contextlib.contextmanager
def _asgi_server(
    command: list[str],
    *,
    port: int,
    workers: int,
    env: dict[str, str],
    cwd: Path | str,
    log_path: Path,
) -> Iterator[AsgiServer]:
    """`command` started in a session of its own, logging to `log_path`,
    until `workers` processes serve; stopped afterwards whatever happened,
    its log's last lines shown when they hold an error."""
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = AsgiServer(process, port, workers, log_path)
    try:
        _wait_asgi_ready(server)
        yield server
    finally:
        stop_process(process)
        tail = log_path.read_text(errors="replace").strip().splitlines()[-30:]
        errors = [line for line in tail if "Error" in line or "Traceback" in line]
        if errors:
            log("server log (last lines):\n" + "\n".join(tail))


def _wait_asgi_ready(server: AsgiServer, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    started = 0
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"uvicorn exited ({server.process.returncode}):\n"
                + server.log_path.read_text(errors="replace")
            )
        # Each serving process logs it (a supervisor logs "Started parent process").
        started = server.log_path.read_text(errors="replace").count("Started server process")
        if started >= server.workers:
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(f"{server.base_url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
        time.sleep(0.2)
    raise RuntimeError(f"uvicorn not ready after {timeout}s ({started} processes started)")
