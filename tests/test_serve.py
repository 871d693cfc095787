"""The web server launcher, `python -m platform_site.serve`: how many processes
it asks for, what it hands uvicorn, and a real run of it with two processes."""

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from django.conf import settings as django_settings
from uvicorn.importer import import_from_string
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bots.models import Bot, Role
from events.models import Event
from platform_site import serve
from tests.factories import member_token
from tests.servers import READ_TIMEOUT, READY_TIMEOUT, Server, reachable_redis
from tests.worker import PROJECT_DIR, celery_queue, worker_database_url  # noqa: F401

PYTHON = PROJECT_DIR / ".venv" / "bin" / "python"
# The live stream's bus, which more than one process needs (settings).
REDIS_URL = django_settings.LIVE_STREAM_REDIS_URL or "redis://127.0.0.1:6379/8"


# --- default_workers -------------------------------------------------------------------


@pytest.fixture
def no_web_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set first, so that undoing restores whatever was there, even after
    # main() writes the variable.
    monkeypatch.setenv("WEB_CONCURRENCY", "1")
    monkeypatch.delenv("WEB_CONCURRENCY")


def test_web_concurrency_chooses_the_number(monkeypatch, settings, no_web_concurrency):
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    settings.LIVE_STREAM_REDIS_URL = ""
    assert serve.default_workers() == 3


def test_one_process_per_core_with_redis_for_the_live_stream(settings, no_web_concurrency):
    settings.LIVE_STREAM_REDIS_URL = "redis://127.0.0.1:6379/8"
    assert serve.default_workers() == serve.cores() == len(os.sched_getaffinity(0))


def test_one_process_on_the_embedded_defaults(settings, no_web_concurrency):
    settings.LIVE_STREAM_REDIS_URL = ""
    assert serve.default_workers() == 1


# --- what main() hands uvicorn ---------------------------------------------------------


@pytest.fixture
def uvicorn_runs(monkeypatch: pytest.MonkeyPatch, no_web_concurrency: None) -> list[dict[str, Any]]:
    """The options of every server main() would start (uvicorn.run for one
    process, serve.supervise for more), with their number of processes."""
    calls: list[dict[str, Any]] = []

    def run(app: str, **kwargs: Any) -> None:
        calls.append({"app": app, "workers": 1, **kwargs})

    def supervise(options: dict[str, Any], workers: int) -> bool:
        calls.append({**options, "workers": workers})
        return True

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setattr(serve, "supervise", supervise)
    # Not this test run's logging to reconfigure.
    monkeypatch.setattr(serve, "_configure_logging", lambda: None)
    monkeypatch.delenv("WEB_ACCESS_LOG", raising=False)
    # main() sets it for the processes it starts; restored after the test.
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "")
    monkeypatch.delenv("PORT", raising=False)
    return calls


def test_main_serves_the_asgi_application_without_trusting_forwarded_headers(
    uvicorn_runs, settings
):
    settings.LIVE_STREAM_REDIS_URL = ""
    serve.main([])
    [call] = uvicorn_runs
    assert call["app"] == "platform_site.asgi:application"
    assert (call["host"], call["port"]) == ("127.0.0.1", 8000)
    assert call["proxy_headers"] is False
    assert call["workers"] == 1
    # The access log is the middleware's (request ids, JSON), not uvicorn's.
    assert call["access_log"] is False
    assert call["log_config"] is None
    assert os.environ["WEB_ACCESS_LOG"] == "1"
    assert call["lifespan"] == "off"
    protocol = import_from_string(call["http"])
    assert call["http"] == "platform_site.server.http_protocol:HttpToolsProtocol"
    assert issubclass(protocol, HttpToolsProtocol)
    # The processes uvicorn starts read the number (settings checks it).
    assert os.environ["WEB_CONCURRENCY"] == "1"


def test_main_takes_the_workers_port_and_host_it_is_given(uvicorn_runs, settings):
    settings.LIVE_STREAM_REDIS_URL = "redis://127.0.0.1:6379/8"
    serve.main(["--host", "0.0.0.0", "--port", "9123", "--workers", "3"])
    [call] = uvicorn_runs
    assert (call["host"], call["port"], call["workers"]) == ("0.0.0.0", 9123, 3)
    assert call["proxy_headers"] is False
    assert os.environ["WEB_CONCURRENCY"] == "3"


