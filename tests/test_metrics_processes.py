"""Metrics and logs of the real processes: `python -m platform_site.serve`
with two web processes and a Celery worker, all on the test database and
broker, writing their metrics to the one METRICS_DIR and their logs as JSON
lines (LOG_FORMAT=json).

/metrics, asked of whichever web process the kernel picks, sums every
process; a request's id reaches the log lines of the task it enqueued, in
the worker; a web process killed with listeners open leaves none counted.
Waits poll; nothing here asserts on speed."""

import json
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from bots.models import Bot, Role
from platform_site.observability import metrics
from tests.documents import garbage_pdf
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    ParticipantFactory,
    UserFactory,
    member_token,
    user_key,
)
from tests.receiver import Answer, Receiver
from tests.servers import READ_TIMEOUT, reachable_redis
from tests.test_serve import Launched, sockets_of, workers_of
from tests.worker import (
    Worker,
    Workers,
    celery_queue,
    wait_until,
    worker_database_url,
    workers,
)

__all__ = ["celery_queue", "workers"]  # fixtures, used by name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVENTS_ROUTE = "/v1/chat/events"
REQUESTS = "platform_http_requests_total"
CREATED = {"route": EVENTS_ROUTE, "method": "POST", "status": "201"}  # its labels
# The live stream's bus, which more than one web process needs: the one
# configured, or a database of this suite's own on a local Redis.
BUS_URL = django_settings.LIVE_STREAM_REDIS_URL or "redis://127.0.0.1:6379/11"

Key = tuple[str, frozenset[tuple[str, str]]]


@pytest.fixture
def bus() -> str:
    return reachable_redis(BUS_URL)


@pytest.fixture
def json_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes started from now on log JSON lines."""
    monkeypatch.setenv("LOG_FORMAT", "json")
    monkeypatch.setenv("LOG_LEVEL", "INFO")


@pytest.fixture
def web(
    bus: str,
    json_logs: None,
    celery_queue: str,  # noqa: F811
    tmp_path: Path,
) -> Iterator[Callable[..., Launched]]:
    """`python -m platform_site.serve --workers N`, answering."""
    started: list[Launched] = []

    def start(processes: int) -> Launched:
        env = dict(os.environ)
        env.pop("WEB_CONCURRENCY", None)
        env.update(
            {
                "DATABASE_URL": worker_database_url(),
                "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
                "CELERY_QUEUE": celery_queue,
                "DATA_DIR": str(django_settings.DATA_DIR),
                "LIVE_STREAM_REDIS_URL": bus,
                "PYTHONUNBUFFERED": "1",
            }
        )
        server = Launched(
            args=["--workers", str(processes)],
            env=env,
            log_path=tmp_path / f"web{len(started) + 1}.log",
        )
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()


class QuietWorker(Worker):
    """A worker started as platform_site/Procfile starts it: `celery --quiet`,
    without Celery's banner on stdout."""

    def _spawn(self, command: list[str], env: dict[str, str]) -> None:
        super()._spawn([command[0], "--quiet", *command[1:]], env)


def start_worker(workers: Workers) -> Worker:
    worker = QuietWorker(
        name=f"worker{len(workers.started) + 1}",
        env=workers.env(),
        beat=False,
        folder=workers.folder,
    )
    workers.started.append(worker)
    worker.wait_ready()
    return worker


def scrape(server: Launched) -> dict[Key, float]:
    """GET /metrics on a connection of its own: whichever process takes it."""
    response = httpx.get(
        f"{server.url}/metrics", headers={"connection": "close"}, timeout=READ_TIMEOUT
    )
    assert response.status_code == 200, response.text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(scraped: dict[Key, float], name: str, **labels: str) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def process_value(pid: int, tmp_path: Path, name: str, **labels: str) -> float:
    """A counter as one process has it, read from that process's own file."""
    folder = tmp_path / f"metrics-of-{pid}"
    folder.mkdir()
    source = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]) / f"counter_{pid}.db"
    if not source.exists():
        return 0.0
    shutil.copy(source, folder)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))
    return registry.get_sample_value(name, labels) or 0.0


