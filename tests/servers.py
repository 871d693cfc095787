"""Real uvicorn processes serving platform_site.asgi on the test database,
one process each (the Procfile's command runs one per core:
tests/test_serve.py), for tests that talk HTTP to the whole app (the live
stream, the chat round trip). Request the `servers` fixture and mark the
test `django_db(transaction=True)`: a server sees committed rows only."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from django.conf import settings as django_settings

from tests.worker import PROJECT_DIR, celery_queue, worker_database_url  # noqa: F401

UVICORN = PROJECT_DIR / ".venv" / "bin" / "uvicorn"
READY_TIMEOUT = 30.0
READ_TIMEOUT = 10.0


def reachable_redis(url: str) -> str:
    """`url`, or the test skipped when no Redis answers there (the live
    stream's bus, which more than one web process needs)."""
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        pytest.skip(f"no Redis at {url} for the live stream's bus: {error}")
    return url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """`uvicorn platform_site.asgi:application` on a port of its own."""

    def __init__(
        self, *, name: str, env: dict[str, str], folder: Path, port: int | None = None
    ) -> None:
        self.name = name
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / f"{name}.log"
        with self.log_path.open("wb") as log:
            # Tests read the log as it happens: lines unbatched.
            self.process = subprocess.Popen(
                self.command(),
                cwd=PROJECT_DIR,
                env={"LOG_FLUSH_SECONDS": "0", **env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def command(self) -> list[str]:
        return [
            str(UVICORN),
            "platform_site.asgi:application",
            "--http",
            "platform_site.server.http_protocol:HttpToolsProtocol",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--lifespan",
            "off",
            "--timeout-graceful-shutdown",
            "2",
        ]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not ready in {READY_TIMEOUT} s:\n{self.log()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def servers(celery_queue: str, tmp_path: Path) -> Iterator[Any]:  # noqa: F811
    """Starts uvicorn processes on the test database, the run's broker and queue,
    and the bus settings name; stops them when the test ends."""
    started: list[Server] = []

    def start() -> Server:
        port = free_port()
        env = dict(os.environ)
        env.update(
            {
                # The URLs it gives out (files', the webchat page's) are its own.
                "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
                "DATABASE_URL": worker_database_url(),
                "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
                "CELERY_QUEUE": celery_queue,
                "DATA_DIR": str(django_settings.DATA_DIR),
                "LIVE_STREAM_REDIS_URL": django_settings.LIVE_STREAM_REDIS_URL,
                "PYTHONUNBUFFERED": "1",
            }
        )
        server = Server(name=f"web{len(started) + 1}", env=env, folder=tmp_path, port=port)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()
        print(f"--- {server.name} ---\n{server.log()}", file=sys.stderr)


def sse_messages(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The data of each SSE message, which must be unnamed."""
    for line in response.iter_lines():
        assert not line.startswith("event:"), line
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])
        else:
            assert line == "", line
