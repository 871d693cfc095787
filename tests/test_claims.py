"""Claiming due events: what is due, in which order, how many, under which
lease, which bots are left out, what a claim loads and when the next event
falls due; processes claiming at once; and the wake-up that has a worker
claim an event created due now."""

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
from celery import current_app
from django.db import connection
from django.utils import timezone
from kombu.exceptions import OperationalError

from events import tasks
from events.engine import wakeups
from events.engine.claims import deliveries_claim
from events.models import DeliveryAttempt, Event, EventStatus
from events.services.events import event_record
from tests.delivering import deliver_claimed
from tests.factories import BotFactory, EventFactory
from tests.servers import reachable_redis

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def engine_settings(settings):
    settings.EVENT_LEASE_SECONDS = 60.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0


@pytest.fixture
def bot(bot):
    """The bot, with a webhook (never called here): claims of a bot without
    one end its events `ignored` at once."""
    bot.webhook_url = "http://bot.invalid/hook"
    bot.save(update_fields=["webhook_url"])
    return bot


def ago(seconds: float) -> datetime:
    return timezone.now() - timedelta(seconds=seconds)


def due(bot: Any, seconds_ago: float, status: str = EventStatus.SCHEDULED) -> Event:
    """A scheduled event (or one waiting for a retry) due `seconds_ago` seconds ago."""
    return EventFactory(bot=bot, status=status, due_at=ago(seconds_ago))


def end_lease(event_id: str) -> None:
    """As if the lease on the event ran out."""
    Event.objects.filter(id=event_id).update(next_attempt_at=ago(1))


# --- what is claimed ------------------------------------------------------------------


def test_claims_earliest_first(bot):
    late = due(bot, 10)
    earliest = due(bot, 30)
    middle = due(bot, 20)
    retry = due(bot, 25, status=EventStatus.PENDING)
    claimed = deliveries_claim(limit=10)
    assert claimed.event_ids == [earliest.id, retry.id, middle.id, late.id]
    assert [d.due for d in claimed.deliveries] == [
        e.next_attempt_at.timestamp() for e in (earliest, retry, middle, late)
    ]


def test_a_claim_leases_and_starts_what_is_due(bot):
    scheduled, retry = due(bot, 5), due(bot, 5, status=EventStatus.PENDING)
    before = timezone.now()
    claim = deliveries_claim(limit=10)
    after = timezone.now()
    assert claim.lease > 0
    assert before.timestamp() <= claim.claimed_at <= after.timestamp()
    rows = {row.id: row for row in Event.objects.all()}
    # Its delivery starts now, so it is no longer cancelable.
    assert rows[scheduled.id].status == EventStatus.PENDING
    assert rows[retry.id].status == EventStatus.PENDING
    for row in rows.values():
        assert row.lease == claim.lease
        assert row.next_attempt_at is not None
        # the lease runs from now, the event being overdue
        assert before + timedelta(seconds=60) <= row.next_attempt_at
        assert row.next_attempt_at <= after + timedelta(seconds=60)


def test_claims_at_most_the_limit(bot):
    events = [due(bot, 50 - i) for i in range(5)]
    first = deliveries_claim(limit=2)
    second = deliveries_claim(limit=2)
    third = deliveries_claim(limit=2)
    assert first.event_ids == [events[0].id, events[1].id]
    assert second.event_ids == [events[2].id, events[3].id]
    assert third.event_ids == [events[4].id]
    assert len({first.lease, second.lease, third.lease}) == 3
    assert deliveries_claim(limit=2).event_ids == []


def test_an_empty_claim(bot):
    claim = deliveries_claim(limit=10)
    assert claim.event_ids == []
    assert claim.deliveries == []
    assert claim.next_due is None


def test_scheduled_events_not_yet_due_are_not_claimed(bot):
    later = EventFactory(bot=bot, status=EventStatus.SCHEDULED, due_at=ago(-3600))
    retry_later = EventFactory(bot=bot, status=EventStatus.PENDING, due_at=ago(-60))
    assert deliveries_claim(limit=10).event_ids == []
    for event in (later, retry_later):
        row = Event.objects.get(id=event.id)
        assert row.lease == 0
        assert row.next_attempt_at == event.next_attempt_at


