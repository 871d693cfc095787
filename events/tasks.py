"""Celery tasks of the event engine. Delivery itself is not a task: every
worker process runs a delivery engine (events/engine/) that claims due
events from the table; these only wake it, and purge old events."""

import logging

from celery import shared_task

from events.engine.process import wake_engine
from events.retention import events_purge_expired

logger = logging.getLogger(__name__)


@shared_task(name="events.tasks.wake_deliveries", ignore_result=True)
def wake_deliveries() -> None:
    """An event fell due: the engine of the process that runs this claims now."""
    wake_engine()


@shared_task(name="events.tasks.purge_expired_events", ignore_result=True)
def purge_expired_events() -> int:
    deleted = events_purge_expired()
    logger.info("Deleted %d events past their workspace's retention", deleted)
    return deleted