def json_lines(log: str) -> list[dict[str, Any]]:
    """Every line of a process's output, each a JSON object."""
    parsed = []
    for number, line in enumerate(log.splitlines(), 1):
        try:
            value = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {number} is not JSON: {line!r}\n{log}") from None
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed


def runtime_headers(bot: Bot, **extra: str) -> dict[str, str]:
    return {
        "authorization": f"Bearer {member_token(bot.workspace, Role.DEVELOPER)}",
        "x-bot-id": bot.id,
        "connection": "close",  # a new connection each: the kernel spreads them
        **extra,
    }


def test_metrics_are_summed_over_every_web_process_and_the_worker(
    web, workers: Workers, receiver: Receiver, tmp_path: Path
):
    worker = start_worker(workers)
    server = web(2)
    pids = workers_of(server.process.pid)
    assert len(pids) == 2
    answering = BotFactory(webhook_url=receiver.url_for("/ok"))
    refusing = BotFactory(webhook_url=receiver.url_for("/gone", Answer(status=410)))
    before = scrape(server)
    requests = 24

    request_ids = []
    for number in range(requests):
        request_id = f"req-sum-{number}"
        response = httpx.post(
            f"{server.url}/v1/chat/events",
            json={"type": "order.created", "payload": {"n": number}},
            headers=runtime_headers(answering, **{"x-request-id": request_id}),
            timeout=READ_TIMEOUT,
        )
        assert response.status_code == 201, response.text
        assert response.headers["x-request-id"] == request_id
        request_ids.append(request_id)
    refused = httpx.post(
        f"{server.url}/v1/chat/events",
        json={"type": "order.created", "payload": {}},
        headers=runtime_headers(refusing),
        timeout=READ_TIMEOUT,
    )
    assert refused.status_code == 201, refused.text

    def grown(name: str, **labels: str) -> float:
        return value(scrape(server), name, **labels) - value(before, name, **labels)

    wait_until(
        lambda: (
            grown("platform_events_total", outcome="delivered") == requests
            and grown("platform_events_total", outcome="failed") == 1
        ),
        message=lambda: f"delivered {grown('platform_events_total', outcome='delivered')}",
        workers=workers,
    )
    # Whichever process answers the scrape, it counts them all.
    for _ in range(6):
        assert grown(REQUESTS, **CREATED) == requests + 1
    assert grown("platform_events_total", outcome="created") == requests + 1
    assert grown("platform_event_delivery_duration_seconds_count") == requests + 1
    assert grown("platform_event_delivery_lateness_seconds_count") == requests + 1
    assert grown("platform_events_due_unclaimed") == 0
    # Each web process answered some of them (24 new connections all landing
    # on one would be a 1 in 2^23 chance): the sum is of both.
    per_process = [process_value(pid, tmp_path, REQUESTS, **CREATED) for pid in pids]
    assert all(count > 0 for count in per_process), per_process
    assert sum(per_process) == requests + 1

    # The worker's lines so far (what it prints as it stops: the test below).
    worker_lines = json_lines(worker.log())
    server.stop()
    web_lines = json_lines(server.log())
    access = [line for line in web_lines if line.get("logger") == "platform_site.access"]
    posted = [line for line in access if line["path"] == "/v1/chat/events"]
    assert [line["request_id"] for line in posted][:requests] == request_ids
    assert all(line["method"] == "POST" and line["status"] == 201 for line in posted)
    assert {line["level"] for line in web_lines} <= {"debug", "info", "warning", "error"}
    # A failed attempt's own line is at DEBUG; at INFO the worker sums them
    # up per bot in its report, which it makes as it stops.
    assert not [line for line in worker_lines if line.get("logger") == "events.delivery"]
    worker.stop()
    [failing] = [
        line
        for line in json_lines(worker.log())
        if line.get("logger") == "events.engine" and line.get("bot_id") == refusing.id
    ]
    assert failing["level"] == "info"
    assert (
        "failed attempts: 1 (1 answered with an error); last: The webhook answered HTTP 410"
        in (failing["message"])
    )


