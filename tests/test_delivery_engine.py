"""The delivery engine in this process, on its own threads (its loop and its
database thread) as in a worker: claims, due times, fairness between bots,
backpressure, giving back what it cannot send in time, stopping, waking, and
surviving a failing database. Waits poll the database; nothing here asserts
on speed."""

import contextlib
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
import redis
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from bots.models import Bot
from events.engine import loop as engine_loop
from events.engine.loop import EngineConfig
from events.engine.process import EngineThread
from events.engine.stats import Period
from events.engine.webhook_client import Failure, WebhookResult
from events.models import DeliveryAttempt, Event, EventStatus
from events.services.events import event_record
from tests.factories import BotFactory, EventFactory
from tests.receiver import Answer, Receiver
from tests.servers import free_port, reachable_redis
from tests.worker import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


@pytest.fixture(autouse=True)
def engine_settings(settings):
    settings.EVENT_LEASE_SECONDS = 30.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0
    settings.EVENT_RETRY_BASE_SECONDS = 60.0


def config(**changes: Any) -> EngineConfig:
    values: dict[str, Any] = {
        "concurrency": 50,
        "per_bot": 10,
        "batch": 1000,
        "interval": 0.1,
        "report_interval": 3600.0,
    }
    values.update(changes)
    return EngineConfig(**values)


class Engine:
    """An engine running on threads of its own, as in a worker process."""

    def __init__(self, thread: EngineThread) -> None:
        self.thread = thread

    @property
    def engine(self) -> Any:
        return self.thread._engine

    def wake(self) -> None:
        self.thread.wake()

    def stop(self, grace: float = 5.0) -> None:
        self.thread.stop(grace)
        assert not self.thread.is_alive()


@pytest.fixture
def start_engine() -> Iterator[Any]:
    started: list[Engine] = []

    def start(**changes: Any) -> Engine:
        thread = EngineThread(config(**changes))
        thread.start()
        assert thread.ready.wait(10)
        engine = Engine(thread)
        started.append(engine)
        return engine

    yield start
    for engine in started:
        if engine.thread.is_alive():
            engine.stop(grace=0.0)


def bot_at(receiver: Receiver, path: str, answer: Answer | None = None, **fields: Any) -> Bot:
    return BotFactory(webhook_url=receiver.url_for(path, answer), **fields)


def due_now(bot: Bot, count: int = 1) -> list[str]:
    return [event_record(bot_id=bot.id, type="t", payload={"n": n}).id for n in range(count)]


def statuses(ids: list[str]) -> Counter[str]:
    return Counter(Event.objects.filter(id__in=ids).values_list("status", flat=True))


def wait_statuses(ids: list[str], expected: dict[str, int], timeout: float = 30.0) -> None:
    wait_until(
        lambda: statuses(ids) == Counter(expected),
        timeout=timeout,
        message=lambda: f"statuses {dict(statuses(ids))}, expected {expected}",
    )


# --- delivering --------------------------------------------------------------------------


def test_due_scheduled_and_unreachable_events_each_end_once(receiver, start_engine):
    hooked = bot_at(receiver, "/a")
    silent = BotFactory()
    now = timezone.now()
    due = due_now(hooked, 20)
    soon = [
        EventFactory(
            bot=hooked, status=EventStatus.SCHEDULED, due_at=now + timedelta(seconds=1.5)
        ).id
        for _ in range(5)
    ]
    ignored = due_now(silent, 3)
    start_engine()
    wait_statuses(due + soon, {"processed": 25})
    wait_statuses(ignored, {"ignored": 3})
    delivered = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert delivered == Counter(due + soon)
    for request in receiver.requests:
        Webhook(hooked.signing_secret).verify(request.body, request.headers)
    for event_id in soon:
        [request] = receiver.for_event(event_id)
        due_at = Event.objects.get(id=event_id).due_at.timestamp()
        assert request.at >= due_at - 0.05, "sent before it was due"
    assert DeliveryAttempt.objects.count() == 25


