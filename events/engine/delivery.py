"""A delivery's work in the database after its claim (claims.py): the
outcomes recorded, and unsent claims given back. The engine's loop
(loop.py) runs these on its database thread, each one short transaction
for a whole batch.

Every write is fenced by the lease its events were claimed with: a delivery
whose lease was taken over (its worker stalled past the lease) changes nothing
but the record of its own attempts.

On PostgreSQL the hot statements are written out (one UPDATE for every
delivered event of a batch, COPY for the attempts): through the ORM, building
an IN list and a row of parameters per event cost more CPU than the requests
themselves (bench/profile_delivery.py). The ORM does the same elsewhere."""

import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from events.engine.backoff import next_attempt_time, parse_retry_after
from events.engine.verdicts import Verdict, judge
from events.engine.webhook_client import WebhookRequest, WebhookResult
from events.models import FAILURE_REASON_MAX_LENGTH, AttemptOutcome, DeliveryAttempt, Event
from events.models import EventStatus as Status
from platform_site.foundation.sql.bulk_insert import rows_insert

# Not __name__: failed deliveries' lines keep the logger name log filters know.
logger = logging.getLogger("events.delivery")

LEASE_LOST = "lease lost"
# A delivery's request must end, and its attempt be recorded, before its
# lease ends and another process may claim the event again. Recording takes
# well under RECORD_SECONDS (the margin events.W001 asks of
# EVENT_DELIVERY_TIMEOUT too). A timeout that fits the deployment's lease
# with that margin (55 s under the default 60 s lease; half a lease too
# short for the margin) is sent under it; a longer one (a bot's
# maxExecutionTime, up to five minutes) gets a lease of its own, long enough
# for its request and its recording. The floor keeps a timeout of 0 from
# reading as none.
RECORD_SECONDS = 5.0
MIN_TIMEOUT_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Delivery:
    """A claimed event, ready to send. Times are seconds since the epoch."""

    event_id: str
    bot_id: str
    lease: int
    due: float  # when its attempt was due
    # The latest moment its request may start and still be answered and
    # recorded before the lease ends.
    send_by: float
    request: WebhookRequest  # made once, when claimed
    attempt_count: int
    first_attempt_at: float | None


def timeout_ceiling() -> float:
    """The longest timeout a delivery under the deployment's lease may have."""
    lease = settings.EVENT_LEASE_SECONDS
    return max(lease - RECORD_SECONDS, lease / 2, MIN_TIMEOUT_SECONDS)


def lease_seconds(timeout: float) -> float:
    """How long the claim of an event whose request may take `timeout` lasts."""
    if timeout <= timeout_ceiling():
        return float(settings.EVENT_LEASE_SECONDS)
    return timeout + 2 * RECORD_SECONDS


def start_slack(timeout: float) -> float:
    """Seconds a claimed delivery may wait to start, and still end (after
    its timeout) and be recorded (within RECORD_SECONDS, or half of what a
    short lease leaves) before its lease ends."""
    lease = lease_seconds(timeout)
    margin = min(RECORD_SECONDS, (lease - timeout) / 2)
    return max(0.0, lease - timeout - margin)


