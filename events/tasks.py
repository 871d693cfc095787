"""Celery tasks of the event engine. Delivery itself is not a task: every
worker process runs a delivery engine (events/engine/) that claims due
events from the table; these only wake it, purge old events, and roll up
the dashboard's minutes."""

import logging

from celery import shared_task
from django.utils import timezone

from events.engine.process import wake_engine
from events.engine.wakeups import WAKE_DELIVERIES_TASK
from events.services.partitions import event_partitions_make
from events.services.retention import events_purge_expired
from events.services.rollups import event_rollups_update

logger = logging.getLogger(__name__)


@shared_task(name=WAKE_DELIVERIES_TASK, ignore_result=True)
def wake_deliveries() -> None:
    """An event fell due: the engine of the process that runs this claims now."""
    wake_engine()


@shared_task(name="events.tasks.purge_expired_events", ignore_result=True)
def purge_expired_events() -> int:
    deleted = events_purge_expired()
    logger.info("Deleted %d events past their workspace's retention", deleted)
    return deleted


@shared_task(name="events.tasks.make_event_partitions", ignore_result=True)
def make_event_partitions() -> int:
    """On PostgreSQL, the days ahead that have no partitions yet get theirs."""
    made = event_partitions_make()
    if made:
        logger.info("Made %d partitions of events and delivery attempts", made)
    return made


@shared_task(name="events.tasks.roll_up_dashboard", ignore_result=True)
def roll_up_dashboard() -> None:
    """Safe to run twice: each run recomputes its minutes from the tables."""
    run = event_rollups_update(now=timezone.now())
    logger.debug(
        "Rolled up %s to %s: %d workspace minutes, %d bot failure minutes, %d purged",
        run.start.isoformat(),
        run.end.isoformat(),
        run.minutes,
        run.bot_failure_minutes,
        run.purged,
    )
