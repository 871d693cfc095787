"""Log lines as LOGGING's handler writes them (platform_site/observability/log_config.py),
from the records real code paths log: a request's access and error lines
with its request id, taken from X-Request-Id or made and echoed; tracebacks
inside the JSON object and without frame locals in text; delivery failures
with their event, bot and attempt; and the request id carried into the
tasks a request enqueues and onto the lines those tasks log."""

import asyncio
import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery.app.trace import build_tracer
from django.utils import timezone
from rest_framework.test import APIClient
from structlog.contextvars import (
    bind_contextvars,
    bound_contextvars,
    get_contextvars,
    reset_contextvars,
)

import events.views
from bots.models import Bot
from events.engine.claims import deliveries_claim
from events.models import Event, EventStatus
from events.services.events import event_record
from events.tasks import purge_expired_events
from files.tasks import index_file
from platform_site.celery import app
from platform_site.observability.log_config import formatter
from tests.conftest import assert_error
from tests.delivering import deliver_claimed
from tests.receiver import Answer, Receiver
from tests.worker import celery_queue, wait_until

__all__ = ["celery_queue"]  # a fixture, used by name

GENERATED_ID = re.compile(r"[0-9a-f]{32}")
ACCESS = "platform_site.access"
ERRORS = "platform_site.errors"


class Capture(logging.Handler):
    """Every record the test's thread (which runs the test client's requests
    and the tasks) logs to the root logger, formatted as LOGGING's console
    handler formats it. Threads running beside it (a Redis subscriber
    connecting) are left out."""

    def __init__(self, *, json: bool) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(formatter(json=json))
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []
        self.outputs: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        self.records.append(record)
        self.outputs.append(self.format(record))

    def text(self) -> str:
        """What a stream handler would have written."""
        return "".join(f"{output}\n" for output in self.outputs)

    def lines(self) -> list[dict[str, Any]]:
        """Each line of the output, parsed: one JSON object per line."""
        parsed = []
        for line in self.text().splitlines():
            value = json.loads(line)
            assert isinstance(value, dict), line
            parsed.append(value)
        return parsed

    def of(self, logger: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line["logger"] == logger]


@contextmanager
def capturing(*, json: bool = True, level: int = logging.INFO) -> Iterator[Capture]:
    root = logging.getLogger()
    capture = Capture(json=json)
    previous = root.level
    root.addHandler(capture)
    root.setLevel(level)
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        root.setLevel(previous)


@pytest.fixture
def captured() -> Iterator[Capture]:
    with capturing() as capture:
        yield capture


# --- a request's lines ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_access_line_is_one_json_object_with_the_request_id(captured):
    response = APIClient().get("/healthz", HTTP_X_REQUEST_ID="req-4f1a.b:2@edge/1+=_-")
    assert response.status_code == 200
    assert response["X-Request-Id"] == "req-4f1a.b:2@edge/1+=_-"

    [line] = captured.of(ACCESS)
    assert line["message"] == "GET /healthz 200"
    assert line["level"] == "info"
    assert line["request_id"] == "req-4f1a.b:2@edge/1+=_-"
    assert (line["method"], line["path"], line["status"]) == ("GET", "/healthz", 200)
    assert line["client"] == "127.0.0.1"
    assert isinstance(line["duration_ms"], int | float) and line["duration_ms"] >= 0
    assert datetime.fromisoformat(line["timestamp"]).utcoffset() == timedelta(0)


@pytest.mark.django_db
def test_an_error_line_carries_the_error_id_of_the_body_and_the_request_id(bot, captured):
    client = APIClient()
    client.credentials(HTTP_X_BOT_ID=bot.id)
    response = client.get("/v1/chat/events", HTTP_X_REQUEST_ID="req-error-1")
    body = assert_error(response, 401, "Unauthorized")

    [error] = captured.of(ERRORS)
    assert error["error_id"] == body["id"]
    assert body["id"] in error["message"]
    assert error["request_id"] == "req-error-1"
    [access] = captured.of(ACCESS)
    assert access["status"] == 401
    assert access["request_id"] == "req-error-1"


