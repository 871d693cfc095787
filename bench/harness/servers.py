"""The processes a benchmark measures, each a context manager that starts it
on a free loopback port, waits until it serves, and stops it afterwards
whatever happened: gunicorn, uvicorn, the Procfile's web line, its worker and
beat, and the webhook receiver (webhook_receiver.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.machine import children_of, cmdline, cores, tree
from harness.project import PYTHON, ROOT, Project
from harness.report import log

PROCFILE = ROOT / "platform_site" / "Procfile"
RECEIVER = str(Path(__file__).resolve().parent.parent / "webhook_receiver.py")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM the process we started (a server's master stops its own workers),
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


def procfile_command(name: str) -> str:
    """The Procfile's command line for `name` (web, worker, beat)."""
    for line in PROCFILE.read_text().splitlines():
        label, _, command = line.partition(":")
        if label.strip() == name:
            return command.strip()
    raise LookupError(f"no {name} in {PROCFILE}")


def procfile_words(name: str) -> list[str]:
    """The Procfile's command for `name`, split, its program from this venv."""
    words = procfile_command(name).split()
    words[0] = str(Path(PYTHON).parent / Path(words[0]).name)
    return words


def sockets_on_port(pid: int, port: int) -> int:
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


def _log_errors(log_path: Path, lines: int) -> None:
    """A server's last log lines, shown when they hold an error."""
    tail = log_path.read_text(errors="replace").strip().splitlines()[-lines:]
    if any("Error" in line or "Traceback" in line for line in tail):
        log("server log (last lines):\n" + "\n".join(tail))


def _healthy(base_url: str, probe: str = "healthz") -> bool:
    with contextlib.suppress(OSError, urllib.error.URLError):
        with urllib.request.urlopen(f"{base_url}/{probe}", timeout=2) as answer:
            return answer.status == 200
    return False


def ready(port: int) -> bool:
    """Whether the service on the loopback port answers /readyz (its
    database and broker reachable)."""
    return ready_at(f"http://127.0.0.1:{port}")


def ready_at(base_url: str) -> bool:
    """`ready` for a service at `base_url` (another host's address, say)."""
    return _healthy(base_url, "readyz")


@dataclass
class WebServer:
    """A web server we started: its process, port and log."""

    process: subprocess.Popen[bytes]
    port: int
    workers: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pids(self) -> list[int]:
        """Every process of the server (the master or supervisor too)."""
        return [self.process.pid, *children_of(self.process.pid)]

    def _check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(
                f"server exited ({self.process.returncode}):\n"
                + self.log_path.read_text(errors="replace")
            )


