"""Real Celery workers for integration tests: each a subprocess on the test
database and the test run's broker, with its own log file.

A test that wants them requests the `workers` fixture (import it from here)
and marks itself `django_db(transaction=True)`: a worker sees committed rows
only. Every worker a test starts is stopped when the test ends, and its log is
printed then, which pytest shows only when the test failed."""

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings as django_settings
from django.db import connection
from pytest_django.fixtures import Settings

from platform_site.celery import app

PROJECT_DIR = Path(__file__).resolve().parent.parent
CELERY = PROJECT_DIR / ".venv" / "bin" / "celery"

# Short enough that leases end, retries come and scheduled events fall due
# within a test; every value can be overridden per worker.
ENGINE_SETTINGS: dict[str, float] = {
    "EVENT_LEASE_SECONDS": 5.0,
    "EVENT_DELIVERY_TIMEOUT": 3.0,
    "EVENT_RETRY_BASE_SECONDS": 0.2,
    "EVENT_RETRY_MAX_DELAY_SECONDS": 2.0,
    "EVENT_RETRY_WINDOW_SECONDS": 60.0,
    "EVENT_DISPATCH_INTERVAL": 0.25,
    "EVENT_DELIVERY_REPORT_INTERVAL": 5.0,
    "FILE_HOUSEKEEPING_INTERVAL": 60.0,
}
READY_TIMEOUT = 30.0
# A warm shutdown takes a few seconds (the filesystem transport's consumer
# wakes every 2 s, the prefork pool joins its children).
STOP_GRACE = 10.0
LOG_TAIL_LINES = 60

