"""Claim due events for delivery. The table is the source of truth for what
is due: a worker process claims rows whose next attempt comes within the
look-ahead, with SELECT … FOR UPDATE SKIP LOCKED, so processes claiming at
once never claim the same row, and gives each claim a lease that ends,
counted from the row's due time, when the row falls due again.

A process claims only as many as it has room for, so what it claims it can
send before the lease ends. Claiming a little ahead takes the claim out of
the moment an event falls due: the process holds it until then. A claim
leaves an event due later `scheduled` (and cancelable) until its delivery
starts; one already due is `pending` from the claim on, its delivery
starting at once."""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from events.leases import lease_duration, new_lease
from events.models import Event, EventStatus


@dataclass(frozen=True)
class Claim:
    lease: int
    claimed_at: datetime
    # (event id, when its attempt is due), earliest first
    due: list[tuple[str, datetime]]

    @property
    def event_ids(self) -> list[str]:
        return [event_id for event_id, _ in self.due]


@transaction.atomic
def events_claim_due(
    *,
    limit: int,
    lookahead: float | None = None,
    exclude_bot_ids: Collection[str] = (),
) -> Claim:
    """Claim up to `limit` events whose next attempt comes within `lookahead`
    seconds (EVENT_DISPATCH_LOOKAHEAD by default), earliest first, leaving
    out the bots of `exclude_bot_ids` (those the caller has no room for)."""
    now = timezone.now()
    if lookahead is None:
        lookahead = settings.EVENT_DISPATCH_LOOKAHEAD
    candidates = Event.objects.filter(next_attempt_at__lte=now + timedelta(seconds=lookahead))
    if exclude_bot_ids:
        candidates = candidates.exclude(bot_id__in=list(exclude_bot_ids))
    due = list(
        candidates.order_by("next_attempt_at")
        .select_for_update(skip_locked=True)
        .values_list("id", "next_attempt_at")[:limit]
    )
    lease = new_lease()
    if due:
        Event.objects.filter(id__in=[event_id for event_id, _ in due]).update(
            lease=lease,
            next_attempt_at=Greatest(F("next_attempt_at"), Value(now)) + lease_duration(),
            # Due already: its delivery starts now, so it can no longer be canceled.
            status=Case(
                When(
                    Q(status=EventStatus.SCHEDULED, next_attempt_at__lte=now),
                    then=Value(EventStatus.PENDING),
                ),
                default=F("status"),
            ),
            updated_at=now,
        )
    return Claim(
        lease=lease, claimed_at=now, due=[(event_id, when) for event_id, when in due if when]
    )
