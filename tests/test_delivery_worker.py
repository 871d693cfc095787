"""Webhook delivery end to end: events created through the runtime API, real
Celery workers (with their embedded beat) delivering them to a local receiver.

Waits poll the database; nothing here asserts on speed."""

import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from standardwebhooks.webhooks import Webhook

from bots.models import Bot
from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from events.services.events import event_create
from tests.factories import BotFactory
from tests.receiver import Answer, Received
from tests.worker import Workers, celery_queue, wait_until, workers

__all__ = ["celery_queue", "workers"]  # fixtures, used by name

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

URL = "/v1/chat/events"
# The receiver's clock and the worker's are the same clock, read at different
# moments and rounded differently: allow this much.
CLOCK_TOLERANCE = 0.05


def create_event(client: Any, schedule: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "order.created", "payload": {"order": 42}}
    if schedule is not None:
        body["schedule"] = schedule
    response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    event: dict[str, Any] = response.json()["event"]
    return event


def get_event(client: Any, event_id: str) -> dict[str, Any]:
    response = client.get(f"{URL}/{event_id}")
    assert response.status_code == 200, response.content
    event: dict[str, Any] = response.json()["event"]
    return event


def cancel(client: Any, event_id: str) -> Any:
    return client.delete(f"{URL}/scheduled/{event_id}")


def wait_for_status(event_id: str, status: str, workers: Workers) -> Event:
    def current() -> str:
        return str(Event.objects.values_list("status", flat=True).get(id=event_id))

    wait_until(
        lambda: current() == status,
        message=lambda: f"{event_id} is {current()}, expected {status}",
        workers=workers,
    )
    return Event.objects.get(id=event_id)


def attempts_of(event_id: str) -> list[DeliveryAttempt]:
    return list(DeliveryAttempt.objects.filter(event_id=event_id).order_by("number", "id"))


def assert_signed_by(bot: Bot, request: Received, event_id: str) -> None:
    assert request.headers["webhook-id"] == event_id
    delivered = Webhook(bot.signing_secret).verify(request.body, request.headers)
    assert delivered["id"] == event_id
    assert delivered["botId"] == bot.id


def test_an_event_due_now_is_delivered_once_signed_and_processed(
    runtime_client, hooked, receiver, workers
):
    workers.start(beat=False)
    client = runtime_client()

    created = create_event(client)
    assert created["status"] == EventStatus.PENDING

    [request] = receiver.wait_for(1, timeout=30)
    assert_signed_by(hooked, request, created["id"])
    assert request.json()["payload"] == {"order": 42}
    wait_for_status(created["id"], EventStatus.PROCESSED, workers)
    event = get_event(client, created["id"])
    assert event["status"] == "processed"
    assert event["failureReason"] is None
    [attempt] = attempts_of(created["id"])
    assert (attempt.number, attempt.status_code) == (1, 200)
    assert attempt.outcome == AttemptOutcome.PROCESSED
    assert len(receiver.for_event(created["id"])) == 1