def test_connections_to_a_bot_are_kept_and_reused(receiver, start_engine):
    hooked = bot_at(receiver, "/a")
    engine = start_engine()
    for _ in range(10):
        ids = due_now(hooked)
        engine.wake()
        wait_statuses(ids, {"processed": 1})
    assert len({r.client_port for r in receiver.requests}) == 1


def test_a_slow_bot_holds_its_share_and_the_others_go_on(receiver, start_engine):
    slow = bot_at(receiver, "/slow", Answer(delay=1.5))
    fast = [bot_at(receiver, f"/fast{n}") for n in range(5)]
    slow_ids = due_now(slow, 12)
    engine = start_engine(per_bot=3)
    wait_until(lambda: receiver.in_flight["/slow"] == 3, message="the slow bot's share in flight")
    fast_ids = [event_id for bot in fast for event_id in due_now(bot, 4)]
    engine.wake()
    began = time.monotonic()
    wait_statuses(fast_ids, {"processed": 20})
    # Done while the slow bot's first three still hang.
    assert time.monotonic() - began < 1.5
    wait_statuses(slow_ids, {"processed": 12}, timeout=60)
    assert receiver.peak["/slow"] == 3


def test_a_black_holed_bot_is_cut_to_the_floor(settings, receiver, start_engine):
    settings.EVENT_DELIVERY_TIMEOUT = 0.3
    hole = bot_at(receiver, "/hole", Answer(delay=10.0))
    due_now(hole, 400)
    start_engine(per_bot=16)
    wait_until(
        lambda: receiver.requests and time.time() - receiver.requests[0].at > 4.5,
        timeout=30,
        message="four seconds of timeouts",
    )
    times = [r.at for r in receiver.requests]
    first = times[0]
    # At first the bot's whole share; once its requests time out, halved
    # each second down to the floor: two requests each 0.3 s, give or take.
    assert sum(1 for t in times if t < first + 0.2) == 16
    assert sum(1 for t in times if first + 3.5 <= t < first + 4.5) <= 10


def test_backpressure_a_full_process_claims_no_more_than_it_holds(receiver, start_engine):
    slow = [bot_at(receiver, f"/slow{n}", Answer(delay=0.3)) for n in range(4)]
    ids = [event_id for bot in slow for event_id in due_now(bot, 20)]
    start_engine(concurrency=4, per_bot=4)
    held_max = 0
    leased = Event.objects.filter(id__in=ids, status=EventStatus.PENDING).exclude(lease=0)
    deadline = time.monotonic() + 60
    while statuses(ids) != Counter(processed=80):
        held_max = max(held_max, leased.count())
        assert time.monotonic() < deadline, dict(statuses(ids))
        time.sleep(0.02)
    # Held (in flight, queued, unrecorded): a few times the concurrency at most.
    assert 4 <= held_max <= engine_loop.MAX_HELD_FACTOR * 4
    assert sum(receiver.peak.values()) <= 16
    assert max(receiver.peak.values()) <= 4
    assert Counter(r.headers["webhook-id"] for r in receiver.requests) == Counter(ids)


def test_deliveries_that_would_outlast_their_lease_are_given_back_not_sent_late(
    settings, receiver, start_engine, caplog
):
    # A 3 s lease: a 1 s timeout, 1 s to record it, and 1 s to wait for a
    # slot. One request at a time, each taking 0.8 s.
    settings.EVENT_LEASE_SECONDS = 3.0
    settings.EVENT_DELIVERY_TIMEOUT = 1.0
    slow = bot_at(receiver, "/slow", Answer(delay=0.8))
    ids = due_now(slow, 6)
    with caplog.at_level(logging.WARNING, logger="events.engine"):
        start_engine(per_bot=1)
        wait_statuses(ids, {"processed": 6}, timeout=60)
    assert "given back to be claimed again" in caplog.text
    # Given back, then claimed again: each sent once all the same.
    assert Counter(r.headers["webhook-id"] for r in receiver.requests) == Counter(ids)
    assert receiver.peak["/slow"] == 1


# --- waking, stopping, failing ---------------------------------------------------------------