# One queue for the whole test run (this process, or this xdist worker), so a
# worker never takes tasks published by another run sharing the broker. No
# dots: the filesystem transport reads the queue name after the first dot.
RUN_QUEUE = f"test-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def worker_database_url() -> str:
    """DATABASE_URL naming the database this test process is using."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise NotImplementedError(f"no worker URL for {db['ENGINE']}")
    credentials = quote(db["USER"] or "", safe="")
    if db["PASSWORD"]:
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "localhost"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgres://{credentials}@{host}{port}/{quote(db['NAME'], safe='')}"


class Worker:
    """One `celery worker` process group: the main process, its prefork
    children and, with beat, the embedded beat process; or, started with
    `alone_beat`, a `celery beat` process of its own."""

    def __init__(
        self, *, name: str, env: dict[str, str], beat: bool, folder: Path, alone_beat: bool = False
    ) -> None:
        self.name = name
        self.node = f"{name}-{uuid.uuid4().hex[:6]}"
        self.log_path = folder / f"{name}.log"
        self.alone_beat = alone_beat
        if alone_beat:
            command = [str(CELERY), "-A", "platform_site", "beat", "--loglevel", "INFO"]
            command += ["-s", str(folder / f"{name}-schedule")]
            self._spawn(command, env)
            return
        command = [
            str(CELERY),
            "-A",
            "platform_site",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            "2",
            "-Q",
            env["CELERY_QUEUE"],
            "-n",
            f"{self.node}@%h",
            "--loglevel",
            "INFO",
            # Startup without waiting on other nodes: tests start many workers.
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
        ]
        if beat:
            command += ["-B", "-s", str(folder / f"{name}-beat-schedule")]
        self._spawn(command, env)

    def _spawn(self, command: list[str], env: dict[str, str]) -> None:
        with self.log_path.open("wb") as log:
            # A session of its own, so that the whole group (with the prefork
            # child doing a delivery) can be signalled at once.
            self.process = subprocess.Popen(
                command,
                cwd=PROJECT_DIR,
                # Tests read the log as it happens: lines unbatched.
                env={"LOG_FLUSH_SECONDS": "0", **env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        tail = "\n".join(self.log().splitlines()[-lines:])
        return f"--- last {lines} lines of worker {self.name} (pid {self.pid}) ---\n{tail}"

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Return once the worker consumes its queue (Celery logs `<node>@<host> ready.`),
        or beat has started (`beat: Starting...`)."""
        deadline = time.monotonic() + timeout
        ready = "beat: Starting" if self.alone_beat else rf"\b{self.node}@\S+ ready\."
        while not re.search(ready, self.log()):
            if self.process.poll() is not None:
                raise AssertionError(
                    f"worker {self.name} exited with {self.process.returncode} before it was "
                    f"ready\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"worker {self.name} not ready in {timeout} s\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to every process of the worker and, for SIGKILL, reap it."""
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGKILL:
            self.process.wait(timeout=STOP_GRACE)

    def terminate(self) -> None:
        """Ask for a warm shutdown (SIGTERM to the main process)."""
        if self.process.poll() is None:
            self.process.terminate()

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Warm shutdown; SIGKILL to the group if it is not over within `grace` seconds."""
        self.terminate()
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        # Also takes any child the main process left behind.
        self.kill(signal.SIGKILL)


class Workers:
    """Starts workers for one test, all on the same queue and settings."""

    def __init__(self, *, settings: Settings, folder: Path, queue: str) -> None:
        self.settings = settings
        self.folder = folder
        self.queue = queue
        self.started: list[Worker] = []
        self.engine_settings = dict(ENGINE_SETTINGS)
        self.configure()

    def configure(self, **engine_settings: float) -> None:
        """Set engine settings for this process and the workers started from
        now on: the test process leases the events it creates due now, so both
        sides must agree on the lease."""
        unknown = set(engine_settings) - set(ENGINE_SETTINGS)
        if unknown:
            raise ValueError(f"not an engine setting: {sorted(unknown)}")
        self.engine_settings.update(engine_settings)
        for name, value in self.engine_settings.items():
            setattr(self.settings, name, value)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DATABASE_URL": worker_database_url(),
                "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
                "DATA_DIR": str(django_settings.DATA_DIR),
                "CELERY_QUEUE": self.queue,
                "LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update({name: repr(value) for name, value in self.engine_settings.items()})
        return env

    def start(self, *, beat: bool = True, wait: bool = True) -> Worker:
        """A new worker (with an embedded beat unless `beat=False`), ready
        unless `wait=False` (then call its `wait_ready`)."""
        worker = Worker(
            name=f"worker{len(self.started) + 1}", env=self.env(), beat=beat, folder=self.folder
        )
        self.started.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    def start_beat(self) -> Worker:
        """A `celery beat` process of its own, started."""
        beat = Worker(
            name=f"beat{len(self.started) + 1}",
            env=self.env(),
            beat=False,
            folder=self.folder,
            alone_beat=True,
        )
        self.started.append(beat)
        beat.wait_ready()
        return beat

    def logs(self) -> str:
        """The tails of every worker's log, for assertion messages."""
        return "\n".join(worker.log_tail() for worker in self.started)

    def stop_all(self) -> None:
        """Stop every worker, all shutting down at once."""
        for worker in self.started:
            worker.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for worker in self.started:
            worker.stop(grace=max(0.0, deadline - time.monotonic()))


def wait_until(
    condition: Callable[[], Any],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    message: str | Callable[[], str] = "condition",
    workers: Workers | None = None,
) -> Any:
    """Poll `condition` until it answers something true, and return that;
    fail after `timeout` seconds with `message` and the workers' logs."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            logs = f"\n{workers.logs()}" if workers else ""
            raise AssertionError(f"not met within {timeout} s: {text}{logs}")
        time.sleep(interval)


def drop_queue(queue: str) -> None:
    """Drop `queue` with what is left in it (a task sent while its worker
    stopped), and its binding; the next worker declares it again."""
    with app.connection_for_write() as conn:
        bound = app.amqp.queues[queue](conn.default_channel)
        bound.declare()
        bound.purge()
        bound.delete()
    # The filesystem transport keeps each exchange's bindings in a file.
    options = getattr(django_settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})
    if "control_folder" in options:
        (Path(options["control_folder"]) / f"{queue}.exchange").unlink(missing_ok=True)


@pytest.fixture
def celery_queue(settings: Settings) -> Iterator[str]:
    """This process publishes to the run's queue, which the workers consume."""
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = RUN_QUEUE
    settings.CELERY_TASK_DEFAULT_QUEUE = RUN_QUEUE
    try:
        yield RUN_QUEUE
    finally:
        app.conf.task_default_queue = previous
        drop_queue(RUN_QUEUE)


@pytest.fixture
def workers(settings: Settings, tmp_path: Path, celery_queue: str) -> Iterator[Workers]:
    started = Workers(settings=settings, folder=tmp_path, queue=celery_queue)
    try:
        yield started
    finally:
        started.stop_all()
        # Captured, so pytest shows it only for a failed test.
        print(started.logs(), file=sys.stderr)
