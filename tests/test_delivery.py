"""Delivering events to a bot's webhook, in process, against a local receiver:
the body and its Standard Webhooks signature, what each answer means, retries,
the record of every attempt, and the lease that fences every write."""

import gzip
import json
import socket
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from django.db import OperationalError, connection, connections
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

import events.engine.delivery as delivery_module
import tests.delivering
from bots.models import Bot
from bots.models.bot import new_signing_secret
from events.engine.claims import deliveries_claim
from events.engine.delivery import deliveries_record
from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from events.services.events import event_record, events_retry
from tests.delivering import deliver_claimed, send
from tests.factories import (
    BotFactory,
    ConversationFactory,
    EventFactory,
    MessageFactory,
    UserFactory,
    WorkflowFactory,
)
from tests.receiver import Answer, running_receiver

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def engine_settings(settings):
    settings.EVENT_LEASE_SECONDS = 60.0
    settings.EVENT_DELIVERY_TIMEOUT = 5.0
    settings.EVENT_RETRY_BASE_SECONDS = 5.0
    settings.EVENT_RETRY_MAX_DELAY_SECONDS = 7200.0
    settings.EVENT_RETRY_WINDOW_SECONDS = 24 * 3600.0
    settings.WEBHOOK_SECRET_OVERLAP_SECONDS = 24 * 3600.0


def record(bot: Bot, **fields: Any) -> Event:
    """An event due now, stored pending, as a client's create does."""
    fields.setdefault("type", "order.created")
    fields.setdefault("payload", {})
    return event_record(bot_id=bot.id, **fields)


def deliver(*event_ids: str) -> Any:
    """Claim the events, due now (and no other), and deliver them."""
    claimed = deliveries_claim(limit=10)
    assert sorted(claimed.event_ids) == sorted(event_ids)
    return deliver_claimed(claimed)