def test_a_claim_says_when_the_next_event_falls_due(bot):
    soon = EventFactory(bot=bot, status=EventStatus.SCHEDULED, due_at=ago(-1.5))
    EventFactory(bot=bot, status=EventStatus.SCHEDULED, due_at=ago(-60))
    claimed = deliveries_claim(limit=10)
    assert claimed.event_ids == []
    assert claimed.next_due == soon.next_attempt_at.timestamp()
    # Of the bots it may claim for.
    assert deliveries_claim(limit=10, exclude_bot_ids=[bot.id]).next_due is None


def test_the_end_of_a_lease_is_when_its_event_falls_due_again(bot):
    due(bot, 5)
    first = deliveries_claim(limit=10)
    assert deliveries_claim(limit=10).next_due == pytest.approx(first.claimed_at + 60, abs=0.01)


def test_what_a_claim_loads_to_send(bot, settings):
    settings.EVENT_DELIVERY_TIMEOUT = 7.0
    bot.webhook_url = "https://bot.example/hook?x=1"
    bot.save(update_fields=["webhook_url"])
    event = EventFactory(
        bot=bot, status=EventStatus.PENDING, due_at=ago(3), payload={"text": "héllo", "n": [1]}
    )
    Event.objects.filter(id=event.id).update(attempt_count=2, first_attempt_at=ago(100))
    [delivery] = deliveries_claim(limit=10).deliveries
    assert delivery.request.url == "https://bot.example/hook?x=1"
    assert delivery.request.message_id == event.id
    assert delivery.request.secrets == (bot.signing_secret,)
    assert delivery.request.timeout == 7.0
    assert delivery.attempt_count == 2
    assert delivery.first_attempt_at == pytest.approx(ago(100).timestamp(), abs=1)
    assert delivery.due == event.next_attempt_at.timestamp()
    # It may wait to start as long as its answer still comes inside the lease.
    assert delivery.send_by == pytest.approx(time.time() + 60 - 7 - 5, abs=1)
    assert json.loads(delivery.request.body) == {
        "id": event.id,
        "type": event.type,
        "botId": bot.id,
        "createdAt": event.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "payload": {"text": "héllo", "n": [1]},
    }


@pytest.mark.parametrize(
    "status",
    [EventStatus.PROCESSED, EventStatus.FAILED, EventStatus.IGNORED, EventStatus.CANCELED],
    ids=str,
)
def test_finished_events_are_never_claimed(bot, status):
    EventFactory(bot=bot, status=status, due_at=ago(3600))
    assert deliveries_claim(limit=10).event_ids == []


def test_claims_span_bots(bot):
    other = EventFactory(status=EventStatus.SCHEDULED, due_at=ago(20))
    ours = due(bot, 10)
    assert deliveries_claim(limit=10).event_ids == [other.id, ours.id]


# --- leases ---------------------------------------------------------------------------


def test_a_claimed_event_is_not_claimed_again_until_its_lease_ends(bot, receiver):
    bot.webhook_url = receiver.url
    bot.save(update_fields=["webhook_url"])
    event = due(bot, 5)
    first = deliveries_claim(limit=10)
    assert first.event_ids == [event.id]
    assert deliveries_claim(limit=10).event_ids == []

    end_lease(event.id)
    second = deliveries_claim(limit=10)
    assert second.event_ids == [event.id]
    assert second.lease != first.lease
    assert Event.objects.get(id=event.id).lease == second.lease

    # The first claim's delivery, late, finds its lease gone: its outcome
    # changes nothing but the record of its attempt.
    before = Event.objects.filter(id=event.id).values().get()
    assert deliver_claimed(first) == {"lease lost": 1}
    assert Event.objects.filter(id=event.id).values().get() == before
    assert DeliveryAttempt.objects.count() == 1

    assert deliver_claimed(second) == {"processed": 1}
    assert [r.headers["webhook-id"] for r in receiver.requests] == [event.id] * 2


