"""DELETE /v1/chat/events/scheduled/{id}: only a scheduled event is canceled,
and a canceled event is never dispatched."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from bots.models import Role
from events.engine.claims import deliveries_claim
from events.models import Event, EventStatus
from events.services.events import event_cancel
from platform_site.foundation.ids import new_id
from tests.conftest import assert_error
from tests.factories import BotFactory, EventFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db

URL = "/v1/chat/events"


def cancel_url(event_id: str) -> str:
    return f"{URL}/scheduled/{event_id}"


def scheduled(client: Any, delay_ms: int = 60_000) -> str:
    response = client.post(
        URL, {"type": "reminder", "payload": {}, "schedule": {"delay": delay_ms}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["event"]["status"] == "scheduled"
    return response.json()["event"]["id"]


def snapshot(event_id: str) -> dict[str, Any]:
    return Event.objects.filter(id=event_id).values().get()


def test_cancel_a_scheduled_event(runtime_client):
    client = runtime_client()
    event_id = scheduled(client)
    response = client.delete(cancel_url(event_id))
    assert response.status_code == 200, response.content
    assert response.json() == {}
    row = Event.objects.get(id=event_id)
    assert row.status == EventStatus.CANCELED
    assert row.next_attempt_at is None
    assert row.failure_reason is None
    got = client.get(f"{URL}/{event_id}").json()["event"]
    assert got["status"] == "canceled"
    assert got["failureReason"] is None


def test_a_canceled_event_is_never_claimed(runtime_client, bot):
    client = runtime_client()
    event_id = scheduled(client, delay_ms=1)
    assert client.delete(cancel_url(event_id)).status_code == 200
    # Its due time has long passed, and still nothing claims it.
    Event.objects.filter(id=event_id).update(due_at=timezone.now() - timedelta(hours=1))
    assert deliveries_claim(limit=100).event_ids == []
    assert Event.objects.get(id=event_id).status == EventStatus.CANCELED


def test_cancel_leaves_other_events_alone(runtime_client, bot):
    client = runtime_client()
    kept, canceled = scheduled(client), scheduled(client)
    assert client.delete(cancel_url(canceled)).status_code == 200
    assert Event.objects.get(id=kept).status == EventStatus.SCHEDULED
    assert Event.objects.get(id=kept).next_attempt_at is not None


def test_the_scheduled_event_due_when_the_other_is_canceled_is_still_claimed(bot):
    past = timezone.now() - timedelta(minutes=1)
    kept = EventFactory(bot=bot, status=EventStatus.SCHEDULED, due_at=past)
    dropped = EventFactory(bot=bot, status=EventStatus.SCHEDULED, due_at=past)
    event_cancel(bot=bot, event_id=dropped.id)
    assert deliveries_claim(limit=100).event_ids == [kept.id]


@pytest.mark.parametrize(
    "status",
    [
        EventStatus.PENDING,
        EventStatus.PROCESSED,
        EventStatus.CANCELED,
        EventStatus.FAILED,
        EventStatus.IGNORED,
    ],
    ids=str,
)
def test_cancel_of_an_event_that_is_not_scheduled_is_400(runtime_client, bot, status):
    event = EventFactory(bot=bot, status=status)
    before = snapshot(event.id)
    body = assert_error(runtime_client().delete(cancel_url(event.id)), 400, "InvalidPayload")
    assert status.value in body["message"]
    assert event.id in body["message"]
    assert snapshot(event.id) == before


def test_cancel_twice_is_400_the_second_time(runtime_client):
    client = runtime_client()
    event_id = scheduled(client)
    assert client.delete(cancel_url(event_id)).status_code == 200
    body = assert_error(client.delete(cancel_url(event_id)), 400, "InvalidPayload")
    assert "canceled" in body["message"]


def test_a_scheduled_event_is_cancelable_until_its_due_time_comes(runtime_client, bot):
    client = runtime_client()
    event_id = scheduled(client, delay_ms=1500)
    # A worker looks before it is due, and leaves it alone.
    assert deliveries_claim(limit=10).event_ids == []
    assert client.delete(cancel_url(event_id)).status_code == 200
    Event.objects.filter(id=event_id).update(due_at=timezone.now() - timedelta(seconds=1))
    assert deliveries_claim(limit=10).event_ids == []
    row = Event.objects.get(id=event_id)
    assert row.status == EventStatus.CANCELED
    assert row.next_attempt_at is None
    assert row.attempt_count == 0


def test_an_event_claimed_when_due_can_no_longer_be_canceled(runtime_client, bot):
    client = runtime_client()
    event_id = scheduled(client)
    Event.objects.filter(id=event_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    bot.webhook_url = "http://bot.invalid/hook"
    bot.save(update_fields=["webhook_url"])
    assert deliveries_claim(limit=10).event_ids == [event_id]
    assert Event.objects.get(id=event_id).status == EventStatus.PENDING
    body = assert_error(client.delete(cancel_url(event_id)), 400, "InvalidPayload")
    assert "pending" in body["message"]


def test_an_event_of_a_bot_without_webhook_ends_ignored_when_due(runtime_client, bot):
    client = runtime_client()
    event_id = scheduled(client)
    Event.objects.filter(id=event_id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert deliveries_claim(limit=10).ignored == [event_id]
    body = assert_error(client.delete(cancel_url(event_id)), 400, "InvalidPayload")
    assert "ignored" in body["message"]


def test_an_event_due_now_is_pending_and_cannot_be_canceled(runtime_client, bot):
    client = runtime_client()
    response = client.post(URL, {"type": "t", "payload": {}}, format="json")
    event_id = response.json()["event"]["id"]
    body = assert_error(client.delete(cancel_url(event_id)), 400, "InvalidPayload")
    assert "pending" in body["message"]
    assert Event.objects.get(id=event_id).status == EventStatus.PENDING


def test_event_of_another_bot_is_404_and_stays_scheduled(runtime_client, bot):
    for owner in (BotFactory(workspace=bot.workspace), BotFactory(workspace=WorkspaceFactory())):
        theirs = scheduled(runtime_client(for_bot=owner))
        assert_error(runtime_client().delete(cancel_url(theirs)), 404, "ResourceNotFound")
        assert Event.objects.get(id=theirs).status == EventStatus.SCHEDULED


def test_unknown_event_is_404(runtime_client, bot):
    assert_error(runtime_client().delete(cancel_url(new_id("evt"))), 404, "ResourceNotFound")


@pytest.mark.parametrize(
    "value", ["evt_123", "nonsense", "conv_01J0000000000000000000000A", "evt_" + "0" * 200], ids=str
)
def test_malformed_id_is_400_invalid_identifier(runtime_client, bot, value):
    assert_error(runtime_client().delete(cancel_url(value)), 400, "InvalidIdentifier")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.BILLING], ids=str)
def test_viewer_and_billing_may_not_cancel(runtime_client, role):
    event_id = scheduled(runtime_client())
    body = assert_error(runtime_client(role).delete(cancel_url(event_id)), 403, "Forbidden")
    assert role.value in body["message"]
    assert Event.objects.get(id=event_id).status == EventStatus.SCHEDULED


@pytest.mark.parametrize("role", ["owner", "administrator", "manager", "developer"])
def test_builders_may_cancel(runtime_client, role):
    event_id = scheduled(runtime_client())
    assert runtime_client(role).delete(cancel_url(event_id)).status_code == 200
    assert Event.objects.get(id=event_id).status == EventStatus.CANCELED


def test_no_token_is_401(api_client, runtime_client, bot):
    event_id = scheduled(runtime_client())
    response = api_client.delete(cancel_url(event_id), HTTP_X_BOT_ID=bot.id)
    assert_error(response, 401, "Unauthorized")
    assert Event.objects.get(id=event_id).status == EventStatus.SCHEDULED


def test_other_methods_on_the_cancel_route_are_405(runtime_client):
    client = runtime_client()
    event_id = scheduled(client)
    assert_error(client.get(cancel_url(event_id)), 405, "MethodNotFound")
    assert_error(client.post(cancel_url(event_id), {}, format="json"), 405, "MethodNotFound")
    assert_error(client.delete(f"{URL}/{event_id}"), 405, "MethodNotFound")
    assert Event.objects.get(id=event_id).status == EventStatus.SCHEDULED
