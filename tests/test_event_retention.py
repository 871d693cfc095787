"""Retention: finished events older than their workspace keeps them are
deleted with their delivery attempts, by a beat task, a batch at a time;
waiting events are never touched."""

import logging
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from bots.models import Bot, Workspace, WorkspaceSettings
from events.models import DeliveryAttempt, Event, EventStatus
from events.services.retention import events_purge_expired
from events.tasks import purge_expired_events
from tests.factories import BotFactory, WorkspaceFactory, event_attempted_at

pytestmark = pytest.mark.django_db

FINISHED = [EventStatus.PROCESSED, EventStatus.FAILED, EventStatus.IGNORED, EventStatus.CANCELED]
WAITING = [EventStatus.SCHEDULED, EventStatus.PENDING]
HOUR = timedelta(hours=1)


def workspace_keeping(days: int) -> Workspace:
    workspace = WorkspaceFactory()
    WorkspaceSettings.objects.create(workspace=workspace, event_retention_days=days)
    return workspace


def event_of(bot: Bot, *, status: str, changed: datetime) -> Event:
    return event_attempted_at(bot, changed, status=status)


def ids(events: list[Event]) -> set[str]:
    return {event.id for event in events}


def remaining() -> set[str]:
    return set(Event.objects.values_list("id", flat=True))


def attempted() -> set[str]:
    return set(DeliveryAttempt.objects.values_list("event_id", flat=True))


def test_finished_events_past_retention_go_with_their_attempts_and_the_rest_stay():
    now = timezone.now()
    bot = BotFactory(workspace=workspace_keeping(10))
    cutoff = now - timedelta(days=10)
    expired = [event_of(bot, status=status, changed=cutoff - HOUR) for status in FINISHED]
    kept = [event_of(bot, status=status, changed=cutoff + HOUR) for status in FINISHED]
    waiting = [
        event_of(bot, status=status, changed=now - timedelta(days=400)) for status in WAITING
    ]

    assert events_purge_expired(now=now) == len(expired)

    assert remaining() == ids(kept + waiting)
    assert attempted() == ids(kept + waiting)
    assert Event.objects.filter(status__in=WAITING).count() == len(waiting)


def test_each_workspace_keeps_its_events_as_long_as_its_settings_say():
    now = timezone.now()
    ages = [4, 6, 19, 21, 29, 31]
    by_workspace = {}
    for name, workspace in [
        ("five days", workspace_keeping(5)),
        ("twenty days", workspace_keeping(20)),
        ("no settings", WorkspaceFactory()),
    ]:
        bot = BotFactory(workspace=workspace)
        by_workspace[name] = {
            age: event_of(bot, status=EventStatus.PROCESSED, changed=now - timedelta(days=age))
            for age in ages
        }

    events_purge_expired(now=now)

    kept = {
        name: sorted(age for age, event in events.items() if event.id in remaining())
        for name, events in by_workspace.items()
    }
    # Without a settings row, a workspace keeps the default 30 days.
    assert kept == {"five days": [4], "twenty days": [4, 6, 19], "no settings": [4, 6, 19, 21, 29]}


def test_a_large_purge_goes_batch_after_batch_until_nothing_has_expired(settings):
    settings.EVENT_RETENTION_BATCH = 3
    now = timezone.now()
    # Six fill two batches exactly; four need a short third one.
    short = BotFactory(workspace=workspace_keeping(2))
    long = BotFactory(workspace=workspace_keeping(50))
    expired = [
        *(
            event_of(short, status=EventStatus.FAILED, changed=now - 3 * 24 * HOUR)
            for _ in range(6)
        ),
        *(
            event_of(long, status=EventStatus.IGNORED, changed=now - 51 * 24 * HOUR)
            for _ in range(4)
        ),
    ]
    kept = [
        event_of(short, status=EventStatus.PROCESSED, changed=now - HOUR),
        event_of(long, status=EventStatus.PROCESSED, changed=now - 49 * 24 * HOUR),
    ]

    assert events_purge_expired(now=now) == len(expired)
    assert remaining() == ids(kept)
    assert attempted() == ids(kept)
    assert events_purge_expired(now=now) == 0


def test_nothing_expired_deletes_nothing():
    now = timezone.now()
    bot = BotFactory(workspace=workspace_keeping(1))
    kept = [event_of(bot, status=status, changed=now - 23 * HOUR) for status in FINISHED]
    assert events_purge_expired(now=now) == 0
    assert remaining() == ids(kept)


def test_the_purge_runs_on_beat_through_celery(settings, caplog):
    [entry] = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == purge_expired_events.name
    ]
    assert entry["schedule"] == settings.EVENT_RETENTION_INTERVAL
    assert entry["options"] == {"expires": settings.EVENT_RETENTION_INTERVAL}

    bot = BotFactory()
    old = timezone.now() - timedelta(days=31)
    event_of(bot, status=EventStatus.CANCELED, changed=old)
    kept = event_of(bot, status=EventStatus.PENDING, changed=old)

    with caplog.at_level(logging.INFO, logger="events.tasks"):
        result = purge_expired_events.apply()

    assert result.successful()
    assert result.get() == 1
    assert remaining() == {kept.id}
    assert "Deleted 1 events past their workspace's retention" in caplog.text


def test_attempts_are_the_only_rows_that_name_an_event():
    """The purge deletes events with a plain DELETE after their attempts: a
    new model pointing at events must be deleted by it too."""
    dependents = {relation.related_model for relation in Event._meta.related_objects}
    assert dependents == {DeliveryAttempt}