def test_main_defaults_to_default_workers_and_the_port_variable(
    uvicorn_runs, monkeypatch, settings
):
    monkeypatch.setenv("WEB_CONCURRENCY", "5")
    monkeypatch.setenv("PORT", "8765")
    settings.LIVE_STREAM_REDIS_URL = "redis://127.0.0.1:6379/8"
    serve.main([])
    [call] = uvicorn_runs
    assert (call["workers"], call["port"]) == (5, 8765)


@pytest.mark.parametrize(
    ("variable", "argv", "access_log"),
    [
        (None, [], True),
        ("1", [], True),
        ("0", [], False),
        (None, ["--no-access-log"], False),
        ("0", ["--access-log"], True),
        ("1", ["--no-access-log"], False),
    ],
)
def test_the_access_log(uvicorn_runs, monkeypatch, settings, variable, argv, access_log):
    settings.LIVE_STREAM_REDIS_URL = ""
    if variable is not None:
        monkeypatch.setenv("WEB_ACCESS_LOG", variable)
    serve.main(argv)
    assert uvicorn_runs[0]["access_log"] is False
    assert os.environ["WEB_ACCESS_LOG"] == ("1" if access_log else "0")


# --- a real server -------------------------------------------------------------------------


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of each live process whose parent is `pid` (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # The command name (in parentheses) may hold spaces: fields follow it.
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == pid and state != "Z":
            found.append((int(entry.name), cmdline))
    return found


class Launched(Server):
    """`python -m platform_site.serve`, as platform_site/Procfile runs it."""

    def __init__(
        self, *, args: list[str], env: dict[str, str], log_path: Path, port: int | None = None
    ) -> None:
        self.args = args
        super().__init__(name=log_path.stem, env=env, folder=log_path.parent, port=port)

    def command(self) -> list[str]:
        return [str(PYTHON), "-m", "platform_site.serve", "--port", str(self.port), *self.args]

    def stop(self) -> None:
        children = [pid for pid, _ in children_of(self.process.pid)]
        super().stop()
        # Workers left behind by a supervisor that died: ours, by their ids.
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def redis_bus() -> str:
    return reachable_redis(REDIS_URL)


@pytest.fixture
def launched_unready(
    celery_queue: str,  # noqa: F811
    redis_bus: str,
    tmp_path: Path,
) -> Iterator[Any]:
    """Starts the launcher on the test database and the run's broker and
    queue, without waiting for it; stops it when the test ends."""
    started: list[Launched] = []

    def start(*args: str, port: int | None = None) -> Launched:
        env = dict(os.environ)
        env.pop("WEB_CONCURRENCY", None)
        env.update(
            {
                "DATABASE_URL": worker_database_url(),
                "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
                "CELERY_QUEUE": celery_queue,
                "DATA_DIR": str(django_settings.DATA_DIR),
                "LIVE_STREAM_REDIS_URL": redis_bus,
                "PYTHONUNBUFFERED": "1",
            }
        )
        server = Launched(args=list(args), env=env, log_path=tmp_path / "web.log", port=port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
        print(f"--- web ---\n{server.log()}", file=sys.stderr)


@pytest.fixture
def launched(launched_unready: Any) -> Any:
    """The launcher, once it answers."""

    def start(*args: str) -> Launched:
        server: Launched = launched_unready(*args)
        server.wait_ready()
        return server

    return start


def sockets_of(pid: int, port: int) -> int:
    """Established connections to `port` that process `pid` holds (Linux)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            columns = line.split()
            if columns[3] == "01" and int(columns[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(columns[9])
    held = 0
    for fd in (Path("/proc") / str(pid) / "fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd).removeprefix("socket:[").rstrip("]") in inodes:
                held += 1
    return held


def workers_of(pid: int) -> list[int]:
    """The server processes uvicorn spawned (not multiprocessing's helpers)."""
    return [child for child, cmdline in children_of(pid) if "spawn_main" in cmdline]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_the_launcher_serves_with_two_processes(launched, bot: Bot):
    server = launched("--workers", "2")
    workers = workers_of(server.process.pid)
    assert len(workers) == 2, children_of(server.process.pid)

    # A connection each: the kernel hands them to either process.
    for _ in range(20):
        response = httpx.get(
            f"{server.url}/healthz", headers={"connection": "close"}, timeout=READ_TIMEOUT
        )
        assert response.status_code == 200, response.text

    # Connections held open at once are spread over both processes (each
    # listens on a socket of its own, SO_REUSEPORT): 40 all landing on one
    # by the kernel's hash would be a 1 in 2^39 chance.
    held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(40)]
    try:
        time.sleep(0.5)
        assert all(sockets_of(pid, server.port) > 0 for pid in workers)
    finally:
        for connection in held:
            connection.close()

    headers = {
        "authorization": f"Bearer {member_token(bot.workspace, Role.DEVELOPER)}",
        "x-bot-id": bot.id,
    }
    response = httpx.post(
        f"{server.url}/v1/chat/events",
        content=json.dumps({"type": "order.created", "payload": {"n": 1}}),
        headers={**headers, "content-type": "application/json"},
        timeout=READ_TIMEOUT,
    )
    assert response.status_code == 201, response.text
    event = response.json()["event"]
    assert Event.objects.get().id == event["id"]

    # Both processes are still the ones that started, each having said so.
    assert sorted(workers_of(server.process.pid)) == sorted(workers)
    log = server.log()
    for pid in workers:
        assert f"Started server process [{pid}]" in log, log


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_web_process_that_dies_is_replaced(launched):
    server = launched("--workers", "2")
    first, second = workers_of(server.process.pid)
    # Both serving: a process that dies before it serves stops them all.
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline and server.log().count("Started server process") < 2:
        time.sleep(0.1)
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        now = workers_of(server.process.pid)
        if len(now) == 2 and first not in now and second in now:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no replacement: {children_of(server.process.pid)}")
    # The new process serves (it may take a moment to bind and load).
    replacement = next(pid for pid in now if pid != second)
    while time.monotonic() < deadline and f"Started server process [{replacement}]" not in (
        server.log()
    ):
        time.sleep(0.2)
    assert f"Started server process [{replacement}]" in server.log()
    for _ in range(10):
        response = httpx.get(
            f"{server.url}/healthz", headers={"connection": "close"}, timeout=READ_TIMEOUT
        )
        assert response.status_code == 200


def test_forwarded_headers_are_read_only_from_the_proxies_named(
    uvicorn_runs, monkeypatch, settings
):
    settings.LIVE_STREAM_REDIS_URL = ""
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    serve.main([])
    serve.main(["--forwarded-allow-ips", "10.0.0.5,10.0.0.6"])
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "10.0.0.7")
    serve.main([])
    untrusting, named, from_environment = uvicorn_runs
    assert untrusting["proxy_headers"] is False
    assert untrusting["forwarded_allow_ips"] is None
    assert named["proxy_headers"] is True
    assert named["forwarded_allow_ips"] == "10.0.0.5,10.0.0.6"
    assert from_environment["forwarded_allow_ips"] == "10.0.0.7"


def test_more_than_one_process_without_redis_is_refused(uvicorn_runs, settings, capsys):
    settings.LIVE_STREAM_REDIS_URL = ""
    with pytest.raises(SystemExit) as exited:
        serve.main(["--workers", "2"])
    assert exited.value.code == 2
    assert "needs Redis for the live stream" in capsys.readouterr().err
    assert uvicorn_runs == []


def test_no_processes_is_refused(uvicorn_runs, settings):
    settings.LIVE_STREAM_REDIS_URL = "redis://127.0.0.1:6379/8"
    with pytest.raises(SystemExit):
        serve.main(["--workers", "0"])
    assert uvicorn_runs == []


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_processes_that_cannot_start_stop_the_launcher(launched_unready):
    """The port is held by a socket without SO_REUSEPORT: no process can bind
    it. The launcher must give up (exit 1) rather than restart them forever."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        server = launched_unready("--workers", "2", port=taken.getsockname()[1])
        assert server.process.wait(timeout=READY_TIMEOUT) == 1, server.log()
        assert "before it served: stopping" in server.log()
    finally:
        taken.close()