@pytest.mark.django_db
def test_every_line_of_a_request_carries_its_id_and_no_line_after_it(runtime_client, captured):
    client = runtime_client()
    logging.getLogger("tests").info("before the request")
    client.get("/v1/chat/events/evt_01J00000000000000000000009", HTTP_X_REQUEST_ID="req-every")
    client.post("/v1/chat/events", {"type": ""}, format="json", HTTP_X_REQUEST_ID="req-other")
    logging.getLogger("tests").info("after the requests")

    lines = captured.lines()
    assert [line["message"] for line in (lines[0], lines[-1])] == [
        "before the request",
        "after the requests",
    ]
    during = lines[1:-1]
    # An error line and an access line each.
    assert [line["logger"] for line in during] == [ERRORS, ACCESS, ERRORS, ACCESS]
    assert [line["request_id"] for line in during] == ["req-every"] * 2 + ["req-other"] * 2
    assert "request_id" not in lines[0]
    assert "request_id" not in lines[-1]
    assert "request_id" not in get_contextvars()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "given",
    [
        "has space",
        "line\nbreak",
        "trailing-newline\n",
        "x" * 129,
        "x" * 200,
        "",
        "caf\u00e9",
        "semi;colon",
        'quote"d',
    ],
)
def test_a_request_id_that_is_not_a_sane_token_is_replaced(captured, given):
    response = APIClient().get("/healthz", HTTP_X_REQUEST_ID=given)
    made = response["X-Request-Id"]
    assert GENERATED_ID.fullmatch(made), made
    [line] = captured.of(ACCESS)
    assert line["request_id"] == made


@pytest.mark.django_db
def test_the_longest_request_id_kept_is_128_characters(captured):
    longest = "a" * 128
    assert APIClient().get("/healthz", HTTP_X_REQUEST_ID=longest)["X-Request-Id"] == longest


@pytest.mark.django_db
def test_without_a_request_id_one_is_made_for_each_request(captured):
    client = APIClient()
    made = [client.get("/healthz")["X-Request-Id"] for _ in range(3)]
    assert all(GENERATED_ID.fullmatch(request_id) for request_id in made), made
    assert len(set(made)) == 3
    assert [line["request_id"] for line in captured.of(ACCESS)] == made


@pytest.mark.django_db
def test_no_access_line_when_it_is_off(settings, captured):
    settings.WEB_ACCESS_LOG = False
    response = APIClient().get("/healthz")
    assert response.status_code == 200
    # Still an id for the client to quote.
    assert GENERATED_ID.fullmatch(response["X-Request-Id"])
    assert captured.of(ACCESS) == []


# --- the text format -------------------------------------------------------------------------


@pytest.mark.django_db
def test_text_lines_are_one_per_record_with_the_request_id(bot):
    client = APIClient()
    client.credentials(HTTP_X_BOT_ID=bot.id)
    with capturing(json=False) as captured:
        client.get("/v1/chat/events", HTTP_X_REQUEST_ID="req-text-1")
        client.get("/healthz", HTTP_X_REQUEST_ID="req-text-2")
    lines = captured.text().splitlines()
    assert len(captured.records) == 3
    assert len(lines) == 3, captured.text()
    assert "request_id=req-text-1" in lines[0] and "error_id=err_" in lines[0]
    assert "GET /v1/chat/events 401" in lines[1] and "request_id=req-text-1" in lines[1]
    assert "GET /healthz 200" in lines[2] and "request_id=req-text-2" in lines[2]


@pytest.mark.django_db
def test_a_line_break_in_the_path_does_not_forge_a_text_line():
    forged = "/x%0A2026-01-01T00:00:00.000000Z [info     ] GET /admin/ 200 [platform_site.access]"
    with capturing(json=False) as captured:
        response = APIClient().get(forged)
    assert response.status_code == 404
    assert len(captured.text().splitlines()) == len(captured.records), captured.text()


@pytest.mark.django_db
def test_a_line_break_in_the_path_stays_inside_its_json_line(captured):
    APIClient().get("/x%0Aforged")
    lines = captured.lines()
    assert len(lines) == len(captured.records) == 2
    [access] = captured.of(ACCESS)
    assert access["path"] == "/x%0Aforged"
    assert access["message"] == "GET /x%0Aforged 404"