def deliver_again(event_id: str) -> Any:
    """Bring an event's next attempt forward, then claim and deliver it."""
    Event.objects.filter(id=event_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    return deliver(event_id)


def attempts_of(event_id: str) -> list[DeliveryAttempt]:
    return list(DeliveryAttempt.objects.filter(event_id=event_id).order_by("number", "id"))


def snapshot(event_id: str) -> dict[str, Any]:
    return Event.objects.filter(id=event_id).values().get()


def failure_of(event_id: str) -> str:
    """The reason of an event that failed, which must have one."""
    row = Event.objects.get(id=event_id)
    assert row.status == EventStatus.FAILED
    assert row.next_attempt_at is None
    assert row.failure_reason
    return row.failure_reason


def retry_time_of(event_id: str) -> datetime:
    """When an event waiting for a retry is next tried; it has no failure reason yet."""
    row = Event.objects.get(id=event_id)
    assert row.status == EventStatus.PENDING
    assert row.failure_reason is None
    assert row.next_attempt_at is not None
    return row.next_attempt_at


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def signatures(received: Any) -> list[str]:
    return received.headers["webhook-signature"].split(" ")


def with_signature(received: Any, signature: str) -> dict[str, str]:
    return {**received.headers, "webhook-signature": signature}


# --- what is sent ----------------------------------------------------------------------


def test_body_is_the_event_with_its_bot_and_links(runtime_client, hooked, receiver):
    conversation = ConversationFactory(bot=hooked)
    user = UserFactory(bot=hooked)
    message = MessageFactory(conversation=conversation, user=user)
    workflow = WorkflowFactory(bot=hooked)
    response = runtime_client().post(
        "/v1/chat/events",
        {
            "type": "order.created",
            "payload": {"text": "héllo ✓", "n": [1, None]},
            "conversationId": conversation.id,
            "userId": user.id,
            "messageId": message.id,
            "workflowId": workflow.id,
        },
        format="json",
    )
    created = response.json()["event"]
    assert deliver(created["id"]) == {"processed": 1}

    [received] = receiver.requests
    assert received.path == "/webhook"
    assert received.json() == {
        "id": created["id"],
        "type": "order.created",
        "botId": hooked.id,
        "createdAt": created["createdAt"],
        "payload": {"text": "héllo ✓", "n": [1, None]},
        "conversationId": conversation.id,
        "userId": user.id,
        "messageId": message.id,
        "workflowId": workflow.id,
    }
    assert received.headers["Content-Type"].startswith("application/json")


def test_body_without_links_has_no_link_fields(hooked, receiver):
    event = record(hooked, payload={"a": 1})
    deliver(event.id)
    body = receiver.requests[0].json()
    assert set(body) == {"id", "type", "botId", "createdAt", "payload"}
    assert body["payload"] == {"a": 1}


def test_signature_verifies_with_the_bots_secret(hooked, receiver):
    event = record(hooked, payload={"text": "héllo ✓"})
    before = timezone.now()
    deliver(event.id)
    [received] = receiver.requests
    assert received.headers["webhook-id"] == event.id
    assert abs(int(received.headers["webhook-timestamp"]) - before.timestamp()) < 60
    assert len(signatures(received)) == 1
    assert signatures(received)[0].startswith("v1,")
    verified = Webhook(hooked.signing_secret).verify(received.body, received.headers)
    assert verified["id"] == event.id


def test_signature_fails_with_another_secret_or_another_body(hooked, receiver):
    event = record(hooked, payload={"amount": 10})
    deliver(event.id)
    [received] = receiver.requests
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(received.body, received.headers)
    forged = received.body.replace(b"10", b"99")
    assert forged != received.body
    with pytest.raises(WebhookVerificationError):
        Webhook(hooked.signing_secret).verify(forged, received.headers)


def test_each_bot_signs_with_its_own_secret(bot, receiver):
    other = BotFactory(workspace=bot.workspace)
    for each in (bot, other):
        each.webhook_url = receiver.url
        each.save(update_fields=["webhook_url"])
    first, second = record(bot), record(other)
    deliver(first.id, second.id)
    [to_first] = receiver.for_event(first.id)
    [to_second] = receiver.for_event(second.id)
    Webhook(bot.signing_secret).verify(to_first.body, to_first.headers)
    Webhook(other.signing_secret).verify(to_second.body, to_second.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(other.signing_secret).verify(to_first.body, to_first.headers)


# --- secret rotation ----------------------------------------------------------------------


def rotate(bot: Bot, *, expires_in: timedelta) -> str:
    previous = bot.signing_secret
    bot.previous_signing_secret = previous
    bot.previous_signing_secret_expires_at = timezone.now() + expires_in
    bot.signing_secret = new_signing_secret()
    bot.save()
    return previous


def test_during_a_rotation_both_secrets_sign(hooked, receiver):
    previous = rotate(hooked, expires_in=timedelta(hours=1))
    event = record(hooked)
    deliver(event.id)
    [received] = receiver.requests
    current_signature, previous_signature = signatures(received)
    assert current_signature.startswith("v1,") and previous_signature.startswith("v1,")
    # Each secret alone verifies the delivery, each with its own signature.
    Webhook(hooked.signing_secret).verify(received.body, received.headers)
    Webhook(previous).verify(received.body, received.headers)
    Webhook(hooked.signing_secret).verify(
        received.body, with_signature(received, current_signature)
    )
    Webhook(previous).verify(received.body, with_signature(received, previous_signature))
    with pytest.raises(WebhookVerificationError):
        Webhook(previous).verify(received.body, with_signature(received, current_signature))
    with pytest.raises(WebhookVerificationError):
        Webhook(hooked.signing_secret).verify(
            received.body, with_signature(received, previous_signature)
        )


def test_after_the_overlap_only_the_new_secret_signs(hooked, receiver):
    previous = rotate(hooked, expires_in=-timedelta(seconds=1))
    event = record(hooked)
    deliver(event.id)
    [received] = receiver.requests
    assert len(signatures(received)) == 1
    Webhook(hooked.signing_secret).verify(received.body, received.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(previous).verify(received.body, received.headers)


# --- answers ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 201, 202, 299])
def test_2xx_is_processed(hooked, receiver, status):
    receiver.answer(Answer(status, b"thanks"))
    event = record(hooked)
    assert deliver(event.id) == {"processed": 1}
    row = Event.objects.get(id=event.id)
    assert row.status == EventStatus.PROCESSED
    assert row.next_attempt_at is None
    assert row.failure_reason is None
    assert row.attempt_count == 1
    assert row.first_attempt_at is not None
    [attempt] = attempts_of(event.id)
    assert (attempt.number, attempt.outcome, attempt.status_code) == (1, "processed", status)
    assert attempt.bot_id == hooked.id
    assert attempt.url == receiver.url
    assert attempt.response_excerpt == "thanks"
    assert attempt.error == ""


def test_204_without_a_body_is_processed(hooked, receiver):
    receiver.answer(Answer(204, b""))
    event = record(hooked)
    assert deliver(event.id) == {"processed": 1}
    assert attempts_of(event.id)[0].response_excerpt == ""


def test_500_then_success_records_a_retry_and_a_success(runtime_client, hooked, receiver):
    receiver.answer(Answer(500, b"upstream down"))
    event = record(hooked)
    before = timezone.now()
    assert deliver(event.id) == {"pending": 1}
    after = timezone.now()

    retry_at = retry_time_of(event.id)
    # base 5 s with equal jitter: between 2.5 and 5 s after the attempt
    assert before + timedelta(seconds=2.5) <= retry_at <= after + timedelta(seconds=5)
    row = Event.objects.get(id=event.id)
    assert row.attempt_count == 1
    assert row.first_attempt_at is not None
    [first] = attempts_of(event.id)
    assert (first.number, first.outcome, first.status_code) == (1, "retry", 500)
    assert first.response_excerpt == "upstream down"

    assert deliver_again(event.id) == {"processed": 1}
    row = Event.objects.get(id=event.id)
    assert row.status == EventStatus.PROCESSED
    assert row.next_attempt_at is None
    assert row.failure_reason is None
    assert row.attempt_count == 2
    outcomes = [(a.number, a.outcome, a.status_code) for a in attempts_of(event.id)]
    assert outcomes == [(1, "retry", 500), (2, "processed", 200)]

    # The same message both times, each signed.
    requests = receiver.for_event(event.id)
    assert len(requests) == 2
    assert {r.headers["webhook-id"] for r in requests} == {event.id}
    assert requests[0].body == requests[1].body
    for received in requests:
        Webhook(hooked.signing_secret).verify(received.body, received.headers)

    got = runtime_client().get(f"/v1/chat/events/{event.id}").json()["event"]
    assert got["status"] == "processed"
    assert got["failureReason"] is None


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599])
def test_429_and_5xx_are_retried(hooked, receiver, status):
    receiver.answer(Answer(status, b"busy"))
    event = record(hooked)
    assert deliver(event.id) == {"pending": 1}
    assert retry_time_of(event.id) > timezone.now()
    [attempt] = attempts_of(event.id)
    assert (attempt.outcome, attempt.status_code) == ("retry", status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 422])
