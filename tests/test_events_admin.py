"""The Django admin around delivery: attempts beside their event, the retry
and cancel actions, and rotating a bot's signing secret."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from bots.models import Bot
from events.models import AttemptOutcome, DeliveryAttempt, Event, EventStatus
from tests.factories import AccountFactory, BotFactory, EventFactory

pytestmark = pytest.mark.django_db

EVENTS = reverse("admin:events_event_changelist")
BOTS = reverse("admin:bots_bot_changelist")


@pytest.fixture
def staff_client(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    return client


def attempt(event, number, **fields):
    values = {
        "event": event,
        "bot": event.bot,
        "number": number,
        "started_at": timezone.now(),
        "duration_ms": 12,
        "url": "https://bot.example.test/hook",
        "outcome": AttemptOutcome.RETRY,
    }
    return DeliveryAttempt.objects.create(**{**values, **fields})


def run_action(client, url, action, objects):
    return client.post(
        url,
        {"action": action, "_selected_action": [o.pk for o in objects]},
        follow=True,
    )


def test_event_page_shows_its_attempts(staff_client):
    event = EventFactory(status=EventStatus.FAILED, failure_reason="The webhook answered 404")
    attempt(event, 1, status_code=503, response_excerpt="busy upstream")
    attempt(event, 2, status_code=404, outcome=AttemptOutcome.FAILED, error="")
    response = staff_client.get(reverse("admin:events_event_change", args=[event.id]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "busy upstream" in page
    assert "503" in page and "404" in page
    assert "The webhook answered 404" in page


def test_attempt_list_filters_by_outcome(staff_client):
    event = EventFactory()
    attempt(event, 1, status_code=500)
    attempt(event, 2, status_code=200, outcome=AttemptOutcome.PROCESSED)
    url = reverse("admin:events_deliveryattempt_changelist")
    response = staff_client.get(url, {"outcome": "processed"})
    assert response.status_code == 200
    assert response.context["cl"].result_count == 1


def test_attempts_cannot_be_edited_or_added(staff_client):
    event = EventFactory()
    row = attempt(event, 1)
    assert staff_client.get(reverse("admin:events_deliveryattempt_add")).status_code == 403
    change = reverse("admin:events_deliveryattempt_change", args=[row.pk])
    response = staff_client.post(change, {"number": 9})
    assert response.status_code == 403
    row.refresh_from_db()
    assert row.number == 1


def test_retry_action_puts_failed_and_ignored_events_back_to_pending(
    staff_client, django_capture_on_commit_callbacks
):
    failed = EventFactory(status=EventStatus.FAILED, failure_reason="HTTP 404")
    ignored = EventFactory(status=EventStatus.IGNORED)
    processed = EventFactory(status=EventStatus.PROCESSED)
    with django_capture_on_commit_callbacks() as callbacks:
        response = run_action(staff_client, EVENTS, "retry_delivery", [failed, ignored, processed])
    assert response.status_code == 200
    assert "2 event(s) will be delivered again now; 1 skipped" in response.content.decode()
    # A worker is woken once the change is committed.
    assert len(callbacks) == 1
    for event in (failed, ignored):
        event.refresh_from_db()
        assert event.status == EventStatus.PENDING
        assert event.failure_reason is None
        assert event.next_attempt_at is not None
        assert event.first_attempt_at is None
        assert event.lease == 0  # for any worker to claim
    processed.refresh_from_db()
    assert processed.status == EventStatus.PROCESSED


def test_cancel_action_cancels_only_scheduled_events(staff_client):
    later = timezone.now() + timedelta(hours=1)
    scheduled = EventFactory(status=EventStatus.SCHEDULED, due_at=later)
    pending = EventFactory(status=EventStatus.PENDING)
    response = run_action(staff_client, EVENTS, "cancel_scheduled", [scheduled, pending])
    assert "1 event(s) canceled; 1 skipped" in response.content.decode()
    scheduled.refresh_from_db()
    pending.refresh_from_db()
    assert scheduled.status == EventStatus.CANCELED
    assert scheduled.next_attempt_at is None
    assert pending.status == EventStatus.PENDING


def test_events_cannot_be_added_by_hand(staff_client):
    assert staff_client.get(reverse("admin:events_event_add")).status_code == 403


def test_rotating_the_secret_keeps_the_old_one_for_the_overlap(staff_client, settings):
    settings.WEBHOOK_SECRET_OVERLAP_SECONDS = 3600
    bot = BotFactory()
    old = bot.signing_secret
    before = timezone.now()
    run_action(staff_client, BOTS, "rotate_signing_secret", [bot])
    bot.refresh_from_db()
    assert bot.signing_secret != old
    assert bot.signing_secret.startswith("whsec_")
    assert bot.previous_signing_secret == old
    expires = bot.previous_signing_secret_expires_at
    assert before + timedelta(seconds=3600) <= expires <= timezone.now() + timedelta(seconds=3600)


def test_bot_page_shows_the_secret_read_only(staff_client):
    bot = BotFactory()
    url = reverse("admin:bots_bot_change", args=[bot.id])
    page = staff_client.get(url).content.decode()
    assert bot.signing_secret in page
    assert 'name="signing_secret"' not in page


def test_webhook_url_must_be_http_or_https(staff_client):
    bot = BotFactory()
    url = reverse("admin:bots_bot_change", args=[bot.id])
    form = {
        "workspace": bot.workspace_id,
        "name": bot.name,
        "tags": "{}",
        "webhook_url": "ftp://files.example.test/hook",
        "delivery_format": "standard",
        "configuration": "{}",
        "installations-TOTAL_FORMS": "0",
        "installations-INITIAL_FORMS": "0",
    }
    response = staff_client.post(url, form)
    assert response.status_code == 200  # the form again, with the error
    assert Bot.objects.get(id=bot.id).webhook_url == ""
    form["webhook_url"] = "https://bot.example.test/hook"
    response = staff_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Bot.objects.get(id=bot.id).webhook_url == "https://bot.example.test/hook"


def test_event_rows_keep_their_invariant():
    """Only waiting events have a next attempt; the database refuses anything else."""
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        EventFactory(status=EventStatus.PROCESSED, next_attempt_at=timezone.now())
    with pytest.raises(IntegrityError), transaction.atomic():
        EventFactory(status=EventStatus.SCHEDULED, next_attempt_at=None)
    assert Event.objects.count() == 0