# --- claims at once ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_processes_claiming_at_once_never_claim_the_same_event(bot):
    past = ago(60)
    Event.objects.bulk_create(
        Event(
            bot=bot,
            type="t",
            status=EventStatus.SCHEDULED,
            due_at=past + timedelta(milliseconds=i),
            next_attempt_at=past + timedelta(milliseconds=i),
        )
        for i in range(300)
    )
    everything = set(Event.objects.values_list("id", flat=True))
    start = threading.Barrier(2)
    claimed: dict[str, list[list[str]]] = {"a": [], "b": []}
    leases: dict[str, list[int]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def claimer(name: str) -> None:
        try:
            start.wait(timeout=10)
            for _ in range(100):
                claim = deliveries_claim(limit=50)
                if not claim.event_ids:
                    return
                claimed[name].append(claim.event_ids)
                leases[name].append(claim.lease)
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claimer, args=(name,)) for name in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []

    a = [event_id for batch in claimed["a"] for event_id in batch]
    b = [event_id for batch in claimed["b"] for event_id in batch]
    assert len(a) == len(set(a)) and len(b) == len(set(b))
    assert set(a).isdisjoint(b)
    assert set(a) | set(b) == everything
    assert all(len(batch) <= 50 for batch in claimed["a"] + claimed["b"])
    # Every event holds the lease of the claim that took it.
    holder = dict(Event.objects.values_list("id", "lease"))
    for name in claimed:
        for batch, lease in zip(claimed[name], leases[name], strict=True):
            assert {holder[event_id] for event_id in batch} == {lease}


# --- bots left out -----------------------------------------------------------------------


def test_a_claim_leaves_out_the_bots_it_is_told_to(bot):
    busy = BotFactory(workspace=bot.workspace)
    theirs = [
        EventFactory(bot=busy, status=EventStatus.SCHEDULED, due_at=ago(30 - i)) for i in range(3)
    ]
    ours = due(bot, 5)
    claim = deliveries_claim(limit=10, exclude_bot_ids=[busy.id])
    assert claim.event_ids == [ours.id]
    for event in theirs:
        row = Event.objects.get(id=event.id)
        assert (row.lease, row.status) == (0, EventStatus.SCHEDULED)
    # Another process, with room for that bot, takes them in order.
    assert deliveries_claim(limit=10).event_ids == [e.id for e in theirs]


# --- waking a worker ------------------------------------------------------------------------


class Sent:
    """Stands in for the sending of a wake-up (to Redis or the broker) and
    counts what was sent."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail
        self.done = threading.Event()

    def __call__(self, *args: Any, **options: Any) -> None:
        self.calls.append(options)
        self.done.set()
        if self.fail:
            raise OperationalError("broker down")


@pytest.fixture
def sent(monkeypatch) -> Iterator[Sent]:
    """Wake-ups go to this instead of Redis or the broker, from a wake-up
    thread of the test's own."""
    recorder = Sent()
    monkeypatch.setattr(wakeups, "wake_send", recorder)
    monkeypatch.setattr(wakeups, "_waker", None)
    yield recorder


def test_without_redis_a_wake_up_is_a_task_that_expires(monkeypatch, settings):
    settings.EVENT_WAKE_REDIS_URL = ""
    recorder = Sent()
    monkeypatch.setattr(current_app, "send_task", recorder)
    wakeups.wake_send()
    [options] = recorder.calls
    assert options["expires"] == wakeups.EXPIRES_SECONDS
    assert wakeups.WAKE_DELIVERIES_TASK == tasks.wake_deliveries.name


def test_with_redis_a_wake_up_is_an_item_of_a_short_list_that_expires(settings):
    url = reachable_redis(settings.EVENT_WAKE_REDIS_URL or "redis://127.0.0.1:6379/0")
    settings.EVENT_WAKE_REDIS_URL = url
    settings.CELERY_TASK_DEFAULT_QUEUE = queue = f"test-wake-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(url)
    key = wakeups.wake_key()
    assert key == f"{queue}:wake-deliveries"
    client.delete(key)
    try:
        for _ in range(10):
            wakeups.wake_send()
        assert client.llen(key) == wakeups.LIST_LENGTH
        assert 0 < client.ttl(key) <= wakeups.EXPIRES_SECONDS
    finally:
        client.delete(key)