def test_other_4xx_fails_at_once(runtime_client, hooked, receiver, status):
    receiver.answer(Answer(status, b'{"error": "no such route"}'))
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert str(status) in reason
    assert "no such route" in reason
    [attempt] = attempts_of(event.id)
    assert (attempt.outcome, attempt.status_code) == ("failed", status)
    assert len(receiver.requests) == 1
    got = runtime_client().get(f"/v1/chat/events/{event.id}").json()["event"]
    assert got["status"] == "failed"
    assert got["failureReason"] == reason


def test_404_reason_names_the_status_and_a_cut_of_the_body(hooked, receiver):
    receiver.answer(Answer(404, b"Cannot POST /webhook\n\n  please   check"))
    event = record(hooked)
    deliver(event.id)
    reason = failure_of(event.id)
    assert reason == "The webhook answered HTTP 404 Not Found: Cannot POST /webhook please check"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_fails_with_advice_and_is_not_followed(hooked, receiver, status):
    receiver.answer(Answer(status, b"", headers={"Location": receiver.url + "/moved"}))
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert str(status) in reason
    assert "redirects are not followed" in reason
    assert "webhook URL" in reason
    assert [r.path for r in receiver.requests] == ["/webhook"]


def test_429_with_retry_after_in_seconds_is_honoured(hooked, receiver):
    receiver.answer(Answer(429, b"slow down", headers={"Retry-After": "120"}))
    event = record(hooked)
    before = timezone.now()
    assert deliver(event.id) == {"pending": 1}
    after = timezone.now()
    assert (
        before + timedelta(seconds=120) <= retry_time_of(event.id) <= after + timedelta(seconds=120)
    )
    # And nothing claims it before then.
    assert deliveries_claim(limit=10).event_ids == []


