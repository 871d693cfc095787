"""Claim due events for delivery. The table is the source of truth for what
is due: a tick claims rows whose next attempt comes within the look-ahead,
with SELECT … FOR UPDATE SKIP LOCKED, so dispatchers running at once never
claim the same row, and gives each claim a lease that ends, counted from the
row's due time, when the row falls due again.

Claiming a little ahead takes the claim and the enqueueing out of the moment
an event falls due: its delivery task is already on a worker, waiting for
its ETA. A claim does not change the status: an event stays `scheduled`
(and can be canceled) until its delivery starts."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from events.leases import lease_duration, new_lease
from events.models import Event


@dataclass(frozen=True)
class Claim:
    lease: int
    # (event id, when its attempt is due), earliest first
    due: list[tuple[str, datetime]]

    @property
    def event_ids(self) -> list[str]:
        return [event_id for event_id, _ in self.due]


@transaction.atomic
def events_claim_due(*, limit: int, lookahead: float | None = None) -> Claim:
    """Claim up to `limit` events whose next attempt comes within `lookahead`
    seconds (EVENT_DISPATCH_LOOKAHEAD by default), earliest first."""
    now = timezone.now()
    if lookahead is None:
        lookahead = settings.EVENT_DISPATCH_LOOKAHEAD
    due = list(
        Event.objects.filter(next_attempt_at__lte=now + timedelta(seconds=lookahead))
        .order_by("next_attempt_at")
        .select_for_update(skip_locked=True)
        .values_list("id", "next_attempt_at")[:limit]
    )
    lease = new_lease()
    if due:
        Event.objects.filter(id__in=[event_id for event_id, _ in due]).update(
            lease=lease,
            next_attempt_at=Greatest(F("next_attempt_at"), Value(now)) + lease_duration(),
            updated_at=now,
        )
    return Claim(lease=lease, due=[(event_id, when) for event_id, when in due if when])
