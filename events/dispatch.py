"""Claim due events for delivery. The table is the source of truth for what
is due: a tick claims rows whose next attempt has come, with SELECT … FOR
UPDATE SKIP LOCKED, so dispatchers running at once never claim the same row,
and gives each claim a lease that ends when the row falls due again."""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from events.leases import lease_end, new_lease
from events.models import Event, EventStatus


@dataclass(frozen=True)
class Claim:
    lease: int
    event_ids: list[str]


@transaction.atomic
def events_claim_due(*, limit: int) -> Claim:
    """Claim up to `limit` events whose next attempt is due, earliest first."""
    now = timezone.now()
    due = (
        Event.objects.filter(next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)[:limit]
    )
    event_ids = list(due)
    lease = new_lease()
    if event_ids:
        Event.objects.filter(id__in=event_ids).update(
            status=EventStatus.PENDING, lease=lease, next_attempt_at=lease_end(now), updated_at=now
        )
    return Claim(lease=lease, event_ids=event_ids)