def test_a_wake_up_claims_at_once(receiver, start_engine):
    hooked = bot_at(receiver, "/a")
    engine = start_engine(interval=60.0)
    time.sleep(0.3)  # its first claim found nothing; the next is a minute away
    ids = due_now(hooked)
    engine.wake()
    wait_statuses(ids, {"processed": 1}, timeout=10)


def test_stopping_gives_back_what_is_not_sent_and_another_process_delivers_it(
    receiver, start_engine
):
    hanging = bot_at(receiver, "/hang", Answer(delay=2.0))
    ids = due_now(hanging, 6)
    later = [
        EventFactory(
            bot=hanging,
            status=EventStatus.SCHEDULED,
            due_at=timezone.now() + timedelta(seconds=1.8),
        ).id
    ]
    engine = start_engine(per_bot=2)
    wait_until(lambda: receiver.in_flight["/hang"] == 2, message="two requests in flight")
    engine.stop(grace=0.1)
    # The two cut short and the four queued: back in the table, due,
    # unclaimed; the one not due yet, untouched.
    rows = Event.objects.filter(id__in=ids + later)
    assert set(rows.values_list("lease", flat=True)) == {0}
    assert rows.filter(status=EventStatus.PROCESSED).count() == 0
    assert Event.objects.get(id=later[0]).status == EventStatus.SCHEDULED
    assert DeliveryAttempt.objects.count() == 0

    receiver._routes["/hang"] = Answer()
    start_engine()
    wait_statuses(ids + later, {"processed": 7})


def claims_fail(monkeypatch: pytest.MonkeyPatch, error: Exception, times: int) -> dict[str, int]:
    """The engine's next `times` claims raise `error`; then they work."""
    real_claim = engine_loop.deliveries_claim
    failures = {"left": times}

    def failing_claim(**kwargs: Any) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise error
        return real_claim(**kwargs)

    monkeypatch.setattr(engine_loop, "deliveries_claim", failing_claim)
    return failures


def test_a_failing_database_is_waited_out(receiver, start_engine, monkeypatch, caplog):
    failures = claims_fail(monkeypatch, OperationalError("the database went away"), 3)
    ids = due_now(bot_at(receiver, "/a"), 3)
    with caplog.at_level(logging.INFO, logger="events.engine"):
        start_engine()
        wait_statuses(ids, {"processed": 3}, timeout=30)
    assert failures["left"] == 0
    # The database away is expected: one line with its cause, no trace, and
    # one when it works again.
    [failed] = [r for r in caplog.records if "Claiming due events failed" in r.getMessage()]
    assert failed.levelno == logging.WARNING and failed.exc_info is None
    assert "OperationalError: the database went away" in failed.getMessage()
    assert "Claiming due events works again after 3 failed tries" in caplog.text


def test_a_bug_in_a_claim_is_logged_with_its_trace_once(
    receiver, start_engine, monkeypatch, caplog
):
    claims_fail(monkeypatch, KeyError("a bug"), 2)
    ids = due_now(bot_at(receiver, "/a"), 1)
    with caplog.at_level(logging.WARNING, logger="events.engine"):
        start_engine()
        wait_statuses(ids, {"processed": 1}, timeout=30)
    lines = [r for r in caplog.records if "Claiming due events failed" in r.getMessage()]
    assert [bool(r.exc_info) for r in lines] == [True, False]


def test_the_engine_reports_how_it_keeps_up(receiver, start_engine, caplog):
    hooked = bot_at(receiver, "/a")
    ids = due_now(hooked, 5)
    with caplog.at_level(logging.INFO, logger="events.engine"):
        engine = start_engine(report_interval=0.5)
        wait_statuses(ids, {"processed": 5})
        wait_until(lambda: "5 attempts (" in caplog.text, message="a report")
        engine.stop()
    line = next(r.getMessage() for r in caplog.records if "5 attempts (" in r.getMessage())
    assert ": 5 answered)" in line
    assert "processed 5" in line
    assert "In flight 0 of 50" in line
    assert "Claim lag: p50" in line


def engine_lines(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == name]