def test_an_event_created_due_now_wakes_a_worker_once_committed(
    runtime_client, bot, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = runtime_client().post(
            "/v1/chat/events", {"type": "t", "payload": {}}, format="json"
        )
        assert sent.calls == []  # not before the commit
    assert response.status_code == 201
    assert len(callbacks) == 1
    assert sent.done.wait(5)
    assert len(sent.calls) == 1
    # The row waits, unclaimed, for whichever worker claims first.
    row = Event.objects.get(id=response.json()["event"]["id"])
    assert (row.status, row.lease) == (EventStatus.PENDING, 0)
    assert deliveries_claim(limit=10).event_ids == [row.id]


def test_an_event_due_before_the_next_look_wakes_a_worker(
    runtime_client, bot, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = runtime_client().post(
            "/v1/chat/events",
            {"type": "t", "payload": {}, "schedule": {"delay": 100}},
            format="json",
        )
    assert response.status_code == 201
    assert len(callbacks) == 1


def test_a_scheduled_event_the_next_look_finds_in_time_wakes_no_one(
    runtime_client, bot, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = runtime_client().post(
            "/v1/chat/events",
            {"type": "t", "payload": {}, "schedule": {"delay": 60_000}},
            format="json",
        )
    assert response.status_code == 201
    assert not sent.done.wait(0.3)
    assert sent.calls == []


def test_wake_ups_asked_for_together_go_as_a_few(sent):
    for _ in range(200):
        wakeups.deliveries_wake()
    assert sent.done.wait(5)
    time.sleep(0.2)
    # The first at once, then at most one per interval for the rest.
    assert 1 <= len(sent.calls) <= 3


def test_a_broker_that_refuses_a_wake_up_leaves_the_event_to_the_next_claim(
    bot, sent, caplog, django_capture_on_commit_callbacks
):
    sent.fail = True
    with django_capture_on_commit_callbacks(execute=True):
        event = event_record(bot_id=bot.id, type="t", payload={})
    assert sent.done.wait(5)
    wait_for(lambda: "wake-up could not be sent" in caplog.text)
    assert deliveries_claim(limit=10).event_ids == [event.id]


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not met in time"
        time.sleep(0.01)


def test_a_lease_too_short_for_a_delivery_is_reported_by_the_system_check(settings):
    from events.checks import lease_outlasts_a_delivery

    assert lease_outlasts_a_delivery() == []
    settings.EVENT_LEASE_SECONDS = 10.0
    [warning] = lease_outlasts_a_delivery()
    assert warning.id == "events.W001"


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("EVENT_DELIVERY_CONCURRENCY", -1, "events.E001"),
        ("EVENT_DELIVERY_PER_BOT", 0, "events.E002"),
        ("EVENT_DISPATCH_INTERVAL", 0, "events.E003"),
        ("EVENT_DISPATCH_BATCH", 0, "events.E003"),
    ],
)
def test_delivery_settings_that_cannot_work_are_refused_by_the_system_check(
    settings, name, value, error
):
    from events.checks import delivery_shares_make_sense

    assert delivery_shares_make_sense() == []
    setattr(settings, name, value)
    assert [message.id for message in delivery_shares_make_sense()] == [error]


def test_the_clock_s_other_work_is_published_only_when_its_first_row_is_due(monkeypatch):
    # A lookup per work when nothing is due (the common case), rather than
    # a locking transaction each.
    from events.engine import clock_work
    from events.engine.clock_work import ClockWork, clock_work_run

    now = timezone.now()
    first = {"quiet": now + timedelta(seconds=5), "due": now - timedelta(seconds=1)}
    calls: list[tuple[Any, ...]] = []

    def work(name: str) -> ClockWork:
        def next_due(*, after: datetime | None) -> datetime:
            calls.append((name, "next_due", after))
            return first[name] if after is None else now + timedelta(seconds=9)

        def publish(*, now: datetime) -> None:
            calls.append((name, "publish", now))

        return ClockWork(publish=publish, next_due=next_due)

    monkeypatch.setattr(clock_work, "_registered", {"quiet": work("quiet"), "due": work("due")})
    assert clock_work_run(now=now) == first["quiet"].timestamp()
    assert calls == [
        ("quiet", "next_due", None),
        ("due", "next_due", None),
        ("due", "publish", now),
        ("due", "next_due", now),
    ]