@transaction.atomic
def deliveries_record(finished: Sequence[tuple[Delivery, WebhookResult]]) -> Counter[str]:
    """Record the attempts and what they mean for their events, in one
    transaction; answers how many events ended in each status (`pending`
    for those to retry, LEASE_LOST for those another process took over)."""
    now = timezone.now()
    tally: Counter[str] = Counter()
    attempts: list[tuple[object, ...]] = []
    processed: list[Delivery] = []
    failed: list[_Failed] = []
    for delivery, result in finished:
        verdict = judge(result)
        number = delivery.attempt_count + 1
        if verdict.outcome == AttemptOutcome.PROCESSED:
            attempts.append(_attempt(delivery, number, result, verdict.outcome))
            processed.append(delivery)
            continue
        first_attempt_at = _moment(delivery.first_attempt_at) or result.started_at
        retry_at = None
        if verdict.outcome == AttemptOutcome.RETRY:
            retry_at = next_attempt_time(
                attempt_number=number,
                first_attempt_at=first_attempt_at,
                now=now,
                retry_after=parse_retry_after(result.retry_after, now=now),
            )
            if retry_at is None:
                verdict = Verdict(
                    AttemptOutcome.FAILED,
                    _gave_up(number, first_attempt_at, now, verdict.reason),
                )
        attempts.append(_attempt(delivery, number, result, verdict.outcome))
        failed.append(
            _Failed(
                delivery=delivery,
                status=Status.PENDING if retry_at else Status.FAILED,
                retry_at=retry_at,
                reason=None if retry_at else _cut(verdict.reason),
                number=number,
                first_attempt_at=first_attempt_at,
            )
        )
        if logger.isEnabledFor(logging.DEBUG):
            # At DEBUG only: the worker's report sums failed attempts up per
            # bot (events/engine/stats.py).
            logger.debug(
                "%s to %s: attempt %d %s",
                delivery.event_id,
                delivery.bot_id,
                number,
                f"failed, retry at {retry_at.isoformat()}: {verdict.reason}"
                if retry_at
                else f"failed for good: {verdict.reason}",
                extra={"event_id": delivery.event_id, "bot_id": delivery.bot_id, "attempt": number},
            )
    # The attempts first: a COPY waits on the worker for its rows, and a
    # worker cut off in the middle of one must not hold its events' locks
    # (the updates below take them) until TCP gives the session up.
    rows_insert(DeliveryAttempt, _ATTEMPT_FIELDS, attempts)
    if failed:
        updated = _mark_failed(failed, now)
        for failure in failed:
            tally[failure.status if failure.delivery.event_id in updated else LEASE_LOST] += 1
    if processed:
        done = _mark_processed(processed, now)
        tally[Status.PROCESSED] += done
        tally[LEASE_LOST] += len(processed) - done
    if tally[LEASE_LOST]:
        # Taken over by another process, or deleted with their bot meanwhile:
        # the attempts of events that still exist are kept.
        logger.warning("%d deliveries ended after another process took them", tally[LEASE_LOST])
        ids = {a[0] for a in attempts}
        gone = ids - set(Event.objects.filter(id__in=ids).values_list("id", flat=True))
        if gone:
            DeliveryAttempt.objects.filter(event_id__in=gone).delete()
    return +tally


@dataclass(frozen=True, slots=True)
class _Failed:
    """What a failed attempt makes of its event: retried at `retry_at`, or
    failed for good with `reason`."""

    delivery: Delivery
    status: str
    retry_at: datetime | None
    reason: str | None
    number: int
    first_attempt_at: datetime


# A retry waits unclaimed (lease 0) until a process claims it again, so that
# this delivery, should it be recorded twice, cannot jump the backoff.
_FAILED_SQL = """
UPDATE events_event AS e
SET status = f.status, next_attempt_at = f.retry_at, failure_reason = f.reason,
    lease = CASE WHEN f.retry_at IS NULL THEN e.lease ELSE 0 END,
    attempt_count = f.number, first_attempt_at = f.first_attempt_at, updated_at = %(now)s
FROM unnest(%(ids)s::text[], %(leases)s::bigint[], %(statuses)s::text[],
            %(retry_at)s::timestamptz[], %(reasons)s::text[], %(numbers)s::int[],
            %(firsts)s::timestamptz[])
    AS f (id, lease, status, retry_at, reason, number, first_attempt_at)
WHERE e.id = ANY(%(ids)s::text[])
    AND e.id = f.id AND e.lease = f.lease AND e.status = 'pending'
RETURNING e.id
"""