@pytest.mark.django_db
def test_the_access_line_gives_a_unicode_path_percent_encoded_in_message_and_field():
    with capturing(json=False) as captured:
        APIClient().get("/v1/caf%C3%A9")
    [line] = [line for line in captured.text().splitlines() if "platform_site.access" in line]
    assert "GET /v1/caf%C3%A9 404" in line and "path=/v1/caf%C3%A9" in line
    assert "café" not in line


# --- tracebacks ----------------------------------------------------------------------------


@pytest.fixture
def failing_read(monkeypatch: pytest.MonkeyPatch) -> str:
    """GET /v1/chat/events/{id} fails unexpectedly, with a secret in a local variable."""
    secret = f"hunter2-{uuid.uuid4().hex}"

    def event_get(**kwargs: Any) -> Any:
        signing_secret = secret  # noqa: F841 - a local a rich traceback would print
        raise RuntimeError("the read went wrong")

    monkeypatch.setattr(events.views, "event_get", event_get)
    return secret


@pytest.mark.django_db
def test_a_traceback_is_inside_the_one_json_object(runtime_client, failing_read):
    client = runtime_client()
    with capturing() as captured:
        response = client.get(
            "/v1/chat/events/evt_01J00000000000000000000009", HTTP_X_REQUEST_ID="req-500"
        )
    body = assert_error(response, 500, "Internal")
    assert len(captured.text().splitlines()) == len(captured.records) == 2
    [error] = captured.of(ERRORS)
    assert error["level"] == "error"
    assert error["error_id"] == body["id"]
    assert error["request_id"] == "req-500"
    assert error["exception"].startswith("Traceback (most recent call last):")
    assert "RuntimeError: the read went wrong" in error["exception"]
    assert "exc_info" not in error
    assert failing_read not in captured.text()


@pytest.mark.django_db
def test_a_text_traceback_prints_no_frame_locals(runtime_client, failing_read):
    client = runtime_client()
    with capturing(json=False) as captured:
        response = client.get("/v1/chat/events/evt_01J00000000000000000000009")
    assert_error(response, 500, "Internal")
    text = captured.text()
    assert "Traceback (most recent call last):" in text
    assert "RuntimeError: the read went wrong" in text
    assert "in event_get" in text
    assert failing_read not in text


# --- delivery lines ------------------------------------------------------------------------


@pytest.fixture
def engine_settings(settings: Any) -> None:
    settings.EVENT_LEASE_SECONDS = 60.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0
    settings.EVENT_RETRY_BASE_SECONDS = 5.0
    settings.EVENT_RETRY_MAX_DELAY_SECONDS = 7200.0
    settings.EVENT_RETRY_WINDOW_SECONDS = 24 * 3600.0


def deliver(bot: Bot) -> str:
    """An event due now, claimed and delivered to the bot's webhook."""
    event = event_record(bot_id=bot.id, type="order.created", payload={})
    claimed = deliveries_claim(limit=10)
    assert claimed.event_ids == [event.id]
    deliver_claimed(claimed)
    return event.id


@pytest.mark.django_db
def test_a_failed_attempt_line_names_its_event_bot_and_attempt(
    hooked: Bot, receiver: Receiver, engine_settings
):
    # At DEBUG: the worker's report sums failed attempts up per bot.
    with capturing(level=logging.DEBUG) as captured:
        lines = failed_attempt_lines(hooked, receiver, captured)
    assert {line["level"] for line in lines} == {"debug"}