def test_scheduled_events_are_delivered_once_due_and_not_before(
    runtime_client, hooked, receiver, workers
):
    workers.start()
    client = runtime_client()
    # Seconds ahead, so that a loaded machine still reads them scheduled.
    moment = datetime.now(UTC) + timedelta(seconds=5)
    by_delay = create_event(client, {"delay": 4500})
    by_date = create_event(
        client, {"dateTime": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
    )

    for created in (by_delay, by_date):
        assert created["status"] == "scheduled"
        assert get_event(client, created["id"])["status"] == "scheduled"
    assert Event.objects.get(id=by_date["id"]).due_at == moment.replace(
        microsecond=moment.microsecond // 1000 * 1000
    )

    for created in (by_delay, by_date):
        event = wait_for_status(created["id"], EventStatus.PROCESSED, workers)
        [request] = receiver.for_event(created["id"])
        assert request.at >= event.due_at.timestamp() - CLOCK_TOLERANCE, (
            f"delivered {event.due_at.timestamp() - request.at:.3f} s before it was due"
        )
        assert_signed_by(hooked, request, created["id"])
        assert get_event(client, created["id"])["status"] == "processed"
        assert len(attempts_of(created["id"])) == 1


def test_a_5xx_is_retried_with_the_same_webhook_id_until_it_succeeds(
    runtime_client, hooked, receiver, workers
):
    receiver.answer(Answer(500, b"try later"))
    workers.start()

    created = create_event(runtime_client())

    event = wait_for_status(created["id"], EventStatus.PROCESSED, workers)
    first, second = receiver.for_event(created["id"])
    for request in (first, second):
        assert_signed_by(hooked, request, created["id"])
    assert first.body == second.body
    assert [(a.number, a.status_code, a.outcome) for a in attempts_of(event.id)] == [
        (1, 500, AttemptOutcome.RETRY),
        (2, 200, AttemptOutcome.PROCESSED),
    ]
    assert event.attempt_count == 2


def test_a_4xx_fails_with_its_reason_and_a_bot_without_webhook_ignores(
    runtime_client, hooked, receiver, workers
):
    receiver.answer(Answer(422, b"unknown event type"))
    no_webhook = BotFactory(workspace=hooked.workspace, webhook_url="")
    workers.start()

    refused = create_event(runtime_client())
    unreachable = create_event(runtime_client(for_bot=no_webhook))

    wait_for_status(refused["id"], EventStatus.FAILED, workers)
    failed = get_event(runtime_client(), refused["id"])
    assert failed["status"] == "failed"
    assert "422" in failed["failureReason"]
    assert "unknown event type" in failed["failureReason"]
    [attempt] = attempts_of(refused["id"])
    assert (attempt.status_code, attempt.outcome) == (422, AttemptOutcome.FAILED)

    wait_for_status(unreachable["id"], EventStatus.IGNORED, workers)
    ignored = get_event(runtime_client(for_bot=no_webhook), unreachable["id"])
    assert ignored["status"] == "ignored"
    assert ignored["failureReason"] is None
    assert attempts_of(unreachable["id"]) == []
    assert len(receiver.requests) == 1


def test_a_canceled_scheduled_event_is_never_delivered(runtime_client, hooked, receiver, workers):
    workers.start()
    client = runtime_client()
    # Seconds ahead, so that a loaded machine still cancels them in time:
    # the workers look at the table four times a second meanwhile.
    canceled = create_event(client, {"delay": 3000})
    # Due after it: once it is delivered, the other would have been too.
    witness = create_event(client, {"delay": 3500})

    response = cancel(client, canceled["id"])
    assert response.status_code == 200, response.content
    assert response.json() == {}

    wait_for_status(witness["id"], EventStatus.PROCESSED, workers)
    event = Event.objects.get(id=canceled["id"])
    assert time.time() > event.due_at.timestamp()
    assert event.status == EventStatus.CANCELED
    assert get_event(client, canceled["id"])["status"] == "canceled"
    assert receiver.for_event(canceled["id"]) == []
    assert attempts_of(canceled["id"]) == []
    assert cancel(client, canceled["id"]).status_code == 400


def test_an_event_held_by_a_killed_worker_is_delivered_after_its_lease_ends(
    runtime_client, hooked, receiver, workers
):
    # A timeout above what the lease leaves room for lengthens the lease to
    # the timeout + 10 s (events/engine/delivery.py): 15 s, while the kill
    # comes well within the 5 s the hung request has.
    lease = 3.0
    workers.configure(EVENT_LEASE_SECONDS=lease, EVENT_DELIVERY_TIMEOUT=5.0)
    receiver.answer(Answer(delay=30.0))  # the first request hangs
    doomed = workers.start(beat=False)

    created = create_event(runtime_client())
    receiver.wait_for(1, timeout=30)
    # The prefork child is doing the delivery: kill the whole group.
    doomed.kill(signal.SIGKILL)
    held = Event.objects.get(id=created["id"])
    assert held.status == EventStatus.PENDING
    assert held.next_attempt_at is not None
    lease_end = held.next_attempt_at.timestamp()

    workers.start()

    event = wait_for_status(created["id"], EventStatus.PROCESSED, workers)
    first, second = receiver.for_event(created["id"])
    assert second.at >= lease_end - CLOCK_TOLERANCE, "delivered again before the lease ended"
    assert_signed_by(hooked, second, created["id"])
    # The killed delivery recorded nothing; the one after the lease, one attempt.
    [attempt] = attempts_of(event.id)
    assert (attempt.number, attempt.outcome) == (1, AttemptOutcome.PROCESSED)


def test_two_workers_at_once_deliver_every_event_exactly_once(hooked, receiver, workers):
    # Long enough that no delivery outlives its lease, which would deliver
    # again by design (at least once), however slow the machine.
    workers.configure(EVENT_LEASE_SECONDS=30.0, EVENT_DELIVERY_TIMEOUT=10.0)
    started = [workers.start(wait=False), workers.start(wait=False)]
    for worker in started:
        worker.wait_ready()

    count = 200
    # One transaction, so that both workers find the events due at the same
    # moments: due now (the first) and then every 5 ms over the next second.
    with transaction.atomic():
        ids = [
            event_create(
                bot_id=hooked.id,
                type="load.test",
                payload={"n": n},
                schedule={"delay": n * 5} if n else None,
            ).id
            for n in range(count)
        ]

    processed = Event.objects.filter(id__in=ids, status=EventStatus.PROCESSED)
    wait_until(
        lambda: processed.count() == count,
        timeout=60,
        message=lambda: f"{processed.count()} of {count} processed",
        workers=workers,
    )
    # A second delivery of an event would come a moment after the first.
    time.sleep(1.0)
    delivered = Counter(request.headers["webhook-id"] for request in receiver.requests)
    duplicates = {event_id: n for event_id, n in delivered.items() if n > 1}
    assert not duplicates, f"delivered more than once: {duplicates}\n{workers.logs()}"
    assert set(delivered) == set(ids)
    assert DeliveryAttempt.objects.filter(event_id__in=ids).count() == count