def test_503_with_retry_after_as_a_date_is_honoured(hooked, receiver):
    later = timezone.now() + timedelta(minutes=10)
    receiver.answer(Answer(503, b"", headers={"Retry-After": format_datetime(later, usegmt=True)}))
    event = record(hooked)
    deliver(event.id)
    retry_at = retry_time_of(event.id)
    assert later - timedelta(seconds=2) <= retry_at <= later + timedelta(seconds=2)


def test_retry_after_never_parks_an_event_past_its_retry_window(hooked, receiver):
    event = record(hooked)
    first = timezone.now() - timedelta(hours=23, minutes=59)
    Event.objects.filter(id=event.id).update(first_attempt_at=first, attempt_count=7)
    receiver.answer(Answer(429, b"", headers={"Retry-After": "86400"}))
    assert deliver(event.id) == {"pending": 1}
    row = Event.objects.get(id=event.id)
    assert row.next_attempt_at == first + timedelta(hours=24)
    assert row.attempt_count == 8
    assert row.first_attempt_at == first


def test_a_timeout_is_retried_with_a_reason_naming_it(settings, hooked, receiver):
    settings.EVENT_DELIVERY_TIMEOUT = 0.3
    receiver.answer(Answer(200, b"too late", delay=1.0))
    event = record(hooked)
    assert deliver(event.id) == {"pending": 1}
    retry_time_of(event.id)
    [attempt] = attempts_of(event.id)
    assert attempt.outcome == AttemptOutcome.RETRY
    assert attempt.status_code is None
    assert "No response within 0.3 s" in attempt.error


def test_connection_refused_is_retried_with_a_reason(hooked):
    port = closed_port()
    hooked.webhook_url = f"http://127.0.0.1:{port}/hook"
    hooked.save(update_fields=["webhook_url"])
    event = record(hooked)
    assert deliver(event.id) == {"pending": 1}
    assert retry_time_of(event.id) > timezone.now()
    [attempt] = attempts_of(event.id)
    assert attempt.outcome == AttemptOutcome.RETRY
    assert attempt.status_code is None
    assert f"Could not connect to 127.0.0.1:{port}" in attempt.error
    assert attempt.url == f"http://127.0.0.1:{port}/hook"


def test_an_unusable_url_fails_at_once(hooked):
    hooked.webhook_url = "http://127.0.0.1:99999/hook"
    hooked.save(update_fields=["webhook_url"])
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    assert "cannot be requested" in failure_of(event.id)
    assert attempts_of(event.id)[0].outcome == AttemptOutcome.FAILED


def test_no_webhook_is_ignored_without_an_attempt(runtime_client, bot, receiver):
    event = record(bot)
    assert deliver(event.id) == {"ignored": 1}
    row = Event.objects.get(id=event.id)
    assert row.status == EventStatus.IGNORED
    assert row.failure_reason is None
    assert row.next_attempt_at is None
    assert attempts_of(event.id) == []
    assert receiver.requests == []
    got = runtime_client().get(f"/v1/chat/events/{event.id}").json()["event"]
    assert got["status"] == "ignored"
    assert got["failureReason"] is None


