"""Celery tasks of the event engine. Both take ids and call services; the
database decides what is due and who holds it, so either may run twice or on
many workers at once without delivering an event twice."""

import logging
import time
from collections.abc import Sequence

from celery import shared_task
from django.conf import settings
from kombu.exceptions import OperationalError

from events.delivery import events_deliver
from events.dispatch import events_claim_due

logger = logging.getLogger(__name__)

DISPATCH_TIME_BUDGET = 1.0  # seconds a tick keeps claiming before the next one takes over


@shared_task(name="events.tasks.dispatch_due_events", ignore_result=True)
def dispatch_due_events() -> int:
    """Claim what is due, batch after batch, and enqueue its delivery; answers
    how many events were claimed."""
    deadline = time.monotonic() + DISPATCH_TIME_BUDGET
    claimed = 0
    while True:
        claim = events_claim_due(limit=settings.EVENT_DISPATCH_BATCH)
        enqueue_deliveries(claim.lease, claim.event_ids)
        claimed += len(claim.event_ids)
        if len(claim.event_ids) < settings.EVENT_DISPATCH_BATCH or time.monotonic() > deadline:
            return claimed


# A delivery still running when its lease ends has lost its events to another
# worker: stop it there rather than let it finish work that will be redone.
@shared_task(
    name="events.tasks.deliver_events",
    ignore_result=True,
    time_limit=settings.EVENT_LEASE_SECONDS,
)
def deliver_events(lease: int, event_ids: list[str]) -> dict[str, int]:
    return dict(events_deliver(lease=lease, event_ids=event_ids))


def enqueue_deliveries(lease: int, event_ids: Sequence[str]) -> None:
    """Enqueue the delivery of claimed events, in chunks. Call it after the
    claim committed. If the broker cannot take them, the events wait for
    their lease to end and the dispatcher claims them again."""
    chunk = settings.EVENT_DELIVERY_CHUNK
    for start in range(0, len(event_ids), chunk):
        try:
            deliver_events.delay(lease, list(event_ids[start : start + chunk]))
        except OperationalError:
            logger.warning(
                "The broker refused %d deliveries; they are retried when their lease ends",
                len(event_ids) - start,
                exc_info=True,
            )
            return
