"""The machine a benchmark runs on: its facts, waiting until other processes
leave the cores idle, and the CPU each group of processes used during a
phase (from /proc)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import resource
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Generic, TypeVar

from psycopg import sql

from harness.project import PYTHON, ROOT, admin_connection
from harness.report import log

# Cores used by other processes during a phase above which its figures are
# spoilt: the phase is measured again (see `measure`) or flagged in the report.
BACKGROUND_LIMIT = 0.3
_TICK = os.sysconf("SC_CLK_TCK")


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def exit_cleanly_on_sigterm() -> None:
    """SIGTERM and SIGHUP unwind the stack like Ctrl-C, so every `finally` runs."""
    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)


# ---------------------------------------------------------------- facts


def _first_line_value(path: str, prefix: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    return None


def _command_output(command: list[str]) -> str:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def machine_facts() -> dict[str, str]:
    facts = {
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }
    cpu = _first_line_value("/proc/cpuinfo", "model name")
    if cpu is not None:
        facts["cpu"] = cpu
    memory = _first_line_value("/proc/meminfo", "MemTotal")
    if memory is not None:
        facts["memory"] = f"{int(memory.split()[0]) / 1024 / 1024:.1f} GiB"
    with contextlib.suppress(Exception), admin_connection() as conn:
        row = conn.execute("SHOW server_version").fetchone()
        facts["postgresql"] = str(row[0]) if row else "?"
        for name in ("shared_buffers", "synchronous_commit", "fsync", "max_connections"):
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            facts[f"pg.{name}"] = str(row[0]) if row else "?"
    with contextlib.suppress(Exception):
        commit = _command_output(["git", "rev-parse", "--short", "HEAD"])
        changed = _command_output(["git", "status", "--porcelain", "--untracked-files=no"])
        facts["commit"] = commit + (" (with uncommitted changes)" if changed else "")
    with contextlib.suppress(Exception):
        versions = _command_output(
            [
                PYTHON,
                "-c",
                "import django, rest_framework, gunicorn, psycopg; print("
                "django.__version__, rest_framework.__version__, gunicorn.__version__, "
                "psycopg.__version__)",
            ]
        ).split()
        facts["django/drf/gunicorn/psycopg"] = "/".join(versions)
    return facts


def print_machine() -> None:
    print("machine:")
    for key, value in machine_facts().items():
        print(f"  {key:28s} {value}")


def start(title: str | None = None) -> None:
    """A benchmark's start: Ctrl-C and SIGTERM clean up; its title (if any)
    and the machine printed."""
    exit_cleanly_on_sigterm()
    if title is not None:
        print(title)
    print_machine()


def cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0))


# ---------------------------------------------------------------- quiet machine


def _machine_cpu() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of the whole machine (all cores), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in fields]
    iowait = values[4] if len(values) > 4 else 0
    return (sum(values[:8]) - values[3] - iowait) / _TICK, iowait / _TICK


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


# ---------------------------------------------------------------- processes


class QuietLog:
    """`wait_for_quiet` before each phase, remembering the background load it
    saw each time (cores), to print beside the figures."""

    def __init__(self, max_wait: float) -> None:
        self.max_wait = max_wait
        self.seen: list[float] = []

    def wait(self) -> None:
        self.seen.append(wait_for_quiet(max_wait=self.max_wait))


def _proc_entries() -> list[Path]:
    return [entry for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def children_of(pid: int) -> list[int]:
    found = []
    for entry in _proc_entries():
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    found = [pid]
    for child in children_of(pid):
        found += tree(child)
    return found


# What each of the Procfile's processes runs, as its command line says.
_ROLES = (
    ("web", "platform_site.serve"),
    ("worker", " worker"),
    ("beat", " beat"),
    ("demo bot", "echo_bot"),
)


def platform_groups(runner: int) -> dict[str, list[int]]:
    """The processes under `runner` (make run's procfile_runner, or honcho)
    by role: web, worker, beat, demo bot, and the runner itself (with its
    shells, if any): CPU by process, so the next bottleneck shows."""
    groups: dict[str, list[int]] = {role: [] for role, _ in _ROLES}
    groups["runner"] = []

    def walk(pid: int, role: str) -> None:
        line = cmdline(pid)
        for name, marker in _ROLES:
            if marker in line:
                role = name
                break
        groups[role].append(pid)
        for child in children_of(pid):
            walk(child, role)

    # The runner's own command line names the processes it starts.
    groups["runner"].append(runner)
    for child in children_of(runner):
        walk(child, "runner")
    return groups


def pids_named(name: str) -> list[int]:
    found = []
    for entry in _proc_entries():
        with contextlib.suppress(OSError):
            if (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
    return found


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def resident_kib(pid: int) -> int:
    """Resident memory (VmRSS) of one process, KiB; 0 once it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its descendants, MB."""
    return sum(resident_kib(member) for member in tree(pid)) / 1024


def raise_file_limit(needed: int) -> None:
    """Many sockets on both ends (the client here and a server, a child, which
    inherits the limit) need more open files than the default soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < needed:
            raise SystemExit(f"open files limited to {hard}: {needed} needed")


# ---------------------------------------------------------------- CPU accounting


def _cpu_of_stat(stat: str) -> float:
    """User + system CPU seconds in the text of a /proc `stat` file."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def stat_cpu(path: str | Path) -> float:
    """User + system CPU seconds of a /proc `stat` file (a process's or a thread's)."""
    return _cpu_of_stat(Path(path).read_text())


def process_cpu(pid: int) -> tuple[str, float]:
    """(command name, user+system CPU seconds) of one process."""
    stat = (Path("/proc") / str(pid) / "stat").read_text()
    return stat[stat.index("(") + 1 : stat.rindex(")")], _cpu_of_stat(stat)


def _client_cpu() -> float:
    """CPU seconds of this process and of its children that have ended (wrk)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


@dataclass
class CpuSnapshot:
    at: float
    machine_busy: float
    machine_iowait: float
    by_group: dict[str, float]


def cpu_snapshot(groups: dict[str, list[int]] | None = None) -> CpuSnapshot:
    """CPU seconds so far of each named group of pids, plus `postgres` (every
    process named postgres), `client` (this process and its ended children:
    the load generator) and the machine's busy total."""
    by_group: dict[str, float] = {}
    for group, pids in (groups or {}).items():
        total = 0.0
        for pid in pids:
            with contextlib.suppress(OSError):
                total += process_cpu(pid)[1]
        by_group[group] = total
    postgres = 0.0
    for entry in _proc_entries():
        with contextlib.suppress(OSError, ValueError, IndexError):
            name, seconds = process_cpu(int(entry.name))
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

    def per_request_ms(self, group: str, requests: int) -> float:
        """Milliseconds of `group`'s CPU per request (0 requests count as 1)."""
        return self.cores.get(group, 0.0) * self.wall / max(1, requests) * 1000

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


T = TypeVar("T")


class CpuMeter:
    """CPU use of `groups` from its start to `stop()`: `with CpuMeter(g) as m:`."""

    def __init__(self, groups: dict[str, list[int]] | None = None) -> None:
        self.groups = groups
        self.before = cpu_snapshot(groups)
        self.use: CpuUse | None = None

    def stop(self) -> CpuUse:
        self.use = cpu_use(self.before, cpu_snapshot(self.groups))
        return self.use

    def __enter__(self) -> CpuMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.use is None:
            self.stop()


@dataclass
class Phase(Generic[T]):
    """One measured run of a phase: what it returned, the CPU it used, the
    rows it stored (by the benchmark's own count) and its attempt number."""

    result: T
    cpu: CpuUse
    stored: int
    attempts: int


def measure(
    label: str,
    run: Callable[[], T],
    *,
    count: Callable[[], int],
    groups: dict[str, list[int]] | None = None,
    attempts: int = 3,
    settle: float = 0.0,
) -> Phase[T]:
    """Run a phase with CPU accounting; run it again (after waiting for a quiet
    machine) while other processes took more than BACKGROUND_LIMIT cores.
    `settle`: seconds for the requests in flight when the client stopped."""
    for attempt in range(1, attempts + 1):
        wait_for_quiet()
        stored_before = count()
        meter = CpuMeter(groups)
        result = run()
        cpu = meter.stop()
        time.sleep(settle)
        phase = Phase(result, cpu, count() - stored_before, attempt)
        if cpu.other <= BACKGROUND_LIMIT or attempt == attempts:
            return phase
        log(f"{label}: background load {cpu.other:.2f} cores: measuring again")
    raise AssertionError("unreachable")


@dataclass
class Attempt(Generic[T]):
    """One attempt at a phase measured by `measure_async`: what it returned,
    the CPU it used, the rows it stored (each of the benchmark's counts), the
    background load before it and its number."""

    result: T
    cpu: CpuUse
    stored: dict[str, int]
    background: float  # cores busy before it, outside the benchmark
    attempt: int


async def measure_async(
    label: str,
    run: Callable[[], Awaitable[T]],
    *,
    count: Callable[[], dict[str, int]],
    groups: dict[str, list[int]],
    quiet_wait: float,
    settle: Callable[[T], Awaitable[object]] | None = None,
    attempts: int = 3,
) -> list[Attempt[T]]:
    """`measure` for a phase run on an event loop (whose other tasks, such as
    listeners, go on meanwhile): after waiting for a quiet machine (at most
    `quiet_wait` s, in a thread), and again, up to `attempts` times, while
    other processes took more than BACKGROUND_LIMIT cores during it. `settle`
    waits for what the phase set off before the rows are counted. Every
    attempt is answered: the figures are the last one's, the checks cover all."""
    done: list[Attempt[T]] = []
    for attempt in range(1, attempts + 1):
        background = await asyncio.to_thread(wait_for_quiet, quiet_wait)
        before = count()
        cpu_before = cpu_snapshot(groups)
        result = await run()
        cpu = cpu_use(cpu_before, cpu_snapshot(groups))
        if settle is not None:
            await settle(result)
        after = count()
        stored = {name: after[name] - before[name] for name in after}
        done.append(Attempt(result, cpu, stored, background, attempt))
        if cpu.other <= BACKGROUND_LIMIT:
            break
        log(f"{label}: background load {cpu.other:.2f} cores (attempt {attempt})")
    return done