def test_a_spent_retry_window_fails_the_event(hooked, receiver):
    event = record(hooked)
    Event.objects.filter(id=event.id).update(
        first_attempt_at=timezone.now() - timedelta(hours=25), attempt_count=4
    )
    receiver.answer(Answer(503, b"still down"))
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert reason.startswith("Gave up after 5 attempts over 25.0 h. Last attempt: ")
    assert "503" in reason
    assert "still down" in reason
    assert Event.objects.get(id=event.id).attempt_count == 5
    [attempt] = attempts_of(event.id)
    assert (attempt.number, attempt.outcome) == (5, "failed")


def test_a_spent_retry_window_after_a_timeout_names_the_timeout(settings, hooked, receiver):
    settings.EVENT_DELIVERY_TIMEOUT = 0.3
    settings.EVENT_RETRY_WINDOW_SECONDS = 60.0
    event = record(hooked)
    Event.objects.filter(id=event.id).update(
        first_attempt_at=timezone.now() - timedelta(minutes=2), attempt_count=2
    )
    receiver.answer(Answer(200, b"", delay=1.0))
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert reason.startswith("Gave up after 3 attempts")
    assert "No response within 0.3 s" in reason


def test_failure_reason_stays_within_2000_characters_with_a_huge_body(hooked, receiver):
    receiver.answer(Answer(404, b"x" * 300_000))
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert len(reason) <= 2000
    assert "404" in reason
    assert "xxxxxxxxxx" in reason
    [attempt] = attempts_of(event.id)
    assert 0 < len(attempt.response_excerpt) <= 1000


def test_failure_reason_stays_within_2000_characters_when_giving_up(hooked, receiver):
    event = record(hooked)
    Event.objects.filter(id=event.id).update(
        first_attempt_at=timezone.now() - timedelta(days=3), attempt_count=10**6
    )
    receiver.answer(Answer(500, ("é" * 100_000).encode()))
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert reason.startswith("Gave up after 1000001 attempts")
    assert len(reason) <= 2000
    assert len(attempts_of(event.id)[0].response_excerpt) <= 1000


def test_a_long_unusable_url_keeps_the_reason_within_2000_characters(hooked):
    hooked.webhook_url = "http://127.0.0.1:99999/" + "p" * 1970
    hooked.save(update_fields=["webhook_url"])
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert len(reason) <= 2000
    assert reason.startswith("The webhook URL cannot be requested")


def test_a_compressed_answer_is_recorded(hooked, receiver):
    body = gzip.compress(b'{"ok": true}' * 50)
    assert b"\x00" in body
    receiver.answer(Answer(200, body, headers={"Content-Encoding": "gzip"}))
    event = record(hooked)
    assert deliver(event.id) == {"processed": 1}
    assert Event.objects.get(id=event.id).status == EventStatus.PROCESSED
    [attempt] = attempts_of(event.id)
    assert attempt.outcome == AttemptOutcome.PROCESSED
    assert len(attempt.response_excerpt) <= 1000


def test_a_binary_error_body_is_recorded_in_the_reason(hooked, receiver):
    receiver.answer(Answer(404, b"not\x00found\xff\xfe" + bytes(range(32))))
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    reason = failure_of(event.id)
    assert reason.startswith("The webhook answered HTTP 404 Not Found: not")
    assert "\x00" not in reason
    assert "\x00" not in attempts_of(event.id)[0].response_excerpt


# --- many at once -------------------------------------------------------------------------


def test_one_delivery_of_events_of_several_bots(bot, receiver):
    with running_receiver() as failing:
        failing.answer(Answer(503, b""), Answer(503, b""))
        healthy = bot
        healthy.webhook_url = receiver.url
        healthy.save(update_fields=["webhook_url"])
        sick = BotFactory(workspace=bot.workspace, webhook_url=failing.url)
        silent = BotFactory(workspace=bot.workspace)
        ours = [record(healthy), record(healthy)]
        theirs = [record(sick), record(sick)]
        unheard = record(silent)
        ids = [e.id for e in (*ours, *theirs, unheard)]
        claimed = deliveries_claim(limit=10)
        assert sorted(claimed.event_ids) == sorted(ids)
        assert claimed.ignored == [unheard.id]
        tally = deliver_claimed(claimed)
        assert tally == {"processed": 2, "pending": 2, "ignored": 1}
        assert sorted(r.headers["webhook-id"] for r in receiver.requests) == sorted(
            e.id for e in ours
        )
        assert sorted(r.headers["webhook-id"] for r in failing.requests) == sorted(
            e.id for e in theirs
        )
    statuses = dict(Event.objects.values_list("id", "status"))
    assert [statuses[i] for i in ids] == ["processed"] * 2 + ["pending"] * 2 + ["ignored"]