# A failed attempt's own line is at DEBUG (a webhook refusing every
# connection would write hundreds a second): the report counts attempts by
# what their request came to, and sums each failing bot's up in a line.
def test_a_report_counts_attempts_by_what_they_came_to_and_sums_failing_bots_up(
    receiver: Receiver, start_engine: Any, caplog: pytest.LogCaptureFixture, settings: Any
):
    settings.EVENT_DELIVERY_TIMEOUT = 1.0
    caplog.set_level(logging.INFO)
    answering = bot_at(receiver, "/ok")
    failing = bot_at(receiver, "/busy", Answer(503, b"overloaded"))
    slow = bot_at(receiver, "/slow", Answer(200, delay=3.0))
    refusing = bot_at(receiver, "/unused")
    refusing.webhook_url = f"http://127.0.0.1:{free_port()}/hook"
    refusing.save(update_fields=["webhook_url"])
    events = {bot.id: due_now(bot, 3) for bot in (answering, failing, slow, refusing)}

    engine = start_engine()
    wait_statuses(events[answering.id], {EventStatus.PROCESSED: 3})
    for bot in (failing, slow, refusing):
        wait_statuses(events[bot.id], {EventStatus.PENDING: 3})
    engine.stop()

    assert not [r for r in engine_lines(caplog, "events.delivery") if r.levelno >= logging.INFO]
    lines = [record.getMessage() for record in engine_lines(caplog, "events.engine")]
    [report] = [line for line in lines if line.startswith("Deliveries in ")]
    assert "12 attempts (" in report
    assert ": 6 answered, 3 could not connect, 3 timed out)" in report
    assert "ended: pending 9, processed 3" in report
    per_bot = {
        record.bot_id: record.getMessage()
        for record in engine_lines(caplog, "events.engine")
        if getattr(record, "bot_id", None)
    }
    assert set(per_bot) == {failing.id, slow.id, refusing.id}
    assert (
        "failed attempts: 3 (3 answered with an error); last: The webhook answered HTTP 503"
        in (per_bot[failing.id])
    )
    assert "failed attempts: 3 (3 timed out); last: " in per_bot[slow.id]
    assert (
        "failed attempts: 3 (3 could not connect); last: Could not connect"
        in (per_bot[refusing.id])
    )


def test_a_period_counts_successes_apart_from_failures():
    period = Period(started=0.0)
    ok = WebhookResult(started_at=datetime.now(UTC), duration_ms=5, status_code=204)
    refused = WebhookResult(
        started_at=datetime.now(UTC),
        duration_ms=1,
        failure=Failure.CONNECTION,
        error="Could not connect",
    )
    period.attempt_ended("bot_a", ok)
    period.attempt_ended("bot_b", refused)
    period.attempt_ended("bot_b", refused)

    assert period.sent == 3
    assert period.attempts == {"answered": 1, "could not connect": 2}
    assert list(period.failing) == ["bot_b"]
    assert period.failing["bot_b"].summary() == (
        "failed attempts: 2 (2 could not connect); last: Could not connect"
    )


def connections_in_use() -> int:
    """Connections of this process's pool that some thread holds."""
    stats = connection.pool.get_stats()
    return int(stats["pool_size"] - stats["pool_available"])


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="counts the connections of PostgreSQL's pool",
)
def test_each_database_thread_gives_its_connection_back(receiver, start_engine):
    # In this process the threads borrow from the web's pool (a worker
    # process gives each its own, and closes it the same way).
    ids = due_now(bot_at(receiver, "/a"), 50)
    before = connections_in_use()
    engine = start_engine()
    engine.wake()
    wait_statuses(ids, {"processed": 50})
    assert connections_in_use() > before
    engine.stop()
    assert connections_in_use() == before


def test_threads_end_with_the_engine(start_engine):
    before = {t.name for t in threading.enumerate()}
    engine = start_engine()
    engine.stop()
    after = {t.name for t in threading.enumerate()}
    assert not {name for name in after - before if name.startswith("deliveries")}


