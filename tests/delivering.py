"""Delivery in the test's own thread and transaction: the engine's database
steps (events.engine.claims, events.engine.delivery) called in order, and the requests sent
by the engine's client on a loop of the test's own, as the engine does on its
threads."""

import asyncio
from collections import Counter
from collections.abc import Sequence

from events.engine.claims import Claimed, deliveries_claim
from events.engine.delivery import Delivery, deliveries_record
from events.engine.webhook_client import WebhookClient, WebhookResult


def send(deliveries: Sequence[Delivery]) -> list[WebhookResult]:
    """POST every delivery at once; their results, in order."""

    async def post_all() -> list[WebhookResult]:
        client = WebhookClient()
        try:
            return list(await asyncio.gather(*(client.post(d.request) for d in deliveries)))
        finally:
            await client.close()

    return asyncio.run(post_all())


def deliver_claimed(claimed: Claimed) -> Counter[str]:
    """Send and record what a claim took; how many events ended in each status."""
    tally: Counter[str] = Counter(ignored=len(claimed.ignored))
    if claimed.deliveries:
        results = send(claimed.deliveries)
        tally.update(deliveries_record(list(zip(claimed.deliveries, results, strict=True))))
    return +tally


def deliver_due(*, limit: int = 100) -> Counter[str]:
    """Claim what is due and deliver it."""
    return deliver_claimed(deliveries_claim(limit=limit))
