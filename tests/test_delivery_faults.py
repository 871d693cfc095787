"""Delivery through crashes: a thousand events, due now and over the next
seconds, delivered by real worker processes that are killed (SIGKILL, the
whole process group) twice in the middle of their deliveries, and a beat
process killed once; each is started again. Every event must end processed,
signed, with one recorded attempt; a delivery cut short by a kill is sent
again when its lease ends (at least once), and how many were sent twice is
reported.

Runs on whatever database and broker the suite runs on (PostgreSQL + Redis,
the embedded defaults, RabbitMQ: see docs/development/tests.md)."""

import random
import signal
import time
from collections import Counter

import pytest
from django.db import transaction
from standardwebhooks.webhooks import Webhook

from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from events.services.events import event_record
from tests.receiver import Answer
from tests.worker import Workers, celery_queue, wait_until, workers

__all__ = ["celery_queue", "workers"]  # fixtures, used by name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVENTS = 1000
SCHEDULED_OVER_MS = 6000
LEASE_SECONDS = 8.0
# Seconds after a kill for the receiver to read what the killed worker had sent.
KILL_DRAIN_SECONDS = 2.0


def received_count(receiver) -> int:
    with receiver._lock:
        return len({r.headers.get("webhook-id") for r in receiver.requests})


def _attempts_of(event_id: str) -> list[tuple[object, ...]]:
    return list(
        DeliveryAttempt.objects.filter(event_id=event_id)
        .order_by("started_at")
        .values_list("number", "started_at", "duration_ms", "outcome", "error")
    )


def test_kills_lose_nothing_and_every_delivery_is_signed(
    hooked, receiver, workers: Workers, record_property
):
    # A short lease, so that what a killed worker held is sent again soon;
    # but not shorter than the margins a live worker needs (events.W001):
    # with 4 s a delivery had 1 s to start and 1 s to be recorded, and a
    # suite loading both cores made a live worker miss that, its event
    # claimed and sent again with no kill.
    workers.configure(EVENT_LEASE_SECONDS=LEASE_SECONDS, EVENT_DELIVERY_TIMEOUT=2.0)
    # Each answer takes a moment, so that a kill finds requests in flight.
    receiver.url_for("/webhook", Answer(delay=0.05))
    rng = random.Random(7)
    with transaction.atomic():
        ids = [
            event_record(
                bot_id=hooked.id,
                type="fault.test",
                payload={"n": n},
                schedule={"delay": rng.randrange(SCHEDULED_OVER_MS)} if n % 2 else None,
            ).id
            for n in range(EVENTS)
        ]
    beat = workers.start_beat()
    first = workers.start(beat=False)
    # Each kill as (when it was sent, when the receiver had read what the
    # killed worker sent before it): the receiver's threads may read a request
    # sent before a kill after it, and no worker sends meanwhile.
    kills: list[tuple[float, float]] = []

    def killed() -> tuple[float, float]:
        moment = time.time()
        time.sleep(KILL_DRAIN_SECONDS)
        return moment, time.time()

    # Killed mid-delivery: once a quarter of the events reached the bot.
    wait_until(lambda: received_count(receiver) >= EVENTS // 4, timeout=60, workers=workers)
    first.kill(signal.SIGKILL)
    kills.append(killed())
    second = workers.start(beat=False)
    # Again, with beat, past half of them.
    wait_until(lambda: received_count(receiver) >= EVENTS // 2, timeout=60, workers=workers)
    second.kill(signal.SIGKILL)
    beat.kill(signal.SIGKILL)
    kills.append(killed())
    workers.start_beat()
    workers.start(beat=False)

    processed = Event.objects.filter(id__in=ids, status=EventStatus.PROCESSED)
    wait_until(
        lambda: processed.count() == EVENTS,
        timeout=90,
        message=lambda: f"{processed.count()} of {EVENTS} processed",
        workers=workers,
    )
    sent = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert set(sent) == set(ids), "an event was never sent"
    duplicates = sum(count - 1 for count in sent.values())
    record_property("duplicates", duplicates)
    print(f"fault test: {EVENTS} events, {duplicates} sent twice ({duplicates / EVENTS:.1%})")
    # Sent twice only when a kill cut its delivery short: a kill between
    # each send of it and the next.
    times: dict[str, list[float]] = {}
    for request in receiver.requests:
        times.setdefault(request.headers["webhook-id"], []).append(request.at)
    for event_id, moments in times.items():
        moments.sort()
        for earlier, later in zip(moments, moments[1:], strict=False):
            assert any(earlier <= drained and killed <= later for killed, drained in kills), (
                f"{event_id} was sent again with no kill in between: sent at {moments}, "
                f"kills (sent, drained) at {kills}, attempts recorded: "
                f"{_attempts_of(event_id)}"
            )

    # Every request was signed with the bot's secret, and carried its event.
    verifier = Webhook(hooked.signing_secret)
    for request in receiver.requests:
        body = verifier.verify(request.body, request.headers)
        assert body["id"] == request.headers["webhook-id"]
    # One recorded attempt each: a delivery cut short by a kill left no record.
    attempts = Counter(
        DeliveryAttempt.objects.filter(event_id__in=ids).values_list("event_id", flat=True)
    )
    assert set(attempts.values()) == {1}
    assert (
        not DeliveryAttempt.objects.filter(event_id__in=ids)
        .exclude(outcome=AttemptOutcome.PROCESSED)
        .exists()
    )
    # None went out before it was due.
    due = dict(Event.objects.filter(id__in=ids).values_list("id", "due_at"))
    first_sent: dict[str, float] = {}
    for request in receiver.requests:
        event_id = request.headers["webhook-id"]
        first_sent[event_id] = min(first_sent.get(event_id, request.at), request.at)
    early = [i for i in ids if first_sent[i] < due[i].timestamp() - 0.05]
    assert not early, f"sent before they were due: {early[:5]}"


def test_a_warm_shutdown_lets_requests_in_flight_finish(hooked, receiver, workers: Workers):
    # Answers that take a second: the shutdown comes while they are in flight.
    receiver.url_for("/webhook", Answer(delay=1.0))
    ids = [event_record(bot_id=hooked.id, type="t", payload={"n": n}).id for n in range(20)]
    worker = workers.start(beat=False)
    wait_until(lambda: received_count(receiver) >= 10, timeout=30, workers=workers)
    worker.stop()
    assert worker.process.returncode is not None
    # What was in flight was answered and recorded before the process went;
    # nothing went out twice, and a new worker finishes the rest.
    processed_before = Event.objects.filter(id__in=ids, status=EventStatus.PROCESSED).count()
    assert processed_before >= 10
    workers.start(beat=False)
    wait_until(
        lambda: Event.objects.filter(id__in=ids, status=EventStatus.PROCESSED).count() == 20,
        timeout=60,
        workers=workers,
    )
    sent = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert sent == Counter(ids)