def test_the_task_a_request_enqueues_logs_with_the_request_id(
    web, workers: Workers, runtime_client: Any
):
    worker = start_worker(workers)
    server = web(1)
    client = runtime_client()
    data = garbage_pdf()  # fails to index: the task logs a line about it
    announced = client.put(
        "/v1/files",
        {"key": "broken.pdf", "size": len(data), "contentType": "application/pdf", "index": True},
        format="json",
    )
    assert announced.status_code == 200, announced.content
    file_id = announced.json()["file"]["id"]
    path = announced.json()["file"]["uploadUrl"].split("://", 1)[1].split("/", 1)[1]
    sent = httpx.put(
        f"{server.url}/{path}",
        content=data,
        headers={"content-type": "application/pdf", "x-request-id": "req-upload-42"},
        timeout=READ_TIMEOUT,
    )
    assert sent.status_code == 200, sent.text

    def task_line() -> dict[str, Any] | None:
        for line in json_lines(worker.log()):
            if line.get("file_id") == file_id:
                return line
        return None

    line = wait_until(task_line, timeout=60, message="the indexing line", workers=workers)
    assert "Indexing of" in line["message"] and "failed" in line["message"]
    assert line["request_id"] == "req-upload-42"
    assert line["task"] == "files.tasks.index_file"
    assert line["task_id"]

    json_lines(worker.log())
    server.stop()
    [upload] = [
        line
        for line in json_lines(server.log())
        if line.get("logger") == "platform_site.access" and line["method"] == "PUT"
    ]
    assert upload["request_id"] == "req-upload-42"


def test_the_listeners_of_a_killed_web_process_are_forgotten(web, bot: Bot):
    server = web(2)
    connection = ChatConnectionFactory(bot=bot)
    alice = UserFactory(bot=bot, chat_id="alice")
    conversation = ConversationFactory(bot=bot, chat_id="room-1", owner=alice)
    ParticipantFactory(conversation=conversation, user=alice)
    listen_url = f"{server.url}/chat/{connection.webhook_id}/conversations/room-1/listen"
    workspace = bot.workspace_id

    def listening() -> float | None:
        try:
            return value(scrape(server), "platform_live_stream_listeners", workspace=workspace)
        except httpx.TransportError:
            # A connection the kernel had queued to the killed process's
            # socket (each process listens on its own) is reset with it.
            return None

    with (
        httpx.Client(timeout=READ_TIMEOUT) as client,
        client.stream(
            "GET", listen_url, headers={"x-user-key": user_key(connection, alice)}
        ) as stream,
    ):
        assert stream.status_code == 200
        lines = stream.iter_lines()  # one iterator: dropping it would hang up
        assert next(lines).startswith("data: ")  # the first ping: it is open
        assert listening() == 1
        assert metrics.live_listeners_by_workspace().get(workspace) == 1
        [holder] = [pid for pid in workers_of(server.process.pid) if sockets_of(pid, server.port)]
        os.kill(holder, signal.SIGKILL)
        # Gone without a word: its gauge file stays until a scrape sees it dead.
        wait_until(lambda: listening() == 0, message="the dead process's listener forgotten")
        assert not (
            Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]) / f"gauge_livesum_{holder}.db"
        ).exists()
        assert metrics.live_listeners_by_workspace().get(workspace, 0) == 0


def test_a_worker_s_output_is_json_lines_through_its_warm_shutdown(
    json_logs: None, workers: Workers
):
    worker = start_worker(workers)
    worker.stop()
    assert worker.process.returncode == 0, worker.log_tail()
    assert json_lines(worker.log())