@contextlib.contextmanager
def started(
    command: list[str], *, cwd: Path | str, env: dict[str, str], log_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """`command` in a session of its own, logging to `log_path`; stopped
    afterwards whatever happened."""
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        stop_process(process)


# ---------------------------------------------------------------- gunicorn (WSGI)


@dataclass
class GunicornServer(WebServer):
    """gunicorn: a master and its workers."""

    threads: int = 1
    worker_connections: int = 1000

    def connections_by_worker(self) -> list[int]:
        """Established client connections each worker holds now, most first."""
        counts = [sockets_on_port(pid, self.port) for pid in children_of(self.process.pid)]
        return sorted(counts, reverse=True)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        workers_seen = 0
        while time.monotonic() < deadline:
            self._check_alive()
            if _healthy(self.base_url):
                workers_seen = len(children_of(self.process.pid))
                if workers_seen >= self.workers:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn not ready after {timeout}s ({workers_seen} workers)")


@contextlib.contextmanager
def gunicorn(
    proj: Project,
    *,
    workers: int,
    threads: int,
    worker_connections: int = 1000,
    worker_class: str = "gthread",
) -> Iterator[GunicornServer]:
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
    with started(command, cwd=ROOT, env=proj.env, log_path=log_path) as process:
        server = GunicornServer(process, port, workers, log_path, threads, worker_connections)
        try:
            server.wait_ready()
            yield server
        finally:
            stop_process(process)
            _log_errors(log_path, 20)


def spread_connections(connections: int, workers: int) -> int:
    """gunicorn's --worker-connections of twice a worker's fair share of
    `connections` (see `gunicorn`)."""
    return 2 * -(-connections // workers)


# ---------------------------------------------------------------- uvicorn (ASGI)


@dataclass
class AsgiServer(WebServer):
    """uvicorn serving platform_site.asgi: one process, or a supervisor and
    `workers` worker processes."""

    def worker_pids(self) -> list[int]:
        """The processes that serve requests: the process itself, or the
        workers its supervisor spawned (not multiprocessing's resource tracker)."""
        if self.workers == 1:
            return [self.process.pid]
        return [pid for pid in children_of(self.process.pid) if "spawn_main" in cmdline(pid)]

    def connections_by_worker(self) -> list[int]:
        """Established client connections each worker holds now, in worker order."""
        return [sockets_on_port(pid, self.port) for pid in self.worker_pids()]

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        started = 0
        while time.monotonic() < deadline:
            self._check_alive()
            # Each serving process logs it (a supervisor logs "Started parent process").
            started = self.log_path.read_text(errors="replace").count("Started server process")
            if started >= self.workers and _healthy(self.base_url):
                return
            time.sleep(0.2)
        raise RuntimeError(f"uvicorn not ready after {timeout}s ({started} processes started)")


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
    """`command` until `workers` processes serve; stopped afterwards whatever
    happened, its log's last lines shown when they hold an error."""
    env = {**env, "PYTHONUNBUFFERED": "1"}
    with started(command, cwd=cwd, env=env, log_path=log_path) as process:
        server = AsgiServer(process, port, workers, log_path)
        try:
            server.wait_ready()
            yield server
        finally:
            stop_process(process)
            _log_errors(log_path, 30)


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
    5`). `workers` > 1 runs uvicorn's supervisor with that many worker
    processes sharing the socket. `env` is added to the project's environment.
    Without an access log by default, like `gunicorn(...)`. `app` names
    another application (with uvicorn's options for it, e.g. --factory)."""
    port = free_port()
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
    log(f"uvicorn: {workers} worker process(es), access log {'on' if access_log else 'off'}, "
        f"port {port}")  # fmt: skip
    with _asgi_server(
        command, port=port, workers=workers, env={**proj.env, **(env or {})}, cwd=cwd,
        log_path=proj.data_dir / f"uvicorn-{port}.log",
    ) as server:  # fmt: skip
        yield server


@contextlib.contextmanager
def procfile_web(
    proj: Project,
    *,
    workers: int,
    env: dict[str, str] | None = None,
    tree: str = "",
    port: int = 0,
) -> Iterator[AsgiServer]:
    """The web process exactly as `make run` starts it: platform_site/Procfile's
    `web:` line, on a free port (or `port`, chosen beforehand when the
    server must know its own URL: PUBLIC_BASE_URL in `env`). `workers` is how
    many serving processes it is expected to start (platform_site.serve
    chooses). `tree`: run from that checkout of another commit instead (its
    code, this project)."""
    port = port or free_port()
    line = procfile_command("web")
    log(f"Procfile web: {line} (PORT={port}{f', code of {tree}' if tree else ''})")
    code = {"PYTHONPATH": tree} if tree else {}
    with _asgi_server(
        ["sh", "-c", f"exec {line}"], port=port, workers=workers,
        env={**proj.env, **(env or {}), "PORT": str(port), **code},
        cwd=tree or ROOT, log_path=proj.data_dir / f"web-{port}.log",
    ) as server:  # fmt: skip
        yield server


@contextlib.contextmanager
def asgi_servers(
    proj: Project, processes: int, *, procfile: bool = False, env: dict[str, str] | None = None
) -> Iterator[list[AsgiServer]]:
    """`processes` uvicorn processes on ports of their own (as behind a load
    balancer), or with `procfile` the Procfile's web line with as many
    processes sharing one port, its access log off; `env` added to the
    project's environment."""
    with contextlib.ExitStack() as stack:
        if procfile:
            web_env = {**(env or {}), "WEB_ACCESS_LOG": "0"}
            yield [stack.enter_context(procfile_web(proj, workers=processes, env=web_env))]
        else:
            yield [stack.enter_context(uvicorn(proj, env=env)) for _ in range(processes)]


@contextlib.contextmanager
def web_server(name: str, proj: Project, *, before_tree: str = "") -> Iterator[WebServer]:
    """A way of serving the API, by name:
    - `serve`: the Procfile's web line as `make run` starts it, one process
      per core; `serve:NAME=VALUE+...` the same with settings of its own;
    - `django-asgi`: uvicorn with as many processes and the same protocol,
      serving Django's own ASGI handler (what `make run` served before);
    - `before`: `make run`'s web as `before_tree` (a checkout of an earlier
      commit) served it: uvicorn, one process, Django's ASGI handler;
    - `serve-before`: the Procfile's web line as `serve`, running
      `before_tree`'s code (the same way of serving, the code of then);
    - `gunicorn`: platform_site.wsgi, 4 gthread workers x 1 thread."""
    if name == "serve" or name.startswith("serve:"):
        env = dict(item.split("=", 1) for item in name[6:].split("+") if item)
        with procfile_web(proj, workers=cores(), env=env) as served:
            yield served
    elif name == "django-asgi":
        django_asgi = ("--factory", "django.core.asgi:get_asgi_application")
        protocol = ("--http", "platform_site.server.http_protocol:HttpToolsProtocol")
        with uvicorn(proj, workers=cores(), app=django_asgi + protocol) as asgi:
            yield asgi
    elif name == "serve-before":
        if not before_tree:
            raise SystemExit("--before-tree is needed for the `serve-before` server")
        with procfile_web(proj, workers=cores(), tree=before_tree) as served:
            yield served
    elif name == "before":
        if not before_tree:
            raise SystemExit("--before-tree is needed for the `before` server")
        app = ("platform_site.asgi:application", "--app-dir", before_tree)
        protocol = ("--http", "platform_site.server.http_protocol:HttpToolsProtocol")
        with uvicorn(
            proj, app=app + protocol, env={"PYTHONPATH": before_tree}, cwd=before_tree
        ) as before:
            yield before
    elif name == "gunicorn":
        with gunicorn(proj, workers=4, threads=1, worker_connections=8) as wsgi:
            yield wsgi
    else:
        raise SystemExit(f"unknown server {name!r}")


# ---------------------------------------------------------------- delivery


def _wait_for_children(pid: int, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(children_of(pid)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"worker {pid} did not start {count} processes")
        time.sleep(0.2)
    time.sleep(2.0)  # the children import the project and start their engines


@dataclass
class Engine:
    """The Procfile's worker and beat."""

    worker: int
    beat: int

    def groups(self, receiver: subprocess.Popen[bytes]) -> dict[str, list[int]]:
        """CPU groups: the worker's tree, beat, and the webhook receiver."""
        return {"worker": tree(self.worker), "beat": [self.beat], "receiver": [receiver.pid]}

    def worker_children(self) -> list[int]:
        """The worker's pool processes, which run the tasks and the engines."""
        return children_of(self.worker)


@contextlib.contextmanager
def engine(
    proj: Project,
    queue: str,
    *,
    extra_env: dict[str, str] | None = None,
    log_path: Path | None = None,
    tree: str = "",
) -> Iterator[Engine]:
    """The Procfile's worker and beat on the project's database and broker,
    on a queue of their own; the worker's output to `log_path` if given.
    `tree`: run from that checkout of another commit instead (its code,
    this project)."""
    env = {**proj.env, "CELERY_QUEUE": queue, "LOG_LEVEL": "WARNING", **(extra_env or {})}
    if tree:
        env["PYTHONPATH"] = tree
    schedule = proj.data_dir / f"beat-{time.monotonic_ns()}"
    output = log_path.open("wb") if log_path is not None else sys.stderr
    worker = subprocess.Popen(
        procfile_words("worker"),
        cwd=tree or ROOT,
        env=env,
        start_new_session=True,
        stdout=output,
        stderr=subprocess.STDOUT if log_path is not None else None,
    )
    beat = subprocess.Popen(
        procfile_words("beat") + ["-s", str(schedule)],
        cwd=tree or ROOT,
        env=env,
        start_new_session=True,
        stdout=sys.stderr,
    )
    try:
        _wait_for_children(worker.pid, 2)
        yield Engine(worker=worker.pid, beat=beat.pid)
    finally:
        stop_process(beat)
        stop_process(worker, timeout=30)


@contextlib.contextmanager
def receiver(port: int, out: Path) -> Iterator[subprocess.Popen[bytes]]:
    """webhook_receiver.py on `port`; its records land in `out` when it stops."""
    process = subprocess.Popen([PYTHON, RECEIVER, str(port), str(out)])
    time.sleep(1.0)
    try:
        yield process
    finally:
        stop_process(process)