def _mark_failed(failed: Sequence[_Failed], now: datetime) -> set[str]:
    """Record failed attempts on their events still held under their lease:
    one statement for the batch on PostgreSQL, where an UPDATE each cost
    more than the failed requests did. The ids of those recorded."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _FAILED_SQL,
                {
                    "now": now,
                    "ids": [f.delivery.event_id for f in failed],
                    "leases": [f.delivery.lease for f in failed],
                    "statuses": [str(f.status) for f in failed],
                    "retry_at": [f.retry_at for f in failed],
                    "reasons": [f.reason for f in failed],
                    "numbers": [f.number for f in failed],
                    "firsts": [f.first_attempt_at for f in failed],
                },
            )
            return {row[0] for row in cursor.fetchall()}
    updated = set()
    for f in failed:
        if Event.objects.filter(
            id=f.delivery.event_id, lease=f.delivery.lease, status=Status.PENDING
        ).update(
            status=f.status,
            next_attempt_at=f.retry_at,
            failure_reason=f.reason,
            lease=0 if f.retry_at else f.delivery.lease,
            attempt_count=f.number,
            first_attempt_at=f.first_attempt_at,
            updated_at=now,
        ):
            updated.add(f.delivery.event_id)
    return updated


def deliveries_release(deliveries: Sequence[Delivery]) -> int:
    """Give back claims that will not be sent (the process stops, or one
    waited past its `send_by`): each event is due again at its due time,
    for any process to claim. Answers how many were still held."""
    released = 0
    with transaction.atomic():
        now = timezone.now()
        for delivery in deliveries:
            released += Event.objects.filter(
                id=delivery.event_id, lease=delivery.lease, status=Status.PENDING
            ).update(lease=0, next_attempt_at=_moment(delivery.due), updated_at=now)
    return released


# `e.id = ANY(…)` besides the join: it has the rows found through the primary
# key; on the join alone the planner turns to a scan of the whole table once
# a batch holds a few hundred events.
_PROCESSED_SQL = """
UPDATE events_event AS e
SET status = 'processed', next_attempt_at = NULL, attempt_count = e.attempt_count + 1,
    first_attempt_at = coalesce(e.first_attempt_at, %(now)s), updated_at = %(now)s
FROM unnest(string_to_array(%(ids)s, ','), string_to_array(%(leases)s, ',')::bigint[])
    AS done (id, lease)
WHERE e.id = ANY(string_to_array(%(ids)s, ','))
    AND e.id = done.id AND e.lease = done.lease AND e.status = 'pending'
"""


def _mark_processed(deliveries: Sequence[Delivery], now: datetime) -> int:
    """Mark delivered events processed, those still held under their lease; how many."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                _PROCESSED_SQL,
                {
                    "now": now,
                    "ids": ",".join(d.event_id for d in deliveries),
                    "leases": ",".join(str(d.lease) for d in deliveries),
                },
            )
            return cursor.rowcount
    by_lease: dict[int, list[str]] = defaultdict(list)
    for delivery in deliveries:
        by_lease[delivery.lease].append(delivery.event_id)
    return sum(
        Event.objects.filter(id__in=ids, lease=lease, status=Status.PENDING).update(
            status=Status.PROCESSED,
            next_attempt_at=None,
            attempt_count=F("attempt_count") + 1,
            first_attempt_at=Coalesce(F("first_attempt_at"), Value(now)),
            updated_at=now,
        )
        for lease, ids in by_lease.items()
    )


def _moment(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _cut(reason: str) -> str:
    return reason if len(reason) <= FAILURE_REASON_MAX_LENGTH else reason[:1999] + "…"


_ATTEMPT_FIELDS = (
    "event_id",
    "bot_id",
    "number",
    "started_at",
    "duration_ms",
    "url",
    "status_code",
    "error",
    "response_excerpt",
    "outcome",
)


def _attempt(
    delivery: Delivery, number: int, result: WebhookResult, outcome: AttemptOutcome
) -> tuple[object, ...]:
    """A DeliveryAttempt row, its values in the order of _ATTEMPT_FIELDS."""
    return (
        delivery.event_id,
        delivery.bot_id,
        number,
        result.started_at,
        result.duration_ms,
        delivery.request.url,
        result.status_code,
        result.error[:500],
        result.response_excerpt,
        outcome.value,
    )


def _gave_up(attempts: int, first_attempt_at: datetime, now: datetime, last: str) -> str:
    hours = (now - first_attempt_at).total_seconds() / 3600
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return f"Gave up after {tries} over {hours:.1f} h. Last attempt: {last}"