# --- leases ---------------------------------------------------------------------------------


def test_a_delivery_recorded_under_another_lease_changes_nothing_but_its_record(hooked, receiver):
    event = record(hooked)
    claimed = deliveries_claim(limit=10)
    [delivery] = claimed.deliveries
    results = send(claimed.deliveries)
    before = snapshot(event.id)
    stray = replace(delivery, lease=delivery.lease + 1)
    assert deliveries_record([(stray, results[0])]) == {"lease lost": 1}
    assert snapshot(event.id) == before
    # What happened is on record all the same.
    [attempt] = attempts_of(event.id)
    assert (attempt.outcome, attempt.status_code) == ("processed", 200)


def test_a_stale_lease_changes_nothing_and_the_new_claim_delivers(hooked, receiver):
    event = record(hooked)
    stale = deliveries_claim(limit=10)
    # The lease ends (its worker stalled); another process claims the event again.
    Event.objects.filter(id=event.id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    fresh = deliveries_claim(limit=10)
    assert fresh.event_ids == [event.id]
    assert fresh.lease != stale.lease
    before = snapshot(event.id)
    assert deliver_claimed(stale) == {"lease lost": 1}
    assert snapshot(event.id) == before
    assert deliver_claimed(fresh) == {"processed": 1}
    assert len(receiver.requests) == 2
    assert [a.outcome for a in attempts_of(event.id)] == ["processed", "processed"]


def test_a_delivery_that_lost_its_lease_in_flight_changes_nothing(hooked, receiver, monkeypatch):
    event = record(hooked)
    real_send = tests.delivering.send

    def send_then_lose_the_lease(*args: Any, **kwargs: Any) -> Any:
        results = real_send(*args, **kwargs)
        # Meanwhile the lease ended and another process claimed the event.
        Event.objects.filter(id=event.id).update(lease=42)
        return results

    monkeypatch.setattr(tests.delivering, "send", send_then_lose_the_lease)
    receiver.answer(Answer(404, b"gone"))
    claimed = deliveries_claim(limit=10)
    before = snapshot(event.id)
    assert deliver_claimed(claimed) == {"lease lost": 1}
    after = snapshot(event.id)
    assert after == {**before, "lease": 42}
    # What happened is still on record.
    [attempt] = attempts_of(event.id)
    assert (attempt.outcome, attempt.status_code) == ("failed", 404)


def test_a_processed_event_is_not_marked_again_by_the_same_delivery(hooked, receiver):
    record(hooked)
    claimed = deliveries_claim(limit=10)
    [delivery] = claimed.deliveries
    results = send(claimed.deliveries)
    assert deliveries_record([(delivery, results[0])]) == {"processed": 1}
    before = snapshot(delivery.event_id)
    assert deliveries_record([(delivery, results[0])]) == {"lease lost": 1}
    assert snapshot(delivery.event_id) == before


def test_a_retry_is_not_moved_by_its_delivery_recorded_twice(hooked, receiver):
    receiver.answer(Answer(503, b""))
    event = record(hooked)
    claimed = deliveries_claim(limit=10)
    [delivery] = claimed.deliveries
    results = send(claimed.deliveries)
    assert deliveries_record([(delivery, results[0])]) == {"pending": 1}
    before = snapshot(event.id)
    # The retry waits unclaimed (lease 0): the same outcome again cannot jump the backoff.
    assert before["lease"] == 0
    assert deliveries_record([(delivery, results[0])]) == {"lease lost": 1}
    assert snapshot(event.id) == before
    assert deliveries_claim(limit=10).event_ids == []


def test_failed_attempts_of_a_batch_are_each_recorded_as_their_own(hooked, receiver, settings):
    # One statement for the batch on PostgreSQL: each event gets its own
    # retry time, status, attempt count and reason, and one whose lease was
    # taken over is left alone.
    receiver.answer(*[Answer(503, b"")] * 3)
    retried, given_up, taken = record(hooked), record(hooked), record(hooked)
    # Its first attempt was before the retry window: this one is its last.
    first = timezone.now() - timedelta(seconds=settings.EVENT_RETRY_WINDOW_SECONDS + 60)
    Event.objects.filter(id=given_up.id).update(attempt_count=1, first_attempt_at=first)
    claimed = deliveries_claim(limit=10)
    results = send(claimed.deliveries)
    Event.objects.filter(id=taken.id).update(lease=42)
    before = snapshot(taken.id)

    tally = deliveries_record(list(zip(claimed.deliveries, results, strict=True)))

    assert tally == {"pending": 1, "failed": 1, "lease lost": 1}
    retried.refresh_from_db()
    assert (retried.status, retried.attempt_count, retried.lease) == ("pending", 1, 0)
    assert retried.next_attempt_at is not None and retried.next_attempt_at > timezone.now()
    assert retried.failure_reason is None
    given_up.refresh_from_db()
    assert (given_up.status, given_up.attempt_count, given_up.next_attempt_at) == (
        "failed",
        2,
        None,
    )
    assert given_up.failure_reason is not None and "503" in given_up.failure_reason
    assert snapshot(taken.id) == before
    assert len(attempts_of(taken.id)) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("deleted", ["event", "bot"])
def test_the_record_of_an_event_deleted_meanwhile_is_dropped_and_commits(hooked, receiver, deleted):
    # The event alone, or with its bot: attempts name their bot under a
    # constraint checked at commit, so those of a deleted bot must be gone
    # by then.
    event = record(hooked)
    claimed = deliveries_claim(limit=10)
    results = send(claimed.deliveries)
    if deleted == "event":
        Event.objects.filter(id=event.id).delete()
    else:
        Bot.objects.filter(id=hooked.id).delete()
    finished = list(zip(claimed.deliveries, results, strict=True))
    assert deliveries_record(finished) == {"lease lost": 1}
    assert attempts_of(event.id) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite locks the whole database")
@pytest.mark.django_db(transaction=True)
def test_while_the_attempts_are_copied_their_events_are_not_locked(receiver, monkeypatch):
    # A worker cut off in the middle of the COPY leaves its session waiting
    # for rows until TCP gives up: meanwhile its events must stay free for
    # other processes to claim.
    bot = BotFactory(webhook_url=receiver.url)
    event = record(bot)
    claimed = deliveries_claim(limit=10)
    results = send(claimed.deliveries)
    copy = delivery_module.rows_insert
    locked: list[bool] = []

    def lock_from_another_session() -> None:
        with connections["default"].cursor() as cursor:
            try:
                cursor.execute(
                    "SELECT id FROM events_event WHERE id = %s FOR UPDATE NOWAIT", [event.id]
                )
                locked.append(False)
            except OperationalError:
                locked.append(True)
        connections["default"].close()

    def copy_then_look(*args: Any, **kwargs: Any) -> None:
        copy(*args, **kwargs)
        other = threading.Thread(target=lock_from_another_session)
        other.start()
        other.join()

    monkeypatch.setattr(delivery_module, "rows_insert", copy_then_look)
    finished = list(zip(claimed.deliveries, results, strict=True))
    assert deliveries_record(finished) == {"processed": 1}
    assert locked == [False]
    assert [a.outcome for a in attempts_of(event.id)] == ["processed"]


# --- retry by hand ----------------------------------------------------------------------------


def test_events_retry_puts_a_failed_event_back_and_it_is_delivered(
    hooked, receiver, django_capture_on_commit_callbacks
):
    receiver.answer(Answer(404, b"not yet"))
    event = record(hooked)
    deliver(event.id)
    failed = Event.objects.get(id=event.id)
    assert failed.status == EventStatus.FAILED

    with django_capture_on_commit_callbacks() as callbacks:
        assert events_retry(event_ids=[event.id]) == 1
    assert len(callbacks) == 1  # a worker is woken once the retry commits
    row = Event.objects.get(id=event.id)
    assert row.status == EventStatus.PENDING
    assert row.failure_reason is None
    assert row.lease == 0
    assert row.next_attempt_at is not None
    assert row.next_attempt_at <= timezone.now()
    assert row.first_attempt_at is None
    # The next claim delivers it.
    assert deliver(event.id) == {"processed": 1}
    row = Event.objects.get(id=event.id)
    assert row.status == EventStatus.PROCESSED
    assert row.failure_reason is None
    outcomes = [(a.number, a.outcome, a.status_code) for a in attempts_of(event.id)]
    assert outcomes == [(1, "failed", 404), (2, "processed", 200)]
    assert [r.headers["webhook-id"] for r in receiver.requests] == [event.id, event.id]


def test_events_retry_of_an_ignored_event_delivers_it_once_there_is_a_webhook(bot, receiver):
    event = record(bot)
    deliver(event.id)
    assert Event.objects.get(id=event.id).status == EventStatus.IGNORED
    bot.webhook_url = receiver.url
    bot.save(update_fields=["webhook_url"])
    assert events_retry(event_ids=[event.id]) == 1
    assert deliver(event.id) == {"processed": 1}
    assert len(receiver.requests) == 1


@pytest.mark.parametrize(
    "status",
    [EventStatus.SCHEDULED, EventStatus.PENDING, EventStatus.PROCESSED, EventStatus.CANCELED],
    ids=str,
)
def test_events_retry_leaves_other_statuses_alone(bot, status):
    event = EventFactory(bot=bot, status=status)
    before = snapshot(event.id)
    assert events_retry(event_ids=[event.id]) == 0
    assert snapshot(event.id) == before


def test_events_retry_after_giving_up_opens_a_new_window(hooked, receiver):
    event = record(hooked)
    Event.objects.filter(id=event.id).update(
        first_attempt_at=timezone.now() - timedelta(hours=25), attempt_count=3
    )
    receiver.answer(Answer(503, b""), Answer(503, b""))
    deliver(event.id)
    assert Event.objects.get(id=event.id).status == EventStatus.FAILED
    events_retry(event_ids=[event.id])
    # A retryable failure now waits again instead of failing at once.
    assert deliver(event.id) == {"pending": 1}
    retry_time_of(event.id)
    row = Event.objects.get(id=event.id)
    assert row.attempt_count == 5
    assert row.first_attempt_at is not None
    assert row.first_attempt_at > timezone.now() - timedelta(minutes=1)


def test_body_is_serialised_compactly_as_utf8(hooked, receiver):
    event = record(hooked, payload={"text": "✓"})
    deliver(event.id)
    [received] = receiver.requests
    assert "✓".encode() in received.body
    assert b", " not in received.body and b'": ' not in received.body
    assert json.loads(received.body)["payload"] == {"text": "✓"}


def test_a_url_that_is_not_http_fails_at_once(hooked):
    # The admin and the model refuse such a URL; one written past them is
    # not retried for a day.
    Bot.objects.filter(id=hooked.id).update(webhook_url="ftp://files.example.test/hook")
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    assert "cannot be requested" in failure_of(event.id)


def test_giving_up_after_one_attempt_says_so_in_the_singular(hooked, settings):
    settings.EVENT_RETRY_WINDOW_SECONDS = 0.0
    hooked.webhook_url = f"http://127.0.0.1:{closed_port()}/hook"
    hooked.save(update_fields=["webhook_url"])
    event = record(hooked)
    assert deliver(event.id) == {"failed": 1}
    assert failure_of(event.id).startswith("Gave up after 1 attempt over 0.0 h. Last attempt: ")
