"""Celery tasks of the event engine. They take ids, if any, and call services;
the database decides what is due, who holds it and what has expired, so any
may run twice or on many workers at once without delivering an event twice."""

import logging
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone
from kombu.exceptions import OperationalError

from events.delivery import events_deliver
from events.dispatch import events_claim_due
from events.retention import events_purge_expired

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
        enqueue_deliveries(claim.lease, claim.due)
        claimed += len(claim.due)
        if len(claim.due) < settings.EVENT_DISPATCH_BATCH or time.monotonic() > deadline:
            return claimed


# A delivery still running when a tick may claim its events again (the look-
# ahead before its lease ends) has lost them to another worker: stop it there
# rather than let it finish work that will be redone.
@shared_task(
    name="events.tasks.deliver_events",
    ignore_result=True,
    time_limit=max(1.0, settings.EVENT_LEASE_SECONDS - settings.EVENT_DISPATCH_LOOKAHEAD),
)
def deliver_events(lease: int, event_ids: list[str]) -> dict[str, int]:
    return dict(events_deliver(lease=lease, event_ids=event_ids))


@shared_task(name="events.tasks.purge_expired_events", ignore_result=True)
def purge_expired_events() -> int:
    deleted = events_purge_expired()
    logger.info("Deleted %d events past their workspace's retention", deleted)
    return deleted


def enqueue_deliveries(lease: int, due: Sequence[tuple[str, datetime]]) -> None:
    """Enqueue the delivery of claimed events, given with their due times in
    order, in chunks of events due close together; a chunk not due yet runs
    at the ETA of its last event, a moment away (within the look-ahead). Call
    it after the claim committed. If the broker cannot take them, the events
    wait for their lease to end and the dispatcher claims them again."""
    now = timezone.now()
    for chunk in _chunks(due):
        last_due = chunk[-1][1]
        try:
            args = (lease, [event_id for event_id, _ in chunk])
            if last_due > now:
                deliver_events.apply_async(args, eta=last_due)
            else:
                deliver_events.apply_async(args)
        except OperationalError:
            logger.warning(
                "The broker refused deliveries; they are retried when their lease ends",
                exc_info=True,
            )
            return


def _chunks(due: Sequence[tuple[str, datetime]]) -> Iterator[Sequence[tuple[str, datetime]]]:
    size = settings.EVENT_DELIVERY_CHUNK
    span = timedelta(seconds=settings.EVENT_DELIVERY_CHUNK_SPAN)
    start = 0
    for end in range(1, len(due) + 1):
        if end == len(due) or end - start == size or due[end][1] - due[start][1] > span:
            yield due[start:end]
            start = end
