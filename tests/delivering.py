"""Delivery in the test's own thread and transaction: the engine's database
steps (events.delivery) called in order, and the requests sent by the
engine's client on a loop of the test's own, as the engine does on its threads."""

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from django.utils import timezone

from events.delivery import (
    Delivery,
    deliveries_prepare,
    deliveries_record,
    deliveries_start,
)
from events.dispatch import Claim, events_claim_due
from events.models import Event
from events.webhook_client import WebhookClient, WebhookResult


def send(deliveries: Sequence[Delivery]) -> list[WebhookResult]:
    """POST every delivery at once; their results, in order."""

    async def post_all() -> list[WebhookResult]:
        client = WebhookClient()
        try:
            return list(await asyncio.gather(*(client.post(d.request()) for d in deliveries)))
        finally:
            await client.close()

    return asyncio.run(post_all())


def deliver_claim(claim: Claim) -> Counter[str]:
    """Prepare, start (those claimed ahead, at once), send and record a claim;
    how many events ended in each status."""
    batch = deliveries_prepare(claim)
    tally = Counter(batch.tally)
    ready = [d for d in batch.deliveries if d.started]
    ahead = [d for d in batch.deliveries if not d.started]
    if ahead:
        started = deliveries_start(ahead)
        tally.update(started.tally)
        ready += started.deliveries
    if ready:
        tally.update(deliveries_record(list(zip(ready, send(ready), strict=True))))
    return +tally


def deliver_due(*, limit: int = 100, lookahead: float = 0.0) -> Counter[str]:
    """Claim what is due and deliver it."""
    return deliver_claim(events_claim_due(limit=limit, lookahead=lookahead))


def held(lease: int, event_ids: Sequence[str], *, due: datetime | None = None) -> Claim:
    """A claim on events as a process holding `lease` would have it (the
    lease may be stale, or wrong), the events due `due` (now by default)."""
    moment = due or timezone.now()
    return Claim(lease=lease, claimed_at=timezone.now(), due=[(i, moment) for i in event_ids])


def deliver_held(lease: int, event_ids: Sequence[str]) -> Counter[str]:
    """Deliver events under a lease given by the test."""
    return deliver_claim(held(lease, event_ids))


def lease_of(event_id: str) -> int:
    return int(Event.objects.values_list("lease", flat=True).get(id=event_id))