def failed_attempt_lines(
    hooked: Bot, receiver: Receiver, captured: Capture
) -> list[dict[str, Any]]:
    receiver.answer(Answer(503, b"busy"), Answer(503, b"busy"), Answer(410, b"gone"))
    event_id = deliver(hooked)
    Event.objects.filter(id=event_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    deliver_claimed(deliveries_claim(limit=10))
    gone = deliver(hooked)

    lines = captured.of("events.delivery")
    assert [(line["event_id"], line["bot_id"], line["attempt"]) for line in lines] == [
        (event_id, hooked.id, 1),
        (event_id, hooked.id, 2),
        (gone, hooked.id, 1),
    ]
    assert "attempt 1 failed, retry at" in lines[0]["message"]
    assert "attempt 2 failed, retry at" in lines[1]["message"]
    assert "attempt 1 failed for good" in lines[2]["message"]
    assert Event.objects.get(id=gone).status == EventStatus.FAILED
    return lines


# --- into tasks ------------------------------------------------------------------------------


def published(queue: str) -> Any:
    """The next message in the queue, taken off it."""
    with app.connection_for_read() as connection:
        bound = app.amqp.queues[queue](connection.default_channel)
        bound.declare()
        return wait_until(lambda: bound.get(no_ack=True), timeout=10, message="a message")


def test_a_task_published_within_a_request_context_carries_its_id(celery_queue):
    with bound_contextvars(request_id="req-publish-1"):
        index_file.apply_async(("file_01J00000000000000000000001", 1))
    message = published(celery_queue)
    assert message.headers["task"] == "files.tasks.index_file"
    assert message.headers["request_id"] == "req-publish-1"

    index_file.apply_async(("file_01J00000000000000000000001", 1))
    assert "request_id" not in published(celery_queue).headers


@pytest.mark.django_db(transaction=True)
def test_the_task_a_request_enqueues_carries_the_request_id(
    runtime_client, file_storage, celery_queue
):
    client = runtime_client()
    data = b"# Guide\n\nHello.\n"
    body = {"key": "guide.md", "size": len(data), "contentType": "text/markdown", "index": True}
    announced = client.put("/v1/files", body, format="json")
    assert announced.status_code == 200, announced.content
    path = announced.json()["file"]["uploadUrl"].split("://", 1)[1].split("/", 1)[1]
    # The upload commits, and its commit enqueues the indexing.
    sent = APIClient().put(
        f"/{path}", data=data, content_type="text/markdown", HTTP_X_REQUEST_ID="req-upload-7"
    )
    assert sent.status_code == 200, sent.content

    message = published(celery_queue)
    assert message.headers["task"] == "files.tasks.index_file"
    assert message.headers["request_id"] == "req-upload-7"


def run_as_a_worker(task: Any, headers: dict[str, Any]) -> Any:
    """Run the task as a worker runs a message: its headers become the
    task's request."""
    task_id = str(uuid.uuid4())
    request = {"id": task_id, "task": task.name, "root_id": task_id, **headers}
    tracer = build_tracer(task.name, task, app=app, eager=True, propagate=True)
    tracer(task_id, (), {}, request)
    return task_id


@pytest.mark.django_db
def test_a_task_s_lines_carry_the_request_id_of_its_message_and_its_own_ids(captured):
    task_id = run_as_a_worker(purge_expired_events, {"request_id": "req-task-3"})
    logging.getLogger("tests").info("after the task")

    [line] = captured.of("events.tasks")
    assert line["message"].startswith("Deleted 0 events")
    assert line["request_id"] == "req-task-3"
    assert line["task"] == "events.tasks.purge_expired_events"
    assert line["task_id"] == task_id
    after = captured.of("tests")[0]
    assert {"request_id", "task", "task_id"}.isdisjoint(after)


@pytest.mark.django_db
def test_a_task_from_no_request_has_its_own_ids_only(captured):
    task_id = run_as_a_worker(purge_expired_events, {})
    [line] = captured.of("events.tasks")
    assert "request_id" not in line
    assert (line["task"], line["task_id"]) == ("events.tasks.purge_expired_events", task_id)


@pytest.mark.django_db
def test_a_task_run_eagerly_keeps_the_caller_s_request_id_and_gives_its_context_back(
    captured,
):
    with bound_contextvars(request_id="req-eager"):
        result = purge_expired_events.apply()
        assert get_contextvars() == {"request_id": "req-eager"}
    assert result.successful()
    [line] = captured.of("events.tasks")
    assert line["request_id"] == "req-eager"
    assert line["task"] == "events.tasks.purge_expired_events"
    assert line["task_id"] == result.id


def test_the_json_formatter_writes_what_json_cannot_hold_as_text():
    record = logging.LogRecord("tests", logging.INFO, __file__, 1, "at %s", ("noon",), None)
    record.when = datetime(2026, 1, 2, 12, tzinfo=UTC)
    record.ids = ("a", "b")
    record.callback = Callable
    line = json.loads(formatter(json=True).format(record))
    assert line["message"] == "at noon"
    assert line["when"] == "2026-01-02T12:00:00+00:00"
    assert line["ids"] == ["a", "b"]
    assert isinstance(line["callback"], str)


# --- mends ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_asgi_request_leaves_its_id_bound_for_what_streams_after():
    # Django's ASGI handler runs the (synchronous) middleware on a thread with
    # a copy of the request's context and copies it back: the id stays bound
    # in the task that then streams the body, whose lines carry it.
    from django.test import AsyncClient

    async def request() -> tuple[Any, dict[str, Any]]:
        response = await AsyncClient().get("/healthz", headers={"X-Request-Id": "stream-req-1"})
        return response, get_contextvars()

    response, context = asyncio.run(request())
    assert response.status_code == 200
    assert response["X-Request-Id"] == "stream-req-1"
    assert context.get("request_id") == "stream-req-1"
    # The test's own context, which ran no request, holds none.
    assert "request_id" not in get_contextvars()


@pytest.mark.django_db
def test_a_wsgi_request_leaves_nothing_bound_on_its_thread():
    APIClient().get("/healthz", HTTP_X_REQUEST_ID="thread-req-1")
    assert "request_id" not in get_contextvars()


@pytest.mark.django_db
def test_a_signed_url_s_signature_stays_out_of_the_access_line(captured):
    APIClient().get("/v1/downloads/c2lnbmVk:secret-signature")
    [access] = [line for line in captured.lines() if line["logger"] == "platform_site.access"]
    assert access["path"] == "/v1/downloads/…"
    assert "secret-signature" not in json.dumps(captured.lines())


@pytest.mark.django_db
def test_controls_and_unicode_line_breaks_are_escaped_in_text():
    with capturing(json=False) as captured:
        APIClient().get("/x%0B%0C%C2%85%E2%80%A8%1B[31mred")
    text = captured.text()
    assert len(text.splitlines()) == len(captured.records), text
    assert "\x1b" not in text and "\\x1b" in text and "\\u2028" in text


def test_a_browser_may_send_and_read_the_request_id(client):
    preflight = client.options(
        "/chat/any-webhook/users",
        HTTP_ORIGIN="https://app.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-request-id",
    )
    assert "x-request-id" in preflight["Access-Control-Allow-Headers"]
    answer = client.get("/chat/any-webhook/hello/", HTTP_ORIGIN="https://app.example")
    assert "X-Request-Id" in answer["Access-Control-Expose-Headers"]


# --- expired delivery wake-ups ---------------------------------------------------------------


def test_an_expired_wake_up_is_discarded_without_a_line_and_other_tasks_keep_theirs():
    from events.tasks import wake_deliveries

    # As celery.worker.request words it when a worker meets a task past its
    # expiry (Request.revoked): thousands of wake-ups after a pause.
    worker_requests = logging.getLogger("celery.worker.request")
    with capturing() as capture:
        worker_requests.info("Discarding revoked task: %s[%s]", wake_deliveries.name, "a1")
        worker_requests.info("Discarding revoked task: %s[%s]", "files.tasks.index_file", "b2")
    [kept] = capture.of("celery.worker.request")
    assert kept["message"] == "Discarding revoked task: files.tasks.index_file[b2]"


@pytest.mark.parametrize("json_format", [True, False], ids=["json", "text"])
@pytest.mark.parametrize(
    "path, context",
    [
        ("/v1/chat/events", {"request_id": "req-1"}),
        ("/x%0Aforged\u2028", {"request_id": "req-2", "task": "t", "client": "bound"}),
        ("/v1/caf%C3%A9", {}),
    ],
)
def test_the_access_line_is_rendered_as_structlog_renders_it(json_format, path, context):
    # The access line skips structlog's processors (log_config._Formatter):
    # what it writes must be what they would have, but for the time.
    fast = formatter(json=json_format)
    slow = formatter(json=json_format)
    slow_format = super(type(slow), slow).format
    record = logging.getLogger(ACCESS).makeRecord(
        ACCESS,
        logging.INFO,
        __file__,
        1,
        "%s %s %s",
        ("POST", path, 201),
        None,
        extra={"method": "POST", "path": path, "status": 201, "duration_ms": 1.9, "client": "::1"},
    )
    bound = bind_contextvars(**context)
    try:
        rendered, expected = fast.format(record), slow_format(record)
    finally:
        reset_contextvars(**bound)
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
    assert stamp.sub("T", rendered) == stamp.sub("T", expected)
    assert "\n" not in rendered