def woken_once_idle(settings: Any, receiver: Receiver, wake: Callable[[], object]) -> None:
    """The process's engine, idle, delivers an event due now once `wake()`
    runs: nothing else would make it claim again for a minute."""
    from events.engine import process

    settings.EVENT_DISPATCH_INTERVAL = 60.0
    hooked = bot_at(receiver, "/a")
    process.start_engine()
    try:
        assert process._thread is not None and process._thread.ready.wait(10)
        time.sleep(0.3)  # its first claim found nothing
        ids = due_now(hooked)
        wake()
        wait_statuses(ids, {"processed": 1}, timeout=10)
    finally:
        process.stop_engine()
    assert process._thread is None


def test_the_wake_up_task_wakes_the_engine_of_its_process(settings, receiver):
    from events import tasks

    settings.EVENT_WAKE_REDIS_URL = ""
    woken_once_idle(settings, receiver, tasks.wake_deliveries.apply)  # as a worker runs it


def test_a_wake_up_through_redis_wakes_an_engine(settings, receiver):
    from events.engine import wakeups

    url = reachable_redis(settings.EVENT_WAKE_REDIS_URL or "redis://127.0.0.1:6379/0")
    settings.EVENT_WAKE_REDIS_URL = url
    settings.CELERY_TASK_DEFAULT_QUEUE = f"test-wake-{uuid.uuid4().hex}"
    try:
        # As a web process's wake-up thread sends it.
        woken_once_idle(settings, receiver, wakeups.wake_send)
    finally:
        redis.Redis.from_url(url).delete(wakeups.wake_key())


def test_no_engine_when_a_worker_is_told_to_deliver_nothing(settings):
    from events.engine import process

    settings.EVENT_DELIVERY_CONCURRENCY = 0
    process.start_engine()
    assert process._thread is None
    process.wake_engine()  # nothing to wake: nothing happens
    process.stop_engine()


@contextlib.contextmanager
def engine_db_thread() -> Iterator[Callable[[Callable[[], T]], T]]:
    """Run functions on a thread as the engine's database thread runs them
    (engine_loop._on_db_thread: its session configured once); the thread's
    connection closed at the end."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL settings")
    with ThreadPoolExecutor(max_workers=1) as db:
        try:
            yield lambda function: db.submit(engine_loop._on_db_thread, function).result()
        finally:
            db.submit(lambda: connection.close()).result()


def shown(*names: str) -> list[str]:
    """The session's values of the settings `names`."""
    values = []
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f"SHOW {name}")
            values.append(str(cursor.fetchone()[0]))
    return values


@pytest.mark.parametrize("asynchronous", [True, False])
def test_the_engine_commits_without_waiting_for_the_disk_unless_told_to(settings, asynchronous):
    settings.EVENT_DELIVERY_ASYNC_COMMIT = asynchronous
    with engine_db_thread() as run:
        value = run(lambda: shown("synchronous_commit"))
    assert value == ["off" if asynchronous else "on"]


def test_a_transaction_the_engine_abandons_gives_its_rows_back(settings):
    """A worker cut off mid-transaction: the server ends what it left open,
    so other processes' claims (which skip locked rows) reach its events."""
    settings.EVENT_LEASE_SECONDS = 2.0  # abandoned after 1 s idle
    event = EventFactory()

    def lock_and_vanish() -> None:
        # What a process cut off after its first statement leaves: an open
        # transaction holding the row, and nobody to commit it.
        connection.set_autocommit(False)
        list(Event.objects.select_for_update().filter(id=event.id))

    def claimable() -> bool:
        with transaction.atomic():
            return Event.objects.select_for_update(skip_locked=True).filter(id=event.id).exists()

    with engine_db_thread() as run:
        run(lock_and_vanish)
        assert not claimable()
        wait_until(claimable, timeout=15, message="the abandoned transaction to end")


def test_the_engine_s_sessions_ask_for_keepalives():
    """A session cut off mid-statement is not idle in its transaction: the
    server's keepalives are what end it."""
    with engine_db_thread() as run:
        values = run(
            lambda: shown("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count")
        )
    assert values == ["10", "5", "3"]
